"""Volume rules: VolumeBinding, VolumeZone and NodeVolumeLimits, for whole gangs.

Why this exists: a pod that mounts a local or zonal disk can only run where the disk is; a
``WaitForFirstConsumer`` claim gets its disk where the scheduler puts the pod; a CSI driver can
attach only so many volumes to one node. Ignoring these binds pods that never start. Each plugin
ports its kube-scheduler namesake, reasons word for word:

- VolumeBinding. PreFilter: every claim must exist and not be deleting; a ``ReadWriteOncePod``
  claim must not be mounted by another pod (kube-scheduler's VolumeRestrictions); an unbound
  claim of an ``Immediate`` class (or of no class) waits for the volume controller ("pod has
  unbound immediate PersistentVolumeClaims"). Filter: a bound volume's
  ``nodeAffinity`` must match the node; an unbound ``WaitForFirstConsumer`` claim needs an
  available matching volume there, or a provisioner whose ``allowedTopologies`` admit the node.
  PreBind: the claim gets ``volume.kubernetes.io/selected-node`` (or the chosen volume its
  ``claimRef``), and the pod is bound only once the claim is bound to a volume that reaches the
  node.
- VolumeZone: a bound volume's zone/region labels must include the node's.
- NodeVolumeLimits: the node's CSINode ``allocatable.count`` per driver must cover the volumes
  already attached there plus the pod's new ones (one volume counted once however many pods
  share it).

Gang-aware: members placed earlier in the same cycle count like pods already there — they take
the static volumes they would bind (two members never count the same local disk) and their
volumes count against a node's attach limit. So do members reserved in earlier cycles and not
bound yet (kube-scheduler's ``AssumePodVolumes`` at Reserve): VolumeBinding's Reserve assumes,
for each unbound ``WaitForFirstConsumer`` claim of a reserved member, the static volume it will
bind on the member's node, and every later placement counts that volume taken (and the claim as
bound to it) until the member's PreBind ends or it is unreserved. Without it a gang whose members
were placed over two cycles (a job's pods created a few at a time), or two gangs waiting in
Permit together, could plan two claims onto one local disk; the member left without a disk then
waited in PreBind with the rest of its gang bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from gang.scheduling import predicates
from gang.scheduling.framework import Mask, NodeFilterInput, Placed, reads_no_labels
from gang.state.cache import ClusterCache, Snapshot
from gang.state.nodefacts import NodeFacts
from gang.state.podinfo import NodeSelectorTerm, PodInfo
from gang.state.volumes import (
    ANN_SELECTED_NODE,
    ZONE_LABELS,
    Claim,
    Volume,
    VolumeCatalog,
)

if TYPE_CHECKING:
    from gang.scheduling.gang import Gang

log = logging.getLogger(__name__)

REASON_NODE_CONFLICT: Final = "node(s) had volume node affinity conflict"
REASON_NO_VOLUME: Final = "node(s) didn't find available persistent volumes to bind"
REASON_ZONE: Final = "node(s) had no available volume zone"
REASON_LIMIT: Final = "node(s) exceed max volume count"
REASON_PV_MISSING: Final = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
REASON_UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"
REASON_ONE_POD_ONLY: Final = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
READ_WRITE_ONCE_POD: Final = "ReadWriteOncePod"
#: VolumeBinding's Filter reasons, in the order kube-scheduler lists them for one node
_BINDING_REASONS: Final = (REASON_NODE_CONFLICT, REASON_NO_VOLUME, REASON_PV_MISSING)
Key = tuple[str, str]


def _terms_mask(snap: Snapshot, terms: tuple[NodeSelectorTerm, ...]) -> Mask:
    """Rows whose node matches any of the node selector terms (no terms: every live row)."""
    if not terms:
        return snap.valid.copy()
    return np.array(
        [f is not None and any(predicates.term_matches(t, f) for t in terms) for f in snap.facts],
        dtype=np.bool_,
    )


def claim_problem(catalog: VolumeCatalog, pod: PodInfo) -> str | None:
    """kube-scheduler's VolumeBinding PreFilter verdict for ``pod``: why it cannot be placed
    on any node now, or None."""
    unbound_immediate = False
    for name in pod.rules.claims:
        claim = catalog.claims.get((pod.namespace, name))
        if claim is None:
            rejected = catalog.rejected.get(("claims", pod.namespace, name))
            return rejected or f'persistentvolumeclaim "{name}" not found'
        if claim.deleting:
            return f'persistentvolumeclaim "{name}" is being deleted'
        if claim.lost:  # its volume went away after binding
            return (
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                f'"{claim.volume_name}"'
            )
        if claim.bound:
            continue  # a missing volume is Filter's reason, node by node
        if claim.storage_class and claim.storage_class not in catalog.classes:
            return f'storageclass.storage.k8s.io "{claim.storage_class}" not found'
        if not catalog.delayed(claim):
            unbound_immediate = True
    return REASON_UNBOUND_IMMEDIATE if unbound_immediate else None


def _one_pod_only(snap: Snapshot, pod: PodInfo, taken: dict[Key, str]) -> str | None:
    """VolumeRestrictions: a ``ReadWriteOncePod`` claim is mounted by one pod at a time — one
    already placed anywhere, or another member of the same gang (``taken`` collects them)."""
    for name in pod.rules.claims:
        claim = snap.volumes.claims.get((pod.namespace, name))
        if claim is None or READ_WRITE_ONCE_POD not in claim.access_modes:
            continue
        key = (pod.namespace, name)
        users = (
            p.key
            for on_node in snap.pods.with_claims.values()
            for p in on_node.values()
            if p.namespace == pod.namespace and name in p.claims and p.key != pod.key
        )
        if taken.get(key, pod.name) != pod.name or next(users, None) is not None:
            return REASON_ONE_POD_ONLY
        taken[key] = pod.name
    return None


def _smallest(
    catalog: VolumeCatalog, claim: Claim, taken: set[str], reaches: Callable[[Volume], bool]
) -> str | None:
    """The smallest volume not ``taken`` that the claim could bind and that ``reaches`` the
    node (kube-scheduler's choice among static volumes)."""
    best: Volume | None = None
    for volume in catalog.volumes.values():
        if volume.name in taken or not _fits(volume, claim) or not reaches(volume):
            continue
        if best is None or volume.capacity < best.capacity:
            best = volume
    return best.name if best is not None else None


def _fits(volume: Volume, claim: Claim) -> bool:
    """A volume the claim could bind (``FindMatchingVolume`` without the node check)."""
    if claim.volume_name:
        return volume.name == claim.volume_name
    if volume.claim_ref is not None:
        return volume.claim_ref == (claim.namespace, claim.name) and volume.claim_uid in (
            "",
            claim.uid,
        )
    return (
        volume.available
        and volume.storage_class == claim.storage_class
        and volume.capacity >= claim.request
        and claim.access_modes <= volume.access_modes
        and volume.volume_mode == claim.volume_mode
    )


@dataclass(slots=True, eq=False)
class VolumeBinding:
    """PreFilter + Filter + PreBind (see the module docstring)."""

    kube: Any = None  # gang.kube.transport.Kube
    #: the live cache (claims and node facts for PreBind); None where nothing is bound
    cache: ClusterCache | None = None
    #: how long PreBind waits for a claim to be bound (kube-scheduler's bindTimeoutSeconds)
    bind_timeout_seconds: float = 600.0
    name: str = "VolumeBinding"
    #: relevant by the pod's claims (its rules) alone
    relevance_by_template: ClassVar[bool] = True
    relevance_label_keys = reads_no_labels
    _last: tuple[object, npt.NDArray[np.bool_]] | None = field(default=None, repr=False)
    _masks: dict[tuple[object, int], Mask] = field(default_factory=dict, repr=False)
    #: volumes chosen by a PreBind in flight (claim → volume), so two never take one
    _chosen: dict[Key, str] = field(default_factory=dict, repr=False)
    #: Reserve's assumptions: unbound delayed claim → (the static volume it will bind, the
    #: reserved member mounting it). An entry lives from the member's Reserve until its
    #: Unreserve or the end of its PreBind, whichever comes first.
    _assumed: dict[Key, tuple[str, Key]] = field(default_factory=dict, repr=False)

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        return bool(pod.rules.claims)

    def pre_filter(self, gang: Gang, snap: Snapshot) -> str | None:
        single_user: dict[Key, str] = {}  # ReadWriteOncePod claims → the member mounting it
        # the pending members with claims (claims asked first: most members have none)
        for pod in gang.members.values():
            if not pod.rules.claims or not gang.is_pending(pod):
                continue
            problem = claim_problem(snap.volumes, pod) or _one_pod_only(snap, pod, single_user)
            if problem is not None:
                return f"{problem} (pod {pod.namespace}/{pod.name})"
        return None

    def _mask(self, snap: Snapshot, key: object, terms: tuple[NodeSelectorTerm, ...]) -> Mask:
        cache_key = (key, snap.version)
        found = self._masks.get(cache_key)
        if found is None:
            if len(self._masks) > 4096:
                self._masks.clear()
            found = self._masks[cache_key] = _terms_mask(snap, terms)
        return found

    def volume_rows(self, snap: Snapshot, volume: Volume) -> Mask:
        """Rows a volume can be used from (its node affinity; every row without one)."""
        host = volume.pinned_host()
        if host is not None:  # a local disk: one lookup, not a pass over every node
            mask = np.zeros(len(snap.names), dtype=np.bool_)
            row = snap.domains.row_of.get(host)
            if row is not None and snap.facts[row] is not None:
                facts = snap.facts[row]
                assert facts is not None
                mask[row] = facts.labels.get("kubernetes.io/hostname") == host
            return mask
        return self._mask(snap, ("volume", volume.node_terms), volume.node_terms)

    def _taken(self, snap: Snapshot, placed: Sequence[Placed]) -> set[str]:
        """Static volumes reserved members will bind, and those the members placed earlier in
        this cycle would."""
        taken = self._assumed_volumes()
        for member, row in placed:
            for claim in self._unbound_delayed(snap.volumes, member):
                chosen = self._static_for(snap, claim, row, taken)
                if chosen is not None:
                    taken.add(chosen)
        return taken

    def _unbound_delayed(self, catalog: VolumeCatalog, pod: PodInfo) -> Iterator[Claim]:
        """The pod's claims still to be bound where it goes (none assumed by a reservation)."""
        assumed = self._assumed
        for name in pod.rules.claims:
            claim = catalog.claims.get((pod.namespace, name))
            if (
                claim is not None
                and not claim.bound
                and catalog.delayed(claim)
                and (claim.namespace, claim.name) not in assumed
            ):
                yield claim

    # --- Reserve -------------------------------------------------------------------------------

    def reserve(self, gang: Gang, assignments: Mapping[Key, str]) -> str | None:
        """Assume, per unbound delayed claim of each placed member, the static volume it will
        bind on the member's node (the smallest no other assumption took, as Filter counted);
        a claim that none reaches and no provisioner can serve refuses the gang."""
        if self.cache is None:
            return None
        catalog = self.cache.volumes
        assumed: dict[Key, tuple[str, Key]] = {}
        taken = self._assumed_volumes()
        for key, node in assignments.items():
            member = gang.members.get(key)
            if member is None or not member.rules.claims:
                continue
            for claim in self._unbound_delayed(catalog, member):
                claim_key = (claim.namespace, claim.name)
                if claim_key in assumed:
                    continue  # shared by two members: the first one's volume
                volume = self._static_on(claim, node, taken)
                if volume is not None:
                    assumed[claim_key] = (volume, key)
                    taken.add(volume)
                elif catalog.provisionable(claim) is None:
                    return (
                        f'no available persistent volume for claim "{claim.name}" of pod '
                        f"{member.name} on node {node}"
                    )
        self._assumed.update(assumed)
        return None

    def unreserve(self, gang: Gang, assignments: Mapping[Key, str]) -> None:
        self._forget_assumed(assignments.keys())

    def _assumed_volumes(self) -> set[str]:
        """The static volumes reserved members will bind (a fresh set: callers add to it)."""
        return {volume for volume, _ in self._assumed.values()}

    def _forget_assumed(self, pods: Collection[Key]) -> None:
        if self._assumed:
            self._assumed = {c: a for c, a in self._assumed.items() if a[1] not in pods}

    def _static_for(self, snap: Snapshot, claim: Claim, row: int, taken: set[str]) -> str | None:
        """The smallest volume the claim could bind on ``row`` (kube-scheduler's choice)."""
        return _smallest(
            snap.volumes, claim, taken, lambda volume: bool(self.volume_rows(snap, volume)[row])
        )

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        result: Mask = np.logical_not(np.any(self._verdict(s), axis=0))
        return result

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        failed = self._verdict(s)[:, row]
        return [reason for reason, bad in zip(_BINDING_REASONS, failed, strict=True) if bad]

    def _verdict(self, s: NodeFilterInput) -> npt.NDArray[np.bool_]:
        """Per reason of ``_BINDING_REASONS``, the rows it rejects (a node may have several)."""
        if self._last is not None and self._last[0] is s:
            return self._last[1]
        snap, pod, catalog = s.snap, s.pod, s.snap.volumes
        failed = np.zeros((len(_BINDING_REASONS), len(snap.names)), dtype=np.bool_)
        delayed: list[Claim] = []
        for name in pod.rules.claims:
            claim = catalog.claims.get((pod.namespace, name))
            if claim is None:
                continue  # PreFilter said so already
            assumed = self._assumed.get((claim.namespace, claim.name))
            if claim.bound or assumed is not None:  # (assumed: as good as bound to it)
                volume = catalog.volumes.get(assumed[0] if assumed else claim.volume_name)
                if volume is None:
                    failed[2] = True
                else:
                    failed[0] |= ~self.volume_rows(snap, volume)
            elif catalog.delayed(claim):
                delayed.append(claim)
        if delayed:
            failed[1] = ~self._delayed_rows(snap, delayed, self._taken(snap, s.placed))
        self._last = (s, failed)
        return failed

    def _delayed_rows(self, snap: Snapshot, claims: list[Claim], taken: set[str]) -> Mask:
        """Rows where every claim gets a volume: an available one (each its own) or one its
        class can provision there."""
        ok = snap.valid.copy()
        static: list[Claim] = []
        for claim in claims:
            reachable = np.zeros(len(snap.names), dtype=np.bool_)
            for volume in snap.volumes.volumes.values():
                if volume.name not in taken and _fits(volume, claim):
                    reachable |= self.volume_rows(snap, volume)
            sc = snap.volumes.provisionable(claim)
            if sc is not None:
                reachable |= self._mask(snap, ("class", sc), sc.allowed_topologies)
            else:
                static.append(claim)
            ok &= reachable
        if len(static) > 1:  # several claims on one node must not count one volume twice
            for row in np.flatnonzero(ok):
                chosen = set(taken)
                for claim in static:
                    found = self._static_for(snap, claim, int(row), chosen)
                    if found is None:
                        ok[row] = False
                        break
                    chosen.add(found)
        return ok

    # --- PreBind -----------------------------------------------------------------------------

    def pre_bind_pre_flight(self, gang: Gang, pod: Key) -> bool:
        """Only a member with claims has anything to bind before it."""
        member = gang.members.get(pod)
        return member is not None and self.cache is not None and bool(member.rules.claims)

    async def pre_bind(self, gang: Gang, pod: Key, node: str) -> None:
        """Ask for each unbound claim's volume on ``node`` and wait until every claim is bound
        to a volume reaching it (raising fails this member's binding; it is re-placed)."""
        member = gang.members.get(pod)
        if member is None or self.cache is None or not member.rules.claims:
            return
        try:
            await self._bind_claims(member, node)
        finally:
            self._forget_assumed((pod,))  # bound now, or the member is placed anew

    async def _bind_claims(self, member: PodInfo, node: str) -> None:
        assert self.cache is not None
        catalog, kube = self.cache.volumes, self.kube
        waiting: list[Claim] = []
        for name in member.rules.claims:
            claim = catalog.claims.get((member.namespace, name))
            if claim is None:
                raise RuntimeError(f'persistentvolumeclaim "{name}" not found')
            if claim.bound:
                continue
            waiting.append(claim)
            if claim.selected_node == node or claim.volume_name:
                continue
            assumed = self._assumed.get((claim.namespace, claim.name))
            volume = assumed[0] if assumed is not None else self._claim_static(claim, node)
            if volume is not None:
                self._chosen[(claim.namespace, claim.name)] = volume
                ref = {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": claim.namespace,
                    "name": claim.name,
                    "uid": claim.uid,
                }
                await kube.patch_volume(
                    volume,
                    {
                        "metadata": {
                            "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}
                        },
                        "spec": {"claimRef": ref},
                    },
                )
            else:
                await kube.patch_claim(
                    claim.namespace,
                    claim.name,
                    {"metadata": {"annotations": {ANN_SELECTED_NODE: node}}},
                )
        try:
            await self._wait_bound(catalog, waiting, node)
        finally:
            for claim in waiting:
                self._chosen.pop((claim.namespace, claim.name), None)

    def _claim_static(self, claim: Claim, node: str) -> str | None:
        """A static volume for the claim on ``node`` that no PreBind in flight took and no
        reservation assumed."""
        return self._static_on(claim, node, self._assumed_volumes() | set(self._chosen.values()))

    def _static_on(self, claim: Claim, node: str, taken: set[str]) -> str | None:
        """The smallest volume not in ``taken`` the claim could bind on ``node``, by the
        cache's catalog (kube-scheduler's choice)."""
        assert self.cache is not None
        return _smallest(
            self.cache.volumes, claim, taken, lambda volume: self._reaches(volume, node)
        )

    async def _wait_bound(self, catalog: VolumeCatalog, claims: list[Claim], node: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bind_timeout_seconds
        while True:
            pending = []
            for claim in claims:
                now = catalog.claims.get((claim.namespace, claim.name))
                if now is None:
                    raise RuntimeError(f'persistentvolumeclaim "{claim.name}" was deleted')
                if not now.bound:
                    pending.append(now)
                    continue
                volume = catalog.volumes.get(now.volume_name)
                if volume is None:
                    pending.append(now)  # the informer has not shown the volume yet
                elif not self._reaches(volume, node):
                    raise RuntimeError(
                        f'persistentvolumeclaim "{now.name}" was bound to volume {volume.name}, '
                        f"which does not reach node {node}"
                    )
            if not pending:
                return
            if loop.time() > deadline:
                raise TimeoutError(
                    "timed out waiting for persistentvolumeclaim(s) "
                    + ", ".join(f'"{c.name}"' for c in pending)
                    + " to be bound"
                )
            await asyncio.sleep(0.05)

    def _reaches(self, volume: Volume, node: str) -> bool:
        """Whether ``volume``'s node affinity admits ``node`` (by the cache's node facts)."""
        if not volume.node_terms:
            return True
        entry = self.cache.nodes.get(node) if self.cache is not None else None
        if entry is None:
            return volume.pinned_host() in (None, node)
        return any(predicates.term_matches(t, entry.facts) for t in volume.node_terms)


class VolumeZone:
    """A bound volume's zone and region labels must include the node's."""

    name = "VolumeZone"
    #: relevant by the pod's claims (its rules) alone
    relevance_by_template: ClassVar[bool] = True
    relevance_label_keys = reads_no_labels

    def __init__(self) -> None:
        #: per volume zone labels and node-set version: the rows that may use the volume
        self._masks: dict[tuple[object, int], Mask] = {}

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        return bool(pod.rules.claims)

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        snap, pod, catalog = s.snap, s.pod, s.snap.volumes
        ok = np.ones(len(snap.names), dtype=np.bool_)
        for name in pod.rules.claims:
            claim = catalog.claims.get((pod.namespace, name))
            # the claim's volume name decides, bind-completed or not, as in kube-scheduler
            volume = catalog.volumes.get(claim.volume_name) if claim else None
            if volume is None or not volume.zone_labels:
                continue
            key = (volume.zone_labels, snap.version)
            mask = self._masks.get(key)
            if mask is None:
                if len(self._masks) > 4096:
                    self._masks.clear()
                mask = self._masks[key] = np.array(
                    [f is None or zone_fits(volume, f) for f in snap.facts], dtype=np.bool_
                )
            ok &= mask
        return ok

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        return [REASON_ZONE]


def zone_fits(volume: Volume, node: NodeFacts) -> bool:
    """VolumeZone for one node: a node without any zone/region label takes anything."""
    labels = node.labels
    if not any(key in labels for key in ZONE_LABELS):
        return True
    for key, values in volume.zone_labels:
        value = labels.get(key)
        if value is None:
            value = labels.get(_GA.get(key, key))
        if value is None or value not in values:
            return False
    return True


_GA: Final = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


class NodeVolumeLimits:
    """CSINode ``allocatable.count`` per driver bounds the volumes attached to a node."""

    name = "NodeVolumeLimits"
    #: relevant by the pod's claims (its rules) and the snapshot's CSI limits alone
    relevance_by_template: ClassVar[bool] = True
    relevance_label_keys = reads_no_labels

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        return bool(pod.rules.claims) and bool(snap.volumes.csi_limits)

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        snap, pod, catalog = s.snap, s.pod, s.snap.volumes
        ok = np.ones(len(snap.names), dtype=np.bool_)
        new = volume_ids(catalog, pod.namespace, pod.rules.claims)
        if not new:
            return ok
        placed_on: dict[int, list[PodInfo]] = {}
        for member, row in s.placed:
            placed_on.setdefault(row, []).append(member)
        for node, limits in catalog.csi_limits.items():
            at = snap.domains.row_of.get(node)
            if at is None or not any(limits.get(d) is not None for d in new):
                continue
            attached: dict[str, set[str]] = {}
            pods = [(p.namespace, p.claims) for p in snap.pods.with_claims.get(node, {}).values()]
            pods += [(m.namespace, m.rules.claims) for m in placed_on.get(at, [])]
            for namespace, claims in pods:
                for driver, ids in volume_ids(catalog, namespace, claims).items():
                    attached.setdefault(driver, set()).update(ids)
            for driver, ids in new.items():
                limit = limits.get(driver)
                if limit is None:
                    continue
                have = attached.get(driver, set())
                if len(have) + len(ids - have) > limit:
                    ok[at] = False
                    break
        return ok

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        return [REASON_LIMIT]


def volume_ids(
    catalog: VolumeCatalog, namespace: str, claims: Sequence[str]
) -> dict[str, set[str]]:
    """CSI driver → the volume ids these claims use (a claim naming an existing volume: its
    handle; any other: the claim itself, under its class's provisioner)."""
    out: dict[str, set[str]] = {}
    for name in claims:
        claim = catalog.claims.get((namespace, name))
        if claim is None:
            continue
        volume = catalog.volumes.get(claim.volume_name) if claim.volume_name else None
        if volume is not None:
            if volume.csi_driver:
                out.setdefault(volume.csi_driver, set()).add(volume.handle)
            continue
        sc = catalog.claim_class(claim)  # not bound yet, or its volume is gone
        if sc is not None and sc.provisioner:
            out.setdefault(sc.provisioner, set()).add(f"{namespace}/{name}")
    return out
