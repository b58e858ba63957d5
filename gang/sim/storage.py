"""What a kube-apiserver does to PersistentVolumeClaims, PersistentVolumes and StorageClasses.

A scheduler that places pods with volumes reads these objects as the server stored them, so the
server-side facts it may rely on are reproduced here, as ``gang.sim.workloads`` does for Jobs:
the v1 defaults (a claim's and a volume's ``volumeMode: Filesystem``, a volume's
``persistentVolumeReclaimPolicy: Retain``, a class's ``reclaimPolicy: Delete`` and
``volumeBindingMode: Immediate``), the status a new object starts with (the strategies drop a
posted status: a claim starts ``Pending``, a volume ``Available`` — on a real server it is
``Pending`` for the instant before the PV controller's first sync), the admission plugins that
touch them (DefaultStorageClass gives a claim without ``storageClassName`` the default class;
StorageObjectInUseProtection adds the ``kubernetes.io/pvc-protection`` /
``kubernetes.io/pv-protection`` finalizers), and the validation users hit in practice (access
modes, the requested / offered ``storage`` quantity, a volume source, a class's provisioner).
Updates are not re-validated (spec immutability of bound claims and of classes is not enforced).
What the PV controller then does with these objects is ``gang.sim.volumes``' business.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from gang.models.quantity import QuantityError, parse_quantity
from gang.sim.workloads import WorkloadRejected

Obj = dict[str, Any]

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BETA_DEFAULT_CLASS_ANNOTATION = "storageclass.beta.kubernetes.io/is-default-class"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
RECLAIM_POLICIES = ("Recycle", "Delete", "Retain")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
#: the spec fields that name a volume source (one is required); ``csi`` is what provisioners use
VOLUME_SOURCES = frozenset(
    {
        "awsElasticBlockStore",
        "azureDisk",
        "azureFile",
        "cephfs",
        "cinder",
        "csi",
        "fc",
        "flexVolume",
        "flocker",
        "gcePersistentDisk",
        "glusterfs",
        "hostPath",
        "iscsi",
        "local",
        "nfs",
        "photonPersistentDisk",
        "portworxVolume",
        "quobyte",
        "rbd",
        "scaleIO",
        "storageos",
        "vsphereVolume",
    }
)


def _supported(value: Any, allowed: tuple[str, ...]) -> str:
    listed = ", ".join(f'"{a}"' for a in allowed)
    return f'Unsupported value: "{value}": supported values: {listed}'


def storage_quantity(resources: Any) -> Decimal | None:
    """``resources["storage"]`` as a number of bytes, or None when absent or unparsable."""
    if not isinstance(resources, dict) or "storage" not in resources:
        return None
    try:
        return parse_quantity(resources["storage"])
    except (QuantityError, TypeError, ValueError):
        return None


def is_default_class(storage_class: Obj) -> bool:
    annotations = storage_class.get("metadata", {}).get("annotations") or {}
    return "true" in (
        annotations.get(DEFAULT_CLASS_ANNOTATION),
        annotations.get(BETA_DEFAULT_CLASS_ANNOTATION),
    )


def default_class(classes: Iterable[Obj]) -> Obj | None:
    """The class DefaultStorageClass picks: of several defaults, the newest (then by name)."""
    defaults = [c for c in classes if is_default_class(c)]
    if not defaults:
        return None
    return max(
        defaults,
        key=lambda c: (c["metadata"].get("creationTimestamp", ""), c["metadata"]["name"]),
    )


def _access_mode_causes(path: str, modes: Any, required_detail: str) -> list[tuple[str, str]]:
    if not isinstance(modes, list) or not modes:
        return [(path, f"Required value: {required_detail}".rstrip(": "))]
    return [(path, _supported(mode, ACCESS_MODES)) for mode in modes if mode not in ACCESS_MODES]


def _volume_mode_causes(path: str, spec: Obj) -> list[tuple[str, str]]:
    mode = spec.setdefault("volumeMode", "Filesystem")
    return [] if mode in VOLUME_MODES else [(path, _supported(mode, VOLUME_MODES))]


def _with_finalizer(meta: Obj, finalizer: str) -> None:
    finalizers = list(meta.get("finalizers") or [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)
    meta["finalizers"] = finalizers


def admit_claim(claim: Obj, default: Obj | None) -> Obj:
    """v1 PersistentVolumeClaim: defaults, admission (default class, protection), validation."""
    spec = dict(claim.get("spec") or {})
    causes = _access_mode_causes(
        "spec.accessModes", spec.get("accessModes"), "at least 1 access mode is required"
    )
    resources = dict(spec.get("resources") or {})
    requests = resources.get("requests")
    if not isinstance(requests, dict) or "storage" not in requests:
        causes.append(("spec.resources[storage]", "Required value"))
    else:
        size = storage_quantity(requests)
        if size is None or size <= 0:
            causes.append(
                (
                    "spec.resources[storage]",
                    f'Invalid value: "{requests["storage"]}": must be greater than zero',
                )
            )
    causes += _volume_mode_causes("spec.volumeMode", spec)
    if causes:
        raise WorkloadRejected(causes)
    if "storageClassName" not in spec and default is not None:
        spec["storageClassName"] = default["metadata"]["name"]
    meta = dict(claim["metadata"])
    _with_finalizer(meta, PVC_PROTECTION)
    return {**claim, "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def admit_volume(volume: Obj, now: str) -> Obj:
    """v1 PersistentVolume: defaults, the pv-protection finalizer, validation."""
    spec = dict(volume.get("spec") or {})
    causes = _access_mode_causes("spec.accessModes", spec.get("accessModes"), "")
    capacity = spec.get("capacity")
    if not isinstance(capacity, dict) or not capacity:
        causes.append(("spec.capacity", "Required value"))
    elif storage_quantity(capacity) is None:
        causes.append(("spec.capacity", _supported(sorted(capacity)[0], ("storage",))))
    if not VOLUME_SOURCES & set(spec):
        causes.append(("spec", "Required value: must specify a volume type"))
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    policy = spec["persistentVolumeReclaimPolicy"]
    if policy not in RECLAIM_POLICIES:
        causes.append(("spec.persistentVolumeReclaimPolicy", _supported(policy, RECLAIM_POLICIES)))
    causes += _volume_mode_causes("spec.volumeMode", spec)
    if causes:
        raise WorkloadRejected(causes)
    meta = dict(volume["metadata"])
    _with_finalizer(meta, PV_PROTECTION)
    status = {"phase": "Available", "lastPhaseTransitionTime": now}
    return {**volume, "metadata": meta, "spec": spec, "status": status}


def admit_storage_class(storage_class: Obj) -> Obj:
    """storage.k8s.io/v1 StorageClass: defaults and validation."""
    causes: list[tuple[str, str]] = []
    if not storage_class.get("provisioner"):
        causes.append(("provisioner", "Required value"))
    storage_class.setdefault("reclaimPolicy", "Delete")
    storage_class.setdefault("volumeBindingMode", "Immediate")
    if storage_class["reclaimPolicy"] not in ("Delete", "Retain"):
        causes.append(
            ("reclaimPolicy", _supported(storage_class["reclaimPolicy"], ("Delete", "Retain")))
        )
    if storage_class["volumeBindingMode"] not in BINDING_MODES:
        causes.append(
            ("volumeBindingMode", _supported(storage_class["volumeBindingMode"], BINDING_MODES))
        )
    if causes:
        raise WorkloadRejected(causes)
    return storage_class
