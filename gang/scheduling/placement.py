"""Placement: choose a node for every member of a gang on one snapshot, or for none.

This is the Filter → Score → assign part of the scheduling cycle, done for a whole gang at once
on a private copy of the cluster's free capacity: each member placed consumes what it requests,
so the next member sees what is really left and two members never count the same free GPU. If
the members that are needed cannot all be placed, the answer is "none of them" and the reasons,
so nothing is reserved for a gang that cannot run.

Speed comes from shape: free capacity is a ``nodes x resources`` int64 matrix, so the resource
filter and the scores are vector operations over all nodes; the label/taint filters run in Python
once per distinct pod template and node-set version and are cached (members of a gang share a
template, and gangs often share one with each other).

Consecutive gangs of one template (a job's replicas) are placed on snapshots that differ only
where the earlier gangs went, so the placer carries its work from one to the next: the slot
counts behind the packing domains' capacities and their sums per domain (``_Slots``), and the
last gang's Filter/Score pass in each domain (``_Carried``), are redone only for the rows whose
free capacity moved. Each is checked against the snapshot it is used on (node-set version,
allocatable, the rows' free capacity), so a stale one is never used: a long-lived placer answers
exactly as a fresh one (``tests/unit/test_placement_carry.py``).

Gang packing: distributed training is sensitive to the network between workers, so when the
``gang_packing`` weight is on, the placer first tries to fit the whole gang inside one topology
domain (``topology_key``, default zone) — the domain already holding its bound members first,
then the tightest domain that fits — and only then spreads across domains, still scoring nodes in
domains the gang already uses higher.

Topology constraints: a gang that asks for a required or preferred topology level (or slices)
is placed where ``gang.scheduling.topologyfit`` chooses: the tightest domain that holds it, and
how many members go into each finest-level domain below it. The greedy pass then runs with a
quota per finest domain (:class:`_Quota`), so every Filter and Score rule still picks the nodes,
but never outside the chosen domains; if a rule between pods refuses that split, the members are
placed again with quotas per slice domain (or per chosen domain) only. A required level is never
left, for the needed members or the extra ones.

Capacity reserved for others: a node holding capacity for a reservation that does not hold
against this gang (a gang behind it, or one it may backfill) scores below every node that holds
none (``Snapshot.avoid``). The reservation planned for those nodes to drain; a gang ahead that
landed on one anyway (most-allocated packing favours a half-drained node) made the gang behind
wait for its run as well, although other nodes had room.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from gang.models.settings import ScoreWeights
from gang.models.topologyapis import TopologyConstraint, level_name
from gang.scheduling.framework import (
    Budgets,
    NodeFilterInput,
    NodeFilterPlugin,
    Placed,
    Profile,
    RuleAwarePlugin,
    ScoreInput,
    ScorePlugin,
    StaticFilterPlugin,
    call,
    reason_counts,
    rejected_by,
    same_but_labels,
    scores_for,
)
from gang.scheduling.plugins import (
    LOCAL_NODE_FILTERS,
    LOCAL_SCORES,
    GangPacking,
    default_filters,
    default_node_filters,
    default_scores,
)
from gang.scheduling.predicates import host_port_key, summarize
from gang.scheduling.topologyfit import Chosen, Leader, choose, choose_with_leader
from gang.scheduling.twins import LabelReads, PluginsByReads
from gang.state.cache import Snapshot
from gang.state.journal import FreeOrigin, RowJournal, intact_origin
from gang.state.podinfo import Constraints, PodInfo
from gang.state.podrules import DO_NOT_SCHEDULE, PodRules
from gang.state.resources import (
    ResourceIndex,
    Vector,
    asked_columns,
    copies_fitting,
    copies_fitting_rows,
    rows_differing,
)
from gang.state.topology import DomainTree

Key = tuple[str, str]
_NOTHING: frozenset[object] = frozenset()
Mask = npt.NDArray[np.bool_]
Ports = dict[int, Counter[tuple[str, str, int]]]
MAX_DOMAIN_TRIES = 8
#: subtracted from the score of a node holding capacity for reservations behind the gang: more
#: than all the weighted scores together (each 0-100, weights at most 100)
RESERVED_ELSEWHERE = 1e7
#: bound on memoized single-node scores (distinct node states seen); cleared when reached
ROW_SCORE_MEMO = 65_536
#: bound on carried passes (templates x packing domains); cleared when reached
CARRIED_PASSES = 256


@dataclass(frozen=True, slots=True)
class Placement:
    assignments: dict[Key, str]  # pod key → node name
    #: members beyond the needed ones that did not fit → why (kube-scheduler's FitError words)
    unplaced: dict[Key, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Unplaceable:
    message: str
    placed: int  # how many needed members fitted before one did not
    needed: int
    #: the member that did not fit, and per Filter reason the number of nodes it rejected
    #: it on (the histogram ``message`` summarises; empty for a trial)
    member: Key | None = None
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One pod against every node, without placing it (what a scheduler extender answers)."""

    feasible: Mask  # per row
    reasons: dict[int, list[str]]  # per valid, infeasible row: its Filter rejection reasons
    scores: dict[int, float]  # per feasible row: the weighted sum of normalized scores
    #: the Score plugins that scored this pod, by name, with their weights (plugins that judge
    #: every node alike for it are left out)
    weights: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Previous:
    """The last full Filter + Score pass of a greedy placement, reused for the same template."""

    signature: tuple[Constraints, PodRules, bytes]
    candidates: npt.NDArray[np.intp]  # rows that passed, ascending
    scores: npt.NDArray[np.float64]  # their local scores (-inf once a row stops fitting)
    last: int  # the row chosen last: the only one whose state changed since
    #: how many domains the gang used when ``scores`` were computed: once a member opens
    #: another, GangPacking scores that domain's rows higher, so the pass is not reused
    domains_used: int
    #: the score ``last`` had when it was chosen as the best of ``scores`` (None: chosen by
    #: rule-aware plugins too, or rows other than ``last`` have changed since). While only
    #: ``last`` changes, it stays the best as long as its score does not drop below this: every
    #: other row scored no higher then, and a row scoring the same lies after it. Packing keeps
    #: a gang's members on one node, so this spares most members the search of every row.
    best_score: float | None = None


@dataclass(slots=True)
class _Carried:
    """A gang's last pass in one packing domain, kept for the next gang of its template.

    Consecutive gangs of one template (a job's replicas) are placed on snapshots that differ,
    inside the domain, only where the earlier gang went: its own members, now assumed. So the
    next gang's first member need not filter and score the domain afresh; it re-judges the rows
    whose free capacity differs from ``free`` (and the row the last member took) and keeps the
    rest. Valid only while nothing else the local plugins read has moved: the node set (the
    placer drops every carried pass when its version moves), allocatable (the shared array, by
    identity) and the domains in use."""

    previous: _Previous
    allocatable: npt.NDArray[np.int64]
    used: frozenset[int]
    #: the cache's journal and stamp the pass's snapshot was taken at (None: not known), and the
    #: rows the pass itself took with their free capacity after it (``tobytes``): together they
    #: name every row that may differ now (a row the pass took, found as it left it, does not)
    at: tuple[RowJournal, int] | None
    taken: dict[int, bytes]
    #: the domain's rows of free capacity after its last member, where ``at`` is not known
    free: npt.NDArray[np.int64] | None


@dataclass(slots=True)
class _Slots:
    """How many members of one template each row holds, and the free capacity it was counted
    on: the next gang's count redoes only the rows whose free capacity moved since (dropped,
    like ``_Carried``, when the node-set version moves)."""

    allocatable: npt.NDArray[np.int64]
    free: npt.NDArray[np.int64]  # a private copy, kept equal to what ``per_node`` counts
    per_node: npt.NDArray[np.int64]
    #: per packing domain: the sum of ``per_node`` over its rows (kept with it)
    capacity: list[int]
    #: the template's request: the columns it asks for and the amounts (``asked_columns``)
    asked: tuple[tuple[int, int], ...] = ()
    #: the cache's journal and the stamp ``free`` is the cache's free capacity at (None: not
    #: known, compare the matrices)
    at: tuple[RowJournal, int] | None = None


@dataclass(slots=True)
class _Quota:
    """How many more members each domain of one level may take (a topology choice)."""

    domain_of: npt.NDArray[np.int64]  # row → domain (-1: outside the chosen domains)
    left: npt.NDArray[np.int64]  # domain → members it may still take

    def open_rows(self) -> Mask:
        inside = self.domain_of >= 0
        result: Mask = inside & (self.left[np.where(inside, self.domain_of, 0)] > 0)
        return result

    def spend(self, row: int) -> int | None:
        """Count a member placed on ``row``; the domain it closed, if it did."""
        domain = int(self.domain_of[row])
        self.left[domain] -= 1
        return domain if self.left[domain] == 0 else None

    def closed(self, row: int) -> bool:
        return bool(self.left[self.domain_of[row]] <= 0)


@dataclass(slots=True)
class _Static:
    mask: Mask
    reasons: list[str | None]  # per row: why the static filters reject it
    #: the distinct reasons, and per row the index of its reason there (-1: not rejected), so
    #: explaining a failure counts the rejected rows at once (a node pool picked by a selector
    #: leaves every other node of a large cluster rejected, on every failed attempt)
    texts: list[str] = field(init=False)
    codes: npt.NDArray[np.intp] = field(init=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        self.codes = np.fromiter(
            (-1 if r is None else index.setdefault(r, len(index)) for r in self.reasons),
            dtype=np.intp,
            count=len(self.reasons),
        )
        self.texts = list(index)


class Placer:
    """Stateless across cycles except for caches keyed on the snapshot's node-set version."""

    def __init__(
        self,
        index: ResourceIndex,
        weights: ScoreWeights,
        topology_key: str,
        filters: Sequence[StaticFilterPlugin] | None = None,
        scores: Sequence[tuple[ScorePlugin, int]] | None = None,
        node_filters: Sequence[NodeFilterPlugin] | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        self.index = index
        self.topology_key = topology_key
        self.filters = list(filters) if filters is not None else default_filters()
        self.node_filters = (
            list(node_filters) if node_filters is not None else default_node_filters()
        )
        self.scores = (
            list(scores)
            if scores is not None
            else default_scores(weights, [*self.filters, *self.node_filters])
        )
        self.budget = (budgets or Budgets()).sync
        #: try to fit a whole gang inside one topology domain first
        self.pack_domains = any(isinstance(plugin, GangPacking) for plugin, _ in self.scores)
        #: plugins that look beyond the node (other pods, node labels for a preference): skipped
        #: for a pod they judge every node alike for, which keeps the fast path below
        self._rule_aware: list[RuleAwarePlugin] = list(
            dict.fromkeys(
                p
                for p in [*self.node_filters, *(p for p, _ in self.scores)]
                if isinstance(p, RuleAwarePlugin)
            )
        )
        #: those whose relevance is a function of the pod's template: asked once for a run of
        #: twins (``same_template``)
        self._by_template = frozenset(
            p for p in self._rule_aware if getattr(p, "relevance_by_template", False)
        )
        self._by_reads = PluginsByReads.of(self._by_template)
        #: every other Filter and Score plugin judges a node by its own state only (the
        #: built-ins do), so placing a member changes nothing but the chosen node's verdict
        self._incremental = all(
            type(f) in LOCAL_NODE_FILTERS or isinstance(f, RuleAwarePlugin)
            for f in self.node_filters
        ) and all(type(p) in LOCAL_SCORES or isinstance(p, RuleAwarePlugin) for p, _ in self.scores)
        self._version = -1
        self._static: dict[Constraints, _Static] = {}
        self._domains: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._row_of: dict[str, int] = {}
        self._columns: dict[bytes, tuple[npt.NDArray[np.intp], tuple[str, ...], Vector]] = {}
        #: one node's weighted score by everything it depends on (built-in scores only); nodes
        #: of a pool that took the same members are in the same state, so this mostly hits
        self._row_scores: dict[tuple[bytes, bytes, bytes, bool, bool], float] = {}
        #: per (trial, template signature, packing domain): the last gang's pass there
        #: (_Carried). Kept apart per ``Snapshot.trial``: a trial on the empty cluster between
        #: two gangs would otherwise leave the next gang nothing to carry
        self._carried: dict[tuple[str, object, int], _Carried] = {}
        #: per packing domain: its rows (for the node-set version in ``_version``)
        self._domain_rows: dict[int, npt.NDArray[np.intp]] = {}
        #: per (trial, static constraints, request): the rows' slot counts (_Slots), for the
        #: packing domains' capacities (apart per trial, like ``_carried``)
        self._slot_counts: dict[tuple[str, Constraints, bytes], _Slots] = {}
        self._labelled: Mask = np.zeros(0, dtype=np.bool_)  # rows with a packing domain
        self._any_labelled = False
        #: during ``place``: where its snapshot's ``free`` came from, if it was intact when the
        #: call began (the call consumes it)
        self._origin: FreeOrigin | None = None

    # --- caches --------------------------------------------------------------------------

    @classmethod
    def for_profile(cls, index: ResourceIndex, profile: Profile, topology_key: str) -> Placer:
        """The placer running a profile's Filter and Score plugins."""
        return cls(
            index,
            ScoreWeights(),
            topology_key,
            filters=profile.static_filters,
            scores=profile.scores,
            node_filters=profile.node_filters,
            budgets=profile.budgets,
        )

    def _refresh(self, snap: Snapshot) -> None:
        if snap.version == self._version and len(self._domains) == len(snap.names):
            return
        self._version = snap.version
        self._static.clear()
        self._carried.clear()
        self._domain_rows.clear()
        self._slot_counts.clear()
        ids: dict[str, int] = {}
        domains = np.full(len(snap.names), -1, dtype=np.int64)
        for row, facts in enumerate(snap.facts):
            if facts is not None:
                value = facts.labels.get(self.topology_key)
                if value is not None:
                    domains[row] = ids.setdefault(value, len(ids))
        self._domains = domains
        self._labelled = domains >= 0
        self._any_labelled = bool(np.count_nonzero(self._labelled))
        self._row_of = {name: row for row, name in enumerate(snap.names) if name}

    def static(self, snap: Snapshot, constraints: Constraints) -> _Static:
        """Rows passing unschedulable / taint / affinity filters for this template (cached)."""
        self._refresh(snap)
        found = self._static.get(constraints)
        if found is None:
            reasons: list[str | None] = [None] * len(snap.names)
            mask = snap.valid.copy()
            for row, facts in enumerate(snap.facts):
                if facts is None:
                    continue
                reason = next(
                    (
                        r
                        for r in (
                            call(f, "Filter", self.budget, f.filter, constraints, facts)
                            for f in self.filters
                        )
                        if r is not None
                    ),
                    None,
                )
                if reason is not None:
                    reasons[row] = reason
                    mask[row] = False
            found = self._static[constraints] = _Static(mask, reasons)
        return found

    # --- the decision --------------------------------------------------------------------

    def place(
        self,
        snap: Snapshot,
        pods: Sequence[PodInfo],
        need: int,
        anchors: Sequence[str] = (),
        topology: TopologyConstraint | None = None,
        required: Sequence[PodInfo] = (),
    ) -> Placement | Unplaceable:
        """Place ``need`` of ``pods`` (all-or-nothing), then as many of the rest as fit.

        ``anchors`` are the nodes of members already bound or reserved: their domains count as
        the gang's own. ``topology``: the gang's topology constraint (None: today's packing).
        ``required``: members of ``pods`` that must be among those placed (Volcano
        minTaskMember: each task's required members); they are placed first, as a whole,
        and the others fill up to ``need`` beside them, bigger first.
        ``snap.free`` is consumed.
        """
        if required:
            first = self.place(snap, required, len(required), anchors, topology)
            if isinstance(first, Unplaceable):
                return first
            rest = [p for p in pods if p.key not in first.assignments]
            beside = [*anchors, *first.assignments.values()]
            more = self.place(snap, rest, max(0, need - len(required)), beside, topology)
            if isinstance(more, Unplaceable):
                return replace(
                    more, placed=more.placed + len(required), needed=more.needed + len(required)
                )
            return Placement({**first.assignments, **more.assignments}, more.unplaced)
        origin = intact_origin(snap.origin, snap.free)
        if origin is not None:
            origin.intact = False  # this call consumes ``free``
        outer, self._origin = self._origin, origin  # (a plugin may place on a snapshot of its own)
        try:
            return self._place(snap, pods, need, anchors, topology)
        finally:
            self._origin = outer

    def _place(
        self,
        snap: Snapshot,
        pods: Sequence[PodInfo],
        need: int,
        anchors: Sequence[str],
        topology: TopologyConstraint | None,
    ) -> Placement | Unplaceable:
        self._refresh(snap)
        width = snap.free.shape[1]  # the cycle registers every request vector before its snapshot
        # one vector per request map: a template's members share theirs (``gang.state.podinfo``)
        shared: dict[int, Vector] = {}
        vectors: dict[Key, Vector] = {}
        for p in pods:
            vec = shared.get(id(p.requests))
            if vec is None:
                vec = shared[id(p.requests)] = self.index.requests_vector(p.requests)[:width]
            vectors[p.key] = vec
        if len(shared) > 1 and len({v.tobytes() for v in shared.values()}) > 1:  # big first
            largest = snap.allocatable.max(axis=0)
            ordered = sorted(
                pods, key=lambda p: (-self._size(p, largest), p.creation_timestamp, p.name)
            )
        else:
            ordered = sorted(pods, key=lambda p: (p.creation_timestamp, p.name))
        row_of = self._row_of
        anchor_domains = {int(self._domains[row_of[n]]) for n in anchors if n in row_of} - {-1}
        needed, extras = ordered[:need], ordered[need:]

        attempt: dict[Key, int] | Unplaceable | None = None
        ports: Ports = {}  # host ports claimed by members placed in this call, per row
        placed: list[Placed] = []  # members placed in this call, seen by rules between pods
        extra_rows: Mask | None = None
        if topology is not None and needed:
            inside = self._in_topology(snap, needed, vectors, anchors, topology, ports, placed)
            if isinstance(inside, Unplaceable):
                return inside
            attempt, extra_rows = inside
        elif (
            self.pack_domains
            and needed
            and len(needed) + len(anchors) > 1
            and not any(
                self._spreads_over_domains(rules)
                for rules in {id(p.rules): p.rules for p in needed}.values()  # once a template
            )
        ):
            for domain in self._candidate_domains(snap, needed, vectors, anchor_domains):
                rows = self._domains == domain
                trial_ports = _copy_ports(ports)
                trial_placed: list[Placed] = []
                result = self._greedy(
                    snap,
                    snap.free,
                    needed,
                    vectors,
                    rows,
                    {domain},
                    trial_ports,
                    trial_placed,
                    False,
                    carry=domain,
                )
                if not isinstance(result, Unplaceable):
                    attempt, ports, placed = result, trial_ports, trial_placed
                    break
                _give_back(snap.free, trial_placed, vectors)
        if attempt is None:
            attempt = self._greedy(
                snap, snap.free, needed, vectors, None, set(anchor_domains), ports, placed
            )
        if isinstance(attempt, Unplaceable):
            return attempt
        used = {int(self._domains[row]) for row in attempt.values()} | anchor_domains
        unplaced: dict[Key, str] = {}
        for pod in extras:  # best effort, each on its own: a smaller one may fit where a bigger
            extra = self._greedy(snap, snap.free, [pod], vectors, extra_rows, used, ports, placed)
            if isinstance(extra, Unplaceable):
                unplaced[pod.key] = extra.message
            else:
                attempt.update(extra)
        return Placement({key: snap.names[row] for key, row in attempt.items()}, unplaced)

    def _in_topology(
        self,
        snap: Snapshot,
        needed: Sequence[PodInfo],
        vectors: dict[Key, Vector],
        anchors: Sequence[str],
        topology: TopologyConstraint,
        ports: Ports,
        placed: list[Placed],
    ) -> tuple[dict[Key, int], Mask | None] | Unplaceable:
        """Place the needed members inside the domains the topology choice takes; the rows the
        extra members may use (the required domain; None: anywhere)."""
        tree = snap.domains.tree(topology.levels)
        count = len(needed)
        anchor_rows = [self._row_of[n] for n in anchors if n in self._row_of]
        within = _anchor_domain(tree, anchor_rows, topology)
        if isinstance(within, Unplaceable):
            return within
        held: dict[int, int] = {}
        if topology.slice_level is not None:  # slices the placed members began
            for row in anchor_rows:
                domain = int(tree.ids[topology.slice_level][row])
                held[domain] = held.get(domain, 0) + 1
        leader, workers = _leader_of(needed, vectors)
        leader_leaf: int | None = None
        if leader is not None and not held:
            lead_vec, work_vec = vectors[leader.key], vectors[workers[0].key]
            slots = self._slots(snap, workers[0], work_vec, len(workers))
            fits = self._slots(snap, leader, lead_vec, 1)
            beside = np.where(
                fits > 0,
                self._slots(snap, workers[0], work_vec, len(workers), snap.free - lead_vec),
                slots,
            )
            found = choose_with_leader(
                tree, slots, Leader(np.minimum(fits, 1), beside), len(workers), topology, within
            )
            chosen = found[0] if isinstance(found, tuple) else found
            leader_leaf = found[1] if isinstance(found, tuple) else None
        else:
            slots = self._slots(snap, needed[0], vectors[needed[0].key], count)
            chosen = choose(tree, slots, count, topology, within, held)
        if not isinstance(chosen, Chosen):
            message = chosen.message + _unlabelled_note(tree)
            return Unplaceable(message, min(chosen.fits * chosen.unit, count), count)
        failure: Unplaceable | None = None
        for parts in _parts(tree, topology, chosen, needed, leader, leader_leaf):
            trial_ports = _copy_ports(ports)
            trial_placed: list[Placed] = []
            result: dict[Key, int] = {}
            refused: Unplaceable | None = None
            for pods, quota in parts:
                part = self._greedy(
                    snap,
                    snap.free,
                    pods,
                    vectors,
                    quota.open_rows(),
                    set(),
                    trial_ports,
                    trial_placed,
                    explain=failure is None,
                    quota=quota,
                )
                if isinstance(part, Unplaceable):
                    refused = part
                    break
                result.update(part)
            if refused is not None:
                failure = failure or refused
                _give_back(snap.free, trial_placed, vectors)
                continue
            ports.clear()
            ports.update(trial_ports)
            placed.extend(trial_placed)
            extra = None
            if topology.required is not None:
                required = tree.ids[topology.required]
                home = required[next(iter(result.values()))]
                extra = required == home
            return result, extra
        assert failure is not None
        where = " and ".join(
            f"{level_name(tree.levels[chosen.level])} {'/'.join(tree.values[chosen.level][d])}"
            for d in chosen.domains
        )
        return Unplaceable(
            f"{topology.describe()}: inside {where}, {failure.message}",
            failure.placed,
            count,
            failure.member,
            failure.reasons,
        )

    def _slots(
        self,
        snap: Snapshot,
        pod: PodInfo,
        vec: Vector,
        most: int,
        free: npt.NDArray[np.int64] | None = None,
    ) -> npt.NDArray[np.int64]:
        """Per row, how many members shaped like ``pod`` fit its free capacity (``free``, else
        the snapshot's; its static filters passing; at most ``most`` where it requests
        nothing)."""
        static = self.static(snap, pod.constraints).mask
        free = snap.free if free is None else free
        if (vec > 0).any():
            per_node = copies_fitting(free, vec)
            per_node[~static] = 0
            return per_node
        result: npt.NDArray[np.int64] = np.where(static, most, 0).astype(np.int64)
        return result

    def _slots_kept(self, snap: Snapshot, pod: PodInfo, vec: Vector, most: int) -> _Slots:
        """``_slots`` on the snapshot's free capacity and the packing domains' sums of it,
        recounting only the rows whose free capacity differs from the last count for this
        template (consecutive gangs of one template differ where the last one went). The
        result is the kept count: read it only."""
        key = (snap.trial, pod.constraints, vec.tobytes())
        kept = self._slot_counts.get(key)
        free = snap.free
        if (
            kept is None  # (only a template that asks for something is kept)
            or kept.allocatable is not snap.allocatable
            or kept.free.shape != free.shape
        ):
            if len(self._slot_counts) >= CARRIED_PASSES:
                self._slot_counts.clear()
            per_node = self._slots(snap, pod, vec, most)
            labelled = self._labelled
            sums = np.bincount(
                self._domains[labelled],
                weights=per_node[labelled],
                minlength=int(self._domains.max()) + 1,
            )
            kept = _Slots(snap.allocatable, free.copy(), per_node, [int(c) for c in sums])
            kept.at = self._stamp()
            if np.count_nonzero(vec > 0):  # a request of nothing counts every row alike
                kept.asked = asked_columns(vec)
                self._slot_counts[key] = kept
            return kept
        moved = self._rows_moved(kept.at, None)
        rows = (
            rows_differing(kept.free, free)
            if moved is None
            else np.array(sorted(moved), dtype=np.intp)
        )
        kept.at = self._stamp()
        if not len(rows):
            return kept
        counts = copies_fitting_rows(free, rows, vec, kept.asked)
        counts[~self.static(snap, pod.constraints).mask[rows]] = 0
        new = counts.tolist()
        capacity = kept.capacity
        for domain, count, before in zip(
            self._domains[rows].tolist(), new, kept.per_node[rows].tolist(), strict=True
        ):
            if domain >= 0:
                capacity[domain] += count - before
        kept.per_node[rows] = new
        kept.free[rows] = free[rows]
        return kept

    def _stamp(self) -> tuple[RowJournal, int] | None:
        """Where the snapshot being placed was taken, if its ``free`` was intact."""
        origin = self._origin
        return None if origin is None else (origin.journal, origin.stamp)

    def _rows_moved(self, at: tuple[RowJournal, int] | None, domain: int | None) -> set[int] | None:
        """The rows (of ``domain``, or all) whose free capacity may have moved between the
        cache at ``at`` and the snapshot being placed; None if the journal cannot tell (then
        compare the matrices)."""
        origin = self._origin
        if at is None or origin is None or at[0] is not origin.journal or at[1] > origin.stamp:
            return None
        changed = at[0].since(at[1])
        if changed is None:
            return None
        rows = set(changed[: origin.stamp - at[1]])  # (later changes are not in this snapshot)
        if domain is not None:
            domains = self._domains
            rows = {row for row in rows if domains[row] == domain}
        return rows

    def _spreads_over_domains(self, rules: PodRules) -> bool:
        """A pod's hard rules spread a gang over the packing domains (DoNotSchedule spread, or
        required anti-affinity, on the packing key): one domain would be a trial bound to fail."""
        return any(
            c.topology_key == self.topology_key and c.when_unsatisfiable == DO_NOT_SCHEDULE
            for c in rules.spread
        ) or any(t.topology_key == self.topology_key for t in rules.pod_affinity.required_anti)

    def evaluate(self, snap: Snapshot, pod: PodInfo) -> Evaluation:
        """Filter and score one pod on every node of ``snap`` (nothing is consumed)."""
        self._refresh(snap)
        vec = self.index.requests_vector(pod.requests)[: snap.free.shape[1]]
        static = self.static(snap, pod.constraints)
        view = NodeFilterInput(snap, snap.free, pod, vec, self.index, {})
        skip = self._skipped(pod, snap, ())
        fit = static.mask.copy()
        reasons: dict[int, list[str]] = {
            row: [r] for row, r in enumerate(static.reasons) if r is not None and snap.valid[row]
        }
        for plugin in self.node_filters:
            if plugin in skip:
                continue
            passed = call(plugin, "Filter", self.budget, plugin.filter_nodes, view)
            for row in np.flatnonzero(fit & ~passed):
                reasons[int(row)] = plugin.reasons(view, int(row)) or [rejected_by(plugin)]
            fit = fit & passed
        candidates = np.flatnonzero(fit)
        totals = (
            self._score(snap, snap.free, candidates, vec, set(), pod, (), skip)
            if candidates.size
            else np.zeros(0)
        )
        scores = {int(row): float(total) for row, total in zip(candidates, totals, strict=True)}
        weights = {p.name: w for p, w in self.scores if p not in skip}
        return Evaluation(fit, reasons, scores, weights)

    def _size(self, pod: PodInfo, largest: Vector) -> float:
        """Dominant share of the pod's request against the largest node (``largest``, per
        resource): big members first."""
        share = 0.0
        for name, amount in pod.requests.items():
            if name == "pods" or not self.index.has(name):
                continue
            col = self.index.column(name)
            if col < len(largest) and largest[col] > 0:
                share = max(share, amount / float(largest[col]))
        return share

    def _candidate_domains(
        self, snap: Snapshot, pods: Sequence[PodInfo], vectors: dict[Key, Vector], anchors: set[int]
    ) -> list[int]:
        """Domains that might hold all of ``pods``: the anchors' first, then tightest fit first."""
        if not self._any_labelled:
            return []
        need = len(pods)
        capacity = self._slots_kept(snap, pods[0], vectors[pods[0].key], need).capacity
        fitting = [d for d, c in enumerate(capacity) if c >= need]
        fitting.sort(key=lambda d: (d not in anchors, capacity[d], d))
        return fitting[:MAX_DOMAIN_TRIES]

    def _greedy(
        self,
        snap: Snapshot,
        free: npt.NDArray[np.int64],
        pods: Sequence[PodInfo],
        vectors: dict[Key, Vector],
        rows: Mask | None,
        used_domains: set[int],
        claimed_ports: Ports,
        placed: list[Placed],
        explain: bool = True,
        quota: _Quota | None = None,
        carry: int | None = None,
    ) -> dict[Key, int] | Unplaceable:
        """Place each pod on its best-scoring feasible row, consuming ``free``, claiming host
        ports in ``claimed_ports`` and appending to ``placed``; a failure on the first pod leaves
        all three untouched. Without ``explain`` a failure carries no message (a trial).
        ``quota``: how many members each domain may still take (spent as members are placed).
        ``carry``: the packing domain ``rows`` is; the pass is then carried to the next gang of
        the template there (:class:`_Carried`)."""
        chosen: dict[Key, int] = {}
        # The previous member's local filter and score results (the plugins that judge a node by
        # its own state: every built-in but the rule-aware ones). When the next member has the
        # same template, only the node that member took has changed for them (its free
        # capacity), so only that node is re-judged; third-party plugins always get the full
        # pass. Rule-aware plugins (pod affinity, spread, volumes, preferences) are asked afresh
        # for every member, on top: the members placed before it change their answers (whether
        # one matters at all is asked once for a run of twins: ``_skipped``).
        previous: _Previous | None = None
        relevance: tuple[PodInfo, frozenset[object]] | None = None  # the last member's skips
        rule_aware: frozenset[object] = frozenset(self._rule_aware)
        labels = LabelReads(self._by_reads, snap, lambda: (*pods, *(m for m, _ in placed)))
        active: list[object] = []  # the rule-aware plugins not skipped for this member
        for i, pod in enumerate(pods):
            vec = vectors[pod.key]
            skip = self._skipped(pod, snap, placed, relevance, labels)
            if relevance is None or skip is not relevance[1]:  # (a twin's: the same set)
                active = [p for p in self._rule_aware if p not in skip]
            relevance = (pod, skip)
            signature = (pod.constraints, pod.rules, vec.tobytes())
            if previous is None and carry is not None:
                previous = self._take_carried(
                    snap, free, signature, vec, carry, used_domains, quota
                )
            if (
                previous is not None
                and previous.signature == signature
                and self._incremental
                and not pod.constraints.host_ports
                and previous.domains_used == len(used_domains)
            ):
                # only the row the previous member took has changed for the local plugins
                score = self._rejudge(snap, free, previous, previous.last, vec, used_domains, quota)
                if active:
                    view = NodeFilterInput(snap, free, pod, vec, self.index, claimed_ports, placed)
                    row = self._choose(
                        view, previous.candidates, previous.scores, active, used_domains
                    )
                    previous.best_score = None
                elif previous.best_score is not None and score >= previous.best_score:
                    row = previous.last  # still the best (a plain pod)
                    previous.best_score = score
                else:
                    at = _best_at(previous.scores)  # a plain pod
                    row = None if at is None else int(previous.candidates[at])
                    previous.best_score = None if at is None else float(previous.scores[at])
                if row is not None:
                    free[row] -= vec
                    chosen[pod.key] = row
                    placed.append((pod, row))
                    previous.last = row
                    if self._domains[row] >= 0:  # (a domain it opens: the next one re-scores)
                        used_domains.add(int(self._domains[row]))
                    _spend(quota, row, previous)
                    continue
            view = NodeFilterInput(snap, free, pod, vec, self.index, claimed_ports, placed)
            static = self.static(snap, pod.constraints)
            fit = static.mask if rows is None else static.mask & rows
            if quota is not None:
                fit = fit & quota.open_rows()
            for plugin in self.node_filters:
                if not fit.any():
                    break
                if plugin not in rule_aware:
                    fit = fit & call(plugin, "Filter", self.budget, plugin.filter_nodes, view)
            candidates = np.flatnonzero(fit)
            local = (
                self._score(snap, free, candidates, vec, used_domains, pod, placed, rule_aware)
                if candidates.size
                else np.zeros(0)
            )
            picked = self._choose(view, candidates, local, active, used_domains)
            if picked is None:
                if not explain:
                    return Unplaceable("", placed=i, needed=len(pods))
                reasons = self._reasons(view, static, skip)
                message = summarize(int(snap.valid.sum()), reasons)
                return Unplaceable(message, i, len(pods), pod.key, dict(reasons))
            row = picked
            free[row] -= vec
            chosen[pod.key] = row
            placed.append((pod, row))
            scored_with = len(used_domains)  # (a domain the member opens re-scores its rows)
            if self._domains[row] >= 0:
                used_domains.add(int(self._domains[row]))
            best = None if active else float(local[int(candidates.searchsorted(row))])
            previous = _Previous(signature, candidates, local, row, scored_with, best)
            _spend(quota, row, previous)
            for port in pod.constraints.host_ports:
                key = host_port_key(port)
                if key is not None:
                    claimed_ports.setdefault(row, Counter())[key] += 1
        if carry is not None and previous is not None:
            self._keep_carried(snap, free, previous, carry, used_domains, quota, chosen.values())
        return chosen

    def _carry_applies(self, snap: Snapshot, quota: _Quota | None) -> bool:
        """Whether a pass may be carried between gangs: only built-in local plugins, no
        quota, and no reservation making some rows score lower for this gang alone."""
        return self._incremental and quota is None and snap.avoid is None

    def _rows_of_domain(self, domain: int) -> npt.NDArray[np.intp]:
        rows = self._domain_rows.get(domain)
        if rows is None:
            rows = self._domain_rows[domain] = np.flatnonzero(self._domains == domain)
        return rows

    def _keep_carried(
        self,
        snap: Snapshot,
        free: npt.NDArray[np.int64],
        previous: _Previous,
        domain: int,
        used: set[int],
        quota: _Quota | None,
        taken: Iterable[int],
    ) -> None:
        if not self._carry_applies(snap, quota) or previous.domains_used != len(used):
            return
        if len(self._carried) >= CARRIED_PASSES:
            self._carried.clear()
        at = self._stamp()
        self._carried[(snap.trial, previous.signature, domain)] = _Carried(
            previous,
            snap.allocatable,
            frozenset(used),
            at,
            {row: free[row].tobytes() for row in taken},
            free[self._rows_of_domain(domain)] if at is None else None,
        )

    def _take_carried(
        self,
        snap: Snapshot,
        free: npt.NDArray[np.int64],
        signature: tuple[Constraints, PodRules, bytes],
        vec: Vector,
        domain: int,
        used: set[int],
        quota: _Quota | None,
    ) -> _Previous | None:
        """The pass the last gang of this template left in ``domain``, brought up to date with
        ``free``; None if there is none, or a full pass is needed (a row outside its
        candidates may fit now). Taken: a trial that fails must not leave it half-spent."""
        carried = self._carried.pop((snap.trial, signature, domain), None)
        if (
            carried is None
            or not self._carry_applies(snap, quota)
            or carried.allocatable is not snap.allocatable
            or carried.used != used
            or signature[0].host_ports
        ):
            return None
        previous = carried.previous
        moved = self._rows_moved(carried.at, domain)
        if moved is not None:
            taken = carried.taken
            maybe = moved | taken.keys()
            changed = np.array(
                sorted(row for row in maybe if taken.get(row) != free[row].tobytes()),
                dtype=np.intp,
            )
        elif carried.free is None:
            return None  # taken at a known stamp, but this snapshot's free is not the cache's
        else:
            rows = self._rows_of_domain(domain)
            changed = rows[rows_differing(carried.free, free[rows])]
        if len(changed):
            static = self.static(snap, signature[0]).mask
            at = previous.candidates.searchsorted(changed)
            inside = at < len(previous.candidates)
            known = np.zeros(len(changed), dtype=np.bool_)
            known[inside] = previous.candidates[at[inside]] == changed[inside]
            if (static[changed] & ~known).any():
                return None  # a row that failed the filters may pass them now
            for row in changed[known]:
                self._rejudge(snap, free, previous, int(row), vec, used, quota)
            previous.best_score = None  # rows besides the last may score higher now
        return previous

    def _choose(
        self,
        view: NodeFilterInput,
        candidates: npt.NDArray[np.intp],
        local: npt.NDArray[np.float64],
        active: Sequence[object],
        used_domains: set[int],
    ) -> int | None:
        """The best row among ``candidates`` (local scores ``local``, -inf: no longer fits)
        once the active rule-aware plugins have filtered and scored them; None if none is left."""
        if not active:  # a plain pod: the local scores decide
            return _best(candidates, local)
        passed: Mask | None = None  # every row the active rule filters let through
        for plugin in self.node_filters:
            if plugin in active:
                verdict = call(plugin, "Filter", self.budget, plugin.filter_nodes, view)
                passed = verdict if passed is None else passed & verdict
        if passed is None:
            total = local
        else:  # candidates are ascending rows: all of them means every row, in order
            keep = passed if len(candidates) == len(passed) else passed[candidates]
            total = np.where(keep, local, -np.inf)
        scorers = [
            (p, w)
            for p, w in self.scores
            if p in active and scores_for(p, view.pod, view.snap, view.placed)
        ]
        if not len(total):
            return None
        if scorers:
            ok = total > -np.inf
            if not ok.any():
                return None
            subset = candidates[ok]
            rule_view = ScoreInput(
                subset,
                np.zeros((len(subset), 0)),
                self._domains[subset],
                frozenset(used_domains),
                pod=view.pod,
                snap=view.snap,
                placed=view.placed,
            )
            for scorer, weight in scorers:
                raw = call(scorer, "Score", self.budget, scorer.score, rule_view)
                normalized = call(scorer, "NormalizeScore", self.budget, scorer.normalize, raw)
                total[ok] += weight * normalized
        best = int(total.argmax())
        return None if total[best] == -np.inf else int(candidates[best])

    def _rejudge(
        self,
        snap: Snapshot,
        free: npt.NDArray[np.int64],
        previous: _Previous,
        row: int,
        vec: Vector,
        used: set[int],
        quota: _Quota | None,
    ) -> float:
        """Re-judge one of the previous pass's candidates by the local plugins; its new score."""
        position = int(previous.candidates.searchsorted(row))
        closed = quota is not None and quota.closed(row)
        score = -np.inf if closed else self._row_score(snap, free, row, vec, used)
        previous.scores[position] = score
        return score

    def _row_score(
        self, snap: Snapshot, free: npt.NDArray[np.int64], row: int, vec: Vector, used: set[int]
    ) -> float:
        """The score of one node (-inf where the request no longer fits), memoized on its free
        and allocatable vectors, the request and whether its domain is the gang's: all a local
        built-in Filter and Score depends on."""
        key = (
            free[row].tobytes(),
            snap.allocatable[row].tobytes(),
            vec.tobytes(),
            int(self._domains[row]) in used,
            snap.avoid is not None and bool(snap.avoid[row]),
        )
        score = self._row_scores.get(key)
        if score is None:
            if len(self._row_scores) >= ROW_SCORE_MEMO:
                self._row_scores.clear()
            if np.all(free[row] >= vec):
                candidates = np.array([row], dtype=np.intp)
                skip = frozenset(self._rule_aware)
                score = float(self._score(snap, free, candidates, vec, used, skip=skip)[0])
            else:
                score = -np.inf
            self._row_scores[key] = score
        return score

    def _score(
        self,
        snap: Snapshot,
        free: npt.NDArray[np.int64],
        candidates: npt.NDArray[np.intp],
        vec: Vector,
        used_domains: set[int],
        pod: PodInfo | None = None,
        placed: Sequence[Placed] = (),
        skip: frozenset[object] = frozenset(),
    ) -> npt.NDArray[np.float64]:
        """Weighted sum of the Score plugins' normalized scores (those in ``skip`` left out:
        they score every node alike); ties go to the lowest row."""
        cols, names, wanted = self._score_columns(vec)
        allocatable = snap.allocatable[candidates][:, cols]
        free_after = free[candidates][:, cols] - wanted
        alloc = allocatable.astype(np.float64)
        util = np.ones_like(alloc)  # a resource the node does not have counts as full
        np.subtract(
            1.0,
            np.divide(free_after, alloc, out=np.zeros_like(alloc), where=alloc > 0),
            out=util,
            where=alloc > 0,
        )
        view = ScoreInput(
            candidates,
            util,
            self._domains[candidates],
            frozenset(used_domains),
            resources=names,
            free_after=free_after,
            allocatable=allocatable,
            pod=pod,
            snap=snap,
            placed=placed,
        )
        total = np.zeros(len(candidates), dtype=np.float64)
        for plugin, weight in self.scores:
            if plugin in skip:
                continue
            raw = call(plugin, "Score", self.budget, plugin.score, view)
            total += weight * call(plugin, "NormalizeScore", self.budget, plugin.normalize, raw)
        if snap.avoid is not None:
            total[snap.avoid[candidates]] -= RESERVED_ELSEWHERE
        return total

    def _score_columns(self, vec: Vector) -> tuple[npt.NDArray[np.intp], tuple[str, ...], Vector]:
        """The resource columns scores consider for a request (cached per request vector):
        cpu and memory always (as kube-scheduler's resource scores do, a pod asking for none
        included), then every other resource it asks for besides the pod slot."""
        key = vec.tobytes()
        found = self._columns.get(key)
        if found is None:
            base = [self.index.column("cpu"), self.index.column("memory")]
            asked = [int(c) for c in np.flatnonzero(vec > 0) if self.index.names[c] != "pods"]
            wanted = [*base, *(c for c in asked if c not in base)]
            cols = np.array(wanted, dtype=np.intp)
            found = self._columns[key] = (
                cols,
                tuple(self.index.names[c] for c in wanted),
                vec[cols],
            )
        return found

    def _skipped(
        self,
        pod: PodInfo,
        snap: Snapshot,
        placed: Sequence[Placed],
        last: tuple[PodInfo, frozenset[object]] | None = None,
        labels: LabelReads | None = None,
    ) -> frozenset[object]:
        """The rule-aware plugins that judge every node alike for ``pod`` now. ``last``: the
        member placed just before it on ``snap`` and what was skipped for it. A plugin that
        answers per template (``relevance_by_template``) is not asked again for its twin: a
        member of the same template whose labels differ, if at all, in none of the keys its
        relevance reads (``labels``; an index label, as a Job's pods carry)."""
        if not self._rule_aware:
            return _NOTHING
        kept: frozenset[object] = _NOTHING
        reused: Collection[object] = ()  # the plugins whose answer for ``last`` holds
        if last is not None and same_but_labels(last[0], pod):
            before, kept = last
            if pod.labels == before.labels:
                reused = self._by_template
            elif labels is not None:
                reused = labels.holding(before, pod)
            if len(reused) == len(self._rule_aware):
                return kept  # every plugin answers per template (the built-ins do)
        try:  # asked for every member: not timed (a relevance check is a lookup)
            return frozenset(
                p
                for p in self._rule_aware
                if (p in kept if p in reused else not p.relevant(pod, snap, placed))
            )
        except Exception:  # name the plugin, through the guarded path
            for p in self._rule_aware:
                call(p, "Filter", None, p.relevant, pod, snap, placed)
            raise

    def _reasons(
        self, view: NodeFilterInput, static: _Static, skip: frozenset[object]
    ) -> Counter[str]:
        """kube-scheduler's FitError histogram for this pod on the consumed snapshot: per node
        the first rejecting Filter's reasons. Counted by plugin over the rows it rejects first
        (``reason_counts``), not node by node: a gang that does not fit is explained on every
        attempt, and at thousands of nodes a Python step per node was most of a failed cycle."""
        reasons: Counter[str] = Counter()
        rows = np.flatnonzero(view.snap.valid)
        codes = static.codes[rows]
        rejected = codes >= 0
        counts = np.bincount(codes[rejected], minlength=len(static.texts))
        reasons.update({text: int(n) for text, n in zip(static.texts, counts, strict=True) if n})
        rows = rows[~rejected]
        for plugin in self.node_filters:
            if not rows.size:
                break
            if plugin in skip:
                continue
            passing = plugin.filter_nodes(view)[rows]
            reasons.update(reason_counts(plugin, view, rows[~passing]))
            rows = rows[passing]
        return reasons


def _anchor_domain(
    tree: DomainTree, rows: Sequence[int], topology: TopologyConstraint
) -> int | Unplaceable | None:
    """The required-level domain the gang's placed members (on ``rows``) hold it to; None if
    it has no required level or no placed member."""
    if topology.required is None or not rows:
        return None
    ids = tree.ids[topology.required]
    held = {int(ids[row]) for row in rows}
    name = level_name(tree.levels[topology.required])
    if -1 in held:
        return Unplaceable(
            f"required {name}: members already run on nodes without the label "
            f"{tree.levels[topology.required]}",
            0,
            0,
        )
    if len(held) > 1:
        return Unplaceable(
            f"required {name}: members already run in {len(held)} {name}s "
            f"({', '.join(sorted('/'.join(tree.values[topology.required][d]) for d in held))})",
            0,
            0,
        )
    return held.pop()


def _spend(quota: _Quota | None, row: int, previous: _Previous) -> None:
    """Count a member placed on ``row`` against its domain's quota; once the domain is full,
    none of its rows is a candidate for the members after it."""
    if quota is None:
        return
    closed = quota.spend(row)
    if closed is not None:
        rows_closed = quota.domain_of[previous.candidates] == closed
        previous.scores[rows_closed] = -np.inf


def _quota_of(tree: DomainTree, level: int, counts: Sequence[tuple[int, int]]) -> _Quota:
    left = np.zeros(tree.size(level), dtype=np.int64)
    for domain, n in counts:
        left[domain] += n
    ids = tree.ids[level]  # -1 outside the tree
    domain_of = np.where((ids >= 0) & (left[np.maximum(ids, 0)] > 0), ids, -1)
    return _Quota(domain_of, left)


def _roll_up(
    tree: DomainTree, level: int, up_to: int, counts: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Counts per domain of ``level``, summed into their ancestors at ``up_to``, in label-value
    order."""
    ancestors = tree.ancestors(level, up_to)
    rolled: dict[int, int] = {}
    for domain, n in counts:
        top = int(ancestors[domain])
        rolled[top] = rolled.get(top, 0) + n
    return sorted(rolled.items(), key=lambda dn: tree.values[up_to][dn[0]])


Part = tuple[Sequence[PodInfo], _Quota]


def _parts(
    tree: DomainTree,
    topology: TopologyConstraint,
    chosen: Chosen,
    needed: Sequence[PodInfo],
    leader: PodInfo | None = None,
    leader_leaf: int | None = None,
) -> list[list[Part]]:
    """How to place the needed members in the chosen domains, best first: with a quota per
    finest domain, then (should a rule between pods refuse that split) per slice domain or per
    chosen domain. With slices, members go in rank order, one slice domain at a time, so the
    ranks a slice holds run together (ranks 0-3 in one rack, 4-7 in the next), as Kueue places
    slices of an indexed job. A leader goes first, to the finest domain chosen for it."""
    last = len(tree.levels) - 1
    if leader is not None and leader_leaf is not None:
        others = [pod for pod in needed if pod.key != leader.key]
        first = (
            [leader],
            _quota_of(tree, last, [(leader_leaf, 1)]),
        )
        loose_level = topology.slice_level if topology.slice_level is not None else chosen.level
        loose_first = (
            [leader],
            _quota_of(
                tree, loose_level, [(int(tree.ancestors(last, loose_level)[leader_leaf]), 1)]
            ),
        )
        plans = _parts(tree, topology, chosen, others)
        return [[first if i == 0 else loose_first, *plan] for i, plan in enumerate(plans)]
    if topology.slice_level is None or topology.slice_size <= 1:
        loose = chosen.level
        parts = [[(needed, _quota_of(tree, last, chosen.leaves))]]
        if loose != last:
            rolled = _roll_up(tree, last, loose, chosen.leaves)
            parts.append([(needed, _quota_of(tree, loose, rolled))])
        return parts
    level = topology.slice_level
    labels = topology.rank_labels
    ranked = sorted(
        needed,
        key=lambda pod: (tuple(_natural(pod.labels.get(k, "")) for k in labels), member_rank(pod)),
    )
    slice_of = tree.ancestors(last, level)
    tight: list[Part] = []
    loose_parts: list[Part] = []
    start = 0
    for domain, n in _roll_up(tree, last, level, chosen.leaves):
        pods = ranked[start : start + n]
        start += n
        if not pods:
            break
        leaves = [(leaf, k) for leaf, k in chosen.leaves if slice_of[leaf] == domain]
        tight.append((pods, _quota_of(tree, last, leaves)))
        loose_parts.append((pods, _quota_of(tree, level, [(domain, n)])))
    return [tight, loose_parts] if level != last else [tight]


def _leader_of(
    needed: Sequence[PodInfo], vectors: dict[Key, Vector]
) -> tuple[PodInfo | None, list[PodInfo]]:
    """The gang's one member of another shape, if it has exactly two shapes and one of them
    has a single member (a launcher and its workers, a LeaderWorkerSet group); the others."""
    shapes: dict[tuple[object, bytes], list[PodInfo]] = {}
    for pod in needed:
        shapes.setdefault((pod.constraints, vectors[pod.key].tobytes()), []).append(pod)
    if len(shapes) != 2:
        return None, list(needed)
    small, big = sorted(shapes.values(), key=len)
    if len(small) != 1:
        return None, list(needed)
    return small[0], big


#: labels that give a member its rank among its gang (indexed Jobs, JobSets, the training
#: operators, LeaderWorkerSets, StatefulSets), most significant first
RANK_LABELS = (
    "jobset.sigs.k8s.io/job-index",
    "batch.kubernetes.io/job-completion-index",
    "training.kubeflow.org/replica-index",
    "leaderworkerset.sigs.k8s.io/group-index",
    "leaderworkerset.sigs.k8s.io/worker-index",
    "apps.kubernetes.io/pod-index",
)
_DIGITS = re.compile(r"(\d+)")


def member_rank(pod: PodInfo) -> tuple[tuple[int, ...], tuple[tuple[bool, int | str], ...]]:
    """A member's place in its gang: its index labels, then its name with numbers compared as
    numbers (``worker-2`` before ``worker-10``)."""
    indices = tuple(
        int(value) if (value := pod.labels.get(key, "")).isdigit() else -1 for key in RANK_LABELS
    )
    return indices, _natural(pod.name)


def _natural(text: str) -> tuple[tuple[bool, int | str], ...]:
    """``text`` with its numbers compared as numbers (``w-2`` before ``w-10``)."""
    return tuple((p.isdigit(), int(p) if p.isdigit() else p) for p in _DIGITS.split(text) if p)


def _unlabelled_note(tree: DomainTree) -> str:
    """Nodes outside the tree for lack of a level's label: said, not guessed."""
    missing = {key: n for key, n in tree.unlabelled.items() if n}
    if not missing:
        return ""
    return "; " + ", ".join(f"{n} node(s) lack label {key}" for key, n in missing.items())


def _best(candidates: npt.NDArray[np.intp], local: npt.NDArray[np.float64]) -> int | None:
    """The candidate with the highest score (the lowest row of a tie); None if none fits."""
    at = _best_at(local)
    return None if at is None else int(candidates[at])


def _best_at(local: npt.NDArray[np.float64]) -> int | None:
    """Where the highest score is (the first of a tie); None if none fits."""
    if not len(local):
        return None
    best = int(local.argmax())
    return None if local[best] == -np.inf else best


def _give_back(
    free: npt.NDArray[np.int64], placed: Sequence[Placed], vectors: dict[Key, Vector]
) -> None:
    """Undo a failed trial on ``free``: what each member it placed took goes back to its row.
    A trial consumes ``free`` in place, not a copy: copying the whole free matrix twice per
    gang (a trial, then its adoption) cost 13 µs a gang at 5,000 nodes, and a trial touches
    only the rows its members took."""
    for pod, row in placed:
        free[row] += vectors[pod.key]


def _copy_ports(ports: Ports) -> Ports:
    return {row: Counter(claimed) for row, claimed in ports.items()}
