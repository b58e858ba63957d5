"""The watch stream as a real server writes it: events split across writes, several in one,
a last line with no newline. ``Kube.watch`` reads whatever the connection holds at once and
splits it into lines itself, so it must give back exactly the events written, in order,
whatever the pieces."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp import web

from gang.kube.decoding import lean_page
from gang.kube.transport import PODS, Kube, KubeError
from tests.kube.test_leanhttp import make_api_client_for
from tests.stand_in import serve


def event(kind: str, name: str, rv: int) -> bytes:
    pod = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}
    return orjson.dumps({"type": kind, "object": pod})


async def test_events_split_across_writes_or_sharing_one_come_back_whole_and_in_order() -> None:
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

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
            await asyncio.sleep(0.02)  # each write is read on its own
        await response.write_eof()
        return response

    async for url in serve(handler):
        api = await make_api_client_for(url)
        try:
            batches = [batch async for batch in Kube(api).watch(PODS, "0", 5)]
        finally:
            await api.close()
    got = [(e["type"], e["object"]["metadata"]["resourceVersion"]) for b in batches for e in b]
    assert got == [("ADDED", str(i)) for i in range(1, 7)] + [("BOOKMARK", "9")]
    assert any(len(b) == 3 for b in batches)  # the three written together come back together


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
