"""Fault injection knobs: the ways production apiservers misbehave, on demand and seeded.

A scheduler earns trust by surviving a flaky control plane: throttling (429 with Retry-After),
transient 5xx, slow answers, load balancers that cut long watches, history compaction that
forces relists, whole-server restarts, a slow binding path, and watch caches that lose an event
(only a periodic relist repairs that). Each knob here reproduces one of those; all draws come
from one seeded RNG so a failing chaos run can be replayed. The knobs are plain attributes and
may be changed while the simulator runs. Counters say what was injected, for test reports.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from gang.sim import errors
from gang.sim.errors import ApiError


@dataclass(slots=True)
class FaultCounts:
    delayed: int = 0
    throttled: int = 0
    server_errors: int = 0
    watches_opened: int = 0
    watches_cut: int = 0
    history_expiries: int = 0
    restarts: int = 0
    events_dropped: int = 0
    conflicts: int = 0


@dataclass(slots=True)
class Faults:
    #: seconds added to every API request (plus up to ``latency_jitter`` more, uniformly).
    latency: float = 0.0
    latency_jitter: float = 0.0
    #: probability that an API request is answered 429 TooManyRequests with Retry-After.
    throttle_rate: float = 0.0
    retry_after_seconds: int = 1
    #: probability that an API request is answered 500 InternalError.
    error_rate: float = 0.0
    #: close every watch stream after this many seconds (a load balancer's idle cut).
    watch_drop_after: float | None = None
    #: seconds added to every pods/binding POST on top of ``latency`` (a slow binding path
    #: spreads a gang's bindings out in time, so a crash can fall between the first and last).
    binding_latency: float = 0.0
    #: probability that one watch event is silently not sent to one watcher; the stream goes
    #: on, so the watcher never learns of the change until it lists again.
    drop_event_rate: float = 0.0
    #: drop the first watch event that ``drop_event_rate`` could drop, whatever the draw: a run
    #: whose watches are mostly cut (so few events flow) still loses one (the chaos runs)
    drop_first_event: bool = False
    #: (method, path) → how many more such requests to answer 409 Conflict, as if the object
    #: had changed since it was read (a write racing another writer, on demand)
    conflicts: dict[tuple[str, str], int] = field(default_factory=dict)
    seed: int | None = None
    counts: FaultCounts = field(default_factory=FaultCounts)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def reseed(self, seed: int | None) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    def request_delay(self, binding: bool = False) -> float:
        extra = self.binding_latency if binding else 0.0
        if self.latency <= 0 and self.latency_jitter <= 0 and extra <= 0:
            return 0.0
        self.counts.delayed += 1
        return self.latency + extra + self._rng.uniform(0.0, self.latency_jitter)

    def injected_error(self) -> ApiError | None:
        if self.throttle_rate > 0 and self._rng.random() < self.throttle_rate:
            self.counts.throttled += 1
            return errors.too_many_requests(self.retry_after_seconds)
        if self.error_rate > 0 and self._rng.random() < self.error_rate:
            self.counts.server_errors += 1
            return errors.internal_error("injected fault")
        return None

    def injected_conflict(self, method: str, path: str) -> ApiError | None:
        left = self.conflicts.get((method, path), 0)
        if left <= 0:
            return None
        self.conflicts[(method, path)] = left - 1
        self.counts.conflicts += 1
        name = path.rstrip("/").removesuffix("/status").rpartition("/")[2]
        return ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
            {"name": name},
        )

    def drop_event(self) -> bool:
        """Whether to silently skip the next watch event for one watcher."""
        if self.drop_event_rate > 0 and (
            (self.drop_first_event and not self.counts.events_dropped)
            or self._rng.random() < self.drop_event_rate
        ):
            self.counts.events_dropped += 1
            return True
        return False

    def note_watch_opened(self) -> None:
        self.counts.watches_opened += 1

    def calm(self) -> None:
        """Turn every knob off (the counters and the RNG stay): the control plane recovers."""
        self.latency = self.latency_jitter = self.binding_latency = 0.0
        self.throttle_rate = self.error_rate = self.drop_event_rate = 0.0
        self.watch_drop_after = None
        self.conflicts.clear()
