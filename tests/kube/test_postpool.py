"""Bindings sent by post workers (child processes), against real servers and the simulator.

What must hold: a binding means the same whether this process or a worker sends it — the same
request on the wire (TLS and client certificate from the kubeconfig, the bearer token), the
same status for every answer, no answer as a retryable connection error — and the scheduler
keeps binding when a worker dies or cannot run at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import trustme
from aiohttp import web

from gang.app.metrics import make_registry
from gang.kube import postpool
from gang.kube.client import make_api_client
from gang.kube.leanhttp import LeanHTTP
from gang.kube.postframes import ANSWER, OKS
from gang.kube.postpool import MAX_QUICK_EXITS, PostPool
from gang.kube.transport import Kube, KubeError
from tests.kube.test_leanhttp import client_certificate_kubeconfig, make_api_client_for
from tests.scheduler.conftest import eventually, gang_env, gang_pod, podgroup
from tests.stand_in import serve


def _posters(kube: Kube) -> PostPool:
    posters = kube.post_pool
    assert posters is not None
    return posters


async def test_bindings_go_out_from_workers_over_tls_with_a_client_certificate(
    tmp_path: Path,
) -> None:
    """The worker takes the CA, the client certificate and key from the same kubeconfig the
    scheduler loaded; this process opens no connection for them."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    seen: list[tuple[str, Any, str]] = []

    async def handler(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(x[0] for x in peer["subject"]) if peer else {}
        seen.append((request.path, orjson.loads(await request.read()), subject["commonName"]))
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async for url in serve(handler, server_ctx):
        client = await make_api_client(client_certificate_kubeconfig(tmp_path, url, ca))
        kube = Kube(client, post_workers=2)
        try:
            await asyncio.gather(*(kube.bind("ns", f"p-{i}", "node-1", "uid") for i in range(6)))
            posters = _posters(kube)
            assert posters.started_workers == 2 and not posters.in_process
            assert posters.answered == 6
            assert posters.fallback._open == 0  # nothing was sent from this process
        finally:
            await kube.close()
            await client.close()
    assert sorted(path for path, _, _ in seen) == [
        f"/api/v1/namespaces/ns/pods/p-{i}/binding" for i in range(6)
    ]
    assert all(cn == "gang-scheduler" for _, _, cn in seen)
    assert seen[0][1]["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1"}
    assert seen[0][1]["metadata"]["uid"] == "uid"


#: per pod name, the API server's answer to its binding (as recorded: status, reason,
#: Retry-After); any other name is bound (201)
ANSWERS = {
    "gone": (404, "NotFound", None),
    "taken": (409, "Conflict", None),
    "busy": (429, "TooManyRequests", "7"),
    "bad": (422, "Invalid", None),
}


def _answer(name: str) -> web.Response:
    if name not in ANSWERS:
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)
    status, reason, retry = ANSWERS[name]
    body = {"kind": "Status", "reason": reason, "message": f"pod {name}: {reason}"}
    headers = {"Retry-After": retry} if retry else None
    return web.json_response(body, status=status, headers=headers)


def _check_answer(name: str, err: KubeError) -> None:
    """``err`` is what ``ANSWERS`` says the server answered for ``name``."""
    status, reason, retry = ANSWERS[name]
    assert (err.status, err.reason) == (status, reason)
    assert err.message == f"pod {name}: {reason}"
    assert err.retry_after == (float(retry) if retry else None)


@contextlib.asynccontextmanager
async def _one_worker_kube(url: str) -> AsyncIterator[Kube]:
    """A Kube for the server at ``url`` sending through one post worker, closed afterwards."""
    client = await make_api_client_for(url)
    kube = Kube(client, post_workers=1)
    try:
        yield kube
    finally:
        await kube.close()
        await client.close()


async def test_every_answer_keeps_its_meaning_through_a_worker() -> None:
    async def handler(request: web.Request) -> web.Response:
        return _answer(request.path.split("/")[-2])

    async for url in serve(handler):
        async with _one_worker_kube(url) as kube:
            await kube.bind("ns", "fine", "n1")
            for name in ANSWERS:
                with pytest.raises(KubeError) as caught:
                    await kube.bind("ns", name, "n1")
                _check_answer(name, caught.value)


@contextlib.asynccontextmanager
async def _stalling_worker(marker: str) -> AsyncIterator[tuple[Kube, PostPool, asyncio.Event]]:
    """A Kube with its one post worker started, against a server binding every pod at once but
    those whose path holds ``marker``: their requests are held (the yielded event is set when
    one arrives) until the block ends."""
    stalled, release = asyncio.Event(), asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        if marker in request.path:
            stalled.set()
            await asyncio.wait_for(release.wait(), 30)
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async for url in serve(handler):
        async with _one_worker_kube(url) as kube:
            try:
                await kube.start_post_workers()
                yield kube, _posters(kube), stalled
            finally:
                release.set()  # (before the close: it waits for the workers' answers)


def _kill_worker(posters: PostPool) -> None:
    child = posters._children[0]
    assert child is not None and child.transport is not None
    os.kill(child.transport.get_pid(), signal.SIGKILL)


async def _bind_many(kube: Kube, names: list[str]) -> dict[str, KubeError | None]:
    """``Kube.bind_many`` of ``names``, waiting for every outcome (each must come once)."""
    outcomes: dict[str, KubeError | None] = {}
    done = asyncio.Event()

    def answered(index: int, err: KubeError | None) -> None:
        assert names[index] not in outcomes, f"{names[index]} answered twice"
        outcomes[names[index]] = err
        if len(outcomes) == len(names):
            done.set()

    assert await kube.bind_many([("ns", n, "n1", f"uid-{n}") for n in names], answered)
    await asyncio.wait_for(done.wait(), 15)
    return outcomes


async def test_a_batch_of_bindings_gets_every_answer_as_one_by_one() -> None:
    """A gang's bindings handed over in one batch: the same request per pod (path, uid), and
    each answer means what ``Kube.bind`` would raise for it."""
    seen: list[tuple[str, str]] = []

    async def handler(request: web.Request) -> web.Response:
        name = request.path.split("/")[-2]
        seen.append((name, (await request.json())["metadata"]["uid"]))
        return _answer(name)

    async for url in serve(handler):
        async with _one_worker_kube(url) as kube:
            names = ["fine-0", *ANSWERS, "fine-1"]
            outcomes = await _bind_many(kube, names)
            assert outcomes["fine-0"] is None and outcomes["fine-1"] is None
            for name in ANSWERS:
                err = outcomes[name]
                assert err is not None
                _check_answer(name, err)
            assert sorted(seen) == sorted((n, f"uid-{n}") for n in names)
            assert _posters(kube).answered == len(names)


async def test_a_batch_s_successes_come_back_in_one_frame_and_its_failures_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bindings are brief requests: the worker answers their successes as (id, status) pairs in
    ``K`` frames, a few writes for the batch instead of a frame per binding, and every other
    answer as before, with the server's body (what ``KubeError`` reads its message from)."""
    kinds: list[bytes] = []
    read = postpool.frames

    def recording(buffer: bytearray) -> list[tuple[bytes, int, bytes, bytes]]:
        found = read(buffer)
        kinds.extend(kind for kind, _, _, _ in found)
        return found

    monkeypatch.setattr(postpool, "frames", recording)

    async def handler(request: web.Request) -> web.Response:
        return _answer(request.path.split("/")[-2])

    async for url in serve(handler):
        async with _one_worker_kube(url) as kube:
            names = [f"fine-{i}" for i in range(32)] + list(ANSWERS)
            outcomes = await _bind_many(kube, names)
            assert all(outcomes[n] is None for n in names if n.startswith("fine"))
            for name in ANSWERS:
                err = outcomes[name]
                assert err is not None
                _check_answer(name, err)
            assert kinds.count(OKS) >= 1
            assert kinds.count(OKS) < 32  # (several successes to a frame)
            assert kinds.count(ANSWER) == len(ANSWERS)  # only the failures answered whole


async def test_a_worker_killed_mid_batch_answers_each_binding_as_no_answer() -> None:
    """Every binding of the batch still in flight becomes one retryable connection error."""
    async with _stalling_worker("/slow-") as (kube, posters, stalled):
        batch = asyncio.create_task(_bind_many(kube, ["quick", "slow-0", "slow-1"]))
        await asyncio.wait_for(stalled.wait(), 10)
        await asyncio.sleep(0.2)  # the quick one's answer is read
        _kill_worker(posters)
        outcomes = await batch
        assert outcomes["quick"] is None
        for name in ("slow-0", "slow-1"):
            err = outcomes[name]
            assert err is not None and err.status == 0 and err.retryable
            assert "post worker exited" in err.message


async def test_a_worker_killed_mid_request_is_no_answer_and_is_replaced() -> None:
    """Its bindings in flight become connection errors (the binder retries them and its 409
    check settles any that landed); the next binding starts a new worker."""
    async with _stalling_worker("/slow/binding") as (kube, posters, stalled):
        slow = asyncio.create_task(kube.bind("ns", "slow", "n1"))
        await asyncio.wait_for(stalled.wait(), 10)
        _kill_worker(posters)
        with pytest.raises(KubeError) as caught:
            await asyncio.wait_for(slow, 10)
        assert caught.value.status == 0 and caught.value.retryable
        assert "post worker exited" in caught.value.message
        await kube.bind("ns", "after", "n1")
        assert posters.started_workers == 2 and not posters.in_process


async def test_workers_that_cannot_run_leave_the_bindings_to_this_process() -> None:
    posted: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        posted.append(request.path)
        return web.json_response({}, status=201)

    async def no_headers() -> dict[str, str]:
        return {}

    async for url in serve(handler):
        fallback = LeanHTTP(
            url, ssl_context=None, server_hostname=None, headers=no_headers, limit=4
        )
        pool = PostPool(
            1,
            {"host": url, "limit": 4, "timeout": 5.0},
            no_headers,
            fallback,
            command=(sys.executable, "-c", "import sys; sys.exit(3)"),
        )
        try:
            for i in range(MAX_QUICK_EXITS + 1):
                reply = await pool.request("POST", f"/try/{i}", b"{}")
                if reply.status == 201:
                    break
        except Exception as err:  # a worker's exit is no answer: the caller would retry
            assert "post worker" in str(err)
        try:
            while not pool.in_process:
                try:
                    await pool.request("POST", "/again", b"{}")
                except Exception as err:
                    assert "post worker" in str(err)
            reply = await pool.request("POST", "/in-process", b"{}")
            assert reply.status == 201
        finally:
            await pool.close()
            await fallback.close()
    assert pool.started_workers == MAX_QUICK_EXITS
    assert posted[-1] == "/in-process"


async def test_a_refreshed_token_reaches_the_workers() -> None:
    """A 401 makes the pool read the auth hook again and hand the workers the new token before
    the next request, as the in-process pool does."""
    token = {"value": "old"}

    async def headers() -> dict[str, str]:
        return {"Authorization": f"Bearer {token['value']}"}

    async def handler(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "reason": "Unauthorized"}, status=401)
        return web.json_response({}, status=201)

    async for url in serve(handler):
        fallback = LeanHTTP(url, ssl_context=None, server_hostname=None, headers=headers, limit=4)
        pool = PostPool(1, {"host": url, "limit": 4, "timeout": 5.0}, headers, fallback)
        try:
            assert (await pool.request("POST", "/x", b"{}")).status == 401
            token["value"] = "new"
            assert (await pool.request("POST", "/x", b"{}")).status == 201  # within the TTL
        finally:
            await pool.close()
            await fallback.close()


async def test_the_scheduler_binds_gangs_through_post_workers() -> None:
    """The real scheduler with two post workers against the simulator: both gangs bound
    whole, every write sent by a worker, the usual Scheduled Event per pod."""
    async with gang_env("4:gpu=8,zones=2", post_workers=2) as env:
        api = env.api
        for group in ("a", "b"):
            await api.create_podgroup(podgroup(group, 4))
            await api.create_pods([gang_pod(f"{group}-{i}", group, gpu=4) for i in range(4)])

        async def all_bound() -> bool:
            return len(await api.bound()) == 8

        await eventually(all_bound)
        posters = _posters(env.scheduler.kube)
        assert posters.started_workers == 2 and posters.running == 2

        async def statuses_written() -> bool:
            groups = [await api.get_podgroup(g) for g in ("a", "b")]
            return all((g.get("status") or {}).get("phase") == "Scheduled" for g in groups)

        await eventually(statuses_written)
        # the bindings (each gang's as one batch), the Events and the status patches all went
        # out from the workers
        assert env.scheduler.binder.batched == 8
        assert posters.answered >= 8 + 2
        assert posters.fallback._open == 0
        registry = make_registry(lambda: env.scheduler, lambda: True)
        samples = {s.name: s.value for f in registry.collect() for s in f.samples}
        assert samples["gang_post_workers"] == 2
        assert samples["gang_post_worker_starts_total"] == 2
        await api.assert_not_overcommitted()
        scheduled = [e for e in await api.events() if e["reason"] == "Scheduled"]
        assert len(scheduled) == 8


async def test_a_worker_killed_under_the_watches_is_replaced_and_no_event_is_lost() -> None:
    """The one post worker reads every watch of the real scheduler. Killed between two gangs,
    its watches end as broken streams: each informer resumes from its last resourceVersion
    through a new worker, without relisting, and the second gang's pods (created after the
    kill) are seen and bound whole."""
    async with gang_env("4:gpu=8,zones=2", post_workers=1) as env:
        api = env.api
        await api.create_podgroup(podgroup("a", 4))
        await api.create_pods([gang_pod(f"a-{i}", "a", gpu=4) for i in range(4)])

        async def bound(count: int) -> bool:
            return len(await api.bound()) == count

        await eventually(lambda: bound(4))
        posters = _posters(env.scheduler.kube)
        informers = env.scheduler.informers
        assert posters.watches_opened >= len(informers)  # every kind is watched by the worker
        relists = {i.kind.name: i.relists for i in informers}
        _kill_worker(posters)
        await api.create_podgroup(podgroup("b", 4))
        await api.create_pods([gang_pod(f"b-{i}", "b", gpu=4) for i in range(4)])
        await eventually(lambda: bound(8))
        assert posters.started_workers == 2
        pods = next(i for i in informers if i.kind.name == "pods")
        assert pods.rewatches >= 1
        assert {i.kind.name: i.relists for i in informers} == relists
        await api.assert_not_overcommitted()
