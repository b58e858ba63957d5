"""The simulator's audit trail: what clients asked, when, and every binding and eviction POST.

Reliability claims need evidence taken from the server's side, not the client's word: "the
client waited Retry-After before trying again" is a gap between two request arrivals; "the
client kept to its rate limit" is a count of arrivals per window; "no pod was bound twice" is a
count of binding POSTs per pod, where a second POST for a pod already bound is a 409 that a real
apiserver would answer just the same — so every such conflict is recorded with the node the pod
was on and the node the POST asked for. A conflict on the same node is a retry whose first answer
was lost; one on another node means a scheduler lost track of a bound pod.

Preemption claims need the same kind of evidence: "the scheduler evicted only the victims it
chose, through the Eviction API, and backed off when a PodDisruptionBudget said no" is the list
of eviction POSTs with their answers (201 evicted, 429 refused by a budget, 500 more than one
budget, 404 no such pod), kept in ``evictions`` in arrival order.

Binding and eviction records are always kept (a counter increment per binding, a small record per
eviction); the per-request log costs a record per request and is off unless ``record_requests``
is set.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

Key = tuple[str, str]  # (namespace, name)


@dataclass(slots=True)
class RequestRecord:
    """One API request: arrival time (``time.monotonic``), what it was, and its answer."""

    at: float
    method: str
    path: str
    watch: bool
    #: the HTTP status answered; 0 while unanswered (or when the handler failed outright)
    status: int = 0


@dataclass(frozen=True, slots=True)
class BindingConflict:
    """A binding POST refused because the pod was already bound."""

    at: float
    pod: Key
    target: str
    bound_to: str

    @property
    def same_node(self) -> bool:
        return self.target == self.bound_to


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """One POST to pods/{name}/eviction: when (``time.monotonic``), which pod, the HTTP answer."""

    at: float
    pod: Key
    status: int

    @property
    def evicted(self) -> bool:
        return self.status == 201


@dataclass(slots=True)
class Audit:
    record_requests: bool = False
    max_requests: int = 200_000
    requests: deque[RequestRecord] = field(init=False)
    #: binding POSTs that reached the binding handler, per pod (whatever their answer)
    binding_posts: Counter[Key] = field(default_factory=Counter)
    #: bindings accepted (201), per pod: never above 1 while the server's check holds
    bindings_accepted: Counter[Key] = field(default_factory=Counter)
    conflicts: list[BindingConflict] = field(default_factory=list)
    #: every eviction POST that reached the eviction handler, in arrival order
    evictions: list[EvictionRecord] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.requests = deque(maxlen=self.max_requests)

    def request(self, method: str, path: str, watch: bool) -> RequestRecord | None:
        if not self.record_requests:
            return None
        record = RequestRecord(self.clock(), method, path, watch)
        self.requests.append(record)
        return record

    def binding(self, pod: Key, target: str, bound_to: str, status: int) -> None:
        """One binding POST for ``pod`` asking for ``target``; ``bound_to`` is where the pod
        already was ("" if unbound) and ``status`` the answer."""
        self.binding_posts[pod] += 1
        if status == 201:
            self.bindings_accepted[pod] += 1
        elif status == 409 and bound_to:
            self.conflicts.append(BindingConflict(self.clock(), pod, target, bound_to))

    def eviction(self, pod: Key, status: int) -> None:
        """One eviction POST for ``pod`` and the HTTP status it was answered with."""
        self.evictions.append(EvictionRecord(self.clock(), pod, status))

    # --- summaries -------------------------------------------------------------------------

    @property
    def double_binds(self) -> int:
        """Binding POSTs for a pod already bound elsewhere (each would be a second placement)."""
        return sum(1 for c in self.conflicts if not c.same_node)

    @property
    def repeated_binds(self) -> int:
        """Binding POSTs for a pod already bound to the same node (a retry of a lost answer)."""
        return sum(1 for c in self.conflicts if c.same_node)

    def evictions_of(self, pod: Key) -> list[int]:
        """The answers to the eviction POSTs for ``pod``, in order (e.g. ``[429, 201]``)."""
        return [r.status for r in self.evictions if r.pod == pod]

    @property
    def evicted(self) -> list[Key]:
        """Pods whose eviction was accepted (201), in order."""
        return [r.pod for r in self.evictions if r.status == 201]

    def select(
        self, method: str | None = None, predicate: Callable[[RequestRecord], bool] | None = None
    ) -> Iterator[RequestRecord]:
        for record in self.requests:
            if (method is None or record.method == method) and (
                predicate is None or predicate(record)
            ):
                yield record

    def reset(self) -> None:
        self.requests.clear()
        self.binding_posts.clear()
        self.bindings_accepted.clear()
        self.conflicts.clear()
        self.evictions.clear()
