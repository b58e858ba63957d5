"""Reservation and backfill: a big gang that fits the cluster but not now is never starved.

Why this exists: on a busy cluster a gang of 16 whole nodes waits for 16 nodes to drain at once,
while every GPU that frees up goes to the next small gang that fits in it — the big gang waits
for ever (with Coscheduling too). A reservation breaks that: when a gang does not fit now but
would once running pods finish, the nodes that will be free for it soonest are *held* for it.
Nothing new goes onto held capacity except *backfill*: a gang whose declared run time ends before
the reservation is expected to start. Gangs that fit on unheld capacity keep flowing.

The guarantee: a gang that fits the empty cluster and is at the head of the queue is bound as
soon as the pods on its reserved nodes have finished (or its reservation expires), whatever
arrives behind it.

How the nodes are chosen (:class:`ReservationPlanner`, pure, on the snapshot): running pods are
ordered by expected end — from their declared run time (the ``gang.scheduling/expected-run-seconds``
annotation or ``activeDeadlineSeconds``), else "as long again as it has run so far, at least a
minute" — then by priority. Holds of reservations ahead in the queue join that order: each
comes free once its gang has started and run its declared time. The shortest prefix of that
order whose ending lets the gang place is found by binary search, first on a resource-only
bound, then with the real placement (every placement rule holds). The nodes that placement used
are held, each for the requests of the members planned on it; the expected start is when the
last pod (or hold) the gang must wait for on them ends.

Moves (:func:`slipped`, ``ReservationBook.move``): each time the gang is tried its start is
refreshed from the pods and holds on its nodes now; once it has slipped past the planned start by
more than its margin, the nodes are chosen afresh, and the reservation moves if they free sooner.
Its expiry stays, so a move never lengthens a hold.

Bounds (:class:`ReservationBook`): reservations are made in queue order, at most
``max_reservations`` at a time holding at most ``reservation_max_share`` of the cluster (of its
scarcest resource, :func:`held_share`: holds stacked on one node count up to the node, as they
follow one another in time; a gang ahead in the queue takes the place of the last reservation
behind it); none for a gang that would not fit the empty cluster (an impossible gang blocks
nobody); a reservation that has not become placeable within ``max_reservation_seconds`` is
dropped and not renewed for as long again, so nothing blocks for ever. A hold applies only to
gangs *behind* the reserving gang in the queue: a higher-priority arrival sorts ahead and goes
first, and gang-aware preemption is tried before any reservation.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, NamedTuple

import numpy as np

from gang.scheduling.gang import Backfill, Gang, GangKey, Reservation
from gang.scheduling.histogram import FULL_GANG_BUCKETS, DurationHistogram
from gang.scheduling.placement import Placement
from gang.scheduling.trials import Free, Trials, usable
from gang.state.cache import ClusterCache, PodRecord, PodState, Snapshot
from gang.state.podinfo import PodInfo

#: the least a pod that declares no run time is expected to run on (a pod that started a
#: moment ago is not about to finish just because its age is small)
UNDECLARED_FLOOR_SECONDS: Final = 60.0
#: placements one reservation decision may run (each binary-search step is one)
MAX_TRIALS: Final = 24
#: backfill decisions kept per reservation for /debug
BACKFILLS_KEPT: Final = 16
#: a hold ahead sorts after running pods ending at the same moment (priorities are int32)
HOLD_PRIORITY: Final = 1 << 31
#: a reservation has *slipped* when its refreshed start is later than planned by more than this
#: many seconds or this share of the wait it was planned with, whichever is more; its nodes are
#: then chosen afresh (at most every :data:`MOVE_CHECK_SECONDS`) and it moves if the new
#: choice starts earlier by as much
SLIP_SECONDS: Final = 1.0
SLIP_SHARE: Final = 0.1
MOVE_CHECK_SECONDS: Final = 3.0


# --- estimates ----------------------------------------------------------------------------------


def expected_end(pod: PodInfo, now: float) -> float:
    """When a bound pod is expected to finish (epoch seconds, never before ``now``).

    A pod being deleted or preempted goes now; one not running yet starts now. Declared run
    time counts from the start; without one, a pod is expected to run as long again as it has
    run so far (the median of an unknown lifetime, the same estimate for everyone), at least
    :data:`UNDECLARED_FLOOR_SECONDS`."""
    if pod.deleting or pod.preemption_marked:
        return now
    started = pod.start_time if pod.phase == "Running" and pod.start_time else now
    if pod.declared_run is not None:
        return max(now, started + pod.declared_run)
    return now + max(now - started, UNDECLARED_FLOOR_SECONDS)


def declared_run(pods: Iterable[PodInfo]) -> float | None:
    """A gang's declared run time: the longest of its members', None if any declares none."""
    longest = 0.0
    for pod in pods:
        if pod.declared_run is None:
            return None
        longest = max(longest, pod.declared_run)
    return longest or None


def ready_time(
    room: Free, need: Free, pods: Sequence[tuple[float, Free]], now: float
) -> tuple[float, int] | None:
    """When ``need`` fits in ``room`` on one node as its ``pods`` (expected end, requests; in
    order of end) finish: the moment and how many must finish; None if never."""
    room = room.copy()
    when, waited = now, 0
    for end, vector in pods:
        if bool(np.all(room >= need)):
            return when, waited
        room += vector
        when, waited = max(when, end), waited + 1
    return (when, waited) if bool(np.all(room >= need)) else None


# --- the decision -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReservePlan:
    """Where to hold capacity for a gang, and when it is expected to place."""

    #: node → the capacity held there
    held: dict[str, Free]
    start: float
    waiting_for: int
    trials: int


class NoReservation(NamedTuple):
    why: str
    #: the gang does not fit the cluster even if it were empty (not a matter of time)
    never: bool = False


NEVER_FITS: Final = "the gang does not fit this cluster even with every node empty"


class Ending(NamedTuple):
    """Capacity expected to come free on a node: a running pod finishing (``record``), or a
    reservation ahead whose gang will have run (``record`` None)."""

    end: float
    priority: int
    node: str
    vector: Free
    record: PodRecord | None
    row: int  # the node's row in the cache


#: endings by expected end, then lowest priority first
_END_ORDER: Final = operator.itemgetter(0, 1)


def slip_margin(reservation: Reservation) -> float:
    """Seconds of slip a reservation tolerates, and the gain a move must bring."""
    return max(SLIP_SECONDS, SLIP_SHARE * (reservation.planned - reservation.made))


def slipped(reservation: Reservation, now: float) -> bool:
    """Whether the reservation's refreshed start has slipped past its plan by more than its
    margin, and it is time to look for better nodes (see :data:`SLIP_SECONDS`).

    Why: its nodes were chosen on estimates. A gang ahead of it in the queue that found no
    other room lands on them (its own reservation, which the plan counted on, then frees
    elsewhere), a pod runs past its estimate, a backfill is placed there: the nodes it holds
    may now free later than others would. Holding them regardless makes the gang wait for
    what a fresh choice avoids; Slurm's backfill plans every job afresh each cycle for the
    same reason."""
    return (
        now >= reservation.replan_after
        and reservation.start - reservation.planned > slip_margin(reservation)
    )


def hold_ends(reservation: Reservation, now: float) -> float:
    """When a reservation's hold is expected to come free: its gang starts at ``start`` (not
    before now) and runs its declared run time, else :data:`UNDECLARED_FLOOR_SECONDS` (the
    estimate for a pod that has just started)."""
    run = UNDECLARED_FLOOR_SECONDS if reservation.run is None else reservation.run
    return max(now, reservation.start) + run


class ReservationPlanner:
    """One reservation decision for a gang that did not place (state lives for one call).

    ``holds`` are the reservations ahead of the gang, whose holds the trials' snapshot already
    takes off its free capacity. They are planned through, not around: each hold comes free
    when its gang will have run (:func:`hold_ends`), in the same order as the running pods. A
    planner that counted them held for ever refused a big gang arriving behind a few small
    ones ("would not fit even once every running pod has finished") or planned it on nodes
    that free later than the held ones."""

    def __init__(
        self,
        trials: Trials,
        cache: ClusterCache,
        own: Mapping[tuple[str, str], PodInfo],
        now: float,
        holds: Sequence[Reservation] = (),
        max_trials: int = MAX_TRIALS,
    ) -> None:
        self.t = trials
        self.cache = cache
        self.own = own
        self.now = now
        self.holds = holds
        self.max_trials = max_trials

    def plan(self) -> ReservePlan | NoReservation:
        t = self.t
        if not t.fits_empty():
            return NoReservation(NEVER_FITS, never=True)
        endings = self._endings()
        count = len(endings)
        rows = np.fromiter((e.row for e in endings), dtype=np.int64, count=count)
        vectors = (
            np.stack([e.vector for e in endings])
            if endings
            else np.zeros((0, t.width), dtype=np.int64)
        )
        pods = np.fromiter((e.record is not None for e in endings), dtype=np.bool_, count=count)
        base, holds = t.unheld, t.base.held

        def after(k: int) -> Variant:
            free = base.copy()
            finished = pods[:k]
            np.add.at(free, rows[:k][finished], vectors[:k][finished])
            held = None
            if holds is not None:
                held = holds.copy()
                np.subtract.at(held, rows[:k][~finished], vectors[:k][~finished])
            removed = [e.record for e in endings[:k] if e.record is not None]
            return Variant(free, held, removed)

        if not t.bound_ok(*after(count)[:2]):
            return NoReservation(
                "it would not fit even once every running pod and every reservation ahead of it "
                "has finished: the rest is held by other gangs (Permit waits, nominations)"
            )
        low, high = 0, count  # the shortest prefix passing the resource-only bound
        while low < high:
            mid = (low + high) // 2
            if t.bound_ok(*after(mid)[:2]):
                high = mid
            else:
                low = mid + 1
        found = self._search(low, count, after)
        if found is None:
            return NoReservation(
                f"no placement found within {self.max_trials} trials once running pods finish"
            )
        k, assignments = found
        held: dict[str, Free] = {}
        for key, node in assignments.items():
            vec = t.vectors[key]
            held[node] = held[node] + vec if node in held else vec.copy()
        start, waiting = self._wait(held, base, endings[:k])
        return ReservePlan(held, start, waiting, t.count)

    def _search(
        self, low: int, count: int, after: Callable[[int], Variant]
    ) -> tuple[int, dict[tuple[str, str], str]] | None:
        """The shortest prefix (from ``low``) whose ending lets the gang place: galloping,
        then binary search between the last failure and the first success."""
        t = self.t

        def place(k: int) -> Placement | None:
            variant = after(k)
            return t.place(variant.unheld, variant.removed, held=variant.held)

        failed, probe, step = low - 1, low, 1
        success: tuple[int, dict[tuple[str, str], str]] | None = None
        while t.count < self.max_trials:
            placement = place(probe)
            if placement is not None:
                success = (probe, placement.assignments)
                break
            failed = probe
            if probe >= count:
                return None
            probe, step = min(count, probe + step), step * 2
        if success is None:
            return None
        low, high = failed + 1, success[0]
        while low < high and t.count < self.max_trials:
            mid = (low + high) // 2
            placement = place(mid)
            if placement is not None:
                high, success = mid, (mid, placement.assignments)
            else:
                low = mid + 1
        return success

    def _endings(self) -> list[Ending]:
        """Bound pods that will finish and the holds ahead, in order of expected end, then
        lowest priority. Pods assumed by other gangs (in Permit, nominated) are not waited for:
        they have yet to run."""
        found: list[Ending] = []
        # one pass over every bound pod, for each reservation planned (up to the book's limit
        # while a backlog waits): the lookups are taken out of the loop
        nodes, own, now, vector_of = self.cache.nodes, self.own, self.now, self.t.vector
        width, bound = self.t.width, PodState.BOUND
        for rec in self.cache.pods.values():
            info = rec.info
            if rec.state is not bound or info is None or rec.key in own:
                continue
            entry = nodes.get(rec.node)
            if entry is None:
                continue
            found.append(
                Ending(
                    expected_end(info, now), info.priority, rec.node, vector_of(rec), rec, entry.row
                )
            )
        for res in self.holds:
            end = hold_ends(res, self.now)
            for node, vec in res.held.items():
                row = self._row_of(node)
                if row >= 0:
                    vector = self.cache.index.fit(vec)[:width]
                    found.append(Ending(end, HOLD_PRIORITY, node, vector, None, row))
        found.sort(key=_END_ORDER)
        return found

    def _wait(
        self, held: Mapping[str, Free], base: Free, endings: Sequence[Ending]
    ) -> tuple[float, int]:
        """The expected start (the last ending to wait for on the held nodes) and how many pods
        and holds the gang waits for there, counting only those each node needs to end."""
        on_node: dict[str, list[tuple[float, Free]]] = {}
        for ending in endings:
            if ending.node in held:
                on_node.setdefault(ending.node, []).append((ending.end, ending.vector))
        start, waiting = self.now, 0
        holds = self.t.base.held
        last = max((e.end for e in endings), default=self.now)
        for node, need in held.items():
            row = self._row_of(node)
            room = base[row] if holds is None else base[row] - holds[row]
            found = ready_time(room, need, on_node.get(node, []), self.now)
            when, count = found if found is not None else (last, 0)
            start, waiting = max(start, when), waiting + count
        return start, waiting

    def _row_of(self, node: str) -> int:
        row = self.cache.row_of(node)
        return -1 if row is None else row


class Variant(NamedTuple):
    """The cluster once a prefix of the endings has come: free capacity before holds, the
    holds still in force (None: none at all), and the pods gone."""

    unheld: Free
    held: Free | None
    removed: list[PodRecord]


#: the share of the cluster some holds take together (``held_share`` on the cache)
Measure = Callable[[Iterable[Mapping[str, Free]]], float]


# --- the book of reservations -------------------------------------------------------------------


class ReservationBook:
    """The reservations in force, their bounds, and what they hold against whom."""

    def __init__(self, limit: int = 32, share: float = 0.8) -> None:
        self.limit = limit
        self.share = share
        #: gang → its reservation (see ``Reservation``'s invariant)
        self.by_gang: dict[GangKey, Reservation] = {}
        #: counters for /metrics
        self.made = 0
        self.expired = 0
        self.yielded = 0
        self.moved = 0
        self.backfills = 0
        #: seconds from a reservation being made to its gang placing
        self.waits = DurationHistogram(FULL_GANG_BUCKETS)
        #: bumped whenever a reservation is made or dropped (a refusal judged before is stale)
        self.version = 0

    def __len__(self) -> int:
        return len(self.by_gang)

    def ahead_of(self, gang: GangKey, sort_key: tuple[object, ...]) -> list[Reservation]:
        """The reservations of other gangs that sort before ``sort_key`` in the queue."""
        return [
            r
            for r in self.by_gang.values()
            if r.gang != gang and sorts_before(r.sort_key, sort_key)
        ]

    def held_nodes(self) -> set[str]:
        return {n for r in self.by_gang.values() for n in r.held}

    def against(
        self, gang: Gang, sort_key: tuple[object, ...], run: float | None, now: float
    ) -> tuple[list[Reservation], list[Reservation]]:
        """The reservations ahead of ``gang`` in the queue: those that hold against it, and
        those it may backfill (its declared run time ends before they are expected to start)."""
        holding: list[Reservation] = []
        backfill: list[Reservation] = []
        for key, res in self.by_gang.items():
            if key == gang.key or not sorts_before(res.sort_key, sort_key):
                continue
            if run is not None and now + run <= res.start:
                backfill.append(res)
            else:
                holding.append(res)
        return holding, backfill

    def room_for(self, sort_key: tuple[object, ...], measure: Measure) -> str | None:
        """Before planning: None if a reservation could be admitted (possibly in place of ones
        behind it), else why not. ``measure`` gives the share of the cluster holds take."""
        ahead = [r for r in self.by_gang.values() if not sorts_before(sort_key, r.sort_key)]
        if len(ahead) >= self.limit:
            return f"{self.limit} reservation(s) ahead of it in the queue already (the limit)"
        held = measure(r.held for r in ahead)
        if held >= self.share:
            return (
                f"reservations ahead of it hold {held:.0%} of the cluster already "
                f"(the limit is {self.share:.0%})"
            )
        return None

    def admit(
        self,
        gang: GangKey,
        sort_key: tuple[object, ...],
        held: Mapping[str, Free],
        measure: Measure,
    ) -> list[Reservation] | str:
        """Whether a reservation holding ``held`` may be made: the reservations behind it that
        must give way (last in queue order first), or why not."""
        share = measure([held])
        if share > self.share:
            return (
                f"it would hold {share:.0%} of the cluster, more than the {self.share:.0%} "
                "reservations may hold"
            )
        others = sorted((r for k, r in self.by_gang.items() if k != gang), key=lambda r: r.sort_key)
        yielding: list[Reservation] = []
        while others:
            together = measure([held, *(r.held for r in others)])
            if len(others) < self.limit and together <= self.share:
                return yielding
            last = others[-1]
            if not sorts_before(sort_key, last.sort_key):
                return (
                    f"{len(others)} reservation(s) ahead of it hold "
                    f"{measure(r.held for r in others):.0%} of the cluster; limits: "
                    f"{self.limit} reservations, {self.share:.0%} of the cluster"
                )
            yielding.append(others.pop())
        return yielding

    def add(self, gang: Gang, reservation: Reservation) -> None:
        self.drop(gang)
        self.by_gang[gang.key] = reservation
        gang.reservation = reservation
        self.made += 1
        self.version += 1

    def move(self, reservation: Reservation, plan: ReservePlan, share: float) -> None:
        """The reservation holds ``plan``'s nodes from now on (made and expiry unchanged: a
        move never extends how long a gang may hold capacity)."""
        reservation.held = plan.held
        reservation.start = reservation.planned = plan.start
        reservation.waiting_for = plan.waiting_for
        reservation.share = share
        reservation.moves += 1
        self.moved += 1
        self.version += 1

    def drop(self, gang: Gang) -> Reservation | None:
        reservation = self.by_gang.pop(gang.key, None)
        if reservation is not None:
            reservation.cancel()
            self.version += 1
        gang.reservation = None
        return reservation

    def backfilled(
        self,
        reservations: Sequence[Reservation],
        who: str,
        nodes: Iterable[str],
        run: float,
        now: float,
    ) -> list[Reservation]:
        """Record a placement of gang ``who`` on ``nodes``: the reservations it backfilled."""
        placed = set(nodes)
        into = [r for r in reservations if placed & set(r.held)]
        first = False
        for res in into:
            # a gang placed again (members arriving one by one) is one decision, updated
            kept = [b for b in res.backfills if b.gang != who]
            first = first or len(kept) == len(res.backfills)
            decision = Backfill(who, len(placed & set(res.held)), run, now, now + run, res.start)
            res.backfills = [*kept, decision][-BACKFILLS_KEPT:]
        if first:
            self.backfills += 1
        return into


def refreshed_start(
    reservation: Reservation,
    cache: ClusterCache,
    now: float,
    ahead: Sequence[Reservation] = (),
) -> tuple[float, int] | None:
    """The reservation's expected start and pods waited for, from the pods on its nodes now
    and the holds of the reservations ``ahead`` of it there; None if a node is gone or could
    no longer hold its share once they have ended.

    Pods placed on its nodes since it was made (backfill, gangs ahead of it) are assumed
    until the informer shows them bound; they count like bound ones, each ending its expected
    run time from now. Leaving them out made a backfilled node look as if it could never hold
    the share again, so the reservation was dropped and planned afresh on other nodes — its
    wait started over. Leaving out the holds ahead made the start look near while the gang
    waited behind them, refusing backfill that would have ended in time."""
    width = cache.allocatable.shape[1]
    start, waiting = now, 0
    for node, held in reservation.held.items():
        row = cache.row_of(node)
        if row is None:
            return None
        room = cache.allocatable[row] - cache.requested[row]
        endings = [
            (expected_end(rec.info, now), cache.index.fit(rec.vector)[:width])
            for rec in cache.pods_on(node)
            if rec.info is not None  # bound, or assumed: placed since, and will run too
        ]
        for res in ahead:
            vec = res.held.get(node)
            if vec is not None:
                hold = cache.index.fit(vec)[:width]
                room = room - hold
                endings.append((hold_ends(res, now), hold))
        endings.sort(key=lambda e: e[0])
        found = ready_time(room, cache.index.fit(held)[:width], endings, now)
        if found is None:
            return None
        start, waiting = max(start, found[0]), waiting + found[1]
    return start, waiting


def apply_holds(
    snap: Snapshot,
    holding: Sequence[Reservation],
    cache: ClusterCache,
    kept: Iterable[tuple[PodInfo, str]] = (),
) -> Snapshot:
    """``snap`` with the capacity ``holding`` reserves taken off its free (never below zero),
    except the capacity in ``kept`` (what the cycle's gang held until it began: its dropped
    placeholders and nominations). The free before and the holds are kept for trials."""
    if not holding:
        return snap
    width = snap.free.shape[1]
    held = held_by_row((res.held for res in holding), cache, snap.free.shape)
    own: Free | None = None
    for pod, node in kept:
        row = cache.row_of(node)
        if row is not None:
            if own is None:
                own = np.zeros_like(snap.free)
            own[row] += cache.index.requests_vector(pod.requests)[:width]
    free = usable(snap.free, held, own)
    return replace(snap, free=free, unheld=snap.free, held=held, kept=own)


def avoiding(snap: Snapshot, others: Sequence[Reservation], cache: ClusterCache) -> Snapshot:
    """``snap`` marking the nodes where ``others`` (reservations not holding against the
    cycle's gang) hold capacity, for placement to use last (``Snapshot.avoid``)."""
    rows = [row for res in others for node in res.held if (row := cache.row_of(node)) is not None]
    if not rows:
        return snap
    avoid = np.zeros(len(snap.names), dtype=np.bool_)
    avoid[rows] = True
    return replace(snap, avoid=avoid)


def sorts_before(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Queue order: ``a`` sorts strictly before ``b``."""
    return a < b


def held_share(holds: Iterable[Mapping[str, Free]], cache: ClusterCache) -> float:
    """The largest fraction of any resource of the cluster that ``holds`` hold together.

    Holds on one node count up to its allocatable, never beyond: a gang behind plans through
    the holds ahead of it, so holds stacked on a node follow one another in time. Summing them
    counted the same GPUs once per gang queued for them — a queue of small gangs seemed to
    hold most of the cluster and refused the big gang behind them its reservation."""
    held = held_by_row(holds, cache, cache.allocatable.shape)
    total = np.minimum(held, cache.allocatable).sum(axis=0)
    capacity = cache.allocatable[cache.valid].sum(axis=0)
    positive = capacity > 0
    return float(np.max(total[positive] / capacity[positive], initial=0.0))


def held_by_row(
    holds: Iterable[Mapping[str, Free]], cache: ClusterCache, shape: tuple[int, ...]
) -> Free:
    """The holds summed per node row (a ``shape`` matrix: rows x resources); holds on nodes
    gone since are left out."""
    width = shape[1]
    held = np.zeros(shape, dtype=np.int64)
    for hold in holds:
        for node, vec in hold.items():
            row = cache.row_of(node)
            if row is not None:
                held[row] += cache.index.fit(vec)[:width]
    return held
