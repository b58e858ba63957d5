"""A gang: the pods of one PodGroup (or one lone pod) and where each of them stands.

Member states are derived from two facts, so they cannot disagree: what the API last said of
the pod (``members``) and which pods this scheduler has reserved a node for (``reserved``).

    pending   ours, unassigned, not deleting, not reserved — waits for placement
    reserved  assumed in the cache on a node, waiting in Permit or being bound
    bound     assigned to a node (by us or anyone) and not finished

While fewer members exist than ``minMember``, the gang also holds *placeholders*: reservations
shaped like its members for the ones not created yet. A gang thus holds the capacity of its whole
quorum or nothing, so two half-created gangs can never each hold part of what both need and
deadlock until their timeouts. Placeholders are re-planned together with the real members in the
same cycle, and are never bound.

Invariant: a key is in ``reserved`` only while the API shows the pod unassigned; the moment
the informer reports it bound, it leaves ``reserved`` (the cache turns ASSUMED into BOUND).
A member past Permit is in ``binding`` from its first POST until the informer shows it bound
(or it is forgotten): its binding may already have succeeded (``bound_unseen``), so it is never
unreserved, re-planned or POSTed again while the confirming watch event is on its way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from gang.models.podgroup import PodGroupInfo
from gang.models.queueapis import DEFAULT_QUEUE
from gang.models.topologyapis import TopologyConstraint
from gang.queue.tree import Membership
from gang.scheduling.members import Members
from gang.state.podinfo import PodInfo

Key = tuple[str, str]


class PlacementFailure(Protocol):
    """Why a gang's last placement failed, as explain reads it (the placer's ``Unplaceable``
    has this shape; a Protocol so this module, under the plugin API, imports no placement)."""

    @property
    def message(self) -> str: ...

    @property
    def placed(self) -> int:
        """How many needed members fitted before one did not."""
        ...

    @property
    def needed(self) -> int: ...

    @property
    def member(self) -> Key | None:
        """The member that did not fit."""
        ...

    @property
    def reasons(self) -> dict[str, int]:
        """Per Filter reason, the number of nodes that rejected ``member`` for it."""
        ...


class GangKey(NamedTuple):
    """``(namespace, group, pod)``: ``group`` set for a PodGroup, ``pod`` set for a lone pod."""

    namespace: str
    group: str
    pod: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.group or self.pod}"


def gang_key_of(pod: PodInfo) -> GangKey:
    if pod.group:
        return GangKey(pod.namespace, pod.group)
    return GangKey(pod.namespace, "", pod.name)


@dataclass(eq=False)
class Preempting:
    """A preemption under way: the victim pods (key → uid) whose going frees the nominated
    capacity, and the timer that gives the nomination up if they do not go in time."""

    victims: dict[Key, str]
    summary: str
    timer: asyncio.TimerHandle | None = None
    #: across queues, by fair share (reclaim), not by priority
    reclaim: bool = False

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = None


@dataclass(frozen=True, slots=True)
class Backfill:
    """A gang placed on capacity held for another gang's reservation: its declared run time
    ends before the reservation is expected to start."""

    gang: str
    nodes: int
    run_seconds: float
    #: epoch seconds: when it was placed, when it is expected to end, the reservation's start
    at: float
    ends_by: float
    start: float


@dataclass(eq=False)
class Reservation:
    """Capacity held for a gang that fits the cluster but not now (gang.scheduling.reservation):
    on each node, the requests of the members planned there, held against every gang behind it
    in the queue except backfill. Lives in memory only, rebuilt from the queue after a restart.

    Invariant: ``ReservationBook`` holds it exactly while ``gang.reservation`` points to it, and
    ``timer`` (its expiry) runs exactly as long."""

    gang: GangKey
    #: the gang's queue-sort key: the reservation holds against gangs that sort after it
    sort_key: tuple[object, ...]
    #: node → the capacity held there (a request vector of the resource index, cut to the width
    #: it had; ``ResourceIndex.fit`` widens it)
    held: dict[str, npt.NDArray[np.int64]]
    #: epoch seconds: expected start (when enough of the pods it waits for will have finished),
    #: when it was made, when it is dropped if the gang still does not fit
    start: float
    made: float
    expires: float
    #: running pods it waits for
    waiting_for: int
    #: the largest fraction of any resource of the cluster it holds
    share: float = 0.0
    #: the gang's declared run time (None: undeclared): a gang behind plans on the held
    #: capacity coming free that long after ``start``
    run: float | None = None
    timer: asyncio.TimerHandle | None = None
    #: recent backfill decisions into it (newest last)
    backfills: list[Backfill] = field(default_factory=list)
    #: the expected start when its nodes were last chosen: a refreshed ``start`` well past it
    #: is a slip, worth choosing its nodes afresh (``ReservationBook.move``)
    planned: float = field(init=False)
    #: epoch seconds before which its nodes are not chosen afresh; how often they were
    replan_after: float = 0.0
    moves: int = 0

    def __post_init__(self) -> None:
        self.planned = self.start

    @property
    def nodes(self) -> list[str]:
        return sorted(self.held)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = None


@dataclass(eq=False)
class Gang:
    key: GangKey
    podgroup: PodGroupInfo | None = None
    #: the profile serving this gang (its first member's spec.schedulerName)
    scheduler_name: str = ""
    #: keeps the counts the queue's order reads (``gang.scheduling.members``)
    members: Members = field(default_factory=Members)
    reserved: dict[Key, str] = field(default_factory=dict)
    #: reservations held for members not created yet: placeholder key → (its shape, node)
    placeholders: dict[Key, tuple[PodInfo, str]] = field(default_factory=dict)
    #: members past Permit whose binding is in flight or succeeded but not yet seen bound
    binding: set[Key] = field(default_factory=set)
    #: the part of ``binding`` whose binding succeeded (201, or a 409 naming our node)
    bound_unseen: set[Key] = field(default_factory=set)
    #: loop time the gang first had a member waiting (for time-to-full-gang); None when none
    waiting_since: float | None = None
    #: Permit: loop time the quorum wait ends, and the timer that releases the reservations
    permit_deadline: float | None = None
    permit_timer: asyncio.TimerHandle | None = None
    #: a reserved member left the gang (deleted, or relabelled into another) since the cycle
    #: last judged a disruption: set by the tracker, read and cleared by ``Cycle.disrupted``
    member_left: bool = False
    #: why the gang is not (fully) placed, for Events, status and /debug
    last_failure: str | None = None
    #: loop time of the last FailedScheduling event per message (avoid flooding)
    reported: dict[str, float] = field(default_factory=dict)
    #: preemption: capacity held for members (and placeholders) while victims terminate: key →
    #: (its shape, node). Assumed in the cache like a reservation, so no gang that may not take
    #: it sees it free; dropped before each of the gang's own cycles, restored if that fails
    nominated: dict[Key, tuple[PodInfo, str]] = field(default_factory=dict)
    #: the preemption this gang is waiting on (no second one while it lasts); None otherwise
    preempting: Preempting | None = None
    #: the higher-priority gang whose preemption evicts this gang's members (a victim), if any
    preempted_by: str | None = None
    #: that eviction is a reclaim: ``preempted_by`` names the reclaiming queue and the shares
    reclaimed: bool = False
    #: capacity held for the gang until running pods finish; None when it holds none
    reservation: Reservation | None = None
    #: epoch seconds before which no new reservation is made for it (one expired), and why
    reserve_after: float = 0.0
    reservation_expired: str | None = None
    #: why the gang's last failed cycle made no reservation (for /debug and explain)
    reservation_refused: str | None = None
    #: a planned refusal: (node-set version, reservation-book version, no new plan before)
    reservation_memo: tuple[int, int, float] | None = None
    #: the gang cannot fit this cluster even with every node empty: why (the empty cluster's
    #: FitError), and how many of the members it needs do fit there; None while it could fit
    never_fits: str | None = None
    never_placed: int = 0
    #: the judgement above, kept while the node set and the gang's shape stay the same:
    #: (node-set version, members needed, members' keys)
    never_memo: tuple[int, int, tuple[Key, ...], TopologyConstraint | None] | None = None
    #: the last cycle's placement failure, structured (for explain); None after a placement
    last_unplaceable: PlacementFailure | None = None
    #: the queue it is in, or why its queue cannot serve it (kept by ``QueueLedger.place``)
    membership: Membership = field(default_factory=lambda: Membership(DEFAULT_QUEUE))
    #: what it asks of the topology, resolved at the start of its last cycle (every placement
    #: of that cycle, preemption's and reservation's trials included, honours it)
    topology: TopologyConstraint | None = None

    @property
    def priority(self) -> int:
        """The group's own priority where its API gives one (native ``spec.priority``), else
        its highest member's."""
        if self.podgroup is not None and self.podgroup.priority is not None:
            return self.podgroup.priority
        return self.members.highest_priority()

    @property
    def single(self) -> bool:
        return not self.key.group

    @property
    def min_member(self) -> int:
        if self.podgroup is None or self.podgroup.error is not None:
            return 1
        return self.podgroup.min_member

    @property
    def timeout(self) -> float | None:
        return self.podgroup.schedule_timeout_seconds if self.podgroup is not None else None

    def _tasks_missing(self) -> dict[str, int]:
        """Volcano ``minTaskMember``: per task, how many more members it needs placed (bound
        or reserved, as :meth:`placed` counts them)."""
        missing = dict(self.podgroup.min_task_member) if self.podgroup is not None else {}
        if not missing:  # (most groups: no task minimums, nothing to count)
            return missing
        for member in [
            *self.bound(),
            *(self.members[k] for k in self.reserved if k in self.members),
        ]:
            if missing.get(member.task, 0) > 0:
                missing[member.task] -= 1
        return missing

    def tasks_missing(self, placing: Iterable[Key]) -> dict[str, int]:
        """Per task, how many members it would still lack if ``placing`` (pods and
        placeholders being placed now) were added; only tasks that would lack some."""
        missing = self._tasks_missing()
        for key in placing:
            member = self.members.get(key)
            if member is not None and missing.get(member.task, 0) > 0:
                missing[member.task] -= 1
        return {task: count for task, count in missing.items() if count > 0}

    def task_minimums(self, pods: Iterable[PodInfo]) -> list[PodInfo]:
        """Of ``pods``, the members each task still needs (its first ones)."""
        missing = self._tasks_missing()
        if not missing:  # (most groups: nothing required)
            return []
        out = []
        for pod in pods:
            if missing.get(pod.task, 0) > 0:
                missing[pod.task] -= 1
                out.append(pod)
        return out

    def bound_seen(self, key: Key) -> None:
        """The informer showed member ``key`` bound: its reservation and binding are over."""
        self.reserved.pop(key, None)
        self.binding_over(key)

    def binding_over(self, key: Key) -> None:
        """Member ``key`` is no longer being bound (seen bound, or gone)."""
        self.binding.discard(key)
        self.bound_unseen.discard(key)

    def placeholder(self, template: PodInfo, index: int) -> PodInfo:
        """A stand-in for a member not created yet, shaped like ``template``. Its name cannot
        be a real pod's (``~`` is not allowed in object names)."""
        name = f"{self.key.group or self.key.pod}~placeholder-{index}"
        # a member not created yet mounts claims nobody knows: the template's are not its own
        rules = replace(template.rules, claims=())
        return replace(
            template, name=name, uid=f"placeholder:{self.key}:{index}", node_name="", rules=rules
        )

    def is_pending(self, p: PodInfo) -> bool:
        """Waits for placement: ours, unassigned, alive, not gated, not reserved."""
        return (
            not p.assigned
            and not p.terminal
            and not p.deleting
            and not p.scheduling_gated
            and p.key not in self.reserved
        )

    def unsupported(self) -> dict[str, list[str]]:
        """Fields gang cannot honour yet, each with the unbound members that use it."""
        found: dict[str, list[str]] = {}
        for pod in self.members.values():
            if pod.rules.unsupported and not pod.assigned:
                for what in pod.rules.unsupported:
                    found.setdefault(what, []).append(pod.name)
        return found

    def pending(self) -> list[PodInfo]:
        # ``node_name`` read first: an assigned member (most, once a gang is placed) is out
        # without a method call (asked per gang per cycle, per binding answer, per scrape)
        return [p for p in self.members.values() if not p.node_name and self.is_pending(p)]

    def any_pending(self) -> bool:
        """``bool(pending())`` without the list: stops at the first waiting member."""
        for p in self.members.values():  # noqa: SIM110 (a loop: any() over a generator costs 2x)
            if not p.node_name and self.is_pending(p):
                return True
        return False

    def bound(self) -> list[PodInfo]:
        if not self.members.bound_count:  # (kept by ``Members``: most cycles' gangs have none)
            return []
        return [p for p in self.members.values() if p.node_name and not p.terminal]

    def placed(self) -> int:
        """Members holding a node: bound (not finished) plus reserved."""
        return self.members.bound_count + len(self.reserved)

    def has_quorum(self) -> bool:
        return self.placed() >= self.min_member

    def short_of_quorum(self) -> bool:
        """Waiting in Permit (members reserved, none binding) yet holding less than its quorum
        — members and placeholders together — e.g. after a placeholder lost its node or
        minMember was raised: its placeholders need planning again."""
        return (
            bool(self.reserved)
            and not self.binding
            and self.placed() + len(self.placeholders) < self.min_member
        )
