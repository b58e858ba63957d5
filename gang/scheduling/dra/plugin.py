"""DynamicResources: devices claimed through ResourceClaims, allocated for a whole gang at once.

Why this exists: kube-scheduler allocates one pod's claims at a time, so a gang's members can each
take devices that leave the last member short (upstream issue 138765): the gang then holds devices
it cannot use. Here the members' claims are allocated in the gang's one scheduling cycle, on the
snapshot, each member's on the node it is placed on, with the devices the members placed before it
took counted as in use: either every claim of every member is satisfied, or the gang is not
placed. kube-scheduler's extension points, reasons word for word where it has them:

- PreFilter: every claim a pending member names exists, is not being deleted, and (made from a
  template) was made for that pod; a template claim not created yet waits for the resourceclaim
  controller. The API must be served at all.
- Filter (rule-aware, per member, with the members placed before it): a claim allocated already
  (by the API, by an allocation in flight, or by an earlier member of this cycle sharing it) must
  reach the node; the others must be allocatable there together (``gang.scheduling.dra.allocator``).
- Reserve: the allocations of the whole gang are recorded in flight (``DraCatalog.plan``): from
  then on no other gang plans on those devices. Unreserve forgets them.
- PreBind, as a barrier for the whole gang: the first member to reach it starts one commit for
  every member, and every member waits for it. Per claim, kube-scheduler's writes: the finalizer
  ``resource.kubernetes.io/delete-protection`` by an update, then ``status.allocation`` and the
  members' ``reservedFor`` entries in one status update carrying the claim's resourceVersion. A
  conflict or any failure rolls back everything the commit wrote — entries, allocations it made,
  the finalizer it added — and fails every member's binding, so nothing of the gang is bound and
  it is placed again. Members without claims wait for the commit too: a gang is bound whole.

After a restart an allocation written is a fact: the claim arrives allocated and reserved, the
Filter holds its members to the allocation's nodes, and the commit has nothing left to write.

Placeholders (members not created yet) hold no devices: the real member's claims are allocated
when it arrives, and if they fit nowhere beside the members reserved before it the gang is placed
again as a whole (``gang.scheduling.cycle``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np

from gang.kube.transport import KubeError
from gang.models.dra import ResourceClaim, ResourceSlice
from gang.scheduling.dra.allocator import AllocationError, Allocator, SelectorMemo, reaches
from gang.scheduling.framework import Mask, NodeFilterInput, Placed, reads_no_labels
from gang.state.cache import ClusterCache, Snapshot
from gang.state.dra import (
    CLAIMS,
    DELETE_PROTECTION_FINALIZER,
    DRA_GROUP,
    DRA_VERSION,
    MAX_RESERVED_FOR,
    DeviceId,
    DraCatalog,
    devices_of,
)
from gang.state.podinfo import PodInfo

if TYPE_CHECKING:
    from gang.scheduling.gang import Gang

log = logging.getLogger(__name__)

Key = tuple[str, str]
#: a claim allocation per claim key
Allocations = dict[Key, Mapping[str, Any]]

REASON_CANNOT_ALLOCATE: Final = "cannot allocate all claims"
REASON_NOT_ON_NODE: Final = "resourceclaim not available on the node"
NOT_SERVED: Final = (
    "the API server does not serve resource.k8s.io/v1 (dynamic resource allocation): "
    "spec.resourceClaims cannot be allocated"
)


class CommitError(Exception):
    """The gang's claims could not be written; what was written is rolled back."""


def claim_names(pod: PodInfo) -> list[tuple[str, str | None, str | None]]:
    """Per ``spec.resourceClaims`` entry: (pod claim name, ResourceClaim name or None, why it is
    not known yet or None)."""
    statuses = dict(pod.claim_statuses)
    found: list[tuple[str, str | None, str | None]] = []
    for ref in pod.rules.device_claims:
        if ref.claim_name is not None:
            found.append((ref.name, ref.claim_name, None))
        elif ref.name not in statuses:
            found.append(
                (
                    ref.name,
                    None,
                    f"waiting for resource claim {ref.name!r}: ResourceClaim not created yet",
                )
            )
        else:  # None: the controller decided no claim is needed
            found.append((ref.name, statuses[ref.name], None))
    return found


def claims_problem(catalog: DraCatalog, pod: PodInfo) -> str | None:
    """Why ``pod``'s claims cannot be allocated now (kube-scheduler's PreFilter), or None."""
    if not catalog.served:
        return NOT_SERVED
    for pod_claim, name, waiting in claim_names(pod):
        if waiting is not None:
            return waiting
        if name is None:
            continue
        claim = catalog.claims.get((pod.namespace, name))
        if claim is None:
            rejected = catalog.rejected.get((CLAIMS, pod.namespace, name))
            if rejected is not None:
                return f"resourceclaim {name!r} cannot be read: {rejected}"
            return f'resourceclaim "{name}" not found'
        if claim.deleting:
            return f'resourceclaim "{name}" is being deleted'
        templated = any(r.name == pod_claim and r.template_name for r in pod.rules.device_claims)
        if templated and (claim.owner_pod is None or claim.owner_pod[1] != pod.uid):
            return (
                f"ResourceClaim {pod.namespace}/{name} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)"
            )
        users = set(claim.reserved_for) | {pod.uid}
        if len(users) > MAX_RESERVED_FOR:
            return f'resourceclaim "{name}" is in use by {MAX_RESERVED_FOR} consumers, the most a claim can have'
    return None


def _claims_of(catalog: DraCatalog, pod: PodInfo) -> list[ResourceClaim]:
    """The ResourceClaims ``pod`` uses, as far as they exist (PreFilter checked the rest)."""
    found: list[ResourceClaim] = []
    for _, name, _ in claim_names(pod):
        claim = catalog.claims.get((pod.namespace, name)) if name else None
        if claim is not None and claim not in found:
            found.append(claim)
    return found


def _index_slices(
    catalog: DraCatalog,
) -> tuple[dict[str, list[ResourceSlice]], list[ResourceSlice]]:
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for piece in catalog.slices.values():
        pools.setdefault((piece.driver, piece.pool), []).append(piece)
    local: dict[str, list[ResourceSlice]] = {}
    shared: list[ResourceSlice] = []
    for members in pools.values():
        nodes = {piece.node_name for piece in members}
        if None in nodes:  # some slice of the pool is for all nodes, or chosen by a selector
            shared.extend(members)
            continue
        for node in nodes:
            assert node is not None
            local.setdefault(node, []).extend(members)
    return local, shared


def _is_placeholder(pod: PodInfo) -> bool:
    return pod.uid.startswith("placeholder:")


@dataclass(slots=True)
class _Plan:
    """One member's part of the cycle's allocation: the claims allocated for it on ``row``."""

    row: int
    allocated: Allocations
    taken: frozenset[DeviceId]


@dataclass(slots=True)
class _Attempt:
    """A reserved gang's claims to commit: claim → (allocation to write or None, members
    using it → uid); ``members``: every member reserved with it, claims or not, each of which
    waits for the commit before its binding."""

    claims: dict[Key, tuple[Mapping[str, Any] | None, dict[Key, str]]] = field(default_factory=dict)
    members: set[Key] = field(default_factory=set)
    task: asyncio.Task[None] | None = None


@dataclass(eq=False)
class DynamicResources:
    """PreFilter + Filter + Reserve + PreBind (see the module docstring)."""

    kube: Any = None  # gang.kube.transport.Kube
    #: the live cache (the catalog for Reserve and PreBind)
    cache: ClusterCache | None = None
    name: str = "DynamicResources"
    #: relevant by the pod's device claims (its rules) alone: a placeholder, the one pod it
    #: skips, has rules of its own, so is never a member's twin
    relevance_by_template: ClassVar[bool] = True
    relevance_label_keys = reads_no_labels
    #: per snapshot: the plans of the members placed so far, by (pod, row) prefix
    _plans: dict[tuple[object, ...], _Plan | None] = field(default_factory=dict, repr=False)
    #: the snapshot and catalog version the plans are for (the snapshot itself is held, so
    #: a later snapshot can never be mistaken for it)
    _plans_of: tuple[object, int] = (None, -1)
    _memo: SelectorMemo = field(default_factory=dict, repr=False)
    _memo_of: int = -1
    #: node name → the slices of the pools it has slices of; the slices tied to no one node
    _slices_by_node: tuple[dict[str, list[ResourceSlice]], list[ResourceSlice]] = field(
        default_factory=lambda: ({}, []), repr=False
    )
    _attempts: dict[object, _Attempt] = field(default_factory=dict, repr=False)

    # --- PreFilter ---------------------------------------------------------------------------

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        return bool(pod.rules.device_claims) and not _is_placeholder(pod)

    def pre_filter(self, gang: Gang, snap: Snapshot) -> str | None:
        # the pending members with claims (claims asked first: most members have none)
        for pod in gang.members.values():
            if not pod.rules.device_claims or _is_placeholder(pod) or not gang.is_pending(pod):
                continue
            problem = claims_problem(snap.devices, pod)
            if problem is not None:
                return f"{problem} (pod {pod.namespace}/{pod.name})"
        return None

    # --- Filter ------------------------------------------------------------------------------

    def _allocator(self, catalog: DraCatalog, in_use: frozenset[DeviceId], node: str) -> Allocator:
        """An allocator over the slices that can matter on ``node``: every slice of a pool
        with a slice for it by name, and every slice not tied to one node. On a large cluster
        this keeps a member's pass over the nodes from reading every slice per node."""
        if self._memo_of != catalog.version:  # a changed slice is a new device object
            self._memo.clear()
            self._slices_by_node = _index_slices(catalog)
            self._memo_of = catalog.version
        local, shared = self._slices_by_node
        return Allocator(catalog.classes, [*local.get(node, ()), *shared], in_use, self._memo)

    def _context(
        self, snap: Snapshot, placed: Sequence[Placed]
    ) -> tuple[Allocations, frozenset[DeviceId]]:
        """What the members placed before (in order) allocated, and every device in use."""
        catalog = snap.devices
        if self._plans_of[0] is not snap or self._plans_of[1] != catalog.version:
            self._plans.clear()
            self._plans_of = (snap, catalog.version)
        allocated: Allocations = {}
        taken = catalog.in_use(snap.released_claims)
        prefix: tuple[object, ...] = ()
        for member, row in placed:
            if not member.rules.device_claims or _is_placeholder(member):
                continue
            prefix = (*prefix, member.key, row)
            plan = self._plans.get(prefix)
            if prefix not in self._plans:
                plan = self._plan(snap, member, row, allocated, taken)
                self._plans[prefix] = plan
            if plan is None:
                continue  # cannot happen for a member the Filter passed; judged again at Reserve
            allocated = {**allocated, **plan.allocated}
            taken = plan.taken
        return allocated, taken

    def _plan(
        self,
        snap: Snapshot,
        pod: PodInfo,
        row: int,
        allocated: Allocations,
        taken: frozenset[DeviceId],
    ) -> _Plan | None:
        """Allocate ``pod``'s claims on node ``row``, given the cycle's allocations so far."""
        node = snap.facts[row]
        if node is None:
            return None
        catalog = snap.devices
        pending: list[ResourceClaim] = []
        for claim in _claims_of(catalog, pod):
            allocation = allocated.get(claim.key) or catalog.allocation_of(
                claim.key, snap.released_claims
            )
            if allocation is not None:
                if not reaches(allocation, node):
                    return None
            else:
                pending.append(claim)
        if not pending:
            return _Plan(row, {}, taken)
        results = self._allocator(catalog, taken, node.name).allocate(node, pending)
        if results is None:
            return None
        mine: Allocations = {c.key: result for c, result in zip(pending, results, strict=True)}
        devices = {d for result in results for d in devices_of(result)}
        return _Plan(row, mine, taken | devices)

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        snap = s.snap
        ok = snap.valid.copy()
        allocated, taken = self._context(snap, s.placed)
        for row in np.flatnonzero(ok):
            try:
                ok[row] = self._plan(snap, s.pod, int(row), allocated, taken) is not None
            except AllocationError:
                ok[row] = False
        return ok

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        snap, node = s.snap, s.snap.facts[row]
        allocated, taken = self._context(snap, s.placed)
        catalog = snap.devices
        if node is not None:
            for claim in _claims_of(catalog, s.pod):
                allocation = allocated.get(claim.key) or catalog.allocation_of(
                    claim.key, snap.released_claims
                )
                if allocation is not None and not reaches(allocation, node):
                    return [REASON_NOT_ON_NODE]
        try:
            self._plan(snap, s.pod, row, allocated, taken)
        except AllocationError as err:
            return [str(err)]
        return [REASON_CANNOT_ALLOCATE]

    # --- Reserve -----------------------------------------------------------------------------

    def reserve(self, gang: Gang, assignments: Mapping[Key, str]) -> str | None:
        """Allocate every member's claims on its node, members in order, and record them in
        flight; a member that no longer fits refuses the whole gang."""
        if self.cache is None:
            return None
        users = [
            k for k in assignments if k in gang.members and gang.members[k].rules.device_claims
        ]
        attempt = self._attempts.get(gang.key)
        if not users and attempt is None:
            return None
        if attempt is None or attempt.task is not None:  # a new Permit wait: a new commit
            attempt = _Attempt()
        catalog, snap = self.cache.devices, self.cache.snapshot()
        rows = snap.domains.row_of
        allocated: Allocations = {}
        taken = catalog.in_use()
        planned: list[tuple[Key, Mapping[str, Any] | None, Key, str]] = []
        for key, node in assignments.items():
            pod = gang.members.get(key)
            if pod is None or not pod.rules.device_claims:
                continue
            row = rows.get(node)
            try:
                plan = None if row is None else self._plan(snap, pod, row, allocated, taken)
            except AllocationError as err:
                return f"pod {key[0]}/{key[1]}: {err}"
            if plan is None:
                return f"pod {key[0]}/{key[1]}: {REASON_CANNOT_ALLOCATE} on node {node}"
            allocated.update(plan.allocated)
            taken = plan.taken
            for claim in _claims_of(catalog, pod):
                if pod.uid not in claim.reserved_for:  # else committed before (a restart)
                    planned.append((claim.key, plan.allocated.get(claim.key), key, pod.uid))
        for claim_key, allocation, pod_key, uid in planned:
            entry = attempt.claims.setdefault(claim_key, (allocation, {}))
            if entry[0] is None and allocation is not None:
                entry = attempt.claims[claim_key] = (allocation, entry[1])
            entry[1][pod_key] = uid
            catalog.plan(claim_key, allocation, pod_key, uid)
        attempt.members.update(k for k in assignments if k in gang.members)
        self._attempts[gang.key] = attempt
        return None

    def unreserve(self, gang: Gang, assignments: Mapping[Key, str]) -> None:
        if self.cache is None:
            return
        for key in assignments:
            self.cache.devices.unplan(key)
        attempt = self._attempts.get(gang.key)
        if attempt is not None and attempt.task is None:
            for _, pods in attempt.claims.values():
                for key in assignments:
                    pods.pop(key, None)
            attempt.claims = {k: v for k, v in attempt.claims.items() if v[1]}
            attempt.members.difference_update(assignments)
            if not attempt.members:
                del self._attempts[gang.key]

    # --- PreBind -----------------------------------------------------------------------------

    def pre_bind_pre_flight(self, gang: Gang, pod: Key) -> bool:
        """Every member of a gang with claims to commit waits for the commit."""
        attempt = self._attempts.get(gang.key)
        return attempt is not None and pod in attempt.members

    async def pre_bind(self, gang: Gang, pod: Key, node: str) -> None:
        attempt = self._attempts.get(gang.key)
        if attempt is None or pod not in attempt.members:
            return
        if attempt.task is None:
            attempt.task = asyncio.create_task(
                self._commit(attempt), name=f"commit the resource claims of {gang.key}"
            )
        try:
            await asyncio.shield(attempt.task)
        except CommitError:
            if self.cache is not None:
                self.cache.devices.unplan(pod)
            raise
        finally:  # the last member through ends the attempt
            attempt.members.discard(pod)
            if not attempt.members and self._attempts.get(gang.key) is attempt:
                del self._attempts[gang.key]

    async def _commit(self, attempt: _Attempt) -> None:
        """Write every claim of the attempt; on any failure undo what was written."""
        written: list[tuple[Key, bool, bool, list[str]]] = []
        try:
            for key, (allocation, pods) in attempt.claims.items():
                written.append(await self._commit_claim(key, allocation, pods))
        except Exception as err:
            for entry in reversed(written):
                try:
                    await self._roll_back(*entry)
                except Exception as undo:
                    log.warning("rolling back resourceclaim %s/%s failed: %s", *entry[0], undo)
            raise CommitError(f"committing the gang's resource claims failed: {err}") from err

    async def _commit_claim(
        self, key: Key, allocation: Mapping[str, Any] | None, pods: Mapping[Key, str]
    ) -> tuple[Key, bool, bool, list[str]]:
        """kube-scheduler's two writes for one claim: (key, finalizer added, allocation
        written, uids added)."""
        kube = self.kube
        claim = await kube.get_namespaced(DRA_GROUP, DRA_VERSION, CLAIMS, *key)
        if claim is None:
            raise CommitError(f'resourceclaim "{key[1]}" not found')
        meta = claim.setdefault("metadata", {})
        status = claim.setdefault("status", {})
        served = status.get("allocation")
        if served and allocation is not None and served != allocation:
            raise CommitError(f'resourceclaim "{key[1]}" was allocated by someone else meanwhile')
        finalizers = list(meta.get("finalizers") or [])
        add_finalizer = (
            DELETE_PROTECTION_FINALIZER not in finalizers and allocation is not None and not served
        )
        if add_finalizer:
            meta["finalizers"] = [*finalizers, DELETE_PROTECTION_FINALIZER]
            claim = await kube.replace_namespaced(DRA_GROUP, DRA_VERSION, CLAIMS, *key, claim)
            status = claim.setdefault("status", {})
        reserved = list(status.get("reservedFor") or [])
        have = {r.get("uid") for r in reserved if isinstance(r, Mapping)}
        added = [uid for uid in pods.values() if uid not in have]
        reserved += [
            {"resource": "pods", "name": name, "uid": uid}
            for (_, name), uid in pods.items()
            if uid in added
        ]
        write_allocation = not status.get("allocation") and allocation is not None
        if write_allocation and allocation is not None:
            status["allocation"] = dict(allocation)
        if added or write_allocation:
            status["reservedFor"] = reserved
            try:
                await kube.replace_namespaced(
                    DRA_GROUP, DRA_VERSION, CLAIMS, *key, claim, status=True
                )
            except Exception:
                if add_finalizer:
                    await self._roll_back(key, True, False, [])
                raise
        return key, add_finalizer, write_allocation, added

    async def _roll_back(
        self, key: Key, finalizer: bool, allocation: bool, uids: list[str]
    ) -> None:
        """Undo one claim's commit: our ``reservedFor`` entries, the allocation if we wrote it
        and nobody else uses it now, then the finalizer if we added it."""
        kube = self.kube
        for _ in range(5):  # a conflict means someone wrote in between: read again
            claim = await kube.get_namespaced(DRA_GROUP, DRA_VERSION, CLAIMS, *key)
            if claim is None:
                return
            status = claim.setdefault("status", {})
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") not in uids]
            clear = allocation and not reserved
            try:
                if uids or clear:
                    status["reservedFor"] = reserved or None
                    if clear:
                        status.pop("allocation", None)
                    claim = await kube.replace_namespaced(
                        DRA_GROUP, DRA_VERSION, CLAIMS, *key, claim, status=True
                    )
                meta = claim.setdefault("metadata", {})
                if finalizer and not (claim.get("status") or {}).get("allocation"):
                    meta["finalizers"] = [
                        f for f in meta.get("finalizers") or [] if f != DELETE_PROTECTION_FINALIZER
                    ]
                    await kube.replace_namespaced(DRA_GROUP, DRA_VERSION, CLAIMS, *key, claim)
                return
            except KubeError as err:
                if err.status != 409:
                    raise
        raise CommitError(f'resourceclaim "{key[1]}": could not roll back after 5 conflicts')
