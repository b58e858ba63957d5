"""The cluster cache: what every node has left, counting everyone's pods and our reservations.

The apiserver checks nothing about capacity, so over-commit is this module's to prevent. Per
node it keeps allocatable and the sum of requests of every pod bound there — by gang, by
kube-scheduler, by anyone — plus the pods gang has *assumed* onto it (reserved, not yet seen
bound). Terminal and deleted pods release their share. All of it lives in two int64 matrices
(``nodes x resources``), so a scheduling cycle takes its snapshot with one subtraction.

Pod states (after kube-scheduler's ``internal/cache``)::

                 assume()                     informer: bound on that node
    (absent) ──────────────▶ ASSUMED ─────────────────────────────────────▶ BOUND
        ▲                      │  │   informer: bound on another node           │
        │        forget()      │  └──────────────── (moves its share) ─────────▶│
        └──────────────────────┘                                                │
        ▲            informer: deleted, or terminal (Succeeded/Failed)          │
        └───────────────────────────────────────────────────────────────────────┘
    informer: a bound pod seen first (another scheduler; after a restart) ──▶ BOUND

Invariants:
- ``requested[row] == sum(vector of every ASSUMED or BOUND pod whose node is that row's)``;
  every transition applies exactly the difference, and ``check()`` recomputes it for tests.
- assume/forget are symmetric; forget only undoes an ASSUMED pod, never a BOUND fact.
- A pod on a node the cache does not know yet is remembered and counted when the node appears.
- ``record.info`` is the PodInfo the record was last attached or confirmed with; ``priorities``
  counts the records per priority (a pod's priority never changes); ``held_by`` sums the vectors
  of the records per gang (:func:`holder_of` of ``record.info``).
- ``pods_by_label`` (the affinity index) holds exactly the ASSUMED and BOUND records, with the
  labels the API last showed: ``_attach`` / ``_detach`` keep both, and a bound pod's label or
  deletion change refreshes its entry.
- ``journal`` has the row of every write to ``requested`` or ``allocatable`` (``_apply``, node
  events), and is reset when the matrices are reshaped (``_widen``, ``_grow``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

from gang.models.quantity import QuantityError, resource_units
from gang.state.disruption import DisruptionBudgets
from gang.state.dra import DraCatalog
from gang.state.hypernodes import HyperNode
from gang.state.journal import FreeOrigin, RowJournal
from gang.state.nodefacts import NodeFacts, node_facts
from gang.state.podindex import PodIndex
from gang.state.podinfo import PodInfo
from gang.state.resources import Mask, Matrix, ResourceIndex, Vector
from gang.state.selecting import SelectorCatalog
from gang.state.topology import NodeDomains
from gang.state.volumes import VolumeCatalog

Key = tuple[str, str]


class PodState(Enum):
    ASSUMED = "Assumed"
    BOUND = "Bound"


@dataclass(slots=True)
class PodRecord:
    key: Key
    uid: str
    node: str
    vector: Vector
    state: PodState
    host_ports: tuple[tuple[str, str, int], ...] = ()
    #: what the API last showed of the pod (or, while ASSUMED, the pod we placed): priority,
    #: group and start time are what preemption weighs
    info: PodInfo | None = None


@dataclass(slots=True)
class NodeEntry:
    name: str
    row: int
    facts: NodeFacts
    allocatable: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A read-only picture for one scheduling cycle. ``free`` is a private copy to mutate;
    ``names``, ``facts``, ``valid`` and ``allocatable`` are shared by every snapshot taken
    while the nodes did not change (the arrays are read-only: a write raises)."""

    names: list[str]  # row → node name ("" for an unused row)
    facts: list[NodeFacts | None]  # row → facts (None for an unused row)
    valid: npt.NDArray[np.bool_]  # row is a live node
    allocatable: npt.NDArray[np.int64]
    #: allocatable - requested, a copy the cycle may consume. Only a placement changes it in
    #: place (``Placer.place``, which says so in ``origin``); anything else that changes it
    #: makes a new array (``replace(snap, free=...)``), which no longer claims to be the cache's
    free: npt.NDArray[np.int64]
    version: int  # node-set/facts version, for caching static filter masks
    used_ports: Mapping[str, Counter[tuple[str, str, int]]] = field(default_factory=dict)
    #: topology domains per label key (shared by every snapshot of one ``version``)
    domains: NodeDomains = field(default_factory=lambda: NodeDomains([]))
    #: the placed pods by label and affinity term. The cache's live index, not a copy: valid for
    #: the synchronous scheduling cycle that took the snapshot (nothing may await in between)
    pods: PodIndex = field(default_factory=PodIndex)
    #: namespace name → its labels (for namespaceSelector), live like ``pods``
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: claims, volumes, storage classes, CSI limits; live like ``pods``
    volumes: VolumeCatalog = field(default_factory=VolumeCatalog)
    #: DeviceClasses, ResourceSlices, ResourceClaims (dynamic resource allocation); live
    devices: DraCatalog = field(default_factory=DraCatalog)
    #: where ``free`` came from (the cache's journal and stamp), while nobody has changed it:
    #: read it through ``gang.state.journal.intact_origin``
    origin: FreeOrigin | None = None
    #: a trial's claims taken to be released (every consumer evicted or finished; on the
    #: empty cluster every claim): their devices are free and their allocations gone
    released_claims: frozenset[tuple[str, str]] = frozenset()
    #: Services' and controllers' selectors (default spreading); live like ``pods``
    selecting: SelectorCatalog = field(default_factory=SelectorCatalog)
    #: reservations: ``free`` as it was before the holds of other gangs' reservations were
    #: taken off it, and those holds; None when nothing is held against the cycle's gang (see
    #: gang.scheduling.reservation)
    unheld: npt.NDArray[np.int64] | None = None
    held: npt.NDArray[np.int64] | None = None
    #: capacity the cycle's gang held itself until the cycle began (its placeholders and
    #: nominations, dropped to be planned again): exempt from the holds, so
    #: ``free == max(unheld - kept - held, 0) + kept``
    kept: npt.NDArray[np.int64] | None = None
    #: rows holding capacity for reservations that do not hold against the cycle's gang (gangs
    #: behind it, or ones it may backfill): placement goes there only when no other node fits,
    #: so the nodes a reservation waits for keep draining; None when there are none
    avoid: npt.NDArray[np.bool_] | None = None
    #: which question a trial placement on this snapshot asks: "" for the cluster as it is,
    #: "empty" as if nothing ran, "later" with some pods gone or some holds ended (the trials
    #: of reservations, preemption and reclaim). The placer keeps the work it carries from one
    #: gang to the next apart per trial, so asking one does not undo what the next real
    #: placement starts from
    trial: str = ""


class ClusterCache:
    def __init__(self, index: ResourceIndex | None = None, capacity: int = 64) -> None:
        self.index = index or ResourceIndex()
        self.allocatable = np.zeros((capacity, len(self.index)), dtype=np.int64)
        self.requested = np.zeros((capacity, len(self.index)), dtype=np.int64)
        self.valid = np.zeros(capacity, dtype=np.bool_)
        self.names: list[str] = [""] * capacity
        self.facts: list[NodeFacts | None] = [None] * capacity
        self.nodes: dict[str, NodeEntry] = {}
        self.pods: dict[Key, PodRecord] = {}
        self._on_node: dict[str, dict[Key, PodRecord]] = {}
        self._ports: dict[str, Counter[tuple[str, str, int]]] = {}
        self._free_rows: list[int] = list(range(capacity - 1, -1, -1))
        #: bumped when nodes appear, disappear or change labels/taints/schedulability
        self.version = 0
        self.pods_by_label = PodIndex()
        #: how many ASSUMED or BOUND pods hold each priority (preemption's first question:
        #: is anyone lower?)
        self.priorities: Counter[int] = Counter()
        #: what the ASSUMED or BOUND pods of each gang hold, by :func:`holder_of` (the queues'
        #: usage is the sum over their gangs)
        self.held_by: dict[tuple[str, str, str], Vector] = {}
        #: told of every change of ``held_by``: (gang, the vector added; negative: released)
        self.on_hold: Callable[[tuple[str, str, str], Vector], None] | None = None
        self.namespace_labels: dict[str, Mapping[str, str]] = {}
        self.volumes = VolumeCatalog()
        self.devices = DraCatalog()
        self.selecting = SelectorCatalog()
        self.budgets = DisruptionBudgets()
        self._domains = NodeDomains([])
        self._domains_version = -1
        #: Volcano HyperNodes (their tiers are topology levels); a change rebuilds the domains
        self.hypernodes: tuple[HyperNode, ...] = ()
        #: bumped by every write to ``names``, ``facts``, ``valid`` or ``allocatable`` (node
        #: events, new resource columns, growth): snapshots share one read-only copy of those
        #: four until it moves, so a cycle copies only what pods change (``free``)
        self._node_rows_changed = 0
        self._shared: tuple[int, list[str], list[NodeFacts | None], Mask, Matrix] | None = None
        #: one past the highest row a node was ever given. Snapshots cover these rows only:
        #: the rest is room the matrices grew into (doubling: 8,192 rows for 5,000 nodes), all
        #: invalid, and every cycle's whole-matrix work would pay for it. A removed node's row
        #: is the next one handed out, so the rows in use stay packed at the front.
        self._rows_used = 0
        #: the rows whose free capacity changed, in order (see ``gang.state.journal``)
        self.journal = RowJournal()

    # --- shape ---------------------------------------------------------------------------

    def _widen(self) -> None:
        """New resource columns appeared in the index: widen the matrices."""
        width = len(self.index.names)  # (not ``len(self.index)``: asked per pod, a call less)
        if width == self.allocatable.shape[1]:
            return
        extra = width - self.allocatable.shape[1]
        self._node_rows_changed += 1
        self.journal.reset()
        pad = ((0, 0), (0, extra))
        self.allocatable = np.pad(self.allocatable, pad)
        self.requested = np.pad(self.requested, pad)

    def _grow(self) -> None:
        self._node_rows_changed += 1
        self.journal.reset()
        old = len(self.names)
        new = old * 2
        self.allocatable = np.pad(self.allocatable, ((0, new - old), (0, 0)))
        self.requested = np.pad(self.requested, ((0, new - old), (0, 0)))
        self.valid = np.pad(self.valid, (0, new - old))
        self.names.extend([""] * (new - old))
        self.facts.extend([None] * (new - old))
        self._free_rows.extend(range(new - 1, old - 1, -1))

    def _vector(self, amounts: Mapping[str, int]) -> Vector:
        vec = self.index.vector(amounts)
        self._widen()
        return vec

    def _requests_vector(self, info: PodInfo) -> Vector:
        vec = self.index.requests_vector(info.requests)
        self._widen()
        return vec

    def _apply(self, record: PodRecord, sign: int) -> None:
        entry = self.nodes.get(record.node)
        if entry is not None:
            vec = self.index.fit(record.vector)
            self._widen()
            row = self.requested[entry.row]
            if sign > 0:
                row += vec
            else:
                row -= vec
            self.journal.note(entry.row)
        if record.host_ports:
            ports = self._ports.setdefault(record.node, Counter())
            for port in record.host_ports:
                ports[port] += sign
                if ports[port] <= 0:
                    del ports[port]

    def _hold(self, record: PodRecord, info: PodInfo, sign: int) -> None:
        vec = self.index.fit(record.vector)
        self._add_held(holder_of(info), vec if sign > 0 else -vec)

    def _add_held(self, holder: tuple[str, str, str], signed: Vector) -> None:
        """Add ``signed`` (read-only: request vectors are shared) to what ``holder`` holds."""
        held = self.held_by.get(holder)
        total = signed.copy() if held is None else self.index.fit(held) + signed
        if np.count_nonzero(total):  # (``.any()`` costs five times as much on a short row)
            self.held_by[holder] = total
        else:
            self.held_by.pop(holder, None)
        if self.on_hold is not None:
            self.on_hold(holder, signed)

    def _attach(self, record: PodRecord, info: PodInfo, hold: bool = True) -> None:
        record.info = info
        if hold:
            self._hold(record, info, +1)
        self.priorities[info.priority] += 1
        self.pods[record.key] = record
        self.pods_by_label.add(info, record.node)
        self._on_node.setdefault(record.node, {})[record.key] = record
        self._apply(record, +1)

    def _detach(self, record: PodRecord) -> None:
        if record.info is not None:
            self._hold(record, record.info, -1)
            self.priorities[record.info.priority] -= 1
            if not self.priorities[record.info.priority]:
                del self.priorities[record.info.priority]
        self._apply(record, -1)
        self.pods.pop(record.key, None)
        self.pods_by_label.remove(record.key)
        on_node = self._on_node.get(record.node)
        if on_node is not None:
            on_node.pop(record.key, None)
            if not on_node:
                del self._on_node[record.node]

    # --- nodes ---------------------------------------------------------------------------

    def upsert_node(self, raw: Mapping[str, Any]) -> bool:
        """Add or update a node from its raw JSON. Returns True if the node is new or changed
        in a way that could make a waiting gang fit (capacity, labels, taints, schedulability)."""
        meta = raw.get("metadata")
        name = str((meta.get("name") if isinstance(meta, Mapping) else None) or "")
        if not name:
            return False
        status = raw.get("status")
        status = status if isinstance(status, Mapping) else {}
        amounts = status.get("allocatable") or status.get("capacity")
        allocatable: dict[str, int] = {}
        # a status of the wrong shape counts as no resources: one odd node must not stop us
        for resource, quantity in (amounts if isinstance(amounts, Mapping) else {}).items():
            try:
                allocatable[str(resource)] = max(0, resource_units(str(resource), quantity))
            except QuantityError:
                continue  # a malformed quantity on a node: treat that resource as absent
        facts = node_facts(raw)
        entry = self.nodes.get(name)
        if entry is not None and entry.facts == facts and entry.allocatable == allocatable:
            return False
        vec = self._vector(allocatable)
        self._node_rows_changed += 1
        if entry is None:
            if not self._free_rows:
                self._grow()
            row = self._free_rows.pop()
            self._rows_used = max(self._rows_used, row + 1)
            entry = NodeEntry(name, row, facts, allocatable)
            self.nodes[name] = entry
            self.names[row] = name
            self.valid[row] = True
            self.requested[row] = 0
            for record in self._on_node.get(name, {}).values():
                self.requested[row] += self.index.fit(record.vector)
            self.version += 1
        else:
            if entry.facts != facts:
                self.version += 1
            entry.facts = facts
            entry.allocatable = allocatable
        self.allocatable[entry.row] = vec
        self.facts[entry.row] = facts
        self.journal.note(entry.row)
        return True

    def remove_node(self, name: str) -> bool:
        entry = self.nodes.pop(name, None)
        if entry is None:
            return False
        row = entry.row
        self._node_rows_changed += 1
        self.valid[row] = False
        self.allocatable[row] = 0
        self.requested[row] = 0
        self.journal.note(row)
        self.names[row] = ""
        self.facts[row] = None
        self._free_rows.append(row)
        self.version += 1
        return True

    # --- pods from the informer -------------------------------------------------------------

    def upsert_pod(self, info: PodInfo) -> PodRecord | None:
        """Apply what the API says about a pod. Returns the record it holds afterwards."""
        record = self.pods.get(info.key)
        if record is not None and record.uid != info.uid:
            self._detach(record)  # same name, new pod: the old one is gone
            record = None
        if info.terminal or not info.assigned:
            if record is not None and (info.terminal or record.state is PodState.BOUND):
                self._detach(record)
                return None
            return record  # unassigned: at most our own assumption, still waiting for its bind
        if record is not None:
            if record.node == info.node_name and (
                # the confirmation of our own binding carries the very requests we assumed
                (record.info is not None and record.info.requests is info.requests)
                or np.array_equal(self.index.fit(record.vector), self._requests_vector(info))
            ):
                record.state = PodState.BOUND  # ASSUMED → BOUND, or nothing new
                if record.info is not None and holder_of(record.info) != holder_of(info):
                    self._hold(record, record.info, -1)  # relabelled into another gang
                    self._hold(record, info, +1)
                record.info = info
                self.pods_by_label.add(info, record.node)  # labels may have changed
                return record
            self._detach(record)
        vector = self._requests_vector(info)
        record = PodRecord(info.key, info.uid, info.node_name, vector, PodState.BOUND, _ports(info))
        self._attach(record, info)
        return record

    def remove_pod(self, key: Key) -> PodRecord | None:
        record = self.pods.get(key)
        if record is not None:
            self._detach(record)
        return record

    # --- our reservations --------------------------------------------------------------------

    def assume(self, info: PodInfo, node: str) -> PodRecord:
        """Reserve ``node`` for a pod we decided to place; counted at once."""
        self.assume_all([(info, node)])
        return self.pods[info.key]

    def assume_all(self, placed: Sequence[tuple[PodInfo, str]]) -> None:
        """``assume`` for a gang's placement at once: what each gang holds moves once, by the
        sum of its members (one ``on_hold`` per gang, not per pod). Nothing is assumed if one
        of the pods is already counted (ValueError)."""
        keys = {info.key for info, _ in placed}
        if len(keys) < len(placed):
            raise ValueError("a pod is placed twice")
        for info, _ in placed:
            existing = self.pods.get(info.key)
            if existing is not None:
                raise ValueError(
                    f"pod {info.key} is already {existing.state.value} on {existing.node}"
                )
        held: dict[tuple[str, str, str], Vector] = {}
        # a template's members share one request map: its vector is asked for once
        requests: Mapping[str, int] | None = None
        for info, node in placed:
            if info.requests is not requests:
                requests, vec = info.requests, self._requests_vector(info)
            record = PodRecord(info.key, info.uid, node, vec, PodState.ASSUMED, _ports(info))
            self._attach(record, info, hold=False)
            holder = holder_of(info)
            total = held.get(holder)
            if total is None:
                held[holder] = vec.copy()
            else:  # (widened if this member's request added a column)
                held[holder] = total = self.index.fit(total)
                total += vec
        for holder, total in held.items():
            self._add_held(holder, total)

    def forget(self, key: Key) -> bool:
        """Undo an assumption (unreserve). A pod already seen BOUND is a fact and stays."""
        record = self.pods.get(key)
        if record is None or record.state is not PodState.ASSUMED:
            return False
        self._detach(record)
        return True

    def state_of(self, key: Key) -> PodState | None:
        record = self.pods.get(key)
        return record.state if record is not None else None

    # --- reading -----------------------------------------------------------------------

    def upsert_namespace(self, name: str, labels: Mapping[str, str]) -> bool:
        """Record a namespace's labels; True if they changed (namespaceSelector may match now)."""
        if self.namespace_labels.get(name) == labels:
            return False
        self.namespace_labels[name] = labels
        return True

    def remove_namespace(self, name: str) -> None:
        self.namespace_labels.pop(name, None)

    def domains(self) -> NodeDomains:
        """Topology domains of the current node set (rebuilt when its version moves)."""
        if self._domains_version != self.version:
            self._domains = NodeDomains(self.facts[: self._rows()], hypernodes=self.hypernodes)
            self._domains_version = self.version
        return self._domains

    def set_hypernodes(self, hypernodes: tuple[HyperNode, ...]) -> bool:
        """Replace the HyperNodes; whether they changed (the domains are then rebuilt)."""
        if hypernodes == self.hypernodes:
            return False
        self.hypernodes = hypernodes
        self._domains_version = -1
        return True

    def _rows(self) -> int:
        """How many rows snapshots cover: those nodes were given (at least one, so that
        reductions over rows have something to reduce)."""
        return max(self._rows_used, 1)

    def snapshot(self) -> Snapshot:
        self._widen()
        rows = self._rows()
        shared = self._shared
        if shared is None or shared[0] != self._node_rows_changed:
            valid, allocatable = self.valid[:rows].copy(), self.allocatable[:rows].copy()
            valid.flags.writeable = allocatable.flags.writeable = False
            shared = (
                self._node_rows_changed,
                self.names[:rows],
                self.facts[:rows],
                valid,
                allocatable,
            )
            self._shared = shared
        _, names, facts, valid, allocatable = shared
        free = self.allocatable[:rows] - self.requested[:rows]
        return Snapshot(
            names=names,
            facts=facts,
            valid=valid,
            allocatable=allocatable,
            free=free,
            origin=FreeOrigin(self.journal, self.journal.stamp(), free),
            version=self.version,
            used_ports={name: Counter(c) for name, c in self._ports.items() if c},
            domains=self.domains(),
            pods=self.pods_by_label,
            namespace_labels=self.namespace_labels,
            volumes=self.volumes,
            devices=self.devices,
            selecting=self.selecting,
        )

    def fits_allocatable(self, requests: Mapping[str, int]) -> bool | None:
        """Whether ``requests`` (canonical units) fit the cluster's total allocatable, the
        most any gang could ever get; None while no node is known."""
        if not self.valid.any():
            return None
        want = self.index.vector(requests)  # a resource no node has gets its column here
        self._widen()
        return bool(np.all(self.allocatable[self.valid].sum(axis=0) >= want))

    def free_of(self, name: str) -> dict[str, int]:
        entry = self.nodes[name]
        return self.index.describe(self.allocatable[entry.row] - self.requested[entry.row])

    def row_of(self, name: str) -> int | None:
        entry = self.nodes.get(name)
        return entry.row if entry is not None else None

    def pods_on(self, name: str) -> Iterator[PodRecord]:
        return iter(self._on_node.get(name, {}).values())

    def check(self) -> None:
        """Recompute ``requested`` from the pod records and compare (tests and debugging)."""
        expected = np.zeros_like(self.requested)
        for record in self.pods.values():
            entry = self.nodes.get(record.node)
            if entry is not None:
                expected[entry.row] += self.index.fit(record.vector)
        if not np.array_equal(expected, self.requested):
            raise AssertionError("cache requested-resources drifted from its pod records")
        counted = Counter(r.info.priority for r in self.pods.values() if r.info is not None)
        if counted != self.priorities:
            raise AssertionError("cache priority counts drifted from its pod records")
        held: dict[tuple[str, str, str], Vector] = {}
        for record in self.pods.values():
            if record.info is not None:
                holder = holder_of(record.info)
                base = held.get(holder, np.zeros(len(self.index), dtype=np.int64))
                held[holder] = self.index.fit(base) + self.index.fit(record.vector)

        def plain(sums: Mapping[tuple[str, str, str], Vector]) -> dict[Any, list[int]]:
            return {k: self.index.fit(v).tolist() for k, v in sums.items() if v.any()}

        if plain(held) != plain(self.held_by):
            raise AssertionError("cache held-by-gang sums drifted from its pod records")


def holder_of(info: PodInfo) -> tuple[str, str, str]:
    """The gang a pod's capacity is held for: ``(namespace, group, "")``, or for a pod without
    a group ``(namespace, "", name)`` (the scheduler's gang key, as a plain tuple)."""
    return (info.namespace, info.group, "") if info.group else (info.namespace, "", info.name)


def _ports(info: PodInfo) -> tuple[tuple[str, str, int], ...]:
    if not info.constraints.host_ports:
        return ()
    return tuple(
        (p.ip or "0.0.0.0", p.protocol or "TCP", p.port)
        for p in info.constraints.host_ports
        if p.port > 0
    )
