"""Watch semantics over HTTP: resume, 410 Expired in-stream, bookmarks, selectors, timeouts."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from gang.sim.cluster import SimCluster
from tests.conftest import Raw, pod

PODS = "/api/v1/namespaces/default/pods"


async def _rv(raw: Raw, path: str = PODS) -> str:
    status, body, _ = await raw.get(path)
    assert status == 200
    rv: str = body["metadata"]["resourceVersion"]
    return rv


async def test_resume_from_recent_rv_gets_exactly_the_missed_events(raw: Raw) -> None:
    await raw.post(PODS, pod("before"))
    since = await _rv(raw)
    # changes made while "disconnected"
    await raw.post(PODS, pod("a"))
    await raw.post(PODS, pod("b"))
    await raw.patch(f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}})
    await raw.delete(f"{PODS}/b", {"gracePeriodSeconds": 0})
    events = await raw.watch_lines(
        f"{PODS}?watch=1&resourceVersion={since}", max_events=10, seconds=1.0
    )
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(since)


async def test_too_old_rv_gets_in_stream_410(cluster: SimCluster, raw: Raw) -> None:
    await raw.post(PODS, pod("p"))
    since = await _rv(raw)
    await raw.post(PODS, pod("q"))
    cluster.expire_history()
    status, _, _ = await raw.get(f"{PODS}?watch=1&resourceVersion={since}")
    assert status == 200  # the error is inside the stream, not the HTTP status
    events = await raw.watch_lines(f"{PODS}?watch=1&resourceVersion={since}", max_events=5)
    assert len(events) == 1
    assert events[0] == {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {since} ({cluster.store.rv})",
            "reason": "Expired",
            "code": 410,
        },
    }


async def test_history_window_compacts_old_events() -> None:
    async with SimCluster(history_size=3) as sim, sim.api_client() as api:
        core = k8s.CoreV1Api(api)
        first = await core.create_namespaced_pod("default", pod("p0"))
        for i in range(1, 6):
            await core.create_namespaced_pod("default", pod(f"p{i}"))
        w = watch.Watch()
        with pytest.raises(ApiException) as info:
            async for _ in w.stream(
                core.list_namespaced_pod,
                "default",
                resource_version=first.metadata.resource_version,
                timeout_seconds=2,
            ):
                pass
        assert info.value.status == 410


async def test_kubernetes_asyncio_watch_raises_410_after_one_retry(
    cluster: SimCluster, client: Any
) -> None:
    """kubernetes-asyncio retries a 410 once and then raises: callers must relist themselves."""
    core = k8s.CoreV1Api(client)
    await core.create_namespaced_pod("default", pod("p"))
    old = (await core.list_namespaced_pod("default")).metadata.resource_version
    await core.create_namespaced_pod("default", pod("q"))
    cluster.expire_history()
    w = watch.Watch()
    with pytest.raises(ApiException) as info:
        async for _ in w.stream(core.list_namespaced_pod, "default", resource_version=old):
            pass
    assert info.value.status == 410
    await w.close()


async def test_watch_without_rv_starts_with_synthetic_added(raw: Raw) -> None:
    await raw.post(PODS, pod("x"))
    await raw.post(PODS, pod("y"))
    events = await raw.watch_lines(f"{PODS}?watch=true", max_events=2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "x"),
        ("ADDED", "y"),
    ]


async def test_live_events_and_bookmarks(raw: Raw, cluster: SimCluster) -> None:
    since = await _rv(raw)

    async def later() -> None:
        await asyncio.sleep(0.1)
        await raw.post(PODS, pod("live"))

    task = asyncio.create_task(later())
    events = await raw.watch_lines(
        f"{PODS}?watch=1&resourceVersion={since}&allowWatchBookmarks=true", max_events=2, seconds=3
    )
    await task
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "live"
    assert events[1]["type"] == "BOOKMARK"
    bookmark = events[1]["object"]
    assert set(bookmark) == {"kind", "apiVersion", "metadata"}
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )


async def test_a_busy_stream_keeps_delivering_when_a_bookmark_falls_due() -> None:
    """A bookmark due every millisecond, so it is due whenever a burst of events (more than
    one batch of the stream) is queued: the stream must deliver every event. It used to wait
    for the next event with a timeout of zero whenever a bookmark was due and events were
    queued — a timeout that cancels the wait before it runs, every time — so a busy stream went
    silent for good (the scheduler's pod watch, about a minute into a loaded benchmark: nodes
    looked full long after their pods had finished)."""
    async with (
        SimCluster("1:gpu=8", bookmark_interval=0.001) as cluster,
        aiohttp.ClientSession() as session,
    ):
        raw = Raw(session, cluster.url)
        since = await _rv(raw)
        key = cluster.api.rt_pods.storage_key
        count = 3000
        for i in range(count):  # no await: a commit storm, queued before the stream runs
            cluster.store.commit(key, {**pod(f"p{i:05d}"), "metadata": _meta(f"p{i:05d}")})
        added = 0
        path = f"{PODS}?watch=1&resourceVersion={since}&allowWatchBookmarks=true"
        async with session.get(raw.base + path) as resp:

            async def read() -> None:
                nonlocal added
                while added < count and (line := await resp.content.readline()):
                    added += orjson.loads(line)["type"] == "ADDED"

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(read(), 10)
        assert added == count


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "uid": name, "labels": {}}


async def test_no_bookmarks_unless_asked(raw: Raw) -> None:
    since = await _rv(raw)
    events = await raw.watch_lines(
        f"{PODS}?watch=1&resourceVersion={since}&timeoutSeconds=1", max_events=5, seconds=3
    )
    assert events == []  # stream ended cleanly at the timeout, with no events


async def test_timeout_seconds_ends_stream(raw: Raw) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    events = await raw.watch_lines(f"{PODS}?watch=1&timeoutSeconds=1", max_events=100, seconds=5)
    elapsed = loop.time() - start
    assert events == []
    assert 0.9 <= elapsed < 4


async def test_label_selector_transitions(raw: Raw) -> None:
    await raw.post(PODS, pod("p", labels={"team": "a"}))
    since = await _rv(raw)
    await raw.patch(f"{PODS}/p", {"metadata": {"labels": {"team": "b"}}})  # leaves the selection
    await raw.patch(f"{PODS}/p", {"metadata": {"labels": {"team": "a"}}})  # enters it again
    await raw.post(PODS, pod("other", labels={"team": "b"}))  # never selected
    events = await raw.watch_lines(
        f"{PODS}?watch=1&resourceVersion={since}&labelSelector=team%3Da", max_events=5, seconds=1
    )
    assert [(e["type"], e["object"]["metadata"]["labels"]["team"]) for e in events] == [
        ("DELETED", "b"),
        ("ADDED", "a"),
    ]


async def test_field_selector_on_watch(raw: Raw) -> None:
    since = await _rv(raw)
    await raw.post(PODS, pod("mine"))
    await raw.post(PODS, pod("theirs", scheduler="default-scheduler"))
    events = await raw.watch_lines(
        f"{PODS}?watch=1&resourceVersion={since}&fieldSelector=spec.schedulerName%3Dgang-scheduler",
        max_events=5,
        seconds=1,
    )
    assert [e["object"]["metadata"]["name"] for e in events] == ["mine"]


async def test_watch_all_namespaces_and_cluster_scoped(raw: Raw) -> None:
    await raw.post("/api/v1/namespaces", {"metadata": {"name": "team"}})
    since = await _rv(raw, "/api/v1/pods")
    await raw.post("/api/v1/namespaces/team/pods", pod("t"))
    await raw.post(PODS, pod("d"))
    events = await raw.watch_lines(f"/api/v1/pods?watch=1&resourceVersion={since}", max_events=2)
    assert sorted(e["object"]["metadata"]["namespace"] for e in events) == ["default", "team"]


async def test_dropped_watches_resume_without_loss(cluster: SimCluster, raw: Raw) -> None:
    since = await _rv(raw)
    got: list[dict[str, Any]] = []

    async def consume() -> None:
        got.extend(
            await raw.watch_lines(
                f"{PODS}?watch=1&resourceVersion={since}", max_events=10, seconds=2
            )
        )

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.1)
    await raw.post(PODS, pod("one"))
    await asyncio.sleep(0.1)
    assert cluster.drop_watches() >= 1
    await raw.post(PODS, pod("two"))  # made while the watcher is cut off
    await task
    assert [e["object"]["metadata"]["name"] for e in got] == ["one"]
    last = got[-1]["object"]["metadata"]["resourceVersion"]
    rest = await raw.watch_lines(f"{PODS}?watch=1&resourceVersion={last}", max_events=1)
    assert [e["object"]["metadata"]["name"] for e in rest] == ["two"]


async def test_watch_with_kubernetes_asyncio_typed_events(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    nodes = await core.list_node()
    assert len(nodes.items) == 4
    w = watch.Watch()
    seen = []
    async for event in w.stream(
        core.list_node, resource_version=nodes.metadata.resource_version, timeout_seconds=1
    ):
        seen.append(event)
    assert seen == []  # nodes unchanged since the list: nothing to replay
    await core.patch_node("node-00000", {"spec": {"unschedulable": True}})
    async for event in w.stream(
        core.list_node, resource_version=nodes.metadata.resource_version, timeout_seconds=1
    ):
        seen.append(event)
    assert [
        (e["type"], e["object"].metadata.name, e["object"].spec.unschedulable) for e in seen
    ] == [("MODIFIED", "node-00000", True)]


async def test_bad_resource_version_is_400(raw: Raw) -> None:
    status, body, _ = await raw.get(f"{PODS}?watch=1&resourceVersion=abc")
    assert status == 400 and body["reason"] == "BadRequest"
