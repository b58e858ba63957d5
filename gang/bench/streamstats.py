"""The mixed-stream benchmark's figures, computed from what was observed — plain data, no I/O.

A big gang's wait alone says little: under a full cluster some wait is unavoidable, and what a
reservation promises is only that nothing queued *behind* a gang takes the capacity it was
about to get. So each big gang's wait is set against a theoretical minimum: the wait it would
have had if the cluster had served only the gangs created before it (ahead of it in a queue
ordered by age), with their actual nodes and finish times — each holding its capacity from the
gang's arrival (or its own start) until it finished, since a queue serves it first. Replaying
those pods is exact slot arithmetic per node over every resource a member requests, so the
figure can be checked by hand; the unit tests do just that. (``ahead_waiting`` says how many
gangs ahead were still waiting for their nodes at that instant.)

The price of reservations is idle capacity while a gang waits for its nodes to drain; backfill
is meant to win it back. Hence the second figure: the GPUs in use, integrated over the time some
big gang was waiting, divided by what the cluster had over that time.

Everything here takes lists of observed pod intervals and node allocatable (integer units, as
``gang.models.quantity.resource_units`` gives them), so it runs the same on a recorded run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby

Resources = Mapping[str, int]
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class PodSpan:
    """One pod's hold on a node, as observed: from its binding until it finished (Succeeded,
    Failed or deleted); ``finished`` None while it still held the node when observation ended."""

    node: str
    requests: Resources
    bound: float
    finished: float | None = None

    def holds_at(self, t: float) -> bool:
        """Bound at ``t`` and not finished by then."""
        return self.bound <= t and (self.finished is None or self.finished > t)


@dataclass(frozen=True, slots=True)
class GangRun:
    """One gang as observed: created (its last member) at ``created``; ``request`` is one
    member's requests; ``bound`` is its last member's binding, None unless all were bound."""

    name: str
    big: bool
    created: float
    size: int
    request: Resources
    bound: float | None
    pods: tuple[PodSpan, ...] = ()


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0..1) with linear interpolation between the closest ranks, as
    numpy's default; 0.0 for no values. (Big gangs are few; nearest-rank would jump.)"""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def member_slots(free: Resources, request: Resources) -> int:
    """How many members requesting ``request`` fit into ``free`` (every requested resource)."""
    counts = [free.get(res, 0) // amount for res, amount in request.items() if amount > 0]
    return max(0, min(counts)) if counts else 1 << 30


def fits(free_by_node: Iterable[Resources], request: Resources, count: int) -> bool:
    """``count`` members of shape ``request`` fit onto the nodes' free capacity."""
    left = count
    for free in free_by_node:
        left -= member_slots(free, request)
        if left <= 0:
            return True
    return left <= 0


def earliest_fit(
    allocatable: Mapping[str, Resources],
    occupants: Iterable[PodSpan],
    request: Resources,
    count: int,
    since: float,
    until: float | None = None,
) -> float | None:
    """The earliest ``t >= since`` at which ``count`` members of shape ``request`` fit on the
    nodes, occupied by the ``occupants`` (the pods of gangs ahead) not finished by ``t`` —
    whether bound by then or later: a queue serves the gangs ahead first, so their capacity is
    theirs before the gang's. None if no instant up to ``until`` has room. Candidate instants:
    ``since`` and every finish after it.

    Pods on nodes outside ``allocatable`` are ignored (the gang could not use those nodes).
    """
    free = {node: dict(amounts) for node, amounts in allocatable.items()}
    changes: list[tuple[float, str, Resources, int]] = []
    for pod in occupants:
        if pod.node not in free or (pod.finished is not None and pod.finished <= pod.bound):
            continue
        if pod.finished is not None and pod.finished <= since:
            continue  # gone before the gang arrived
        # holding its node at ``since``, or bound later: its gang is ahead in the queue, so
        # its capacity is its own first
        _take(free[pod.node], pod.requests, 1)
        if pod.finished is not None:
            changes.append((pod.finished, pod.node, pod.requests, -1))
    if fits(free.values(), request, count):
        return since
    changes.sort(key=_instant)
    for t, together in groupby(changes, key=_instant):
        if until is not None and t > until:
            return None
        for _, node, requests, sign in together:  # the state at t: every change at t applied
            _take(free[node], requests, sign)
        if fits(free.values(), request, count):
            return t
    return None


def _instant(change: tuple[float, str, Resources, int]) -> float:
    return change[0]


def _take(free: dict[str, int], requests: Resources, sign: int) -> None:
    for res, amount in requests.items():
        free[res] = free.get(res, 0) - sign * amount


def merge(windows: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``[start, end]`` windows as disjoint sorted windows (empty ones dropped)."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(w for w in windows if w[1] > w[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def utilisation(
    spans: Iterable[PodSpan],
    windows: Iterable[tuple[float, float]],
    capacity: int,
    end: float,
    resource: str = GPU,
) -> float:
    """``resource`` held by the pods (each from binding to finish, or to ``end`` if it never
    finished), integrated over the union of ``windows``, divided by ``capacity`` times the
    union's length. 0.0 for an empty union or no capacity."""
    union = merge(windows)
    length = sum(b - a for a, b in union)
    if length <= 0 or capacity <= 0:
        return 0.0
    held = 0.0
    for pod in spans:
        amount = pod.requests.get(resource, 0)
        if not amount:
            continue
        start, stop = pod.bound, end if pod.finished is None else pod.finished
        for a, b in union:
            overlap = min(stop, b) - max(start, a)
            if overlap > 0:
                held += overlap * amount
    return held / (capacity * length)


def overcommitted_during(
    allocatable: Mapping[str, Resources], spans: Iterable[PodSpan]
) -> list[str]:
    """Nodes whose pods' requests exceeded their allocatable at some observed instant, sorted.

    Instants are replayed in time order; at equal times finishes go before bindings (a binding
    that used capacity freed at the same instant came after the release it needed).
    """
    used: dict[str, dict[str, int]] = {node: {} for node in allocatable}
    changes: list[tuple[float, int, str, Resources]] = []
    for pod in spans:
        if pod.node not in used or (pod.finished is not None and pod.finished <= pod.bound):
            continue
        changes.append((pod.bound, 1, pod.node, pod.requests))
        if pod.finished is not None:
            changes.append((pod.finished, -1, pod.node, pod.requests))
    changes.sort(key=lambda change: (change[0], change[1]))
    over: set[str] = set()
    for _, sign, node, requests in changes:
        on_node = used[node]
        for res, amount in requests.items():
            on_node[res] = on_node.get(res, 0) + sign * amount
            if sign > 0 and on_node[res] > allocatable[node].get(res, 0):
                over.add(node)
    return sorted(over)


@dataclass(slots=True)
class BigGangFigures:
    name: str
    created: float
    bound: bool
    #: seconds from creation to its last member's binding (or to the end, if never bound)
    wait: float
    #: the theoretical minimum wait (None: no instant before the end had room)
    min_wait: float | None
    #: wait / min_wait, None where the minimum is below ``ratio_floor`` (latency, not queueing)
    ratio: float | None
    #: bound within the target: ``wait <= max(factor * min_wait, min_wait + allowance)``
    within_target: bool
    #: big gangs created before it still not (wholly) bound at its minimum's instant (counted
    #: on the nodes they later got, as a queue serves them first)
    ahead_waiting: int = 0


@dataclass(slots=True)
class StreamFigures:
    big_created: int = 0
    big_bound: int = 0
    small_created: int = 0
    small_bound: int = 0
    big_wait_p50: float = 0.0
    big_wait_p95: float = 0.0
    big_wait_max: float = 0.0
    big_min_wait_p50: float = 0.0
    big_min_wait_max: float = 0.0
    #: over the big gangs with a ratio (see ``BigGangFigures.ratio``); None when there is none
    big_ratio_p50: float | None = None
    big_ratio_max: float | None = None
    big_within_target: int = 0
    #: GPU utilisation over the union of the big gangs' waits, and over the whole run
    utilisation_while_waiting: float = 0.0
    utilisation_overall: float = 0.0
    small_wait_p50: float = 0.0
    small_wait_p95: float = 0.0
    #: nodes over-committed at some instant of the run (by the observed intervals)
    overcommitted_during_run: list[str] = field(default_factory=list)
    big_gangs: list[BigGangFigures] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Targets:
    """What counts as "bound as soon as it could be": the issue's 1.2x, plus an allowance for
    the scheduler's own latency (a gang with no minimum wait still takes a cycle to bind)."""

    factor: float = 1.2
    allowance: float = 1.0
    #: minimum waits below this are latency, not queueing: no ratio is computed for them
    ratio_floor: float = 1.0


def analyse(
    gangs: Sequence[GangRun],
    allocatable: Mapping[str, Resources],
    end: float,
    targets: Targets | None = None,
    resource: str = GPU,
) -> StreamFigures:
    """The run's figures. ``gangs`` in creation order (the queue's order: the theoretical
    minimum of a gang counts the gangs before it); times in seconds on one clock; ``end`` is
    when observation stopped."""
    targets = targets or Targets()
    figures = StreamFigures()
    capacity = sum(amounts.get(resource, 0) for amounts in allocatable.values())
    ahead: list[PodSpan] = []
    bound_ahead: list[float | None] = []
    windows: list[tuple[float, float]] = []
    small_waits: list[float] = []
    for gang in gangs:
        if gang.big:
            figures.big_created += 1
            big = _big_gang(gang, ahead, allocatable, end, targets)
            if big.min_wait is not None:
                fit = gang.created + big.min_wait
                big.ahead_waiting = sum(1 for b in bound_ahead if b is None or b > fit)
            figures.big_gangs.append(big)
            figures.big_bound += big.bound
            windows.append((gang.created, gang.created + big.wait))
        else:
            figures.small_created += 1
            if gang.bound is not None:
                figures.small_bound += 1
                small_waits.append(max(0.0, gang.bound - gang.created))
        ahead.extend(gang.pods)
        bound_ahead.append(gang.bound)
    waits = [g.wait for g in figures.big_gangs]
    minimums = [g.min_wait for g in figures.big_gangs if g.min_wait is not None]
    ratios = [g.ratio for g in figures.big_gangs if g.ratio is not None]
    figures.big_wait_p50, figures.big_wait_p95 = percentile(waits, 0.5), percentile(waits, 0.95)
    figures.big_wait_max = max(waits, default=0.0)
    figures.big_min_wait_p50 = percentile(minimums, 0.5)
    figures.big_min_wait_max = max(minimums, default=0.0)
    if ratios:
        figures.big_ratio_p50, figures.big_ratio_max = percentile(ratios, 0.5), max(ratios)
    figures.big_within_target = sum(g.within_target for g in figures.big_gangs)
    figures.utilisation_while_waiting = utilisation(ahead, windows, capacity, end, resource)
    start = min((g.created for g in gangs), default=end)
    figures.utilisation_overall = utilisation(ahead, [(start, end)], capacity, end, resource)
    figures.small_wait_p50 = percentile(small_waits, 0.5)
    figures.small_wait_p95 = percentile(small_waits, 0.95)
    figures.overcommitted_during_run = overcommitted_during(allocatable, ahead)
    return figures


def _big_gang(
    gang: GangRun,
    ahead: Sequence[PodSpan],
    allocatable: Mapping[str, Resources],
    end: float,
    targets: Targets,
) -> BigGangFigures:
    wait = max(0.0, (end if gang.bound is None else gang.bound) - gang.created)
    # (up to the end, not the binding: a minimum after the actual binding is a finding)
    fit = earliest_fit(allocatable, ahead, gang.request, gang.size, gang.created, end)
    min_wait = None if fit is None else fit - gang.created
    ratio = None
    if gang.bound is not None and min_wait is not None and min_wait >= targets.ratio_floor:
        ratio = wait / min_wait
    within = (
        gang.bound is not None
        and min_wait is not None
        and wait <= max(targets.factor * min_wait, min_wait + targets.allowance)
    )
    return BigGangFigures(
        gang.name, gang.created, gang.bound is not None, wait, min_wait, ratio, within
    )
