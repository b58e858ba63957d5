"""A ResourceClaim controller stand-in (kube-controller-manager's ``resourceclaim`` controller).

Why: a pod that asks for devices through ``spec.resourceClaims[].resourceClaimTemplateName``
cannot be scheduled until a ResourceClaim exists for it, and a claim a finished pod leaves
behind keeps its devices allocated until someone lets go. On a real cluster that someone is
the resource claim controller (``pkg/controller/resourceclaim/controller.go``); without a
stand-in the simulator could not exercise a scheduler's DRA path at all (every templated pod
would wait for ever) nor show that devices come back. ``SimCluster(controllers=True)`` starts
it on clusters that serve ``resource.k8s.io/v1``. Like the volume controller stand-in
(``gang.sim.volumes``) it is an in-process store listener with a work queue drained on the
event loop (``gang.sim.reconciler``), and it writes through the SimApi verbs, so the server's
rules (``gang.sim.dra``) apply to its writes as to anyone's and watchers see every change.

What it does, as upstream:

- **Claims from templates**: for each ``spec.resourceClaims`` entry naming a template, a claim
  with ``generateName: <pod>-<claim>-`` (both truncated in proportion when they exceed 57
  characters), the annotation ``resource.kubernetes.io/pod-claim-name``, the pod as its
  controlling owner, the template's ``spec.metadata`` labels and annotations and its
  ``spec.spec``; then ``status.resourceClaimStatuses`` on the pod (upstream applies it with
  server-side apply; here a status update that keeps the other entries). An existing claim
  owned by the pod with that annotation is used instead of making a second one. A missing
  template is a Warning ``FailedResourceClaimCreation`` Event on the pod; the pod is retried
  when the template appears (and with back-off).
- **Reservation** of an allocated claim for a pod that is bound (``spec.nodeName``) but not
  among its consumers, as upstream does for pods placed without the scheduler.
- **Releasing**: entries of ``status.reservedFor`` whose pod is gone, replaced (another uid) or
  done (Succeeded, Failed, or deleted before it was scheduled) are removed; when that empties
  the list of a claim carrying ``resource.kubernetes.io/delete-protection``, the allocation is
  cleared in the same status write and the finalizer removed after it; a deleted claim nobody
  uses is deallocated and unblocked the same way.
- **Generated claims go with their pod**: an unused claim whose owning pod is done is deleted
  (upstream's controller), and a claim whose owning pod no longer exists is deleted (the
  garbage collector's job; the simulator has no garbage collector).

Not simulated: the admin-access namespace check, the claim metrics, extended-resource claims.
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

from gang.models.dra import POD_CLAIM_NAME_ANNOTATION
from gang.sim.api import DeleteOptions, SimApi
from gang.sim.dra import DELETE_PROTECTION
from gang.sim.errors import ApiError
from gang.sim.pods import is_terminal
from gang.sim.reconciler import Reconciler, obj_key
from gang.sim.resources import ResourceType
from gang.sim.store import DELETED, Obj, ObjKey, StoredEvent

POD_CLAIM_NAME = POD_CLAIM_NAME_ANNOTATION
COMPONENT = "resource_claim"
#: room for a hyphen and 5 random characters in a 63-character name
MAX_BASE_LEN = 57


class ClaimNameError(Exception):
    """resourceclaim.Name could not name the claim; ``not_created``: not yet made for the pod."""

    def __init__(self, message: str, not_created: bool) -> None:
        super().__init__(message)
        self.not_created = not_created


class _Failed(Exception):
    """A pod claim the controller could not handle now (retried later)."""


# --- the pod-side rules (shared with the kubelet stand-in) -----------------------------------


def pod_claims(pod: Obj) -> list[Obj]:
    claims = (pod.get("spec") or {}).get("resourceClaims")
    return [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []


def claim_name(pod: Obj, pod_claim: Obj) -> tuple[str | None, bool]:
    """resourceclaim.Name: (the claim's name, or None when none is needed; whether the claim
    must be checked to be the pod's own). Raises ClaimNameError."""
    meta = pod["metadata"]
    who = f'pod "{meta.get("namespace", "")}/{meta["name"]}"'
    if pod_claim.get("resourceClaimName"):
        return str(pod_claim["resourceClaimName"]), False
    if pod_claim.get("resourceClaimTemplateName"):
        for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if isinstance(entry, dict) and entry.get("name") == pod_claim.get("name"):
                name = entry.get("resourceClaimName")
                return (str(name) if name is not None else None), True
        raise ClaimNameError(f"{who}: ResourceClaim not created yet", not_created=True)
    raise ClaimNameError(
        f"{who}, spec.resourceClaim {json.dumps(pod_claim.get('name'))}: "
        "none of the supported fields are set",
        not_created=False,
    )


def controller_owner(obj: Obj) -> dict[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def owning_pod(claim: Obj) -> tuple[str, str] | None:
    """(name, uid) of the pod that controls the claim (a generated claim), else None."""
    ref = controller_owner(claim)
    if ref is None or ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod":
        return None
    return str(ref.get("name") or ""), str(ref.get("uid") or "")


def not_for_pod(pod: Obj, claim: Obj) -> str | None:
    """resourceclaim.IsForPod: why the claim is not the pod's own, or None when it is."""
    p_meta, c_meta = pod["metadata"], claim["metadata"]
    ref = controller_owner(claim)
    if c_meta.get("namespace") != p_meta.get("namespace") or (ref or {}).get("uid") != p_meta.get(
        "uid"
    ):
        return (
            f"ResourceClaim {c_meta.get('namespace')}/{c_meta['name']} was not created for pod "
            f"{p_meta.get('namespace')}/{p_meta['name']} (pod is not owner)"
        )
    return None


def reserved_for(claim: Obj) -> list[Obj]:
    reserved = (claim.get("status") or {}).get("reservedFor")
    return [r for r in reserved if isinstance(r, dict)] if isinstance(reserved, list) else []


def is_reserved_for(pod: Obj, claim: Obj) -> bool:
    return any(r.get("uid") == pod["metadata"].get("uid") for r in reserved_for(claim))


def pod_done(pod: Obj) -> bool:
    """isPodDone: it will never run (finished, or deleted before it was scheduled)."""
    return is_terminal(pod) or bool(
        pod["metadata"].get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName")
    )


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """``<pod>-<claim>-``, or both truncated in proportion to their length (no trailing
    hyphen then, as upstream)."""
    base = f"{pod_name}-{pod_claim_name}-"
    if len(base) <= MAX_BASE_LEN:
        return base
    pod_len = len(pod_name) * MAX_BASE_LEN // len(base)
    claim_len = len(pod_claim_name) * MAX_BASE_LEN // len(base)
    return f"{pod_name[:pod_len]}-{pod_claim_name[:claim_len]}"


def _named_claims(pod: Obj | None) -> set[str]:
    """Every claim name the pod refers to, directly or through its status."""
    if pod is None:
        return set()
    names = {str(c["resourceClaimName"]) for c in pod_claims(pod) if c.get("resourceClaimName")}
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if isinstance(entry, dict) and entry.get("resourceClaimName"):
            names.add(str(entry["resourceClaimName"]))
    return names


# --- the controller ----------------------------------------------------------------------------


class ResourceClaimController(Reconciler):
    """Creates claims from templates, reserves, releases and collects them; see the docstring."""

    def __init__(self, api: SimApi) -> None:
        if api.rt_resource_claims is None or api.rt_claim_templates is None:
            raise ValueError("this cluster does not serve resource.k8s.io/v1")
        super().__init__(api)
        self.rt_claims: ResourceType = api.rt_resource_claims
        self._pods = api.rt_pods.storage_key
        self._claims = api.rt_resource_claims.storage_key
        self._templates = api.rt_claim_templates.storage_key
        #: pods first, then claims, in each drain; a pod that failed is retried with back-off
        self._pod_queue = self.queue(self._sync_pod_key)
        self._claim_queue = self.queue(self._sync_claim_key)
        #: pod uid → claims it controls; claim → pods naming it; template → pods waiting for it
        self._owned: dict[str, set[ObjKey]] = {}
        self._users: dict[ObjKey, set[ObjKey]] = {}
        self._waiting: dict[ObjKey, set[ObjKey]] = {}
        #: pod uid → the message of the last Event posted on it (one per message in a row)
        self._reported: dict[str, str] = {}

    def _seed(self) -> None:
        for claim in self.api.store.items(self._claims):
            self._index_claim(claim, None, deleted=False)
            self._claim_queue.add(obj_key(claim))
        for pod in self.api.store.items(self._pods):
            if pod_claims(pod):
                self._index_pod(pod, None, deleted=False)
                self._pod_queue.add(obj_key(pod))

    # --- events, indexes and the work queue ------------------------------------------------

    def _on_event(self, storage_key: str, event: StoredEvent) -> None:
        if storage_key == self._pods:
            self._on_pod(event)
        elif storage_key == self._claims:
            self._on_claim(event)
        elif storage_key == self._templates and event.type != DELETED:
            for pod_key in sorted(self._waiting.pop(obj_key(event.obj), set())):
                self._pod_queue.add(pod_key)

    def _on_pod(self, event: StoredEvent) -> None:
        pod, deleted = event.obj, event.type == DELETED
        if not pod_claims(pod) and (event.prev is None or not pod_claims(event.prev)):
            return  # nothing of DRA's business (most pods)
        self._index_pod(pod, event.prev, deleted)
        namespace = pod["metadata"].get("namespace", "")
        for name in _named_claims(pod) | _named_claims(event.prev):
            self._claim_queue.add((namespace, name))
        for claim_key in sorted(self._owned.get(pod["metadata"].get("uid", ""), set())):
            self._claim_queue.add(claim_key)
        if deleted:
            self.drop_retry(obj_key(pod))
            self._reported.pop(pod["metadata"].get("uid", ""), None)
        else:
            self._pod_queue.add(obj_key(pod))

    def _on_claim(self, event: StoredEvent) -> None:
        claim, deleted = event.obj, event.type == DELETED
        self._index_claim(claim, event.prev, deleted)
        key = obj_key(claim)
        if not deleted:
            self._claim_queue.add(key)
        for pod_key in sorted(self._users.get(key, set())):
            self._pod_queue.add(pod_key)  # a claim to reserve, or one to make again

    def _index_pod(self, pod: Obj, prev: Obj | None, deleted: bool) -> None:
        namespace, key = pod["metadata"].get("namespace", ""), obj_key(pod)
        for name in _named_claims(prev):
            users = self._users.get((namespace, name))
            if users is not None:
                users.discard(key)
                if not users:
                    del self._users[(namespace, name)]
        if not deleted:
            for name in _named_claims(pod):
                self._users.setdefault((namespace, name), set()).add(key)

    def _index_claim(self, claim: Obj, prev: Obj | None, deleted: bool) -> None:
        key = obj_key(claim)
        for obj in (prev, claim if deleted else None):
            owner = owning_pod(obj) if obj is not None else None
            if owner is not None:
                owned = self._owned.get(owner[1])
                if owned is not None:
                    owned.discard(key)
                    if not owned:
                        del self._owned[owner[1]]
        owner = owning_pod(claim)
        if owner is not None and not deleted:
            self._owned.setdefault(owner[1], set()).add(key)

    def _sync_pod_key(self, key: ObjKey) -> None:
        pod = self.api.store.get(self._pods, *key)
        if pod is not None:
            self.sync_pod(pod)

    def _sync_claim_key(self, key: ObjKey) -> None:
        claim = self.api.store.get(self._claims, *key)
        if claim is not None:
            self.sync_claim(claim)

    # --- pods ------------------------------------------------------------------------------

    def sync_pod(self, pod: Obj) -> None:
        """syncPod: make the pod's claims, record them in its status, reserve for bound pods."""
        if pod["metadata"].get("deletionTimestamp") or pod_done(pod):
            return  # a pod that will not run needs no claims
        created: dict[str, str] = {}
        for pod_claim in pod_claims(pod):
            try:
                self._handle_claim(pod, pod_claim, created)
            except _Failed as failed:
                message = f"PodResourceClaim {pod_claim.get('name')}: {failed}"
                self._report(pod, "Warning", "FailedResourceClaimCreation", message)
                self.retry_later(self._pod_queue, obj_key(pod))
                return
        self.reset_backoff(obj_key(pod))
        if created:
            written = self._record_claims(pod, created)
            if written is None:
                self.retry_later(self._pod_queue, obj_key(pod))
                return
            pod = written
        if (pod.get("spec") or {}).get("nodeName"):
            self._reserve_for_pod(pod)

    def _handle_claim(self, pod: Obj, pod_claim: Obj, created: dict[str, str]) -> None:
        """handleClaim: nothing when the claim exists (or is not needed), else make it."""
        try:
            name, check_owner = claim_name(pod, pod_claim)
        except ClaimNameError as err:
            if not err.not_created:
                raise _Failed(f"checking for claim before creating it: {err}") from None
        else:
            if name is None:
                return
            if name:
                claim = self.api.store.get(self._claims, pod["metadata"]["namespace"], name)
                if claim is not None and not (check_owner and not_for_pod(pod, claim)):
                    return
        template = pod_claim.get("resourceClaimTemplateName")
        if not template:
            return
        claim = self._find_pod_claim(pod, str(pod_claim.get("name") or ""))
        if claim is None:
            claim = self._create_claim(pod, pod_claim, str(template))
        created[str(pod_claim.get("name") or "")] = claim["metadata"]["name"]

    def _find_pod_claim(self, pod: Obj, pod_claim_name: str) -> Obj | None:
        """A claim the pod owns that was made for this pod claim (after a lost status write)."""
        for key in sorted(self._owned.get(pod["metadata"]["uid"], set())):
            claim = self.api.store.get(self._claims, *key)
            if claim is None:
                continue
            annotations = claim["metadata"].get("annotations") or {}
            if annotations.get(POD_CLAIM_NAME) == pod_claim_name:
                return claim
        return None

    def _create_claim(self, pod: Obj, pod_claim: Obj, template_name: str) -> Obj:
        meta = pod["metadata"]
        namespace = meta["namespace"]
        template = self.api.store.get(self._templates, namespace, template_name)
        if template is None:
            self._waiting.setdefault((namespace, template_name), set()).add(obj_key(pod))
            raise _Failed(
                f'resource claim template "{template_name}": '
                f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found'
            )
        t_spec = template.get("spec") or {}
        t_meta = t_spec.get("metadata") or {}
        pod_claim_name = str(pod_claim.get("name") or "")
        c_meta: Obj = {
            "generateName": generate_name(meta["name"], pod_claim_name),
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "annotations": {**(t_meta.get("annotations") or {}), POD_CLAIM_NAME: pod_claim_name},
        }
        if t_meta.get("labels"):
            c_meta["labels"] = dict(t_meta["labels"])
        body = {
            "apiVersion": self.rt_claims.api_version,
            "kind": "ResourceClaim",
            "metadata": c_meta,
            "spec": copy.deepcopy(t_spec.get("spec") or {}),
        }
        try:
            return self.api.create(self.rt_claims, namespace, body)
        except ApiError as err:
            # upstream names the claim before the server generated its name: ""
            raise _Failed(f"create ResourceClaim : {err.message}") from None

    def _record_claims(self, pod: Obj, created: dict[str, str]) -> Obj | None:
        """status.resourceClaimStatuses: the new entries, the other ones kept."""
        status = dict(pod.get("status") or {})
        entries = [
            e
            for e in status.get("resourceClaimStatuses") or []
            if not (isinstance(e, dict) and e.get("name") in created)
        ]
        entries += [{"name": n, "resourceClaimName": c} for n, c in sorted(created.items())]
        status["resourceClaimStatuses"] = entries
        return self.write(self.api.rt_pods, {**pod, "status": status}, "status")

    def _reserve_for_pod(self, pod: Obj) -> None:
        """Reserve allocated claims for a bound pod that is not among their consumers yet."""
        meta = pod["metadata"]
        for pod_claim in pod_claims(pod):
            try:
                name, check_owner = claim_name(pod, pod_claim)
            except ClaimNameError:
                return
            if name is None:
                continue
            claim = self.api.store.get(self._claims, meta["namespace"], name)
            if claim is None or (check_owner and not_for_pod(pod, claim)):
                return
            status = claim.get("status") or {}
            if status.get("allocation") and not is_reserved_for(pod, claim):
                entry = {"resource": "pods", "name": meta["name"], "uid": meta["uid"]}
                status = {**status, "reservedFor": [*reserved_for(claim), entry]}
                self.write(self.rt_claims, {**claim, "status": status}, "status")

    # --- claims ----------------------------------------------------------------------------

    def sync_claim(self, claim: Obj) -> None:
        """syncClaim: drop stale consumers, deallocate, unblock deletion, collect."""
        reserved = reserved_for(claim)
        valid = [r for r in reserved if self._still_uses(claim, r)]
        protected = DELETE_PROTECTION in (claim["metadata"].get("finalizers") or [])
        if len(valid) < len(reserved):
            status = {k: v for k, v in (claim.get("status") or {}).items() if k != "reservedFor"}
            if valid:
                status["reservedFor"] = valid
            elif protected:
                status.pop("allocation", None)  # the last consumer is gone: deallocate
            written = self.write(self.rt_claims, {**claim, "status": status}, "status")
            if written is None:
                return
            claim = written
            if protected and not (claim.get("status") or {}).get("allocation"):
                claim = self._unprotect(claim) or claim
        elif protected and claim["metadata"].get("deletionTimestamp") and not valid:
            claim = self._deallocate(claim) or claim
            claim = self._unprotect(claim) or claim
        self._collect(claim, bool(valid))

    def _still_uses(self, claim: Obj, ref: Obj) -> bool:
        if ref.get("apiGroup") or ref.get("resource") != "pods":
            return True  # not a pod: upstream does not look further either
        pod = self.api.store.get(self._pods, claim["metadata"]["namespace"], str(ref.get("name")))
        return pod is not None and pod["metadata"]["uid"] == ref.get("uid") and not pod_done(pod)

    def _deallocate(self, claim: Obj) -> Obj | None:
        status = claim.get("status") or {}
        if not status.get("allocation"):
            return claim
        status = {k: v for k, v in status.items() if k != "allocation"}
        return self.write(self.rt_claims, {**claim, "status": status}, "status")

    def _unprotect(self, claim: Obj) -> Obj | None:
        meta = claim["metadata"]
        finalizers = [f for f in meta.get("finalizers") or [] if f != DELETE_PROTECTION]
        return self.write(self.rt_claims, {**claim, "metadata": {**meta, "finalizers": finalizers}})

    def _collect(self, claim: Obj, in_use: bool) -> None:
        """Delete a generated claim whose pod is gone (garbage collection) or, unused, done."""
        owner = owning_pod(claim)
        meta = claim["metadata"]
        if owner is None or meta.get("deletionTimestamp"):
            return
        pod = self.api.store.get(self._pods, meta["namespace"], owner[0])
        gone = pod is None or pod["metadata"]["uid"] != owner[1]
        if gone or (not in_use and pod is not None and pod_done(pod)):
            with contextlib.suppress(ApiError):  # gone already
                self.api.delete(self.rt_claims, meta["namespace"], meta["name"], DeleteOptions())

    # --- helpers ---------------------------------------------------------------------------

    def _report(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        """An Event on the pod, unless the last one posted on it said the same."""
        uid = pod["metadata"]["uid"]
        if self._reported.get(uid) == message:
            return
        self._reported[uid] = message
        self.post_event(pod, "Pod", "v1", type_, reason, message, COMPONENT)
