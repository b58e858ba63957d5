"""Claims, volumes, storage classes and CSI nodes: what volume rules need, parsed once.

Why this exists: a PersistentVolume with ``nodeAffinity`` (a local disk, a zonal disk) pins every
pod that mounts it to the nodes it can reach; a ``WaitForFirstConsumer`` claim waits for the
scheduler to choose its node; a CSI driver can attach only so many volumes to one node. The
volume plugins (``gang.scheduling.volumes``) judge those on the hot path, so the informers'
PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes are read here once into
small frozen shapes, and the catalog answers lookups by key.

Malformed objects are skipped with the reason kept (``rejected``) rather than raised: one odd
claim must not blind the scheduler to the others; a pod that mounts it waits with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gang.models.quantity import QuantityError, quantity_to_int
from gang.state.catalog import KindCatalog, KindTable
from gang.state.podinfo import NodeSelectorRequirement, NodeSelectorTerm

Key = tuple[str, str]

ANN_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
ANN_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS: Final = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"
IMMEDIATE: Final = "Immediate"
WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
#: PV labels VolumeZone compares with the node's (GA and the older beta names)
ZONE_LABELS: Final = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)


@dataclass(frozen=True, slots=True)
class Claim:
    namespace: str
    name: str
    uid: str
    storage_class: str
    volume_name: str
    #: ``spec.volumeName`` set and the PV controller's bind-completed annotation present
    bound: bool
    selected_node: str
    deleting: bool
    access_modes: frozenset[str]
    volume_mode: str
    request: int  # bytes
    lost: bool = False  # status.phase Lost: its volume is gone


@dataclass(frozen=True, slots=True)
class Volume:
    name: str
    storage_class: str
    #: ``spec.nodeAffinity.required.nodeSelectorTerms`` (ORed); () when the PV has none
    node_terms: tuple[NodeSelectorTerm, ...]
    has_node_affinity: bool
    zone_labels: tuple[tuple[str, frozenset[str]], ...]
    claim_ref: Key | None
    claim_uid: str
    available: bool  # status.phase Available (or no status yet) and not being deleted
    capacity: int
    access_modes: frozenset[str]
    volume_mode: str
    csi_driver: str
    handle: str

    def pinned_host(self) -> str | None:
        """The one hostname a local PV's affinity allows (``kubernetes.io/hostname In [x]``)."""
        if len(self.node_terms) != 1:
            return None
        term = self.node_terms[0]
        if term.match_fields or len(term.match_expressions) != 1:
            return None
        (req,) = term.match_expressions
        if req.key == "kubernetes.io/hostname" and req.operator == "In" and len(req.values) == 1:
            return req.values[0]
        return None


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str
    #: allowedTopologies as node selector terms (ORed); () when unrestricted
    allowed_topologies: tuple[NodeSelectorTerm, ...]


@dataclass(slots=True)
class VolumeCatalog(KindCatalog):
    """Live picture of the cluster's storage objects (one per cache, fed by informers; the
    informers' side, ``upsert``/``remove``/``rejected``/``version``, is ``KindCatalog``'s)."""

    claims: dict[Key, Claim] = field(default_factory=dict)
    volumes: dict[str, Volume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    #: node name → CSI driver → attachable volume count (None: the driver states no limit)
    csi_limits: dict[str, dict[str, int | None]] = field(default_factory=dict)

    def kinds(self) -> Mapping[str, KindTable]:
        return {
            "claims": KindTable(self.claims, parse_claim, namespaced=True),
            "volumes": KindTable(self.volumes, parse_volume, namespaced=False),
            "classes": KindTable(self.classes, parse_storage_class, namespaced=False),
            "csinodes": KindTable(self.csi_limits, parse_csi_limits, namespaced=False),
        }

    def parse_errors(self) -> tuple[type[Exception], ...]:
        return (ValueError, TypeError, KeyError, QuantityError)

    def rejection(self, kind: str, name: str, err: Exception) -> str:
        return f"{kind[:-1]} {name}: {err}"

    def claim_class(self, claim: Claim) -> StorageClass | None:
        return self.classes.get(claim.storage_class) if claim.storage_class else None

    def delayed(self, claim: Claim) -> bool:
        """An unbound claim the scheduler binds: its class waits for a consumer
        (``IsDelayBindingMode``) and it names no volume yet (a pre-bound claim is the volume
        controller's to finish, like an ``Immediate`` one)."""
        sc = self.claim_class(claim)
        return (
            sc is not None and sc.binding_mode == WAIT_FOR_FIRST_CONSUMER and not claim.volume_name
        )

    def provisionable(self, claim: Claim) -> StorageClass | None:
        """The claim's class if a provisioner can create its volume (not a static-only class)."""
        sc = self.claim_class(claim)
        if sc is None or not sc.provisioner or sc.provisioner == NO_PROVISIONER:
            return None
        return sc


# --------------------------------------------------------------------------- parsing


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _storage(amounts: Any) -> int:
    value = _map(amounts).get("storage")
    return quantity_to_int(value) if value is not None else 0


def _modes(value: Any) -> frozenset[str]:
    return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset()


def _terms(raw_terms: Any) -> tuple[NodeSelectorTerm, ...]:
    terms = []
    for raw in raw_terms if isinstance(raw_terms, list) else ():
        term = _map(raw)
        terms.append(
            NodeSelectorTerm(
                _requirements(term.get("matchExpressions")), _requirements(term.get("matchFields"))
            )
        )
    return tuple(terms)


def _requirements(raw: Any) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(
            str(r["key"]), str(r["operator"]), tuple(str(v) for v in r.get("values") or ())
        )
        for r in raw or ()
    )


def parse_claim(raw: Mapping[str, Any]) -> Claim:
    meta, spec, status = _map(raw.get("metadata")), _map(raw.get("spec")), _map(raw.get("status"))
    annotations = _map(meta.get("annotations"))
    storage_class = spec.get("storageClassName")
    if storage_class is None:
        storage_class = annotations.get(ANN_BETA_STORAGE_CLASS, "")
    volume_name = str(spec.get("volumeName") or "")
    return Claim(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        storage_class=str(storage_class or ""),
        volume_name=volume_name,
        bound=bool(volume_name) and ANN_BIND_COMPLETED in annotations,
        selected_node=str(annotations.get(ANN_SELECTED_NODE) or ""),
        deleting=meta.get("deletionTimestamp") is not None,
        access_modes=_modes(spec.get("accessModes")),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        request=_storage(_map(spec.get("resources")).get("requests")),
        lost=status.get("phase") == "Lost",
    )


def parse_volume(raw: Mapping[str, Any]) -> Volume:
    meta, spec, status = _map(raw.get("metadata")), _map(raw.get("spec")), _map(raw.get("status"))
    labels = _map(meta.get("labels"))
    affinity = _map(_map(spec.get("nodeAffinity")).get("required"))
    ref = spec.get("claimRef")
    claim_ref = None
    if isinstance(ref, Mapping) and ref.get("name"):
        claim_ref = (str(ref.get("namespace") or ""), str(ref["name"]))
    csi = _map(spec.get("csi"))
    phase = str(status.get("phase") or "Available")
    return Volume(
        name=str(meta.get("name") or ""),
        storage_class=str(spec.get("storageClassName") or ""),
        node_terms=_terms(affinity.get("nodeSelectorTerms")),
        has_node_affinity=bool(affinity),
        zone_labels=tuple(
            (key, frozenset(str(labels[key]).split("__"))) for key in ZONE_LABELS if key in labels
        ),
        claim_ref=claim_ref,
        claim_uid=str(_map(ref).get("uid") or ""),
        available=phase == "Available" and meta.get("deletionTimestamp") is None,
        capacity=_storage(spec.get("capacity")),
        access_modes=_modes(spec.get("accessModes")),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        csi_driver=str(csi.get("driver") or ""),
        handle=str(csi.get("volumeHandle") or meta.get("name") or ""),
    )


def parse_storage_class(raw: Mapping[str, Any]) -> StorageClass:
    terms = []
    for raw_term in raw.get("allowedTopologies") or ():
        expressions = _map(raw_term).get("matchLabelExpressions") or ()
        terms.append(
            {
                "matchExpressions": [
                    {"key": e["key"], "operator": "In", "values": list(e.get("values") or ())}
                    for e in expressions
                ]
            }
        )
    return StorageClass(
        name=str(_map(raw.get("metadata")).get("name") or ""),
        provisioner=str(raw.get("provisioner") or ""),
        binding_mode=str(raw.get("volumeBindingMode") or IMMEDIATE),
        allowed_topologies=_terms(terms),
    )


def parse_csi_limits(raw: Mapping[str, Any]) -> dict[str, int | None]:
    limits: dict[str, int | None] = {}
    for driver in _map(raw.get("spec")).get("drivers") or ():
        entry = _map(driver)
        count = _map(entry.get("allocatable")).get("count")
        limits[str(entry["name"])] = int(count) if count is not None else None
    return limits
