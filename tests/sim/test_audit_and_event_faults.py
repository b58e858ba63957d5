"""The simulator's newer knobs, seen over HTTP: dropped watch events, a slow binding path, calm(),
and the audit trail of requests and binding POSTs that reliability tests take as evidence."""

from __future__ import annotations

import asyncio

import aiohttp

from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from tests.conftest import Raw, binding, pod

PODS = "/api/v1/namespaces/default/pods"


async def _rv(raw: Raw) -> str:
    status, body, _ = await raw.get(PODS)
    assert status == 200
    rv: str = body["metadata"]["resourceVersion"]
    return rv


async def test_dropped_watch_events_are_skipped_silently_and_counted() -> None:
    faults = Faults(drop_event_rate=1.0)
    async with SimCluster(faults=faults) as cluster, aiohttp.ClientSession() as session:
        raw = Raw(session, cluster.url)
        since = await _rv(raw)

        async def create_later() -> None:
            await asyncio.sleep(0.1)
            assert (await raw.post(PODS, pod("lost")))[0] == 201
            await asyncio.sleep(0.1)
            faults.drop_event_rate = 0.0
            assert (await raw.post(PODS, pod("seen")))[0] == 201

        writer = asyncio.create_task(create_later())
        events = await raw.watch_lines(
            f"{PODS}?watch=1&resourceVersion={since}", max_events=1, seconds=3
        )
        await writer
        # the stream went on: the next event came, carrying a version past the lost one
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "seen")]
        assert faults.counts.events_dropped == 1
        # a list (or a watch resumed from before the loss) still has it
        status, listed, _ = await raw.get(PODS)
        assert status == 200
        assert [p["metadata"]["name"] for p in listed["items"]] == ["lost", "seen"]


async def test_binding_latency_delays_binding_posts_only() -> None:
    async with (
        SimCluster("1", faults=Faults(binding_latency=0.3)) as cluster,
        aiohttp.ClientSession() as session,
    ):
        raw = Raw(session, cluster.url)
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert (await raw.post(PODS, pod("p")))[0] == 201
        assert loop.time() - start < 0.3
        start = loop.time()
        status, _, _ = await raw.post(f"{PODS}/p/binding", binding("p", "node-00000"))
        assert status == 201 and loop.time() - start >= 0.3
        assert cluster.faults.counts.delayed == 1


async def test_calm_turns_every_knob_off_and_keeps_the_counts() -> None:
    faults = Faults(
        latency=1,
        latency_jitter=1,
        throttle_rate=1,
        error_rate=1,
        watch_drop_after=1,
        binding_latency=1,
        drop_event_rate=1,
    )
    faults.counts.throttled = 4
    faults.calm()
    assert faults.request_delay(binding=True) == 0 and faults.injected_error() is None
    assert not faults.drop_event() and faults.watch_drop_after is None
    assert faults.counts.throttled == 4


async def test_audit_counts_binding_posts_and_conflicts_per_pod() -> None:
    async with SimCluster("2") as cluster, aiohttp.ClientSession() as session:
        raw = Raw(session, cluster.url)
        for name in ("a", "b"):
            assert (await raw.post(PODS, pod(name)))[0] == 201
        assert (await raw.post(f"{PODS}/a/binding", binding("a", "node-00000")))[0] == 201
        # a retry whose first answer was lost, and a second placement elsewhere: both 409
        assert (await raw.post(f"{PODS}/a/binding", binding("a", "node-00000")))[0] == 409
        assert (await raw.post(f"{PODS}/a/binding", binding("a", "node-00001")))[0] == 409
        # the bindings collection counts too
        status, _, _ = await raw.post(
            "/api/v1/namespaces/default/bindings", binding("b", "node-00001")
        )
        assert status == 201
        audit = cluster.audit
        assert audit.binding_posts == {("default", "a"): 3, ("default", "b"): 1}
        assert audit.bindings_accepted == {("default", "a"): 1, ("default", "b"): 1}
        assert [(c.pod[1], c.target, c.bound_to) for c in audit.conflicts] == [
            ("a", "node-00000", "node-00000"),
            ("a", "node-00001", "node-00000"),
        ]
        assert (audit.repeated_binds, audit.double_binds) == (1, 1)
        assert list(audit.requests) == []  # the request log is off unless asked for


async def test_audit_records_request_arrivals_and_answers() -> None:
    faults = Faults(throttle_rate=1.0)
    async with SimCluster(faults=faults) as cluster, aiohttp.ClientSession() as session:
        raw = Raw(session, cluster.url)
        cluster.audit.record_requests = True
        assert (await raw.get(PODS))[0] == 429
        faults.throttle_rate = 0.0
        assert (await raw.get(PODS))[0] == 200
        await raw.watch_lines(f"{PODS}?watch=1&timeoutSeconds=1", max_events=1, seconds=0.2)
        assert (await raw.get("/version"))[0] == 200  # not an API request: not recorded
        records = list(cluster.audit.requests)
        assert [(r.method, r.path, r.watch) for r in records] == [
            ("GET", PODS, False),
            ("GET", PODS, False),
            ("GET", PODS, True),
        ]
        assert [r.status for r in records[:2]] == [429, 200]
        assert records[0].at <= records[1].at <= records[2].at


def test_the_first_event_a_rate_could_drop_is_dropped_when_asked() -> None:
    """``drop_first_event``: a chaos run loses at least one watch event however few flow; after
    the first, the rate alone decides (here: practically never). Off, the first is a draw."""
    sure = Faults(drop_event_rate=1e-9, drop_first_event=True, seed=1)
    assert [sure.drop_event() for _ in range(1000)] == [True] + [False] * 999
    assert sure.counts.events_dropped == 1
    drawn = Faults(drop_event_rate=1e-9, seed=1)
    assert not any(drawn.drop_event() for _ in range(1000))
    assert not Faults(drop_first_event=True).drop_event()  # no rate: nothing dropped
