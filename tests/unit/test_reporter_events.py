"""The reporter's Event queue in a burst: full, it drops and counts, and never raises.

Every bound pod gets a ``Scheduled`` Event, posted at ``event_qps``; a burst of bindings fills
the queue, and what does not fit is dropped (as kube-scheduler's broadcaster drops when its
channel is full) without building its body or timestamp."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any, cast

from gang.binding.reporter import EVENT_QUEUE_LIMIT, KubeReporter
from gang.kube.transport import Kube


async def test_a_full_event_queue_drops_and_counts_what_does_not_fit() -> None:
    reporter = KubeReporter(cast(Kube, cast(Any, None)), "gang-scheduler", "test")
    for i in range(EVENT_QUEUE_LIMIT + 5):
        reporter.pod_event(("ns", f"p{i}"), f"u{i}", "Normal", "Scheduled", "bound")
    assert len(reporter._events) == EVENT_QUEUE_LIMIT
    assert reporter.dropped_events == 5
    first = reporter._event(reporter._events.popleft())
    assert first["involvedObject"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": "ns",
        "name": "p0",
        "uid": "u0",
    }
    assert first["reason"] == "Scheduled" and first["metadata"]["generateName"] == "p0."
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["firstTimestamp"])
    assert first["lastTimestamp"] == first["firstTimestamp"]


class _Recorder:
    """``Kube.create_event`` as far as the poster uses it: records each body."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []

    async def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        await asyncio.sleep(0)  # an answer takes a turn of the loop
        self.posted.append(body)


async def test_the_poster_wakes_for_events_queued_while_it_waits_or_posts() -> None:
    kube = _Recorder()
    reporter = KubeReporter(cast(Kube, kube), "gang-scheduler", "test")
    poster = asyncio.create_task(reporter.run_events())
    try:
        sizes = (1, 4, 1, 3)  # queued alone while it waits, and some while it posts
        for round_, size in enumerate(sizes):
            for i in range(size):
                reporter.pod_event(("ns", f"r{round_}-p{i}"), "u", "Normal", "Scheduled", "bound")
                if i == 1:
                    await asyncio.sleep(0)  # the poster is in the middle of a post now
            for _ in range(100):
                if len(kube.posted) == sum(sizes[: round_ + 1]):
                    break
                await asyncio.sleep(0)
            names = [body["involvedObject"]["name"] for body in kube.posted]
            assert names == [f"r{r}-p{i}" for r in range(round_ + 1) for i in range(sizes[r])]
            assert not reporter._events
    finally:
        poster.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poster
