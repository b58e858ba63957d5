"""Reclaim's rules: when a queue below its fair share may take capacity back, and from whom.

Why a pure module: reclaim evicts other teams' running work, so its rules must be predictable,
stated once, and testable as tables (KAI Scheduler's and Kueue's cases are replayed against
them). The scheduling side (``gang.scheduling.preemption``) chooses *which* gangs; these rules
say which sets it may choose at all. Amounts are per resource, in the scheduler's units.

The rules, for a reclaimer gang of queue R asking for ``request``:

1. **R is below its fair share**: with the request added, R holds at most its fair share of
   every resource the request needs (KAI's ``CanReclaimResources``). A queue at its fair share
   only borrows idle capacity; it never takes.
2. **Victim queues are above their fair share** (standing, the DRF dominant share, above 1),
   reclaimable, and not R's ancestors (only leaves hold gangs).
3. **Floors**: after the victims go, every queue on a victim's path up to (not including) the
   parent it shares with R still holds at least its fair share (dominant share at least 1, or a
   fair share of nothing) and, of every resource taken, at least its guarantee. So reclaim never
   pushes a queue below its fair share or its guarantee, and two queues both below their share
   cannot evict each other.
4. **Stability** (no ping-pong): where R's branch and the victim's meet, R's side after the move
   stays within its own fair share, or has a dominant share at or below the victim side's. Were
   it above both, the victim side would be the one owed capacity, facing a side above its own
   share, and would take it back next cycle. Together with rule 1 this makes a cluster at its
   fair split evict nothing, however many cycles run: no queue there can add a gang and stay
   within its share.

Shares here are measured over the resources the reclaimer asks for that are *contended* (the
queues together ask more of them than the cluster has; KAI's "involved" resources): taking GPUs
is judged by GPU shares, not by a queue's cpu, and where every queue's demand fits, each one's
fair share is its demand, which would call any queue that loses a pod "below its share".

Victim queues are taken furthest above their fair share first (:meth:`Reclaim.order`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gang.models.queueapis import amount_text
from gang.queue.fairshare import dominant_share

Amounts = Mapping[str, float]
#: slack for float arithmetic on shares (amounts are whole units; shares are their ratios)
EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class QueueState:
    """One queue as reclaim sees it now. ``held`` and ``fair`` of a parent cover its subtree."""

    key: str
    parent: str | None
    held: Amounts
    fair: Amounts
    guarantee: Amounts = field(default_factory=dict)
    reclaimable: bool = True


class Reclaim:
    """The rules for one reclaimer (see the module docstring). Build one per decision."""

    def __init__(
        self,
        queues: Mapping[str, QueueState],
        reclaimer: str,
        request: Amounts,
        contended: Iterable[str] | None = None,
    ) -> None:
        self.queues = queues
        self.reclaimer = reclaimer
        self.request = {r: v for r, v in request.items() if v > 0}
        #: the resources shares are measured over: what the reclaimer asks for, of the
        #: contended ones (all of them when it asks for none of those)
        asked = set(self.request)
        if contended is not None:
            asked &= set(contended)
            if not asked:
                asked = set(contended)
        self.measured = frozenset(asked)
        self._path = self._ancestors(reclaimer)
        self._on_path = set(self._path)

    # --- rule 1 ------------------------------------------------------------------------------

    def refusal(self) -> str | None:
        """Why the reclaimer's queue may not reclaim at all (rule 1), or None."""
        queue = self.queues.get(self.reclaimer)
        if queue is None:
            return f"queue {self.reclaimer} is unknown"
        for resource, amount in sorted(self.request.items()):
            after = queue.held.get(resource, 0.0) + amount
            fair = queue.fair.get(resource, 0.0)
            if after > fair + EPSILON:
                return (
                    f"its queue would hold {amount_text(resource, after)} of its fair share "
                    f"{amount_text(resource, fair)}: a queue takes back only up to its fair share"
                )
        return None

    # --- rule 2 ------------------------------------------------------------------------------

    def may_lose(self, queue: str) -> bool:
        """Whether ``queue``'s gangs may be reclaimed at all (rule 2)."""
        state = self.queues.get(queue)
        if state is None or queue in self._on_path or not state.reclaimable:
            return False
        return self.standing(queue) > 1.0 + EPSILON

    def standing(self, queue: str, taken: Amounts | None = None) -> float:
        """The queue's dominant share over the contended resources (after ``taken`` goes)."""
        state = self.queues[queue]
        held = _minus(state.held, taken) if taken else state.held
        return self.share(held, state.fair)

    def share(self, held: Amounts, fair: Amounts) -> float:
        return dominant_share(held, fair, self._resources(held, fair))

    def _resources(self, held: Amounts, fair: Amounts) -> list[str]:
        return sorted({*held, *fair} & self.measured)

    def at_or_above(self, held: Amounts, fair: Amounts) -> bool:
        """Holds at least its fair share (of its dominant resource), or has a share of none."""
        if not any(fair.get(r, 0.0) > EPSILON for r in self._resources(held, fair)):
            return True
        return self.share(held, fair) >= 1.0 - EPSILON

    def order(self, queue: str) -> tuple[float, str]:
        """Victim queues in the order they are taken: furthest above fair share first."""
        return (-self.standing(queue), queue)

    # --- rules 3 and 4 ------------------------------------------------------------------------

    def allows(self, taken: Mapping[str, Amounts]) -> bool:
        """Whether evicting gangs holding ``taken`` (per victim leaf queue) keeps the floors
        (rule 3) and the stability rule (rule 4)."""
        return self.why_not(taken) is None

    def why_not(self, taken: Mapping[str, Amounts]) -> str | None:
        per_queue: dict[str, dict[str, float]] = {}
        tops: set[str] = set()
        for leaf, amounts in taken.items():
            if not any(v > 0 for v in amounts.values()):
                continue
            if not self.may_lose(leaf):
                return f"queue {leaf} may not lose gangs to reclaim"
            below = self._below_meeting(leaf)
            tops.add(below[-1])
            for queue in below:
                into = per_queue.setdefault(queue, {})
                for resource, amount in amounts.items():
                    into[resource] = into.get(resource, 0.0) + amount
        for queue, amounts in per_queue.items():
            state = self.queues[queue]
            after = _minus(state.held, amounts)
            for resource, amount in amounts.items():
                guarantee = state.guarantee.get(resource, 0.0)
                if amount > 0 and guarantee > 0 and after.get(resource, 0.0) < guarantee - EPSILON:
                    return f"queue {queue} would go below its guarantee of {resource}"
            if not self.at_or_above(after, state.fair):
                return f"queue {queue} would go below its fair share"
        for top in tops:
            mine = self._reclaimer_side(top)
            state = self.queues[mine]
            ours = self.share(total([state.held, self.request]), state.fair)
            theirs = self.standing(top, per_queue[top])
            if ours > 1.0 + EPSILON and ours > theirs + EPSILON:
                return (
                    f"queue {mine} would stand above queue {top} after the move "
                    f"({ours:.3g} against {theirs:.3g} of their fair shares)"
                )
        return None

    # --- the tree -----------------------------------------------------------------------------

    def _ancestors(self, queue: str) -> list[str]:
        """``queue`` and its parents, leaf first (a cycle of parents is cut)."""
        out: list[str] = []
        at: str | None = queue
        while at is not None and at not in out and at in self.queues:
            out.append(at)
            at = self.queues[at].parent
        return out

    def _below_meeting(self, leaf: str) -> list[str]:
        """``leaf`` and its parents up to (not including) the first one the reclaimer's branch
        shares, leaf first."""
        out = []
        for queue in self._ancestors(leaf):
            if queue in self._on_path:
                break
            out.append(queue)
        return out

    def _reclaimer_side(self, top: str) -> str:
        """The reclaimer's ancestor that is a sibling of ``top`` (both children of the queue
        where the two branches meet, or both top level)."""
        parent = self.queues[top].parent
        for queue in self._path:
            if self.queues[queue].parent == parent:
                return queue
        return self._path[-1]


def total(amounts: Iterable[Amounts]) -> dict[str, float]:
    """The sum, per resource, of several amounts (what a set of pods or queues holds)."""
    out: dict[str, float] = {}
    for each in amounts:
        for resource, amount in each.items():
            out[resource] = out.get(resource, 0.0) + amount
    return out


def _minus(held: Amounts, taken: Amounts) -> dict[str, float]:
    out = dict(held)
    for resource, amount in taken.items():
        out[resource] = max(0.0, out.get(resource, 0.0) - amount)
    return out
