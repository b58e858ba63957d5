"""Gang-aware preemption: evict whole gangs, the cheapest set that lets a gang place.

Why this exists: kube-scheduler preempts pod by pod, node by node. For gangs that leaves the worst
outcome a shared cluster can have: victims evicted from several gangs, each now short of its
quorum, holding accelerators it cannot use. Here the unit of eviction is a gang — all bound
members of a PodGroup (a pod without one is a gang of one) — or, for an elastic gang running more
members than its ``minMember``, only members above it. No victim is ever left below its quorum.

The decision is pure and runs in the scheduling cycle on the snapshot, through the *same*
placement as every gang (every placement rule holds for the preemptor): remove candidate victims
from a copy of the snapshot (their capacity, host ports and entries in the pod index), place the
preemptor, keep what works. Among the sets that work it minimises, in this order, kube-scheduler's
criteria lifted to gangs:

1. the highest victim priority (the lowest priority level whose pods suffice, found first);
2. PodDisruptionBudget violations (victims that keep every budget are taken first);
3. pods evicted, then accelerators (``*/gpu``), then cpu and memory evicted;
4. lost work: among equals, the most recently started victims.

Search: victims are added cheapest first until a resource-only bound says the preemptor could fit
and the real placement agrees; then every chosen victim is tried for a reprieve, most expensive
first (kube-scheduler reprieves per node; here across nodes, for a whole gang). The bound is a
necessary condition (free slots per member template on the nodes its static filters allow), so
it skips placements that could not succeed; ``max_trials`` caps the placements one decision may
run, so a decision's time is bounded on any cluster.

**Reclaim** is the same search under other rules (``Request.reclaim``, built by
``gang.scheduling.queues``; the rules are ``gang.queue.reclaim``): victims come from other queues
above their fair share whatever their priority, a victim queue furthest above its share first
(then lower priority), gangs inside their queue's minimum runtime are spared, and only sets that
keep every queue's floor (fair share, guarantee) and the stability rule are chosen.

Nothing here writes: the cycle turns a :class:`Plan` into a nomination (the freed capacity held
for the preemptor) and the binding side evicts (``gang.binding.evictor``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from gang.queue.reclaim import total
from gang.scheduling.framework import Plan as Plan
from gang.scheduling.framework import PreemptionRequest, ReclaimRules
from gang.scheduling.framework import VictimGang as VictimGang
from gang.scheduling.gang import Gang
from gang.scheduling.placement import Placement, Placer
from gang.scheduling.trials import Trials
from gang.state.cache import ClusterCache, PodRecord, PodState, Snapshot
from gang.state.podinfo import PodInfo

Key = tuple[str, str]
#: a victim gang: (namespace, PodGroup name) or, for a pod without a group, (namespace, "/pod")
VictimKey = tuple[str, str]
NOT_ELIGIBLE: Final = "preemption: not eligible due to preemptionPolicy=Never"
DEFAULT_MAX_TRIALS: Final = 64


def victim_key(pod: PodInfo) -> VictimKey:
    """The victim gang a running pod belongs to."""
    return (pod.namespace, pod.group or f"/{pod.name}")


def quorum(key: VictimKey, running: int, podgroups: Mapping[Key, Any]) -> int:
    """A victim gang's quorum: 1 for a lone pod; 0 for a group whose pods may be disrupted one
    by one; its valid PodGroup's minMember (at most what it runs); else all it runs."""
    if key[1].startswith("/"):
        return 1
    group = podgroups.get(key)
    if group is None or getattr(group, "error", None) is not None:
        return running
    if getattr(group, "disrupt_single", False):
        return 0  # native ``disruptionMode: Pod``: its pods may be preempted one by one
    return min(running, int(group.min_member))


def leaving(pod: PodInfo, claimed: Collection[Key]) -> bool:
    """Going already: terminating, or claimed by a preemption under way (marked in the API, or
    in ``claimed``: chosen by a plan whose marks are not written yet)."""
    return pod.deleting or pod.preemption_marked or pod.key in claimed


def is_accelerator(resource: str) -> bool:
    return resource == "gpu" or resource.endswith("/gpu")


@dataclass(frozen=True, slots=True)
class Request:
    """What the cycle hands preemption for a gang that did not fit (the plugin API's
    ``PreemptionRequest``, with the placer's own type)."""

    gang: Gang
    #: the members (and placeholders) the failed placement tried, and how many must place
    pods: Sequence[PodInfo]
    need: int
    anchors: Sequence[str]
    #: a fresh snapshot as this gang's cycle sees it (its own nominations dropped, those of
    #: lower-priority gangs lent)
    snapshot: Callable[[], Snapshot]
    placer: Placer
    cache: ClusterCache
    #: PodGroups by (namespace, name), for victims' minMember
    podgroups: Mapping[Key, Any]
    #: victim pods of the preemptions under way (other gangs' plans)
    claimed: frozenset[Key] = frozenset()
    #: whether a running pod may be this gang's victim at all (queues: only its own queue's,
    #: or a queue's above its fair share)
    may_evict: Callable[[PodInfo], bool] = lambda pod: True
    #: set for a reclaim: victims by queue rules, not by priority
    reclaim: ReclaimRules | None = None


@dataclass(slots=True)
class _Unit:
    """What may be evicted as one: a whole victim gang, or one member above its minMember."""

    gang: VictimKey
    records: tuple[PodRecord, ...]
    whole: bool
    priority: int
    #: the nodes its pods are on
    rows: tuple[int, ...] = ()
    #: the order victims are drawn in, by level (priority; for reclaim, queue then priority)
    tier: tuple[Any, ...] = ()
    #: reclaim: the victim's queue and what its pods hold
    queue: str | None = None
    amounts: dict[str, float] = field(default_factory=dict)
    #: lexicographic sort key (see ``Planner._cost``), and the same order as one number
    cost: tuple[Any, ...] = ()
    price: float = 0.0


@dataclass(slots=True)
class _VictimGroup:
    records: list[PodRecord] = field(default_factory=list)
    min_member: int = 1
    queue: str | None = None


class _Taken:
    """What a set of units takes from each queue, for reclaim's floors (no rules: anything
    goes)."""

    def __init__(self, rules: ReclaimRules | None) -> None:
        self.rules = rules
        self.by_queue: dict[str, dict[str, float]] = {}

    def fits(self, add: Sequence[_Unit], drop: Sequence[_Unit] = ()) -> bool:
        if self.rules is None:
            return True
        self.move(add, +1)
        self.move(drop, -1)
        try:
            return self.rules.allows(self.by_queue)
        finally:
            self.move(drop, +1)
            self.move(add, -1)

    def move(self, units: Sequence[_Unit], sign: int) -> None:
        if self.rules is None:
            return
        for unit in units:
            if unit.queue is None:
                continue
            into = self.by_queue.setdefault(unit.queue, {})
            for resource, amount in unit.amounts.items():
                into[resource] = into.get(resource, 0.0) + sign * amount


class GangPreemption:
    """The PostFilter plugin: plan a preemption for a gang that does not fit, or say why not."""

    name = "GangPreemption"

    #: it plans reclaims too (``Request.reclaim``): the cycle asks it before priority preemption
    reclaims = True

    def __init__(self, max_trials: int = DEFAULT_MAX_TRIALS) -> None:
        self.max_trials = max_trials

    def preempt(self, request: PreemptionRequest) -> Plan | str | None:
        return Planner(request, self.max_trials).plan()


class Planner:
    """One decision (state lives for one call)."""

    def __init__(self, request: PreemptionRequest, max_trials: int) -> None:
        self.r = request
        self.max_trials = max_trials
        self.priority = request.gang.priority

    # --- the decision ---------------------------------------------------------------------

    def plan(self) -> Plan | str | None:
        """A plan; why preemption cannot help; or None when there is no one to preempt (the
        failure message then stays as it was)."""
        r = self.r
        pods = [p for p in r.pods if p.key in r.gang.members]
        if any(p.preempt_never for p in pods):
            return NOT_ELIGIBLE
        if r.reclaim is None and not any(
            priority < self.priority for priority in r.cache.priorities
        ):
            return None  # nobody lower: the common case, answered without a scan
        self.t = Trials(
            r.snapshot(),
            r.pods,
            r.need,
            r.anchors,
            r.placer,
            r.cache.index,
            r.gang.topology,
            r.gang.task_minimums(r.pods),
        )
        self.width = self.t.width
        self.index = r.cache.index
        leaving = [
            rec
            for rec in r.cache.pods.values()
            if rec.state is PodState.BOUND and rec.info is not None and self._leaving(rec.info)
        ]
        free = self.t.unheld
        self._add(free, leaving, +1)
        if self.t.bound_ok(free) and self._trial(free, leaving) is not None:
            return (
                f"preemption: not needed, waiting for {len(leaving)} terminating pod(s) "
                "to free their nodes"
            )
        units = self._units()
        if not units:
            return None
        ceiling = self._ceiling(units, free, leaving)
        if ceiling is None:
            lower = sum(len(u.records) for u in units if u.whole)
            if r.reclaim is not None:
                return (
                    f"reclaim: cannot help, the gang does not fit even with the {lower} pod(s) "
                    "of queues above their fair share it could use evicted as far as their "
                    "fair shares allow"
                )
            return (
                f"preemption: cannot help, the gang does not fit even with all {lower} "
                "lower-priority pod(s) it could use evicted"
            )
        allowed, everything = ceiling
        chosen, placement = self._forward(allowed, everything, free, leaving)
        chosen, placement = self._reprieve(chosen, placement, free, leaving)
        return self._result(chosen, placement)

    def _ceiling(
        self, units: list[_Unit], free: npt.NDArray[np.int64], leaving: list[PodRecord]
    ) -> tuple[list[_Unit], list[_Unit]] | None:
        """The units of the lowest level (priority; for reclaim, victim queue then priority)
        whose eviction (all of them, as far as reclaim's floors allow) lets the gang place: the
        smallest possible highest victim priority. Also that largest set, which places."""
        for level in sorted({u.tier for u in units}):
            allowed = [u for u in units if u.tier <= level]
            for everything in self._largest(allowed):
                records = _records(everything)
                trial = free.copy()
                self._add(trial, records, +1)
                if self.t.bound_ok(trial) and self._trial(trial, leaving + records) is not None:
                    return allowed, everything
        return None

    def _largest(self, allowed: list[_Unit]) -> list[list[_Unit]]:
        """The largest sets of units to try: every whole unit; under reclaim's floors, as many
        as they allow — cheapest first, and (if that differs) biggest first, as a few big gangs
        may fit under a floor where many small ones use it up — then members above minMember
        of the gangs not taken whole."""
        wholes = [u for u in allowed if u.whole]
        if self.r.reclaim is None:
            return [wholes]
        cheapest = self._within_floors(allowed, lambda u: (u.tier, u.cost))
        biggest = self._within_floors(allowed, lambda u: (u.tier, -len(u.records), u.cost))
        same = {id(u) for u in cheapest} == {id(u) for u in biggest}
        return [cheapest] if same else [cheapest, biggest]

    def _within_floors(self, allowed: list[_Unit], order: Callable[[_Unit], Any]) -> list[_Unit]:
        wholes = [u for u in allowed if u.whole]
        taken = _Taken(self.r.reclaim)
        chosen: list[_Unit] = []
        for unit in sorted(wholes, key=order):
            if taken.fits([unit]):
                taken.move([unit], +1)
                chosen.append(unit)
        whole = {u.gang for u in chosen}
        extras: dict[VictimKey, int] = {}
        for unit in sorted((u for u in allowed if not u.whole), key=order):
            group = self._groups[unit.gang]
            if (
                unit.gang in whole
                or extras.get(unit.gang, 0) >= len(group.records) - group.min_member
            ):
                continue
            if taken.fits([unit]):
                taken.move([unit], +1)
                chosen.append(unit)
                extras[unit.gang] = extras.get(unit.gang, 0) + 1
        return chosen

    def _forward(
        self,
        allowed: list[_Unit],
        everything: list[_Unit],
        free: npt.NDArray[np.int64],
        leaving: list[PodRecord],
    ) -> tuple[list[_Unit], Placement]:
        """Victims added node by node, cheapest room first, until the gang places.

        Each node offers "room for one more member" at the price of the cheapest victims on it
        that make that room; the node with the lowest price per member gained goes next (its
        victims may free room elsewhere too, which the next prices see). Prices are kept in a
        heap and recomputed only for the nodes a choice touched."""
        on_row: dict[int, list[_Unit]] = {}
        gang_rows: dict[VictimKey, set[int]] = {}
        for unit in allowed:
            for row in unit.rows:
                on_row.setdefault(row, []).append(unit)
                gang_rows.setdefault(unit.gang, set()).add(row)
        for units in on_row.values():
            units.sort(key=lambda u: u.cost)
        chosen: dict[int, _Unit] = {}
        extras: dict[VictimKey, int] = {}
        wholes: set[VictimKey] = set()
        current = free.copy()
        taken = _Taken(self.r.reclaim)

        def superseded(unit: _Unit) -> list[_Unit]:
            return [u for u in chosen.values() if u.gang == unit.gang]

        def eligible(unit: _Unit) -> bool:
            if id(unit) in chosen or unit.gang in wholes:
                return False
            if unit.whole:
                return taken.fits([unit], superseded(unit))
            group = self._groups[unit.gang]
            if extras.get(unit.gang, 0) >= len(group.records) - group.min_member:
                return False
            return taken.fits([unit])

        version: dict[int, int] = {}
        heap: list[tuple[float, float, int, int]] = []

        def price(row: int) -> None:
            version[row] = version.get(row, 0) + 1
            now = self.t.slots(current[row], row)
            room = current[row].copy()
            cost, newest = 0.0, 0.0
            for unit in on_row.get(row, ()):
                if not eligible(unit):
                    continue
                for rec in unit.records:
                    if self._row(rec) == row:
                        room += self.index.fit(rec.vector)[: self.width]
                cost += unit.price
                newest = max(newest, -unit.cost[-1])
                gained = self.t.slots(room, row) - now
                if gained >= 1:
                    heapq.heappush(heap, (cost / gained, -newest, row, version[row]))
                    return

        for row in on_row:
            price(row)
        next_trial, step = 0, 1
        while heap:
            _, _, row, seen = heapq.heappop(heap)
            if version.get(row) != seen:
                continue
            now = self.t.slots(current[row], row)
            touched: set[int] = set()
            for unit in list(on_row.get(row, ())):
                if self.t.slots(current[row], row) > now:
                    break
                if not eligible(unit):
                    continue
                if unit.whole:
                    for other in superseded(unit):
                        del chosen[id(other)]
                        self._add(current, other.records, -1)
                        taken.move([other], -1)
                    wholes.add(unit.gang)
                else:
                    extras[unit.gang] = extras.get(unit.gang, 0) + 1
                chosen[id(unit)] = unit
                self._add(current, unit.records, +1)
                taken.move([unit], +1)
                touched |= gang_rows[unit.gang]
            for changed in touched:
                price(changed)
            if len(chosen) < next_trial or not self.t.bound_ok(current):
                continue
            units = list(chosen.values())
            placement = self._trial(current, leaving + _records(units))
            if placement is not None:
                return units, placement
            next_trial, step = len(chosen) + step, step * 2
        trial = free.copy()
        self._add(trial, _records(everything), +1)
        placement = self._trial(trial, leaving + _records(everything), counted=False)
        assert placement is not None  # _ceiling found exactly this set to fit
        return everything, placement

    def _reprieve(
        self,
        chosen: list[_Unit],
        placement: Placement,
        free: npt.NDArray[np.int64],
        leaving: list[PodRecord],
    ) -> tuple[list[_Unit], Placement]:
        """Give back every chosen unit the gang can do without, most expensive first."""
        for unit in sorted(chosen, key=lambda u: u.cost, reverse=True):
            if self.t.count >= self.max_trials:
                break
            rest = [u for u in chosen if u is not unit]
            trial = free.copy()
            self._add(trial, _records(rest), +1)
            if not self.t.bound_ok(trial):
                continue
            found = self._trial(trial, leaving + _records(rest))
            if found is not None:
                chosen, placement = rest, found
        return chosen, placement

    def _result(self, chosen: list[_Unit], placement: Placement) -> Plan:
        by_gang: dict[VictimKey, list[PodRecord]] = {}
        priority: dict[VictimKey, int] = {}
        for unit in sorted(chosen, key=lambda u: u.cost):
            by_gang.setdefault(unit.gang, []).extend(unit.records)
            priority[unit.gang] = max(priority.get(unit.gang, unit.priority), unit.priority)
        victims = []
        counter = self.r.cache.budgets.counter()
        past: set[Key] = set()
        for key, records in by_gang.items():
            group = self._groups[key]
            infos = tuple(rec.info for rec in records if rec.info is not None)
            past |= {p.key for p in infos if counter.take(p)}
            victims.append(
                VictimGang(
                    key[0],
                    key[1] if not key[1].startswith("/") else "",
                    priority[key],
                    infos,
                    len(records) >= len(group.records),
                    len(group.records),
                    group.min_member,
                    group.queue,
                )
            )
        victims.sort(key=lambda v: (-v.priority, v.namespace, v.group))
        return Plan(dict(placement.assignments), tuple(victims), frozenset(past), self.t.count)

    # --- candidates -----------------------------------------------------------------------

    def _units(self) -> list[_Unit]:
        """Lower-priority gangs with a bound member on a node the preemptor may use, and none
        placed but not yet bound (evicting the bound members of a gang whose others are in
        Permit or binding would leave it partial once they bind), nor marked as a victim by a
        preemption this process did not plan (its marks may yet be withdrawn)."""
        r = self.r
        own = r.gang.members
        groups: dict[VictimKey, _VictimGroup] = {}
        untouchable: set[VictimKey] = set()  # gangs no unit may come from
        rules = r.reclaim
        for rec in r.cache.pods.values():
            info = rec.info
            if info is None or info.key in own:
                continue
            if rec.state is not PodState.BOUND:
                untouchable.add(victim_key(info))
                continue
            if info.preemption_marked and not info.deleting and info.key not in r.claimed:
                # marked by a preemption this process did not plan (one cut short by a
                # restart, its marks maybe being withdrawn): were the rest of its gang taken
                # as a gang of their own, a withdrawal would leave it partial
                untouchable.add(victim_key(info))
                continue
            if self._leaving(info):
                continue
            queue = None
            if rules is not None:
                queue = rules.victim_queue(info)
                if queue is None:
                    continue
            elif info.priority >= self.priority or not r.may_evict(info):
                continue
            group = groups.setdefault(victim_key(info), _VictimGroup(queue=queue))
            group.records.append(rec)
        for key in untouchable:
            groups.pop(key, None)
        if rules is not None:
            for key in [k for k, g in groups.items() if _young(g, rules)]:
                del groups[key]
        self._groups = groups
        useful = self.t.useful_rows()
        units: list[_Unit] = []
        budgets = r.cache.budgets
        for key, group in groups.items():
            records = group.records
            rows = [self._row(rec) for rec in records]
            if not any(row is not None and useful[row] for row in rows):
                continue
            group.min_member = quorum(key, len(records), r.podgroups)
            stated = getattr(r.podgroups.get(key), "priority", None)  # the group's own, if any
            priority = (
                stated
                if stated is not None
                else max(rec.info.priority for rec in records if rec.info is not None)
            )
            tier = (
                (priority,)
                if rules is None or group.queue is None
                else (
                    rules.order(group.queue),
                    priority,
                )
            )
            whole = self._unit(key, tuple(records), True, priority, _rows(rows), tier, group)
            self._price(whole, budgets.violations(_infos(records)))
            units.append(whole)
            if len(records) > group.min_member:
                # the newest members first among equals (the last to join go first)
                newest = sorted(zip(records, rows, strict=True), key=_age, reverse=True)
                for rec, row in newest:
                    if row is None or not useful[row]:
                        continue  # an extra member elsewhere frees nothing for this gang
                    extra = self._unit(key, (rec,), False, priority, (row,), tier, group)
                    self._price(extra, budgets.violations(_infos([rec])))
                    units.append(extra)
        return units

    @staticmethod
    def _unit(
        key: VictimKey,
        records: tuple[PodRecord, ...],
        whole: bool,
        priority: int,
        rows: tuple[int, ...],
        tier: tuple[Any, ...],
        group: _VictimGroup,
    ) -> _Unit:
        amounts = total(p.requests for p in _infos(records)) if group.queue is not None else {}
        return _Unit(key, records, whole, priority, rows, tier, group.queue, amounts)

    def _leaving(self, info: PodInfo) -> bool:
        """Counted as free room, never as a victim again (:func:`leaving`), so two preemptions
        cannot each take a gang's "extras" and together leave it below its quorum."""
        return leaving(info, self.r.claimed)

    def _price(self, unit: _Unit, violations: int) -> None:
        """The unit's sort key, cheapest first: budget-keeping, fewest pods, fewest
        accelerators, least cpu / memory, lowest priority, most recently started; and its price,
        the first three as one number (a budget violation outweighs any number of pods, a pod
        any number of accelerators)."""
        unit.cost = cost = self._cost(unit, violations)
        unit.price = cost[0] * 1e12 + cost[1] * 1e6 + cost[2]

    def _cost(self, unit: _Unit, violations: int) -> tuple[Any, ...]:
        totals = np.zeros(self.width, dtype=np.int64)
        for rec in unit.records:
            totals += self.index.fit(rec.vector)[: self.width]
        names = self.index.names[: self.width]
        gpus = sum(int(v) for n, v in zip(names, totals, strict=True) if is_accelerator(n))
        cpu = int(totals[self.index.column("cpu")]) if self.index.has("cpu") else 0
        memory = int(totals[self.index.column("memory")]) if self.index.has("memory") else 0
        started = min((rec.info.start_time for rec in unit.records if rec.info), default=0.0)
        return (violations > 0, len(unit.records), gpus, cpu, memory, unit.priority, -started)

    # --- trials ---------------------------------------------------------------------------

    def _trial(
        self, free: npt.NDArray[np.int64], removed: list[PodRecord], counted: bool = True
    ) -> Placement | None:
        return self.t.place(free, removed, counted)

    def _row(self, rec: PodRecord) -> int | None:
        return self.r.cache.row_of(rec.node)

    def _add(self, free: npt.NDArray[np.int64], records: Sequence[PodRecord], sign: int) -> None:
        self.t.add(free, records, sign, self.r.cache.row_of)


def _age(item: tuple[PodRecord, int | None]) -> tuple[float, float, str]:
    info = item[0].info
    return (0.0, 0.0, "") if info is None else (info.start_time, info.creation_timestamp, info.name)


def _young(group: _VictimGroup, rules: ReclaimRules) -> bool:
    """Inside its queue's min runtime: counted from its latest member's start."""
    if group.queue is None:
        return False
    started = max((rec.info.start_time for rec in group.records if rec.info), default=0.0)
    return rules.protected(group.queue, started)


def _rows(rows: Sequence[int | None]) -> tuple[int, ...]:
    return tuple(sorted({row for row in rows if row is not None}))


def _records(units: Sequence[_Unit]) -> list[PodRecord]:
    seen: dict[Key, PodRecord] = {}
    for unit in units:
        for rec in unit.records:
            seen[rec.key] = rec
    return list(seen.values())


def _infos(records: Sequence[PodRecord]) -> list[PodInfo]:
    return [rec.info for rec in records if rec.info is not None]
