"""The watch stream as a real server writes it: events split across writes, several in one,
a last line with no newline. ``Kube.watch`` reads whatever the connection holds at once and
splits it into lines itself, so it must give back exactly the events written, in order,
whatever the pieces.

Where post workers run, a worker reads the stream and passes its body through a pipe
(``PostPool.open_watch``): every test here runs both ways and must see the same events, the
same request and the same errors; a worker that dies mid-watch is a broken stream (resumed),
and a reader that stops makes the worker close the server's connection."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp import web

from gang.kube.decoding import lean_page
from gang.kube.postpool import PostPool
from gang.kube.transport import PODS, Kind, Kube, KubeError
from tests.kube.test_leanhttp import make_api_client_for
from tests.kube.test_postpool import _kill_worker
from tests.stand_in import serve

#: the watch read by this process (kubernetes-asyncio's session), or by one post worker
BOTH_WAYS = pytest.mark.parametrize("post_workers", [0, 1], ids=["in-process", "post-worker"])


@contextlib.asynccontextmanager
async def kube_for(url: str, post_workers: int) -> AsyncIterator[Kube]:
    api = await make_api_client_for(url)
    kube = Kube(api, post_workers=post_workers)
    try:
        yield kube
    finally:
        await kube.close()
        await api.close()


def worker_pool(kube: Kube) -> PostPool:
    posters = kube.post_pool
    assert posters is not None
    return posters


def event(kind: str, name: str, rv: int) -> bytes:
    pod = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}
    return orjson.dumps({"type": kind, "object": pod})


@BOTH_WAYS
async def test_events_split_across_writes_or_sharing_one_come_back_whole_and_in_order(
    post_workers: int,
) -> None:
    lines = [event("ADDED", f"p{i}", i) for i in range(1, 7)] + [event("BOOKMARK", "", 9)]
    first, second, third = lines[0], lines[1], lines[2]
    pieces = [
        first[:5],  # one event in three writes
        first[5:20],
        first[20:] + b"\n",
        second + b"\n" + third[:7],  # one whole and the start of the next
        third[7:] + b"\n\n",  # an empty line between events is skipped
        b"\n".join(lines[3:6]) + b"\n",  # three in one write
        lines[6],  # the last, with no newline before the stream ends
    ]

    asked: list[tuple[str, dict[str, str]]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        asked.append((request.path, {k: v.lower() for k, v in request.query.items()}))
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
            await asyncio.sleep(0.02)  # each write is read on its own
        await response.write_eof()
        return response

    async for url in serve(handler):
        async with kube_for(url, post_workers) as kube:
            batches = [batch async for batch in kube.watch(PODS, "0", 5)]
            if post_workers:
                assert worker_pool(kube).watches_opened == 1
    got = [(e["type"], e["object"]["metadata"]["resourceVersion"]) for b in batches for e in b]
    assert got == [("ADDED", str(i)) for i in range(1, 7)] + [("BOOKMARK", "9")]
    assert any(len(b) == 3 for b in batches)  # the three written together come back together
    assert asked == [
        (
            "/api/v1/pods",
            {
                "watch": "true",
                "resourceVersion": "0",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "5",
            },
        )
    ]


@BOTH_WAYS
async def test_a_custom_kind_is_watched_at_its_group_path(post_workers: int) -> None:
    paths: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        paths.append(request.path)
        return web.Response(status=200, body=event("ADDED", "g", 3) + b"\n")

    kind = Kind("podgroups", "scheduling.x-k8s.io", "v1alpha1", "podgroups")
    async for url in serve(handler):
        async with kube_for(url, post_workers) as kube:
            batches = [batch async for batch in kube.watch(kind, "2", 5)]
    assert paths == ["/apis/scheduling.x-k8s.io/v1alpha1/podgroups"]
    assert [e["object"]["metadata"]["name"] for b in batches for e in b] == ["g"]


#: how the server refuses a watch (as recorded: status, reason, Retry-After)
REFUSALS = [(410, "Expired", None), (429, "TooManyRequests", "3"), (403, "Forbidden", None)]


@BOTH_WAYS
@pytest.mark.parametrize(("status", "reason", "retry"), REFUSALS)
async def test_a_refused_watch_is_the_same_error_either_way(
    post_workers: int, status: int, reason: str, retry: str | None
) -> None:
    async def handler(request: web.Request) -> web.Response:
        body = {"kind": "Status", "status": "Failure", "reason": reason, "message": "no"}
        headers = {"Retry-After": retry} if retry else None
        return web.json_response(body, status=status, headers=headers)

    async for url in serve(handler):
        async with kube_for(url, post_workers) as kube:
            with pytest.raises(KubeError) as raised:
                [batch async for batch in kube.watch(PODS, "5", 5)]
    err = raised.value
    assert (err.status, err.reason, err.message) == (status, reason, "no")
    assert err.retry_after == (float(retry) if retry else None)


async def test_a_worker_that_dies_mid_watch_is_a_broken_stream_to_resume() -> None:
    """What came before its death is delivered; then the watch raises a status-0 error, which
    the informer resumes from its last resourceVersion (no relist), as for a cut connection."""
    done = asyncio.Event()  # the stream stays open until the test has seen the worker die

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(event("ADDED", "p1", 1) + b"\n")
        await done.wait()
        return response

    async for url in serve(handler):
        async with kube_for(url, 1) as kube:
            seen: list[str] = []
            with pytest.raises(KubeError) as raised:
                async for batch in kube.watch(PODS, "0", 60):
                    seen += [e["object"]["metadata"]["name"] for e in batch]
                    _kill_worker(worker_pool(kube))
        done.set()  # else the server's clean-up waits for the handler
    assert seen == ["p1"]
    assert raised.value.status == 0 and raised.value.retryable
    assert raised.value.reason == "StreamBroken"
    assert "post worker exited" in raised.value.message


async def test_a_reader_that_stops_has_the_worker_close_the_watch() -> None:
    """Closing the watch (an informer's resync, or the scheduler stopping) closes the server's
    connection from the worker, which goes on serving requests."""
    gone = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.method == "POST":
            return web.json_response({"kind": "Status", "status": "Success"}, status=201)
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            for i in range(600):
                await response.write(event("ADDED", f"p{i}", i) + b"\n")
                await asyncio.sleep(0.05)
        except (ConnectionError, asyncio.CancelledError):
            gone.set()
            raise
        return response

    async for url in serve(handler):
        async with kube_for(url, 1) as kube:
            watch = kube.watch(PODS, "0", 60)
            first = await anext(watch)
            assert first[0]["object"]["metadata"]["name"] == "p0"
            await watch.aclose()
            await asyncio.wait_for(gone.wait(), 10)
            posters = worker_pool(kube)
            assert not posters._children[0].streams  # type: ignore[union-attr]
            await kube.bind("ns", "after", "n1")
            assert posters.running == 1 and posters.started_workers == 1


async def test_a_list_answered_without_a_body_is_a_retryable_error_not_an_empty_list() -> None:
    """An empty list would make the informer delete every object it knows; a 200 with no
    body is no answer (status 0: the informer retries after backoff)."""

    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=200, body=b"")

    async for url in serve(handler):
        api = await make_api_client_for(url)
        try:
            with pytest.raises(KubeError) as raised:
                [page async for page in Kube(api).list_pages(PODS, lean_page)]
        finally:
            await api.close()
    assert raised.value.status == 0 and raised.value.retryable
    assert "answered no body" in raised.value.message
