"""The reporter's Event queue in a burst: full, it drops and counts, and never raises.

Every bound pod gets a ``Scheduled`` Event, posted at ``event_qps``; a burst of bindings fills
the queue, and what does not fit is dropped (as kube-scheduler's broadcaster drops when its
channel is full) without building its body or timestamp."""

from __future__ import annotations

from typing import Any, cast

from gang.binding.reporter import EVENT_QUEUE_LIMIT, KubeReporter
from gang.kube.transport import Kube


async def test_a_full_event_queue_drops_and_counts_what_does_not_fit() -> None:
    reporter = KubeReporter(cast(Kube, cast(Any, None)), "gang-scheduler", "test")
    for i in range(EVENT_QUEUE_LIMIT + 5):
        reporter.pod_event(("ns", f"p{i}"), f"u{i}", "Normal", "Scheduled", "bound")
    assert reporter._events.qsize() == EVENT_QUEUE_LIMIT
    assert reporter.dropped_events == 5
    first = reporter._events.get_nowait()
    assert first[1]["name"] == "p0" and first[3] == "Scheduled"
