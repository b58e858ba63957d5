"""A gang's members by key, with what the queue's order reads of all of them kept as they change.

Why: every member that arrives puts its gang in the queue again (``ClusterState.enqueue``), and
the queue's key reads the gang's highest priority, best QoS, earliest creation and whether any
member is bound. Read as passes over the members, a gang of n pods listed at start-up cost
n²/2 member visits: 20,000 pods listed in gangs of 1,024 took 135 µs each against 49 in gangs
of 8, most of it in those passes (the same sum runs whenever a big job's pods are created).
Here each of those answers is a count kept per value as members are set and removed, so adding
a member costs the same however big its gang is.

Invariant: ``priorities``, ``qos_ranks`` and ``created`` count, per value, the members having
it (no value is kept at 0), and ``bound_count`` is how many members are bound (a node named,
not finished). Every way a member is set or removed moves them: ``_count``/``_uncount``, or,
where the member is the same pod again (same priority, QoS and creation), only
``bound_count`` (``__setitem__``'s short path, ``now_bound``); a copy is rebuilt member by
member (``__reduce__``), never given the counts as they stand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gang.state.podinfo import PodInfo

Key = tuple[str, str]


class Members(dict[Key, PodInfo]):
    """``dict`` of a gang's members, read as any dict; written through the methods below."""

    __slots__ = ("bound_count", "created", "priorities", "qos_ranks")

    def __init__(self, members: Mapping[Key, PodInfo] | Iterable[tuple[Key, PodInfo]] = ()) -> None:
        super().__init__()
        #: member priority → how many members have it
        self.priorities: dict[int, int] = {}
        #: QoS rank → how many members have it
        self.qos_ranks: dict[int, int] = {}
        #: creation timestamp → how many members have it
        self.created: dict[float, int] = {}
        #: members assigned to a node and not finished
        self.bound_count = 0
        self.update(members)

    # --- what the queue reads -----------------------------------------------------------

    def highest_priority(self, default: int = 0) -> int:
        return max(self.priorities, default=default)

    def best_qos(self, default: int) -> int:
        return max(self.qos_ranks, default=default)

    def earliest(self, default: float = 0.0) -> float:
        return min(self.created, default=default)

    # --- writes ---------------------------------------------------------------------------

    def __setitem__(self, key: Key, pod: PodInfo) -> None:
        old = dict.get(self, key)
        dict.__setitem__(self, key, pod)
        if (
            old is not None
            and old.priority == pod.priority
            and old.qos_rank == pod.qos_rank
            and old.creation_timestamp == pod.creation_timestamp
        ):  # the same pod's update (every binding's confirmation): at most its binding moved
            self.bound_count += _is_bound(pod) - _is_bound(old)
            return
        if old is not None:
            self._uncount(old)
        self._count(pod)

    def now_bound(self, pod: PodInfo) -> None:
        """``self[pod.key] = pod`` where ``pod`` is the bound copy of a member that was not
        bound (``bound_copy``: same priority, QoS and creation; a node, not finished): the
        confirmation of its binding, one per bound pod, counted without the general path."""
        dict.__setitem__(self, pod.key, pod)
        self.bound_count += 1

    def __delitem__(self, key: Key) -> None:
        old = self[key]
        dict.__delitem__(self, key)
        self._uncount(old)

    def pop(self, key: Key, *default: Any) -> Any:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        old = self[key]
        del self[key]
        return old

    def popitem(self) -> tuple[Key, PodInfo]:
        key, old = dict.popitem(self)
        self._uncount(old)
        return key, old

    def setdefault(self, key: Key, default: PodInfo) -> PodInfo:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *others: Any) -> None:
        for other in others:
            pairs = other.items() if isinstance(other, Mapping) else other
            for key, pod in pairs:
                self[key] = pod

    def __ior__(self, other: Any) -> Members:  # type: ignore[override,misc]
        self.update(other)
        return self

    def __reduce__(self) -> tuple[type[Members], tuple[list[tuple[Key, PodInfo]]]]:
        return (Members, (list(self.items()),))

    def clear(self) -> None:
        dict.clear(self)
        self.priorities.clear()
        self.qos_ranks.clear()
        self.created.clear()
        self.bound_count = 0

    def _count(self, pod: PodInfo) -> None:
        _plus(self.priorities, pod.priority)
        _plus(self.qos_ranks, pod.qos_rank)
        _plus(self.created, pod.creation_timestamp)
        self.bound_count += _is_bound(pod)

    def _uncount(self, pod: PodInfo) -> None:
        _minus(self.priorities, pod.priority)
        _minus(self.qos_ranks, pod.qos_rank)
        _minus(self.created, pod.creation_timestamp)
        self.bound_count -= _is_bound(pod)


def _is_bound(pod: PodInfo) -> int:
    """1 for a member ``Gang.bound`` lists (a node named, not finished), else 0."""
    return 1 if pod.node_name and not pod.terminal else 0


def _plus(counts: dict[Any, int], value: Any) -> None:
    counts[value] = counts.get(value, 0) + 1


def _minus(counts: dict[Any, int], value: Any) -> None:
    left = counts[value] - 1
    if left:
        counts[value] = left
    else:
        del counts[value]
