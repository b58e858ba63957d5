"""Queues at work: which queue each gang is in, what each queue holds and asks for, its fair share.

The queue tree (``gang.queue.tree``) knows the queues; fair share (``gang.queue.fairshare``) is
arithmetic. This module joins them to the scheduler's live picture, and answers the three
questions the scheduler asks of queues:

- **ordering**: which queue's gang goes next — the one furthest below its fair share
  (:meth:`QueueLedger.standing`, the dominant share held / fair share);
- **admission**: may this gang be placed — its queue is usable and, with the gang, neither the
  queue nor any parent of it goes past its limit (:meth:`QueueLedger.admit`);
- **preemption**: may this running pod be a victim of that gang's priority — only from the
  preemptor's own queue, or outside every queue (:meth:`QueueLedger.may_evict`); taking
  capacity across queues is reclaim's job, not priority's;
- **reclaim**: may a gang of a queue below its fair share take capacity back from queues above
  theirs, and which sets of victims keep every queue's floor (:meth:`QueueLedger.reclaim_scope`,
  the rules in ``gang.queue.reclaim``).

What a queue *holds* is what the cache counts for its gangs (bound, reserved, placeholders,
nominations: ``ClusterCache.held_by``); what it *asks for* is that plus its waiting gangs'
pending members (and stand-ins for members not created yet, up to minMember). The capacity
divided is the schedulable nodes' allocatable less what pods outside every usable queue hold.

Invariants (``check()`` recounts them): ``_gangs[q]`` holds exactly the keys whose
``Membership.queue`` is ``q`` (a gang with no queue, its claims contradictory, is under no key);
``_held[q]`` is the sum of ``ClusterCache.held_by`` over ``_gangs[q]`` (the cache reports every
change through ``on_hold``; a gang changing queues carries its holdings along); ``_asks[q]`` is
the sum of ``_asks_of`` over ``_gangs[q]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gang.models.queueapis import ALL, GPU, QueueSpec, amount_text
from gang.queue.fairshare import Borrowing, QueueTerms, borrowing, dominant_share, fair_shares
from gang.queue.reclaim import QueueState, Reclaim
from gang.queue.tree import Membership, QueueTree, claims_of, display_name
from gang.scheduling.gang import Gang, GangKey
from gang.state.cache import ClusterCache, holder_of
from gang.state.podinfo import PodInfo
from gang.state.resources import Vector

#: resources no queue divides (every pod asks for one of them)
NOT_DIVIDED = frozenset({"pods"})
Amounts = dict[str, float]


@dataclass(slots=True)
class QueueView:
    """One queue as /debug, metrics and ``kubectl gang queues`` show it."""

    key: str
    name: str
    api: str
    parent: str | None
    leaf: bool
    quota: Mapping[str, int]
    limit: Mapping[str, int]
    guarantee: Mapping[str, int]
    weight: float
    priority: int
    fair: Amounts
    held: Amounts
    demand: Amounts
    standing: float
    #: how much it borrows above its quota, as Kueue weighs it (per mille of its siblings'
    #: quotas, over its weight)
    borrowing: Borrowing
    gangs: int
    pending_gangs: int
    problem: str | None
    open: bool


@dataclass(slots=True)
class _Picture:
    """Shares and standings for one state of the inputs (see ``QueueLedger._picture``)."""

    stamp: tuple[int, ...]
    held: dict[str, Amounts] = field(default_factory=dict)
    demand: dict[str, Amounts] = field(default_factory=dict)
    fair: dict[str, Amounts] = field(default_factory=dict)
    standing: dict[str, float] = field(default_factory=dict)
    borrowing: dict[str, Borrowing] = field(default_factory=dict)
    capacity: Amounts = field(default_factory=dict)


class QueueLedger:
    def __init__(self, tree: QueueTree, cache: ClusterCache, gangs: Mapping[GangKey, Gang]) -> None:
        self.tree = tree
        self.cache = cache
        self.gangs = gangs
        self._gangs: dict[str, set[GangKey]] = {}
        #: per queue, what its gangs hold (kept by the cache's hold hook and ``place``) and what
        #: its waiting gangs ask for (kept by ``refresh``), so a picture costs O(queues)
        self._held: dict[str, Vector] = {}
        self._asks_of: dict[GangKey, Amounts] = {}
        self._asks: dict[str, Amounts] = {}
        #: gangs whose asks may have changed since they were last counted
        self._stale: set[GangKey] = set()
        #: bumped on every change of membership, holdings or asks
        self.version = 0
        self._picture: _Picture | None = None
        cache.on_hold = self._held_changed

    # --- membership ----------------------------------------------------------------------

    def place(self, gang: Gang) -> Membership:
        """(Re)decide the queue of ``gang`` from its group and pods."""
        group = gang.podgroup
        labels: list[Mapping[str, str]] = [p.labels for p in gang.members.values()]
        if group is not None:
            labels.append(group.labels)
        volcano = group.queue if group is not None and group.api == "volcano" else ""
        found = self.tree.resolve(claims_of(gang.key.namespace, volcano, labels))
        counted = found.queue is None or gang.key in self._gangs.get(found.queue, ())
        if found != gang.membership or not counted:  # a new gang is counted nowhere yet
            self._leave(gang)
            gang.membership = found
            if found.queue is not None:
                self._gangs.setdefault(found.queue, set()).add(gang.key)
                self._move(found.queue, self.cache.held_by.get(gang.key), +1)
                _add(self._asks.setdefault(found.queue, {}), self._asks_of.get(gang.key, {}))
            self.touch()
        return found

    def forget(self, gang: Gang) -> None:
        self._leave(gang)
        self._asks_of.pop(gang.key, None)
        self._stale.discard(gang.key)
        self.touch()

    def _leave(self, gang: Gang) -> None:
        queue = gang.membership.queue
        members = self._gangs.get(queue) if queue is not None else None
        if queue is not None and members is not None and gang.key in members:
            members.discard(gang.key)
            if not members:
                del self._gangs[queue]
            self._move(queue, self.cache.held_by.get(gang.key), -1)
            _add(self._asks.setdefault(queue, {}), self._asks_of.get(gang.key, {}), -1)

    def _move(self, queue: str, vector: Vector | None, sign: int) -> None:
        if vector is None:
            return
        fit = self.cache.index.fit
        held = self._held.get(queue)
        self._held[queue] = sign * fit(vector) if held is None else fit(held) + sign * fit(vector)

    def _held_changed(self, holder: tuple[str, str, str], delta: Vector) -> None:
        """The cache's hook: a pod of ``holder`` (a gang key) was counted or released. Without
        queues nothing is kept (``replace_all`` recounts when the first queue appears)."""
        if not self.tree.in_use:
            return
        gang = self.gangs.get(holder)  # type: ignore[call-overload]
        queue = gang.membership.queue if gang is not None else None
        if queue is not None and holder in self._gangs.get(queue, ()):
            self._move(queue, delta, +1)
            self.version += 1

    def refresh(self, gang: Gang) -> None:
        """The gang's waiting members may have changed (it was enqueued, or a cycle ran for
        it): what it asks for is recounted before the shares are next needed (once, however
        many of its members arrived meanwhile)."""
        if self.tree.in_use:
            self._stale.add(gang.key)

    def _settle(self) -> None:
        """Recount the asks of the gangs ``refresh`` marked."""
        stale, self._stale = self._stale, set()
        for key in stale:
            gang = self.gangs.get(key)
            asks = self._asks_(gang) if gang is not None else {}
            before = self._asks_of.get(key, {})
            if asks == before:
                continue
            self._asks_of[key] = asks
            queue = gang.membership.queue if gang is not None else None
            if queue is not None:
                total = self._asks.setdefault(queue, {})
                _add(total, before, -1)
                _add(total, asks)
            self.version += 1

    def replace_all(self) -> list[Gang]:
        """The queues changed: place every gang again; returns those whose queue changed."""
        moved = []
        for gang in list(self.gangs.values()):
            before = gang.membership
            if self.place(gang) != before:
                moved.append(gang)
        self._recount()
        return moved

    def _recount(self) -> None:
        """Every queue's holdings and asks counted afresh from its gangs."""
        self._held.clear()
        self._asks.clear()
        self._asks_of.clear()
        self._stale.clear()
        if self.tree.in_use:
            for queue, keys in self._gangs.items():
                for key in keys:
                    self._move(queue, self.cache.held_by.get(key), +1)
                    gang = self.gangs.get(key)
                    if gang is not None:
                        self._asks_of[key] = asks = self._asks_(gang)
                        _add(self._asks.setdefault(queue, {}), asks)
        self.touch()

    def touch(self) -> None:
        self.version += 1

    # --- what queues hold and ask for --------------------------------------------------------

    def _amounts(self, vector: Vector | None) -> Amounts:
        if vector is None:
            return {}
        names = self.cache.index.names
        return {
            names[i]: float(v) for i, v in enumerate(vector) if v and names[i] not in NOT_DIVIDED
        }

    def held(self, queue: str) -> Amounts:
        """What ``queue`` and the queues under it hold now (live, not memoised)."""
        subtree = self._subtree(queue)
        return self._sum({q: self._amounts(self._held.get(q)) for q in subtree}, subtree)

    def check(self) -> None:
        """Recount every queue's holdings and asks from the gangs (tests)."""
        self._settle()
        index = self.cache.index
        for queue, vector in self._held.items():
            if queue not in self._gangs and self._amounts(vector):
                raise AssertionError(f"queue {queue}: holds {self._amounts(vector)} with no gang")
        for queue, keys in self._gangs.items():
            total = np.zeros(len(index), dtype=np.int64)
            asks: Amounts = {}
            for key in keys:
                held = self.cache.held_by.get(key)
                if held is not None:
                    total = index.fit(total) + index.fit(held)
                _add(asks, self._asks_of.get(key, {}))
            if self._amounts(total) != self._amounts(self._held.get(queue)):
                raise AssertionError(f"queue {queue}: holdings drifted from its gangs'")
            if {r: v for r, v in asks.items() if v} != {
                r: v for r, v in self._asks.get(queue, {}).items() if v
            }:
                raise AssertionError(f"queue {queue}: asks drifted from its gangs'")

    def _subtree(self, queue: str) -> list[str]:
        """``queue`` and every queue under it (once each, even inside a cycle of parents)."""
        out, stack = [queue], [queue]
        while stack:
            for child in self.tree.children(stack.pop()):
                if child not in out:
                    out.append(child)
                    stack.append(child)
        return out

    def _asks_(self, gang: Gang) -> Amounts:
        """What a waiting gang asks for beyond what it holds."""
        if gang.never_fits is not None:
            return {}
        pending = gang.pending()
        out: Amounts = {}
        for pod in pending:
            _add(out, pod.requests)
        missing = gang.min_member - gang.placed() - len(pending) - len(gang.placeholders)
        if missing > 0 and gang.members:
            template = max(gang.members.values(), key=lambda p: p.creation_timestamp)
            _add(out, template.requests, missing)
        return out

    def _picture_now(self) -> _Picture:
        cache = self.cache
        if self._stale:
            self._settle()
        stamp = (self.tree.version, self.version, cache.version)
        picture = self._picture
        if picture is not None and picture.stamp == stamp:
            return picture
        picture = _Picture(stamp)
        valid = set(self.tree.valid())
        leaves = [q for q in valid if self.tree.is_leaf(q)]
        for queue in leaves:
            held = self._amounts(self._held.get(queue))
            demand = dict(held)
            _add(demand, self._asks.get(queue, {}))
            picture.held[queue], picture.demand[queue] = held, demand
        picture.capacity = self._capacity(picture.held.values())
        terms = {key: _terms(self.tree.specs[key]) for key in valid}
        picture.fair = fair_shares(
            terms, self._valid_children(valid), picture.capacity, picture.demand
        )
        leaf_set = set(leaves)
        for queue in valid:
            if queue not in leaf_set:  # a parent: its leaves' (a parent's own sum counts once)
                below = [q for q in self._subtree(queue) if q in leaf_set]
                picture.held[queue] = self._sum(picture.held, below)
                picture.demand[queue] = self._sum(picture.demand, below)
            picture.standing[queue] = dominant_share(
                picture.held[queue], picture.fair.get(queue, {}), picture.capacity
            )
        for queue in valid:
            picture.borrowing[queue] = self._borrowing(queue, valid, picture.held[queue])
        self._picture = picture
        return picture

    def _borrowing(self, queue: str, valid: set[str], held: Amounts) -> Borrowing:
        """Kueue's measure: what the queue holds above its quota against what its siblings
        (its cohort) could lend."""
        spec = self.tree.specs[queue]
        siblings = [self.tree.specs[k] for k in self._valid_children(valid)(spec.parent)]
        lendable: Amounts = {}
        for sibling in siblings:
            _add(lendable, {r: v for r, v in sibling.quota.items() if v != ALL})
        quota = {r: float(v) for r, v in spec.quota.items() if v != ALL}
        return borrowing(quota, held, lendable, headline_weight(spec))

    def _valid_children(self, valid: set[str]) -> Callable[[str | None], list[str]]:
        tree = self.tree

        def children(key: str | None) -> list[str]:
            return [k for k in tree.children(key) if k in valid]

        return children

    @staticmethod
    def _sum(per_queue: Mapping[str, Amounts], queues: Iterable[str]) -> Amounts:
        out: Amounts = {}
        for queue in queues:
            _add(out, per_queue.get(queue, {}))
        return out

    def _capacity(self, queue_held: Iterable[Amounts]) -> Amounts:
        """Schedulable nodes' allocatable, less what pods outside every usable queue hold."""
        cache = self.cache
        index = cache.index
        usable = cache.valid.copy()
        for row, facts in enumerate(cache.facts):
            if facts is not None and facts.unschedulable:
                usable[row] = False
        allocatable = cache.allocatable[usable].sum(axis=0)
        requested = cache.requested[cache.valid].sum(axis=0)
        ours: Amounts = {}
        for held in queue_held:
            _add(ours, held)
        out: Amounts = {}
        for col, name in enumerate(index.names):
            if name in NOT_DIVIDED or col >= len(allocatable):
                continue
            others = max(0.0, float(requested[col]) - ours.get(name, 0.0))
            amount = float(allocatable[col]) - others
            if amount > 0:
                out[name] = amount
        return out

    # --- the scheduler's questions -----------------------------------------------------------

    def in_use(self) -> bool:
        return self.tree.in_use

    def standing(self, queue: str) -> float:
        """The queue's dominant share: how far above (> 1) or below (< 1) its fair share it is."""
        return self._picture_now().standing.get(queue, math.inf)

    def rank(self, queue: str) -> tuple[float, int]:
        """The order among queues: furthest below its fair share first; of equals, the one
        borrowing less above its quota (Kueue's share)."""
        picture = self._picture_now()
        held = picture.borrowing.get(queue)
        return picture.standing.get(queue, math.inf), held.share if held is not None else 0

    def fair(self, queue: str) -> Amounts:
        return self._picture_now().fair.get(queue, {})

    def admit(self, gang: Gang, pods: Iterable[PodInfo]) -> str | None:
        """Why ``gang`` may not place ``pods`` now for its queue's sake, or None."""
        membership = gang.membership
        if membership.error is not None or membership.queue is None:
            return f"queue: {membership.error or 'no queue'}"
        limits = [
            (queue, limit)
            for queue in self.tree.ancestors(membership.queue)
            if (limit := self.tree.specs[queue].limit)
        ]
        if not limits:  # (most queues: no limit, so the members' requests are not summed)
            return None
        asks: Amounts = {}
        for pod in pods:
            _add(asks, pod.requests)
        for queue, limit in limits:
            held = self.held(queue)
            for resource, cap in sorted(limit.items()):
                wanted = asks.get(resource, 0.0)
                if wanted and held.get(resource, 0.0) + wanted > cap:
                    return (
                        f"queue {display_name(queue)} at its limit: holds "
                        f"{_text(resource, held.get(resource, 0.0))} of its limit "
                        f"{_text(resource, cap)}, the gang needs {_text(resource, wanted)} more"
                    )
        return None

    def queue_of(self, key: GangKey) -> str | None:
        """The queue of the gang ``key`` (None: unknown gang, or its queue claims clash)."""
        gang = self.gangs.get(key)
        return gang.membership.queue if gang is not None else None

    def queue_of_pod(self, pod: PodInfo) -> str | None:
        return self.queue_of(GangKey(*holder_of(pod)))

    def may_evict(self, preemptor: Gang, victim: PodInfo) -> bool:
        """Priority preemption takes victims only from the preemptor's own queue, or outside
        every queue (pods gang does not schedule). Across queues, only reclaim takes, under
        its floors."""
        if not self.tree.in_use:
            return True
        queue = self.queue_of_pod(victim)
        return queue is None or queue == preemptor.membership.queue

    def reclaim_scope(
        self,
        gang: Gang,
        pods: Sequence[PodInfo],
        leaving: Callable[[PodInfo], bool],
        now: float,
    ) -> ReclaimScope | str | None:
        """Reclaim's rules for ``gang`` placing ``pods`` (the first of them are the ones it
        must place, the rest may wait): None when queues are not in use or
        there is no one to take from; why not, when its queue may not reclaim; else the
        scope. What pods already ``leaving`` hold (terminating, or victims of decisions under
        way) no longer counts for their queues."""
        queue = gang.membership.queue
        if not self.tree.in_use or queue is None or gang.membership.error is not None:
            return None
        picture = self._picture_now()
        if queue not in picture.fair:
            return None
        gone: dict[str, Amounts] = {}
        for record in self.cache.pods.values():
            info = record.info
            if info is not None and leaving(info):
                victim = self.queue_of_pod(info)
                if victim is not None:
                    _add(gone.setdefault(victim, {}), info.requests)
        states = {}
        for key in picture.fair:
            spec = self.tree.specs[key]
            held = dict(picture.held.get(key, {}))
            for leaf in self._subtree(key):
                _add(held, gone.get(leaf, {}), -1)
            states[key] = QueueState(
                key,
                spec.parent if spec.parent in picture.fair else None,
                held,
                picture.fair[key],
                {r: float(v) for r, v in spec.guarantee.items()},
                spec.reclaimable,
            )
        asks: Amounts = {}
        for pod in pods:  # the cycle passes only the members it must place
            _add(asks, pod.requests)
        asked = self._sum(picture.demand, [q for q in picture.demand if self.tree.is_leaf(q)])
        contended = [r for r, v in asked.items() if v > picture.capacity.get(r, 0.0)]
        rules = Reclaim(states, queue, asks, contended)
        refusal = rules.refusal()
        if refusal is not None:
            return f"reclaim: not for this gang: {refusal}"
        if not any(rules.may_lose(q) for q in states if self.tree.is_leaf(q)):
            return None
        return ReclaimScope(self, rules, now)

    def _at_or_above(self, gang: Gang) -> tuple[str, _Picture] | None:
        """The gang's queue and the shares, when queues are in use and its queue holds at
        least its fair share."""
        queue = gang.membership.queue
        if queue is None or not self.tree.in_use:
            return None
        picture = self._picture_now()
        if picture.standing.get(queue, 0.0) < 1.0:
            return None
        return queue, picture

    def borrowing(self, gang: Gang) -> str | None:
        """Why ``gang`` only borrows (its queue is at or above its fair share, with another
        queue below its own), or None. A borrowing gang may use idle capacity but holds none
        in reserve: a reservation is for a queue waiting for its share."""
        found = self._at_or_above(gang)
        if found is None:
            return None
        queue, picture = found
        waiting = [
            q
            for q, standing in picture.standing.items()
            if standing < 1.0
            and any(v > picture.held[q].get(r, 0.0) for r, v in picture.demand[q].items())
        ]
        if not waiting:
            return None
        return (
            f"queue {display_name(queue)} is at or above its fair share "
            "(it borrows idle capacity, and reserves none)"
        )

    def waiting_note(self, gang: Gang) -> str | None:
        """For explain and FailedScheduling: how the gang's queue stands, when it is above its
        fair share ("queue team-a holds 48 of its fair share 32 GPUs")."""
        found = self._at_or_above(gang)
        if found is None:
            return None
        queue, picture = found
        held, fair = picture.held.get(queue, {}), picture.fair.get(queue, {})
        worst = max(
            (r for r in held if r in picture.capacity),
            key=lambda r: held[r] / fair[r] if fair.get(r) else math.inf,
            default=None,
        )
        if worst is None:
            return None
        return (
            f"queue {display_name(queue)} holds {_text(worst, held[worst])} of its fair share "
            f"{_text(worst, fair.get(worst, 0.0))}"
        )

    # --- views -------------------------------------------------------------------------------

    def views(self, pending: Mapping[str, int] | None = None) -> list[QueueView]:
        picture = self._picture_now()
        problems = self.tree.problems()
        out = []
        for key in sorted(self.tree.specs):
            spec = self.tree.specs[key]
            gangs = sum(len(self._gangs.get(q, ())) for q in self._subtree(key))
            out.append(
                QueueView(
                    key=key,
                    name=spec.name,
                    api=spec.api,
                    parent=spec.parent,
                    leaf=self.tree.is_leaf(key),
                    quota=spec.quota,
                    limit=spec.limit,
                    guarantee=spec.guarantee,
                    weight=headline_weight(spec),
                    priority=spec.priority,
                    fair=picture.fair.get(key, {}),
                    held=picture.held[key] if key in picture.held else self.held(key),
                    demand=picture.demand.get(key, {}),
                    standing=picture.standing.get(key, 0.0),
                    borrowing=picture.borrowing.get(key, Borrowing(0, 0.0, "", False)),
                    gangs=gangs,
                    pending_gangs=(pending or {}).get(key, 0),
                    problem=problems.get(key),
                    open=spec.open,
                )
            )
        return out


class ReclaimScope:
    """One reclaim decision's rules on the live queues (``gang.scheduling.preemption``'s
    ``ReclaimRules``): victims by the pods' queues, min runtime by the victim's queue (or its
    nearest parent that sets one), floors and order by :class:`gang.queue.reclaim.Reclaim`."""

    def __init__(self, ledger: QueueLedger, rules: Reclaim, now: float) -> None:
        self.ledger = ledger
        self.rules = rules
        self.now = now
        #: epoch seconds at which the first gang spared for its min runtime may be taken (the
        #: reclaimer is tried again then: nothing else would wake it), or None
        self.spared_until: float | None = None

    @property
    def queue(self) -> str:
        return self.rules.reclaimer

    def victim_queue(self, pod: PodInfo) -> str | None:
        queue = self.ledger.queue_of_pod(pod)
        return queue if queue is not None and self.rules.may_lose(queue) else None

    def min_runtime(self, queue: str) -> float:
        for key in self.ledger.tree.ancestors(queue):
            seconds = self.ledger.tree.specs[key].reclaim_min_runtime
            if seconds > 0:
                return seconds
        return 0.0

    def protected(self, queue: str, started: float) -> bool:
        until = started + self.min_runtime(queue)
        if self.now >= until:
            return False
        self.spared_until = until if self.spared_until is None else min(self.spared_until, until)
        return True

    def order(self, queue: str) -> tuple[float, str]:
        return self.rules.order(queue)

    def allows(self, taken: Mapping[str, Mapping[str, float]]) -> bool:
        return self.rules.allows(taken)

    def describe(self, victim_queues: Iterable[str]) -> str:
        """Why, in the words of the Events: "queue team-b below its fair share 64 GPUs (has 0);
        team-a holds 128 GPUs of its fair share 64 GPUs"."""
        rules = self.rules
        mine = rules.queues[rules.reclaimer]
        resource = _headline(rules.request, mine.fair)
        text = (
            f"queue {display_name(rules.reclaimer)} below its fair share "
            f"{_text(resource, mine.fair.get(resource, 0.0))} "
            f"(has {_text(resource, mine.held.get(resource, 0.0))})"
        )
        for queue in sorted(set(victim_queues)):
            state = rules.queues[queue]
            text += (
                f"; {display_name(queue)} holds {_text(resource, state.held.get(resource, 0.0))}"
                f" of its fair share {_text(resource, state.fair.get(resource, 0.0))}"
            )
        return text


def _headline(request: Mapping[str, float], fair: Mapping[str, float]) -> str:
    """The resource a reclaim is about: GPUs when asked for, else the largest share asked."""
    if request.get(GPU, 0.0) > 0:
        return GPU
    return max(
        (r for r in request if r not in NOT_DIVIDED),
        key=lambda r: (request[r] / fair[r] if fair.get(r) else math.inf, r),
        default=GPU,
    )


def headline_weight(spec: QueueSpec) -> float:
    """One weight for a queue: its only one (Volcano), or its GPUs' (KAI: per resource)."""
    return spec.weight_of(GPU) if GPU in spec.weight else spec.default_weight


def _terms(spec: QueueSpec) -> QueueTerms:
    return QueueTerms(
        key=spec.key,
        priority=spec.priority,
        quota={r: float(v) for r, v in spec.quota.items()},
        limit={r: float(v) for r, v in spec.limit.items()},
        weight=dict(spec.weight),
        default_weight=spec.default_weight,
        creation=spec.creation_timestamp,
    )


def _add(into: Amounts, amounts: Mapping[str, float | int], times: int = 1) -> None:
    for resource, amount in amounts.items():
        if resource not in NOT_DIVIDED and amount:
            total = into.get(resource, 0.0) + float(amount) * times
            if total:
                into[resource] = total
            else:
                into.pop(resource, None)


def _text(resource: str, amount: float) -> str:
    return amount_text(resource, int(amount))
