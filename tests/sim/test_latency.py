"""The API server latency model: spec parsing, its queueing arithmetic, and its effect over HTTP.

The HTTP tests make the queue deterministic by holding the only worker themselves (a write of
their own through ``ApiLatency.write``), so they assert structure and counters, never durations.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from gang.sim.cluster import SimCluster
from gang.sim.latency import (
    CALIBRATION,
    MANY_CORE_CALIBRATION,
    REAL_MAX_INFLIGHT,
    REAL_NETWORK_SECONDS,
    REAL_SERVICE_SECONDS,
    REAL_WORKERS,
    ApiLatency,
    expected_throughput,
    parse_latency,
    throughput_curve,
)
from gang.sim.server import SimServer
from tests.conftest import pod

NS = "default"


async def _wait_for(predicate: Callable[[], bool], seconds: float = 10.0) -> None:
    """Poll until ``predicate`` holds; the timeout only turns a hang into a failure."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


# --- parse_latency --------------------------------------------------------------------------


def test_parse_latency_none_and_real() -> None:
    assert parse_latency("none") is None
    assert parse_latency(" None ") is None
    real = parse_latency("real")
    assert real is not None
    assert (real.workers, real.service_seconds, real.network_seconds, real.max_inflight) == (
        REAL_WORKERS,
        REAL_SERVICE_SECONDS,
        REAL_NETWORK_SECONDS,
        REAL_MAX_INFLIGHT,
    )
    assert REAL_MAX_INFLIGHT == 200
    assert real.seed is None


def test_parse_latency_full_and_partial_specs() -> None:
    full = parse_latency("workers=16,service=17ms,network=60ms,inflight=200")
    assert full is not None
    assert full.workers == 16
    assert full.service_seconds == pytest.approx(0.017)
    assert full.network_seconds == pytest.approx(0.060)
    assert full.max_inflight == 200

    partial = parse_latency(" workers = 4 , service=0.25s ")
    assert partial is not None
    assert partial.workers == 4 and partial.service_seconds == pytest.approx(0.25)
    assert partial.network_seconds == REAL_NETWORK_SECONDS
    assert partial.max_inflight == REAL_MAX_INFLIGHT

    uncapped = parse_latency("inflight=none,network=0ms,seed=7")
    assert uncapped is not None
    assert uncapped.max_inflight is None and uncapped.network_seconds == 0.0
    assert uncapped.seed == 7 and uncapped.workers == REAL_WORKERS
    assert parse_latency("service=.5ms") == ApiLatency(service_seconds=0.0005)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("fast", "'fast': expected key=value"),
        ("workers=16,", "'': expected key=value"),
        ("workers=", "'workers=': expected key=value"),
        ("workers=0", "'workers=0': must be at least 1"),
        ("workers=two", "'workers=two': expected a whole number"),
        ("workers=1.5", "'workers=1.5': expected a whole number"),
        ("service=17", "'service=17': expected a duration with a unit"),
        ("network=5us", "'network=5us': expected a duration with a unit"),
        ("service=-1ms", "'service=-1ms': expected a duration"),
        ("inflight=0", "'inflight=0': must be at least 1"),
        ("workers=2,speed=3ms", "'speed=3ms': unknown key"),
        ("workers=2,workers=3", "'workers=3': workers given twice"),
        ("real,workers=2", "'real': expected key=value"),
    ],
)
def test_parse_latency_rejects_bad_specs_naming_the_bad_part(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_latency(spec)


def test_the_model_rejects_impossible_knobs() -> None:
    with pytest.raises(ValueError, match="workers"):
        ApiLatency(workers=0)
    with pytest.raises(ValueError, match="negative"):
        ApiLatency(service_seconds=-0.1)
    with pytest.raises(ValueError, match="max_inflight"):
        ApiLatency(max_inflight=0)


# --- expected_throughput --------------------------------------------------------------------


def _product_form_throughput(latency: ApiLatency, clients: int) -> float:
    """The same network solved another way: its product-form stationary distribution."""
    c, s, z = latency.workers, latency.service_seconds, latency.network_seconds
    log_weights = []
    for at_workers in range(clients + 1):
        at_delay = clients - at_workers
        log_w = at_delay * math.log(z) - math.lgamma(at_delay + 1)
        log_w += sum(math.log(s / min(j, c)) for j in range(1, at_workers + 1))
        log_weights.append(log_w)
    top = max(log_weights)
    weights = [math.exp(w - top) for w in log_weights]
    busy = sum(w * min(n, c) for n, w in enumerate(weights)) / sum(weights)
    return busy / s


def test_real_profile_reproduces_the_measured_apiserver() -> None:
    real = ApiLatency()
    for clients, measured in CALIBRATION:
        assert expected_throughput(real, clients) == pytest.approx(measured, rel=0.03)
    assert dict(CALIBRATION) == {64: 714.0, 128: 909.0}


def test_many_core_profile_reproduces_the_16_core_apiserver() -> None:
    many = parse_latency("many-core")
    assert many is not None and many.max_inflight == ApiLatency().max_inflight
    for clients, measured in MANY_CORE_CALIBRATION:
        assert expected_throughput(many, clients) == pytest.approx(measured, rel=0.02)
    # the ratio a benchmark tracks: many cores serve about 4.7x the 2-core server's writes
    assert expected_throughput(many, 256) / expected_throughput(ApiLatency(), 256) > 4


@pytest.mark.parametrize(("workers", "service"), [(1, 0.05), (4, 0.01), (16, 0.0175)])
def test_without_network_delay_and_spare_workers_each_client_gets_a_worker(
    workers: int, service: float
) -> None:
    latency = ApiLatency(workers=workers, service_seconds=service, network_seconds=0.0)
    for clients in range(1, workers + 1):
        assert expected_throughput(latency, clients) == pytest.approx(clients / service)
    # with no delay station every extra client only queues
    assert expected_throughput(latency, 3 * workers) == pytest.approx(workers / service)


@pytest.mark.parametrize(
    "latency",
    [
        ApiLatency(),
        ApiLatency(workers=1, service_seconds=0.05, network_seconds=0.2),
        ApiLatency(workers=50, service_seconds=0.055, network_seconds=0.035),
        ApiLatency(workers=8, service_seconds=0.01, network_seconds=0.0),
    ],
)
def test_throughput_rises_monotonically_to_workers_over_service(latency: ApiLatency) -> None:
    curve = throughput_curve(latency, 300)
    assert curve[0] == 0.0 and len(curve) == 301
    assert curve[64] == expected_throughput(latency, 64)
    assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(curve))
    cap = latency.workers / latency.service_seconds
    assert all(x <= cap * (1 + 1e-9) for x in curve)
    assert expected_throughput(latency, 600) == pytest.approx(cap, rel=1e-6)


@pytest.mark.parametrize(
    "latency",
    [
        ApiLatency(),
        ApiLatency(workers=50, service_seconds=0.055, network_seconds=0.035),
        ApiLatency(workers=3, service_seconds=0.02, network_seconds=0.1),
    ],
)
@pytest.mark.parametrize("clients", [1, 7, 64, 128, 256])
def test_mva_matches_the_product_form_solution(latency: ApiLatency, clients: int) -> None:
    assert expected_throughput(latency, clients) == pytest.approx(
        _product_form_throughput(latency, clients), rel=1e-9
    )


def test_expected_throughput_edge_cases() -> None:
    assert expected_throughput(ApiLatency(), 0) == 0.0
    with pytest.raises(ValueError, match="negative"):
        expected_throughput(ApiLatency(), -1)
    free = ApiLatency(service_seconds=0.0, network_seconds=0.0)
    assert expected_throughput(free, 5) == math.inf
    assert throughput_curve(free, 2) == [0.0, math.inf, math.inf]
    network_only = ApiLatency(service_seconds=0.0, network_seconds=0.1)
    assert expected_throughput(network_only, 5) == pytest.approx(50.0)


# --- the worker gate, without HTTP ----------------------------------------------------------


async def test_a_cancelled_waiter_gives_up_its_place_and_holds_no_worker() -> None:
    latency = ApiLatency(workers=1, service_seconds=0.0, network_seconds=0.0, max_inflight=None)
    order: list[str] = []

    async def writer(name: str) -> None:
        async with latency.write():
            order.append(name)

    async with latency.write():
        first = asyncio.create_task(writer("first"))
        second = asyncio.create_task(writer("second"))
        await _wait_for(lambda: latency.queued == 2)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert latency.queued == 1 and latency.in_service == 1
    await second
    assert order == ["second"]
    assert latency.in_service == 0 and latency.queued == 0
    assert latency.counts.served == 2  # the test's own write and the second


async def test_more_workers_serve_in_parallel_up_to_their_number() -> None:
    latency = ApiLatency(workers=3, service_seconds=0.0, network_seconds=0.0, max_inflight=None)
    release = asyncio.Event()

    async def writer() -> None:
        async with latency.write():
            await release.wait()

    tasks = [asyncio.create_task(writer()) for _ in range(5)]
    await _wait_for(lambda: latency.in_service == 3 and latency.queued == 2)
    release.set()
    await asyncio.gather(*tasks)
    counts = latency.counts
    assert (counts.served, counts.peak_in_service, counts.peak_queued) == (5, 3, 2)
    assert counts.peak_inflight == 5 and counts.throttled == 0


# --- over HTTP, through kubernetes-asyncio --------------------------------------------------


def test_the_model_is_off_by_default() -> None:
    cluster = SimCluster()
    assert cluster.latency is None and cluster.server.latency is None
    assert SimServer(cluster.api).latency is None
    model = ApiLatency()
    cluster.latency = model
    assert cluster.server.latency is model


async def test_writes_queue_for_the_one_worker_and_reads_do_not() -> None:
    latency = ApiLatency(
        workers=1, service_seconds=0.05, network_seconds=0.0, max_inflight=None, seed=2
    )
    async with SimCluster("1", latency=latency) as cluster, cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        async with latency.write():  # the test holds the only worker
            writes = [
                asyncio.create_task(core.create_namespaced_pod(NS, pod(f"p{i}"))) for i in range(5)
            ]
            await _wait_for(lambda: latency.queued == 5)
            # reads pass the queue: a list and a get answer while every write still waits
            listed = await core.list_namespaced_pod(NS)
            assert listed.items == []
            node = await core.read_node("node-00000")
            assert node.metadata.name == "node-00000"
            assert latency.queued == 5 and latency.in_service == 1
        created = await asyncio.gather(*writes)
        assert sorted(p.metadata.name for p in created) == [f"p{i}" for i in range(5)]
        counts = latency.counts
        assert counts.served == 6  # the five pods and the test's own write
        assert counts.peak_in_service == 1
        assert counts.peak_queued == 5 and counts.peak_inflight == 6
        assert counts.throttled == 0 and counts.busy_seconds > 0
        assert latency.in_service == 0 and latency.queued == 0


async def test_every_mutating_verb_goes_through_the_model_and_no_read_does() -> None:
    latency = ApiLatency(workers=2, service_seconds=0.0, network_seconds=0.0, max_inflight=None)
    async with SimCluster("1", latency=latency) as cluster, cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        events = k8s.EventsV1Api(api)
        served: list[int] = []

        def step() -> int:
            served.append(latency.counts.served)
            return served[-1] - (served[-2] if len(served) > 1 else 0)

        created = await core.create_namespaced_pod(NS, pod("p"))  # POST
        assert step() == 1
        binding = k8s.V1Binding(
            metadata=k8s.V1ObjectMeta(name="p"),
            target=k8s.V1ObjectReference(api_version="v1", kind="Node", name="node-00000"),
        )
        await core.create_namespaced_pod_binding("p", NS, binding, _preload_content=False)
        assert step() == 1
        await core.patch_namespaced_pod_status(  # PATCH
            "p", NS, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
        )
        assert step() == 1
        current = await core.read_namespaced_pod("p", NS)
        current.metadata.labels = {"seen": "yes"}
        await core.replace_namespaced_pod("p", NS, current)  # PUT
        assert step() == 1
        await events.create_namespaced_event(
            NS,
            k8s.EventsV1Event(
                metadata=k8s.V1ObjectMeta(name="p.1", namespace=NS),
                event_time=created.metadata.creation_timestamp,
                reporting_controller="gang-scheduler",
                reporting_instance="gang-scheduler-0",
                action="Binding",
                reason="Scheduled",
                type="Normal",
                regarding=k8s.V1ObjectReference(kind="Pod", namespace=NS, name="p"),
            ),
        )
        assert step() == 1
        # reads: get, list, discovery, a watch
        await core.read_namespaced_pod("p", NS)
        await core.list_namespaced_pod(NS)
        await core.list_node()
        await events.list_namespaced_event(NS)
        await k8s.CoreApi(api).get_api_versions()
        stream = watch.Watch()
        async for event in stream.stream(core.list_namespaced_pod, NS, timeout_seconds=5):
            assert event["type"] == "ADDED"
            stream.stop()
        assert step() == 0
        await core.delete_namespaced_pod("p", NS, grace_period_seconds=0)  # DELETE
        assert step() == 1
        # a write the API refuses was still served (it reached the handler)
        with pytest.raises(ApiException) as info:
            await core.delete_namespaced_pod("gone", NS)
        assert info.value.status == 404
        assert step() == 1
        assert latency.counts.throttled == 0 and latency.counts.peak_in_service == 1


async def test_writes_past_max_inflight_get_429_and_do_not_happen() -> None:
    latency = ApiLatency(workers=1, service_seconds=0.01, network_seconds=0.0, max_inflight=2)
    async with SimCluster("1", latency=latency) as cluster, cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        async with latency.write():  # in flight: 1 (in service)
            queued = asyncio.create_task(core.create_namespaced_pod(NS, pod("queued")))
            await _wait_for(lambda: latency.queued == 1)  # in flight: 2, the cap
            refused = await asyncio.gather(
                *(core.create_namespaced_pod(NS, pod(f"refused-{i}")) for i in range(3)),
                core.delete_namespaced_pod("queued", NS),
                return_exceptions=True,
            )
        await queued
        assert all(isinstance(err, ApiException) for err in refused), refused
        for err in refused:
            assert isinstance(err, ApiException)
            assert err.status == 429
            assert err.headers["Retry-After"] == "1"
            assert orjson.loads(err.body) == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Too many requests, please try again later.",
                "reason": "TooManyRequests",
                "details": {"retryAfterSeconds": 1},
                "code": 429,
            }
        counts = latency.counts
        assert counts.throttled == 4
        assert counts.served == 2  # the test's own write and the queued pod
        assert counts.peak_inflight == 2
        # nothing lost, nothing extra: only the queued pod exists, the refused delete did not run
        names = [p.metadata.name for p in (await core.list_namespaced_pod(NS)).items]
        assert names == ["queued"]
        # a refused write may be retried once there is room
        retried = await core.create_namespaced_pod(NS, pod("refused-0"))
        assert retried.metadata.name == "refused-0"
        assert latency.counts.served == 3 and latency.counts.throttled == 4


async def test_the_model_can_be_switched_on_and_off_while_serving() -> None:
    async with SimCluster("1") as cluster, cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        await core.create_namespaced_pod(NS, pod("before"))
        latency = ApiLatency(workers=1, service_seconds=0.0, network_seconds=0.0)
        cluster.latency = latency
        await core.create_namespaced_pod(NS, pod("during"))
        cluster.latency = None
        await core.create_namespaced_pod(NS, pod("after"))
        assert latency.counts.served == 1


# --- gang sim serve --api-latency -----------------------------------------------------------


def _parsed(tmp_path: Path, *flags: str) -> argparse.Namespace:
    from gang.cli import build_parser

    return build_parser().parse_args(
        ["sim", "serve", "--nodes", "1", "--kubeconfig", str(tmp_path / "k"), *flags]
    )


def test_sim_serve_api_latency_flag(tmp_path: Path) -> None:
    from gang.cli.sim_serve import cluster_from_args

    assert cluster_from_args(_parsed(tmp_path)).latency is None
    assert cluster_from_args(_parsed(tmp_path, "--api-latency", "none")).latency is None
    real = cluster_from_args(_parsed(tmp_path, "--api-latency", "real")).latency
    assert real is not None
    assert (real.workers, real.service_seconds, real.max_inflight) == (
        REAL_WORKERS,
        REAL_SERVICE_SECONDS,
        REAL_MAX_INFLIGHT,
    )
    custom = cluster_from_args(
        _parsed(tmp_path, "--api-latency", "workers=2,service=5ms,inflight=none", "--seed", "9")
    ).latency
    assert custom is not None
    assert (custom.workers, custom.service_seconds, custom.max_inflight) == (2, 0.005, None)
    assert custom.seed == 9  # --seed, as the spec named none
    seeded = cluster_from_args(_parsed(tmp_path, "--api-latency", "seed=3", "--seed", "9")).latency
    assert seeded is not None and seeded.seed == 3


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("workers=0", "'workers=0': must be at least 1"),
        ("service=17", "'service=17': expected a duration with a unit"),
        ("sevrice=17ms", "'sevrice=17ms': unknown key"),
    ],
)
def test_sim_serve_rejects_a_bad_api_latency_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    with pytest.raises(SystemExit) as info:
        _parsed(tmp_path, "--api-latency", spec)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --api-latency:" in err and message in err
