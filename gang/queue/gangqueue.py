"""The gang queue: which gang the scheduling cycle takes next, and when a failed one returns.

Three places a gang can be, as in kube-scheduler's scheduling queue, but per gang:
- **active**: a heap ordered by the QueueSort key (priority → QoS → PodGroup age → name);
- **backoff**: failed recently; returns to active when its per-gang exponential backoff
  (initial x 2^attempts, capped) has passed;
- **unschedulable**: did not fit; returns to active when a cluster event could make it fit
  (``activate_unschedulable``) — and at the latest after ``flush_after``, as a safety net.

A gang is in at most one place at a time. ``pop`` waits while nothing is active.

Queues (``gang.queue.tree``): each active gang waits in the heap of its queue. ``pop`` takes
the head of the queue that ``rank`` puts first — the queue furthest below its fair share — and
inside a queue the QueueSort order holds as before. With one queue in use (every gang in
``default``) nothing is ranked and the order is exactly QueueSort's.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from gang.models.queueapis import DEFAULT_QUEUE

GangKey = Hashable
SortKey = tuple[Any, ...]


@dataclass(slots=True)
class _Entry:
    sort_key: SortKey
    #: the heap item that currently stands for this entry; older items for it are stale
    seq: int = -1
    attempts: int = 0
    where: str = ""  # "active" | "backoff" | "unschedulable" | "" (popped, being scheduled)
    timer: asyncio.TimerHandle | None = None
    #: the queue (``gang.queue.tree``) whose heap holds it while active
    queue: str = DEFAULT_QUEUE
    #: the gang's priority as preemption compares it (``activate_outranking``)
    priority: int = 0


class GangQueue:
    def __init__(
        self,
        *,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        flush_after: float = 60.0,
        rank: Callable[[str], Any] | None = None,
    ) -> None:
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.flush_after = flush_after
        self._entries: dict[GangKey, _Entry] = {}
        #: exactly the entries whose ``where`` is "unschedulable" (kept by ``_push``, ``_park``
        #: and ``remove``): cluster events wake these, and a backlog keeps most gangs elsewhere
        self._parked: dict[GangKey, _Entry] = {}
        #: the parked gangs' highest priority and their queues; None when ``_parked`` changed
        #: since it was taken (most completions find it still valid: a parked backlog is still)
        self._parked_summary: tuple[int, frozenset[str]] | None = None
        #: per queue, active gangs by QueueSort key; an item whose seq is not its entry's is
        #: stale (the entry was pushed again, or moved to another queue) and skipped
        self._heaps: dict[str, list[tuple[SortKey, int, GangKey]]] = {}
        #: which of several queues with active gangs goes first (lowest first); None: by name
        self.rank = rank
        self._seq = itertools.count()
        self._ready = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    # --- membership ----------------------------------------------------------------------

    def __contains__(self, key: GangKey) -> bool:
        return key in self._entries

    def where(self, key: GangKey) -> str | None:
        entry = self._entries.get(key)
        return entry.where if entry is not None else None

    def __len__(self) -> int:
        return len(self._entries)

    def counts(self) -> dict[str, int]:
        out = {"active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 0}
        for entry in self._entries.values():
            out[entry.where or "in_flight"] += 1
        return out

    def add(
        self, key: GangKey, sort_key: SortKey, queue: str = DEFAULT_QUEUE, priority: int = 0
    ) -> None:
        """A gang has work (new or changed members): make it active unless it is backing off."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(sort_key, queue=queue, priority=priority)
            self._push(key, entry)
            return
        changed = entry.sort_key != sort_key or entry.queue != queue
        entry.sort_key = sort_key
        entry.queue = queue
        entry.priority = priority
        if entry.where == "unschedulable" or (entry.where == "active" and changed):
            self._push(key, entry)
        # active with a new key: pushed again (pop skips the stale item); backoff: waits;
        # in flight: ``done`` decides where it goes next

    def remove(self, key: GangKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and entry.timer is not None:
            entry.timer.cancel()
        self._unpark(key)

    # --- the cycle's side ----------------------------------------------------------------

    async def pop(self) -> GangKey:
        while True:
            heads = self._heads()
            if heads:
                queue = heads[0] if len(heads) == 1 else self._first(heads)
                _, _, key = heapq.heappop(self._heaps[queue])
                self._entries[key].where = ""
                return key
            self._ready.clear()
            await self._ready.wait()

    def _heads(self) -> list[str]:
        """The queues with an active gang, each heap's stale items dropped from its top."""
        out = []
        for queue, heap in list(self._heaps.items()):
            while heap:
                _, seq, key = heap[0]
                entry = self._entries.get(key)
                if entry is not None and entry.where == "active" and entry.seq == seq:
                    break
                heapq.heappop(heap)
            if heap:
                out.append(queue)
            else:
                del self._heaps[queue]
        return out

    def _first(self, queues: list[str]) -> str:
        """Of several queues with active gangs, the one ``rank`` puts first; ties (and no rank)
        go to the better head gang by QueueSort, then the queue's name."""
        rank = self.rank

        def order(queue: str) -> tuple[Any, ...]:
            head = self._heaps[queue][0][0]
            return (rank(queue) if rank is not None else 0, head, queue)

        return min(queues, key=order)

    def active_queues(self) -> list[str]:
        """The queues with an active gang (for /debug)."""
        return self._heads()

    def done(self, key: GangKey, outcome: str) -> None:
        """After a cycle: ``"scheduled"`` forgets the gang (until ``add``), ``"unschedulable"``
        parks it, ``"backoff"`` delays it, ``"requeue"`` makes it active again."""
        entry = self._entries.get(key)
        if entry is None:
            return
        if outcome == "scheduled":
            self.remove(key)
        elif outcome == "unschedulable":
            entry.attempts += 1
            self._park(key, entry, "unschedulable", self.flush_after)
        elif outcome == "backoff":
            entry.attempts += 1
            self._park(key, entry, "backoff", self.backoff_for(entry.attempts))
        elif outcome == "requeue":
            self._push(key, entry)
        else:
            raise ValueError(f"unknown outcome {outcome!r}")

    def backoff(self, key: GangKey) -> None:
        """Delay a known gang by its next backoff step (e.g. after a Permit timeout)."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.attempts += 1
            self._park(key, entry, "backoff", self.backoff_for(entry.attempts))

    def backoff_for(self, attempts: int) -> float:
        return float(min(self.backoff_max, self.backoff_initial * 2 ** max(0, attempts - 1)))

    def attempts(self, key: GangKey) -> int:
        entry = self._entries.get(key)
        return entry.attempts if entry is not None else 0

    # --- events ----------------------------------------------------------------------------

    def activate_unschedulable(self) -> int:
        """A cluster event (node added, capacity released, ...) might let parked gangs fit.

        Gangs still in backoff stay there: backoff is about pacing, not capacity.
        """
        parked = list(self._parked.items())
        for key, entry in parked:
            self._push(key, entry)
        return len(parked)

    def activate_outranking(self, priority: int, queue: str) -> int:
        """A gang of ``priority`` in ``queue`` may be a victim now (its last member is bound):
        the parked gangs that could take its place try again. Preemption takes lower priority,
        reclaim takes from other queues; a backlog of equals in one queue is left parked (on
        every completion it would be tried again for nothing)."""
        summary = self._parked_summary
        if summary is None:
            parked = self._parked.values()
            summary = self._parked_summary = (
                max((e.priority for e in parked), default=priority),
                frozenset(e.queue for e in parked),
            )
        top, queues = summary
        if top <= priority and queues <= {queue}:
            return 0
        woken = [
            (key, entry)
            for key, entry in self._parked.items()
            if entry.priority > priority or entry.queue != queue
        ]
        for key, entry in woken:
            self._push(key, entry)
        return len(woken)

    def activate(self, key: GangKey) -> None:
        """Make one gang active now (its own event: a member arrived, its PodGroup changed)."""
        entry = self._entries.get(key)
        if entry is not None and entry.where == "unschedulable":
            self._push(key, entry)

    # --- internals -------------------------------------------------------------------------

    def _push(self, key: GangKey, entry: _Entry) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        entry.where = "active"
        entry.seq = next(self._seq)
        self._unpark(key)
        heap = self._heaps.setdefault(entry.queue, [])
        heapq.heappush(heap, (entry.sort_key, entry.seq, key))
        self._ready.set()

    def _park(self, key: GangKey, entry: _Entry, where: str, delay: float) -> None:
        entry.where = where
        if where == "unschedulable":
            self._parked[key] = entry
            self._parked_summary = None
        else:
            self._unpark(key)
        if entry.timer is not None:
            entry.timer.cancel()
        entry.timer = self._loop.call_later(delay, self._expire, key, entry)

    def _unpark(self, key: GangKey) -> None:
        if self._parked.pop(key, None) is not None:
            self._parked_summary = None

    def _expire(self, key: GangKey, entry: _Entry) -> None:
        entry.timer = None
        if self._entries.get(key) is entry and entry.where in ("backoff", "unschedulable"):
            self._push(key, entry)
