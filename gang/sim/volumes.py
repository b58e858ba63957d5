"""A PersistentVolume controller stand-in, with a dynamic provisioner, for the simulator.

Pods of a gang often mount PersistentVolumeClaims (a dataset cache, a checkpoint volume), and a
scheduler that places them has to live with what kube-controller-manager's PV controller and a CSI
external-provisioner do to those claims: claims of an ``Immediate`` class are bound before any
pod is placed (and their volume's node affinity then constrains placement), while claims of a
``WaitForFirstConsumer`` class wait for the scheduler to pick a node, write
``volume.kubernetes.io/selected-node`` on the claim, and wait again until a volume pinned near
that node is provisioned and bound. Without that second actor the scheduler's waiting, its
retries and its bookkeeping cannot be tested. ``SimCluster(controllers=True)`` (the default)
attaches this stand-in; like the Job and StatefulSet ones (``gang.sim.controllers``) it is an
in-process store listener that acts on the event loop (``gang.sim.reconciler``) and writes
through the SimApi verbs, so every change reaches watchers as it would from a real controller.

What it does, as far as a scheduler can observe it:

- **Static binding**: an unbound claim that names an existing volume (``spec.volumeName``), or
  that a volume names (``spec.claimRef``, pre-binding, as a scheduler does for
  ``WaitForFirstConsumer`` claims), is bound to it; for an ``Immediate`` (or class-less) claim,
  the smallest ``Available`` volume with the same ``storageClassName`` and ``volumeMode``, enough
  capacity, every requested access mode and labels matching the claim's ``selector`` is bound.
- **Dynamic provisioning**: otherwise, when the claim's class has a provisioner (anything but
  ``kubernetes.io/no-provisioner``) and either binds ``Immediate`` or the claim carries the
  selected-node annotation, the claim gets the ``volume.kubernetes.io/storage-provisioner`` (and
  ``volume.beta.kubernetes.io/storage-provisioner``) annotation, and after
  ``provisioning_delay`` seconds a volume ``pvc-<claim uid>`` appears: the requested capacity,
  the claim's access modes and volume mode, the class's reclaim policy and mount options,
  ``spec.csi.driver`` = the provisioner, a ``claimRef`` to the claim, the
  ``pv.kubernetes.io/provisioned-by`` annotation and, when a node was selected, a required node
  affinity on the node's values of the driver's topology keys (``spec.drivers[].topologyKeys`` of
  that node's CSINode, as the external-provisioner reads them), else on its
  ``topology.kubernetes.io/zone`` label if it has one, else on ``kubernetes.io/hostname``. A
  selected node that does not exist fails provisioning and the annotation is removed, so the
  scheduler picks again.
- **Binding** writes what the real controller writes, in its order: the volume's ``claimRef``,
  the volume's ``status.phase: Bound``, the claim's ``spec.volumeName`` with the
  ``pv.kubernetes.io/bind-completed`` (and, when the controller chose the volume,
  ``pv.kubernetes.io/bound-by-controller``) annotations, then the claim's status (``Bound``,
  access modes, capacity).
- **Reclaiming**: when a bound claim is gone its volume becomes ``Released``, and is deleted if
  its reclaim policy is ``Delete``. A claim whose volume disappears becomes ``Lost``.
- **Protection**: the ``kubernetes.io/pvc-protection`` finalizer (added at admission, see
  ``gang.sim.storage``) is removed from a deleted claim once no scheduled, unfinished pod mounts
  it, and ``kubernetes.io/pv-protection`` from a deleted volume once it is not ``Bound`` — so a
  claim deleted under a running pod stays Terminating, as on a real cluster.
- A claim created without ``storageClassName`` gets the default class once one exists
  (retroactive default class assignment), and Events (``WaitForFirstConsumer``,
  ``ExternalProvisioning``, ``Provisioning``, ``ProvisioningSucceeded``, ``ProvisioningFailed``,
  ``FailedBinding``, ``ClaimLost``) are posted on claims, once per reason in a row.

Not simulated: volume attach/detach and mounting (the kubelet stand-in ignores volumes),
CSIStorageCapacity and capacity-aware provisioning, ``allowedTopologies``, volume expansion,
snapshots and data sources, generic ephemeral volumes (their claims are not created),
``Recycle``, the periodic resync (state is driven by store events), and provisioning failures
other than a missing class or node.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from decimal import Decimal
from typing import Any

from gang.sim.api import DeleteOptions, SimApi, rfc3339
from gang.sim.errors import ApiError
from gang.sim.pods import is_terminal
from gang.sim.reconciler import Reconciler, obj_key
from gang.sim.storage import PV_PROTECTION, PVC_PROTECTION, default_class, storage_quantity
from gang.sim.store import DELETED, Obj, ObjKey, StoredEvent
from gang.sim.workloads import selector_matches

SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
COMPONENT = "persistentvolume-controller"
EXTERNAL_PROVISIONING_MESSAGE = (
    "Waiting for a volume to be created either by the external provisioner '{}' or manually by "
    "the system administrator. If volume creation is delayed, please verify that the "
    "provisioner is running and correctly registered."
)


class VolumeController(Reconciler):
    """Binds claims to volumes, provisions volumes, reclaims them; see the module docstring."""

    def __init__(self, api: SimApi, provisioning_delay: float = 0.0) -> None:
        super().__init__(api)
        #: seconds between deciding to provision a volume and the volume appearing (runtime knob)
        self.provisioning_delay = provisioning_delay
        self._claims = api.rt_pvcs.storage_key
        self._volumes = api.rt_pvs.storage_key
        self._classes = api.rt_storage_classes.storage_key
        self._pods = api.rt_pods.storage_key
        #: claims first, then volumes, in each drain
        self._claim_queue = self.queue(self._sync_claim_key)
        self._volume_queue = self.queue(self._sync_volume_name)
        #: claim uid → the reason of the last Event posted on it (one Event per reason in a row)
        self._reported: dict[str, str] = {}
        # the pending provisioning of a claim's volume is the timer keyed by the claim's uid

    def _seed(self) -> None:
        for claim in self.api.store.items(self._claims):
            self._claim_queue.add(obj_key(claim))
        for volume in self.api.store.items(self._volumes):
            self._volume_queue.add(volume["metadata"]["name"])

    # --- events and the work queue -------------------------------------------------------

    def _on_event(self, storage_key: str, event: StoredEvent) -> None:
        obj = event.obj
        if storage_key == self._claims:
            if event.type == DELETED:
                self._forget_claim(obj)
            else:
                self._claim_queue.add(obj_key(obj))
        elif storage_key == self._volumes:
            self._volume_queue.add(obj["metadata"]["name"])
            ref = (obj.get("spec") or {}).get("claimRef")
            if isinstance(ref, dict) and ref.get("name"):
                self._claim_queue.add((str(ref.get("namespace") or ""), str(ref["name"])))
            elif event.type != DELETED:
                self._enqueue_unbound_claims()  # a new candidate for static binding
        elif storage_key == self._classes:
            if event.type != DELETED:
                self._enqueue_unbound_claims()
        elif storage_key == self._pods:
            namespace = obj["metadata"].get("namespace", "")
            for pod in (obj, event.prev):
                for claim_name in _claim_names(pod):
                    claim = self.api.store.get(self._claims, namespace, claim_name)
                    if claim is not None and claim["metadata"].get("deletionTimestamp"):
                        self._claim_queue.add((namespace, claim_name))

    def _forget_claim(self, claim: Obj) -> None:
        uid = claim["metadata"].get("uid", "")
        self.cancel_timer(uid)
        self._reported.pop(uid, None)
        for volume in self.api.store.items(self._volumes):
            ref = (volume.get("spec") or {}).get("claimRef") or {}
            if ref.get("uid") == uid:
                self._volume_queue.add(volume["metadata"]["name"])

    def _enqueue_unbound_claims(self) -> None:
        for claim in self.api.store.items(self._claims):
            if not _claim_bound(claim):
                self._claim_queue.add(obj_key(claim))

    def _sync_claim_key(self, key: ObjKey) -> None:
        claim = self.api.store.get(self._claims, *key)
        if claim is not None:
            self.sync_claim(claim)

    def _sync_volume_name(self, name: str) -> None:
        volume = self.api.store.get(self._volumes, "", name)
        if volume is not None:
            self.sync_volume(volume)

    # --- claims --------------------------------------------------------------------------

    def sync_claim(self, claim: Obj) -> None:
        meta = claim["metadata"]
        if meta.get("deletionTimestamp"):
            self._release_claim_protection(claim)
            return
        spec = claim.get("spec") or {}
        if spec.get("volumeName"):
            self._sync_named_volume(claim, str(spec["volumeName"]))
            return
        if "storageClassName" not in spec:
            default = default_class(self.api.store.items(self._classes))
            if default is not None:  # retroactive default StorageClass assignment
                self.write(
                    self.api.rt_pvcs,
                    {**claim, "spec": {**spec, "storageClassName": default["metadata"]["name"]}},
                )
                return
        class_name = str(spec.get("storageClassName") or "")
        storage_class = self.api.store.get(self._classes, "", class_name) if class_name else None
        delayed = (storage_class or {}).get("volumeBindingMode") == "WaitForFirstConsumer"
        volume = self._find_volume(claim, class_name, delayed)
        if volume is not None:
            self._bind(claim, volume)
            return
        if not class_name:
            self._report(
                claim,
                "Normal",
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            )
            return
        if storage_class is None:
            self._report(
                claim,
                "Warning",
                "ProvisioningFailed",
                f'storageclass.storage.k8s.io "{class_name}" not found',
            )
            return
        if delayed and not (meta.get("annotations") or {}).get(SELECTED_NODE):
            self._report(
                claim,
                "Normal",
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )
            return
        provisioner = str(storage_class.get("provisioner") or "")
        if provisioner == NO_PROVISIONER:
            self._report(
                claim,
                "Warning",
                "ProvisioningFailed",
                f"no volume plugin matched name: {NO_PROVISIONER}",
            )
            return
        self._start_provisioning(claim, provisioner)

    def _sync_named_volume(self, claim: Obj, volume_name: str) -> None:
        """A claim with ``spec.volumeName``: bound, being bound, or waiting for that volume."""
        volume = self.api.store.get(self._volumes, "", volume_name)
        status = claim.get("status") or {}
        if volume is None:
            if status.get("phase") == "Bound":
                self.write(
                    self.api.rt_pvcs, {**claim, "status": {**status, "phase": "Lost"}}, "status"
                )
                self._report(
                    claim,
                    "Warning",
                    "ClaimLost",
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                )
            return
        ref = (volume.get("spec") or {}).get("claimRef")
        if ref is not None and not _refers_to(ref, claim):
            self._report(
                claim,
                "Warning",
                "FailedBinding",
                f'volume "{volume_name}" already bound to a different claim.',
            )
            return
        if ref is None:
            problem = _mismatch(claim, volume)
            if problem:
                self._report(
                    claim,
                    "Warning",
                    "FailedBinding",
                    f'Cannot bind to requested volume "{volume_name}": {problem}',
                )
                return
        self._bind(claim, volume)

    def _find_volume(self, claim: Obj, class_name: str, delayed: bool) -> Obj | None:
        """FindMatchingVolume: a volume pre-bound to the claim, else the smallest that fits."""
        spec = claim.get("spec") or {}
        request = storage_quantity((spec.get("resources") or {}).get("requests"))
        selector = spec.get("selector")
        best: Obj | None = None
        best_size: Decimal | None = None
        for volume in self.api.store.items(self._volumes):
            v_spec = volume.get("spec") or {}
            if volume["metadata"].get("deletionTimestamp"):
                continue
            if v_spec.get("volumeMode", "Filesystem") != spec.get("volumeMode", "Filesystem"):
                continue
            ref = v_spec.get("claimRef")
            if ref is not None:
                if _refers_to(ref, claim):
                    return volume
                continue
            if delayed or (volume.get("status") or {}).get("phase") != "Available":
                continue
            if isinstance(selector, dict) and not selector_matches(
                selector, volume["metadata"].get("labels") or {}
            ):
                continue
            if str(v_spec.get("storageClassName") or "") != class_name:
                continue
            if not set(spec.get("accessModes") or []) <= set(v_spec.get("accessModes") or []):
                continue
            size = storage_quantity(v_spec.get("capacity"))
            if size is None or request is None or size < request:
                continue
            if best_size is None or size < best_size:
                best, best_size = volume, size
        return best

    def _bind(self, claim: Obj, volume: Obj) -> None:
        """Bind in the real controller's order: volume claimRef, volume phase, claim, status."""
        c_meta = claim["metadata"]
        v_meta = volume["metadata"]
        v_spec = volume.get("spec") or {}
        ref = v_spec.get("claimRef")
        if not (isinstance(ref, dict) and ref.get("uid") == c_meta["uid"]):
            annotations = dict(v_meta.get("annotations") or {})
            if ref is None:
                annotations[BOUND_BY_CONTROLLER] = "yes"
            claim_ref = {
                "kind": "PersistentVolumeClaim",
                "namespace": c_meta["namespace"],
                "name": c_meta["name"],
                "uid": c_meta["uid"],
                "apiVersion": "v1",
                "resourceVersion": c_meta["resourceVersion"],
            }
            written = self.write(
                self.api.rt_pvs,
                {
                    **volume,
                    "metadata": {**v_meta, "annotations": annotations},
                    "spec": {**v_spec, "claimRef": claim_ref},
                },
            )
            if written is None:
                return
            volume = written
        if (volume.get("status") or {}).get("phase") != "Bound":
            written = self.write(self.api.rt_pvs, self._phase(volume, "Bound"), "status")
            if written is None:
                return
            volume = written
        spec = claim.get("spec") or {}
        annotations = dict(c_meta.get("annotations") or {})
        annotations[BIND_COMPLETED] = "yes"
        if not spec.get("volumeName"):
            annotations[BOUND_BY_CONTROLLER] = "yes"
        written = self.write(
            self.api.rt_pvcs,
            {
                **claim,
                "metadata": {**c_meta, "annotations": annotations},
                "spec": {**spec, "volumeName": v_meta["name"]},
            },
        )
        if written is None:
            return
        v_spec = volume.get("spec") or {}
        status = {
            **(written.get("status") or {}),
            "phase": "Bound",
            "accessModes": list(v_spec.get("accessModes") or []),
            "capacity": dict(v_spec.get("capacity") or {}),
        }
        self.write(self.api.rt_pvcs, {**written, "status": status}, "status")

    def _release_claim_protection(self, claim: Obj) -> None:
        meta = claim["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if PVC_PROTECTION not in finalizers or self._in_use(claim):
            return
        finalizers.remove(PVC_PROTECTION)
        self.write(self.api.rt_pvcs, {**claim, "metadata": {**meta, "finalizers": finalizers}})

    def _in_use(self, claim: Obj) -> bool:
        """A scheduled pod that has not finished mounts the claim (the pvc-protection rule)."""
        meta = claim["metadata"]
        for pod in self.api.store.items(self._pods, meta["namespace"]):
            if (
                (pod.get("spec") or {}).get("nodeName")
                and not is_terminal(pod)
                and meta["name"] in _claim_names(pod)
            ):
                return True
        return False

    # --- provisioning ----------------------------------------------------------------------

    def _start_provisioning(self, claim: Obj, provisioner: str) -> None:
        uid = claim["metadata"]["uid"]
        if uid in self._timers or self._loop is None:
            return
        self.call_later(
            uid,
            max(0.0, self.provisioning_delay),
            functools.partial(self._provision, obj_key(claim), uid),
        )
        meta = claim["metadata"]
        annotations = dict(meta.get("annotations") or {})
        if annotations.get(STORAGE_PROVISIONER) != provisioner:
            annotations[STORAGE_PROVISIONER] = provisioner
            annotations[BETA_STORAGE_PROVISIONER] = provisioner
            written = self.write(
                self.api.rt_pvcs, {**claim, "metadata": {**meta, "annotations": annotations}}
            )
            claim = written or claim
        self._report(
            claim,
            "Normal",
            "ExternalProvisioning",
            EXTERNAL_PROVISIONING_MESSAGE.format(provisioner),
        )
        ns, name = obj_key(claim)
        self._report(
            claim,
            "Normal",
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{ns}/{name}"',
            component=provisioner,
        )

    def _provision(self, key: ObjKey, uid: str) -> None:
        claim = self.api.store.get(self._claims, *key)
        if claim is None or claim["metadata"]["uid"] != uid or _claim_bound(claim):
            return
        if claim["metadata"].get("deletionTimestamp"):
            return
        spec = claim.get("spec") or {}
        class_name = str(spec.get("storageClassName") or "")
        storage_class = self.api.store.get(self._classes, "", class_name)
        if storage_class is None:
            self._claim_queue.add(key)  # sync_claim reports it
            return
        provisioner = str(storage_class.get("provisioner") or "")
        annotations = dict(claim["metadata"].get("annotations") or {})
        node_name = annotations.get(SELECTED_NODE)
        delayed = storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"
        if delayed and not node_name:
            return  # the scheduler took its choice back; wait for the next one
        affinity = None
        if node_name:
            node = self.api.store.get(self.api.rt_nodes.storage_key, "", node_name)
            if node is None:
                self._report(
                    claim,
                    "Warning",
                    "ProvisioningFailed",
                    f'failed to get target node: node "{node_name}" not found',
                    component=provisioner,
                )
                del annotations[SELECTED_NODE]  # reschedule: the scheduler picks another node
                self.write(
                    self.api.rt_pvcs,
                    {**claim, "metadata": {**claim["metadata"], "annotations": annotations}},
                )
                return
            affinity = self._node_affinity(node, provisioner)
        volume = self._volume_for(claim, storage_class, affinity)
        try:
            created = self.api.create(self.api.rt_pvs, None, volume)
        except ApiError as err:
            if err.code != 409:
                self._report(
                    claim, "Warning", "ProvisioningFailed", err.message, component=provisioner
                )
                return
            existing = self.api.store.get(self._volumes, "", volume["metadata"]["name"])
            if existing is None:
                return
            created = existing
        self._report(
            claim,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {created['metadata']['name']}",
            component=provisioner,
        )
        current = self.api.store.get(self._claims, *key)
        if current is not None:
            self._bind(current, created)

    def _node_affinity(self, node: Obj, driver: str) -> dict[str, Any]:
        """Where the new volume is reachable from: the driver's topology segment of the node."""
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        keys: list[str] = []
        csinode = self.api.store.get(self.api.rt_csinodes.storage_key, "", name)
        for entry in ((csinode or {}).get("spec") or {}).get("drivers") or []:
            if entry.get("name") == driver:
                keys = [k for k in entry.get("topologyKeys") or [] if k in labels]
        if keys:
            segment = {k: str(labels[k]) for k in keys}
        elif ZONE_LABEL in labels:
            segment = {ZONE_LABEL: str(labels[ZONE_LABEL])}
        else:
            segment = {HOSTNAME_LABEL: name}
        expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in segment.items()]
        return {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}

    def _volume_for(self, claim: Obj, storage_class: Obj, affinity: dict[str, Any] | None) -> Obj:
        meta = claim["metadata"]
        spec = claim.get("spec") or {}
        provisioner = str(storage_class.get("provisioner") or "")
        requests = (spec.get("resources") or {}).get("requests") or {}
        v_spec: dict[str, Any] = {
            "accessModes": list(spec.get("accessModes") or []),
            "capacity": {"storage": requests.get("storage")},
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
                "apiVersion": "v1",
                "resourceVersion": meta["resourceVersion"],
            },
            "csi": {
                "driver": provisioner,
                "volumeHandle": f"{provisioner}-{uuid.uuid4()}",
                "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "gang-sim"},
            },
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy", "Delete"),
            "storageClassName": storage_class["metadata"]["name"],
            "volumeMode": spec.get("volumeMode", "Filesystem"),
        }
        if storage_class.get("mountOptions"):
            v_spec["mountOptions"] = list(storage_class["mountOptions"])
        if affinity is not None:
            v_spec["nodeAffinity"] = affinity
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"pvc-{meta['uid']}",
                "annotations": {PROVISIONED_BY: provisioner},
            },
            "spec": v_spec,
        }

    # --- volumes ---------------------------------------------------------------------------

    def sync_volume(self, volume: Obj) -> None:
        name = volume["metadata"]["name"]
        spec = volume.get("spec") or {}
        phase = (volume.get("status") or {}).get("phase")
        deleting = bool(volume["metadata"].get("deletionTimestamp"))
        ref = spec.get("claimRef")
        if not isinstance(ref, dict):
            if phase != "Available" and not deleting:
                self.write(self.api.rt_pvs, self._phase(volume, "Available"), "status")
                return
        elif ref.get("uid"):  # (pre-bound by name only: the claim's sync binds it)
            claim = self.api.store.get(self._claims, str(ref.get("namespace") or ""), ref["name"])
            if claim is not None and claim["metadata"]["uid"] == ref["uid"]:
                return  # the claim's sync keeps the pair consistent
            # the claim this volume was bound to is gone: release, then reclaim
            if phase in ("Bound", "Available", "Pending"):
                written = self.write(self.api.rt_pvs, self._phase(volume, "Released"), "status")
                if written is None:
                    return
                volume, phase = written, "Released"
            if phase == "Released" and spec.get("persistentVolumeReclaimPolicy") == "Delete":
                with contextlib.suppress(ApiError):  # gone already
                    self.api.delete(self.api.rt_pvs, None, name, DeleteOptions())
                current = self.api.store.get(self._volumes, "", name)
                if current is None:
                    return
                volume = current
        meta = volume["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp") and PV_PROTECTION in finalizers and phase != "Bound":
            finalizers.remove(PV_PROTECTION)  # the pv-protection controller's rule
            self.write(self.api.rt_pvs, {**volume, "metadata": {**meta, "finalizers": finalizers}})

    # --- helpers -----------------------------------------------------------------------------

    def _phase(self, volume: Obj, phase: str) -> Obj:
        status = {
            **(volume.get("status") or {}),
            "phase": phase,
            "lastPhaseTransitionTime": rfc3339(self.api.clock()),
        }
        return {**volume, "status": status}

    def _report(
        self,
        claim: Obj,
        type_: str,
        reason: str,
        message: str,
        component: str = COMPONENT,
    ) -> None:
        """Post an Event on the claim, unless the last one posted on it had the same reason."""
        uid = claim["metadata"]["uid"]
        if self._reported.get(uid) == reason:
            return
        self._reported[uid] = reason
        self.post_event(claim, "PersistentVolumeClaim", "v1", type_, reason, message, component)


def _claim_bound(claim: Obj) -> bool:
    return bool((claim.get("spec") or {}).get("volumeName")) and (
        (claim.get("status") or {}).get("phase") == "Bound"
    )


def _claim_names(pod: Obj | None) -> list[str]:
    if pod is None:
        return []
    names = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        if isinstance(source, dict) and source.get("claimName"):
            names.append(str(source["claimName"]))
    return names


def _refers_to(ref: Any, claim: Obj) -> bool:
    """IsVolumeBoundToClaim: the claimRef names the claim, and its uid (if any) is the claim's."""
    meta = claim["metadata"]
    return (
        isinstance(ref, dict)
        and ref.get("name") == meta["name"]
        and (ref.get("namespace") or "") == meta.get("namespace", "")
        and ref.get("uid") in (None, "", meta["uid"])
    )


def _mismatch(claim: Obj, volume: Obj) -> str:
    """checkVolumeSatisfyClaim: why the requested volume cannot serve the claim, or ""."""
    spec = claim.get("spec") or {}
    v_spec = volume.get("spec") or {}
    request = storage_quantity((spec.get("resources") or {}).get("requests"))
    size = storage_quantity(v_spec.get("capacity"))
    if request is None or size is None or size < request:
        return "requested PV is too small"
    if str(v_spec.get("storageClassName") or "") != str(spec.get("storageClassName") or ""):
        return "storageClassName does not match"
    if v_spec.get("volumeMode", "Filesystem") != spec.get("volumeMode", "Filesystem"):
        return "incompatible volumeMode"
    if not set(spec.get("accessModes") or []) <= set(v_spec.get("accessModes") or []):
        return "incompatible accessMode"
    return ""
