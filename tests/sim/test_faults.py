"""Fault injection and control-plane trouble, seen over HTTP the way a client would see it.

Every test builds its own ``SimCluster`` with the knobs it needs: throttling, injected 5xx,
latency, watch cuts, server restarts, history compaction, bearer tokens and the body size limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client as k8s

from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from gang.sim.server import MAX_BODY_BYTES
from tests.conftest import Raw, pod

PODS = "/api/v1/namespaces/default/pods"


@asynccontextmanager
async def sim(*args: Any, **kwargs: Any) -> AsyncIterator[tuple[SimCluster, Raw]]:
    async with SimCluster(*args, **kwargs) as cluster, aiohttp.ClientSession() as session:
        yield cluster, Raw(session, cluster.url)


async def _rv(raw: Raw, path: str = PODS) -> str:
    status, body, _ = await raw.get(path)
    assert status == 200, body
    rv: str = body["metadata"]["resourceVersion"]
    return rv


def _names(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


async def _wait_for(predicate: Any, seconds: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


# --- throttling -----------------------------------------------------------------------------


async def test_throttle_answers_429_with_retry_after_on_every_api_request() -> None:
    async with sim("1", faults=Faults(throttle_rate=1.0, retry_after_seconds=7)) as (cluster, raw):
        requests: list[tuple[str, str, Any]] = [
            ("GET", PODS, None),
            ("POST", PODS, pod("p")),
            ("GET", "/api/v1/nodes/node-00000", None),
            ("GET", f"{PODS}?watch=1", None),
            ("DELETE", "/api/v1/namespaces/default", None),
            ("GET", "/api/v1", None),
            ("GET", "/apis", None),
            ("GET", "/apis/scheduling.k8s.io/v1/priorityclasses", None),
        ]
        for method, path, body in requests:
            async with raw.session.request(
                method,
                raw.base + path,
                data=orjson.dumps(body) if body is not None else None,
                headers={"Content-Type": "application/json"},
            ) as resp:
                assert resp.status == 429, (method, path)
                assert resp.headers["Retry-After"] == "7"
                assert resp.content_type == "application/json"
                answer = orjson.loads(await resp.read())
            assert answer == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Too many requests, please try again later.",
                "reason": "TooManyRequests",
                "details": {"retryAfterSeconds": 7},
                "code": 429,
            }
        assert cluster.faults.counts.throttled == len(requests)

        # non-API endpoints are never throttled (and not counted)
        status, version, _ = await raw.get("/version")
        assert status == 200 and version["major"] == "1"
        status, text, _ = await raw.get("/healthz")
        assert (status, text) == (200, "ok")
        assert cluster.faults.counts.throttled == len(requests)

        # the throttled writes never happened
        cluster.faults.throttle_rate = 0.0
        status, listed, _ = await raw.get(PODS)
        assert status == 200 and listed["items"] == []
        assert cluster.store.get(cluster.api.rt_namespaces.storage_key, "", "default") is not None


async def test_throttle_is_seen_by_kubernetes_asyncio_as_429() -> None:
    faults = Faults(throttle_rate=1.0, retry_after_seconds=2)
    async with SimCluster(faults=faults) as cluster, cluster.api_client() as api:
        with pytest.raises(k8s.ApiException) as info:
            await k8s.CoreV1Api(api).list_namespace()
        assert info.value.status == 429
        assert info.value.headers["Retry-After"] == "2"
        assert orjson.loads(info.value.body)["reason"] == "TooManyRequests"


async def test_knobs_change_at_runtime() -> None:
    async with sim(faults=Faults(throttle_rate=1.0)) as (cluster, raw):
        assert (await raw.get(PODS))[0] == 429
        cluster.faults.throttle_rate = 0.0
        for _ in range(5):
            assert (await raw.get(PODS))[0] == 200
        assert (await raw.post(PODS, pod("p")))[0] == 201
        assert cluster.faults.counts.throttled == 1

        cluster.faults.error_rate = 1.0
        assert (await raw.get(PODS))[0] == 500
        cluster.faults.error_rate = 0.0
        status, listed, _ = await raw.get(PODS)
        assert status == 200 and _names(listed["items"]) == ["p"]
        assert cluster.faults.counts.server_errors == 1

        cluster.faults.throttle_rate = 1.0
        assert (await raw.get(PODS))[0] == 429
        assert cluster.faults.counts.throttled == 2


# --- injected server errors -----------------------------------------------------------------


async def test_error_rate_one_answers_500_internal_error() -> None:
    async with sim(faults=Faults(error_rate=1.0)) as (cluster, raw):
        for method, path, body in (("GET", PODS, None), ("POST", PODS, pod("p"))):
            status, answer, _ = await raw.request(method, path, body)
            assert status == 500
            assert answer == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Internal error occurred: injected fault",
                "reason": "InternalError",
                "details": {"causes": [{"message": "injected fault"}]},
                "code": 500,
            }
        assert cluster.faults.counts.server_errors == 2
        assert cluster.faults.counts.throttled == 0
        assert (await raw.get("/version"))[0] == 200
        assert (await raw.get("/readyz"))[0] == 200
        assert cluster.faults.counts.server_errors == 2


async def _error_pattern(seed: int, requests: int = 40) -> tuple[list[int], int]:
    async with sim(faults=Faults(error_rate=0.3, seed=seed)) as (cluster, raw):
        statuses = [(await raw.get("/api/v1/namespaces"))[0] for _ in range(requests)]
        return statuses, cluster.faults.counts.server_errors


async def test_error_rate_is_deterministic_for_a_seed() -> None:
    first, first_count = await _error_pattern(seed=1234)
    second, second_count = await _error_pattern(seed=1234)
    assert first == second
    assert set(first) == {200, 500}  # a rate of 0.3 over 40 requests: some of each
    assert first_count == second_count == first.count(500)
    other, _ = await _error_pattern(seed=99)
    assert other != first  # the seed, not luck, decides the pattern


async def test_reseed_replays_the_same_pattern() -> None:
    async with sim(faults=Faults(error_rate=0.5, seed=7)) as (cluster, raw):
        first = [(await raw.get(PODS))[0] for _ in range(20)]
        cluster.faults.reseed(7)
        again = [(await raw.get(PODS))[0] for _ in range(20)]
        assert first == again and set(first) == {200, 500}


# --- latency --------------------------------------------------------------------------------


async def test_latency_delays_api_requests_only() -> None:
    async with sim(faults=Faults(latency=0.2)) as (cluster, raw):
        loop = asyncio.get_running_loop()
        for method, path, body in (("GET", PODS, None), ("POST", PODS, pod("p"))):
            start = loop.time()
            status, _, _ = await raw.request(method, path, body)
            assert loop.time() - start >= 0.2
            assert status in (200, 201)
        assert cluster.faults.counts.delayed == 2
        assert (await raw.get("/version"))[0] == 200
        assert cluster.faults.counts.delayed == 2  # /version is not an API request


# --- watch cuts -----------------------------------------------------------------------------


async def test_watch_drop_after_ends_watches_and_resume_loses_nothing() -> None:
    async with sim(faults=Faults(watch_drop_after=0.3)) as (cluster, raw):
        loop = asyncio.get_running_loop()
        since = await _rv(raw)

        async def create_during_watch() -> None:
            await asyncio.sleep(0.1)
            assert (await raw.post(PODS, pod("a")))[0] == 201

        writer = asyncio.create_task(create_during_watch())
        start = loop.time()
        events = await raw.watch_lines(
            f"{PODS}?watch=1&resourceVersion={since}", max_events=100, seconds=5
        )
        elapsed = loop.time() - start
        await writer
        assert 0.3 <= elapsed < 2.0  # cut by the server, long before the client gave up
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a")]

        # changes while disconnected, then resume from the last version seen
        assert (await raw.post(PODS, pod("b")))[0] == 201
        assert (await raw.patch(f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}}))[0] == 200
        last = events[-1]["object"]["metadata"]["resourceVersion"]
        start = loop.time()
        rest = await raw.watch_lines(
            f"{PODS}?watch=1&resourceVersion={last}&timeoutSeconds=60", max_events=100, seconds=5
        )
        assert loop.time() - start >= 0.3  # timeoutSeconds cannot outlast the cut
        assert loop.time() - start < 2.0
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in rest] == [
            ("ADDED", "b"),
            ("MODIFIED", "a"),
        ]
        assert cluster.faults.counts.watches_opened == 2


# --- server restarts ------------------------------------------------------------------------


async def test_restart_keeps_the_store_and_ends_open_watches() -> None:
    async with sim("2") as (cluster, raw):
        for name in ("a", "b"):
            assert (await raw.post(PODS, pod(name)))[0] == 201
        before = await _rv(raw)

        watcher = asyncio.create_task(
            raw.watch_lines(f"{PODS}?watch=1&resourceVersion={before}", max_events=100, seconds=5)
        )
        await _wait_for(lambda: cluster.faults.counts.watches_opened == 1)

        loop = asyncio.get_running_loop()
        restart = asyncio.create_task(cluster.restart_server(downtime=0.5))
        start = loop.time()
        assert await watcher == []  # the stream ended cleanly, without waiting for 5 s
        assert loop.time() - start < 1.0

        # the server is down: connecting fails outright
        await asyncio.sleep(0.1)
        assert not restart.done()
        with pytest.raises(aiohttp.ClientConnectionError):
            await raw.get(PODS)

        await restart
        assert cluster.faults.counts.restarts == 1
        status, listed, _ = await raw.get(PODS)
        assert status == 200
        assert _names(listed["items"]) == ["a", "b"]
        assert listed["metadata"]["resourceVersion"] == before  # nothing was lost or rewritten
        status, created, _ = await raw.post(PODS, pod("c"))
        assert status == 201
        assert int(created["metadata"]["resourceVersion"]) > int(before)
        # a watch resumed across the restart gets exactly what happened since
        events = await raw.watch_lines(
            f"{PODS}?watch=1&resourceVersion={before}", max_events=1, seconds=2
        )
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "c")]


async def test_stop_and_start_server() -> None:
    async with sim("1") as (cluster, raw):
        assert (await raw.post(PODS, pod("p")))[0] == 201
        await cluster.stop_server()
        for _ in range(2):
            with pytest.raises(aiohttp.ClientConnectionError):
                await raw.get(PODS)
        with pytest.raises(aiohttp.ClientConnectionError):
            await raw.get("/healthz")
        await cluster.start_server()
        status, listed, _ = await raw.get(PODS)
        assert status == 200 and _names(listed["items"]) == ["p"]
        assert cluster.faults.counts.restarts == 0  # only restart_server counts restarts


async def test_kubernetes_asyncio_client_survives_restarts() -> None:
    async with SimCluster("2") as cluster, cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        await core.create_namespaced_pod("default", pod("p"))
        first = await core.list_namespaced_pod("default")
        for round_ in range(1, 3):
            await cluster.restart_server()
            assert cluster.faults.counts.restarts == round_
            listed = await core.list_namespaced_pod("default")
            assert [p.metadata.name for p in listed.items] == ["p"]
            assert listed.metadata.resource_version == first.metadata.resource_version
            nodes = await core.list_node()
            assert sorted(n.metadata.name for n in nodes.items) == ["node-00000", "node-00001"]
        created = await core.create_namespaced_pod("default", pod("q"))
        assert int(created.metadata.resource_version) > int(first.metadata.resource_version)


# --- history compaction ---------------------------------------------------------------------


async def test_expire_history_forces_410_for_old_versions_only() -> None:
    async with sim() as (cluster, raw):
        assert (await raw.post(PODS, pod("p")))[0] == 201
        old = await _rv(raw)
        assert (await raw.post(PODS, pod("q")))[0] == 201
        cluster.expire_history()
        assert cluster.faults.counts.history_expiries == 1

        events = await raw.watch_lines(
            f"{PODS}?watch=1&resourceVersion={old}", max_events=5, seconds=2
        )
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        error = events[0]["object"]
        assert (error["kind"], error["code"], error["reason"]) == ("Status", 410, "Expired")
        assert error["message"] == f"too old resource version: {old} ({cluster.store.rv})"

        # a fresh list gives the current version, and a watch from it works
        current = await _rv(raw)
        assert int(current) > int(old)

        async def create_later() -> None:
            await asyncio.sleep(0.1)
            assert (await raw.post(PODS, pod("r")))[0] == 201

        writer = asyncio.create_task(create_later())
        events = await raw.watch_lines(
            f"{PODS}?watch=1&resourceVersion={current}", max_events=1, seconds=3
        )
        await writer
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "r")]
        # and a watch without a version starts with the full state, history or not
        events = await raw.watch_lines(f"{PODS}?watch=1", max_events=3, seconds=1)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "p"),
            ("ADDED", "q"),
            ("ADDED", "r"),
        ]


# --- authentication -------------------------------------------------------------------------

UNAUTHORIZED = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
    b'"message":"Unauthorized","reason":"Unauthorized","code":401}'
)


async def test_bearer_token_is_required_when_configured() -> None:
    async with sim(token="t") as (cluster, raw):
        status, _, body = await raw.get(PODS)
        assert (status, body) == (401, UNAUTHORIZED)
        for header in ("Bearer wrong", "t", "Basic dDp0"):
            status, _, body = await raw.get(PODS, headers={"Authorization": header})
            assert (status, body) == (401, UNAUTHORIZED), header
        status, _, body = await raw.post(PODS, pod("p"))
        assert (status, body) == (401, UNAUTHORIZED)

        ok = {"Authorization": "Bearer t"}
        status, listed, _ = await raw.get(PODS, headers=ok)
        assert status == 200 and listed["items"] == []  # the unauthorized create did nothing
        status, _, _ = await raw.request("POST", PODS, pod("p"), headers=ok)
        assert status == 201

        # the kubeconfig carries the token, so a configured client just works
        async with cluster.api_client() as api:
            listed_pods = await k8s.CoreV1Api(api).list_namespaced_pod("default")
            assert [p.metadata.name for p in listed_pods.items] == ["p"]


async def test_no_token_configured_means_no_auth() -> None:
    async with sim() as (_, raw):
        assert (await raw.get(PODS))[0] == 200
        assert (await raw.get(PODS, headers={"Authorization": "Bearer anything"}))[0] == 200


# --- request size limit ---------------------------------------------------------------------


async def test_body_over_3_mib_is_413() -> None:
    async with sim() as (_, raw):
        manifest = pod("big")
        manifest["metadata"]["annotations"] = {"blob": "x" * (MAX_BODY_BYTES + 1024)}
        data = orjson.dumps(manifest)
        assert len(data) > 3 * 1024 * 1024
        status, answer, _ = await raw.post(PODS, data=data)
        assert status == 413
        assert answer == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"Request entity too large: limit is {3 * 1024 * 1024}",
            "reason": "RequestEntityTooLarge",
            "code": 413,
        }
        # nothing was stored, and the server keeps serving
        status, listed, _ = await raw.get(PODS)
        assert status == 200 and listed["items"] == []
        assert (await raw.post(PODS, pod("small")))[0] == 201
