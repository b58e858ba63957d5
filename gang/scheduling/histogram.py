"""A cumulative-bucket duration histogram (Prometheus style) kept as plain integers.

Why this exists: the scheduling code observes durations on its hot path (time to a full gang, a
preemption decision) where a metrics library has no business; the /metrics collector reads these
at scrape time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: upper bounds (seconds) of the time-to-full-gang histogram buckets
FULL_GANG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
#: upper bounds (seconds) of the preemption-decision histogram buckets
DECISION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


@dataclass(slots=True)
class DurationHistogram:
    """Counts per bucket with a bounded memory footprint."""

    bounds: tuple[float, ...] = FULL_GANG_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    observations: int = 0
    largest: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, seconds: float) -> None:
        index = next(
            (i for i, bound in enumerate(self.bounds) if seconds <= bound), len(self.bounds)
        )
        self.counts[index] += 1
        self.total += seconds
        self.observations += 1
        self.largest = max(self.largest, seconds)

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out
