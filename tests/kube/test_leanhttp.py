"""The keep-alive pool that carries bindings, Events and status patches, against real servers.

The scheduler suites exercise it on every binding through the simulator; these tests give it
the answers the simulator never gives: TLS with a client certificate from a kubeconfig, a token
that expires, a server that closes, breaks, stalls, chunks its answer or says 429.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import trustme
import yaml
from aiohttp import web

from gang.kube.client import make_api_client
from gang.kube.leanhttp import LeanError, LeanHTTP, default_client_context
from gang.kube.transport import Kube, KubeError
from tests.stand_in import serve


def _plain(
    url: str, headers: Callable[[], Awaitable[dict[str, str]]] | None = None, **kw: Any
) -> LeanHTTP:
    async def none() -> dict[str, str]:
        return {}

    return LeanHTTP(
        url,
        ssl_context=None,
        server_hostname=None,
        headers=headers or none,
        limit=kw.pop("limit", 8),
        **kw,
    )


async def test_tls_with_a_client_certificate_from_a_kubeconfig(tmp_path: Path) -> None:
    """A binding through Kube, as the scheduler sends it, to a server that demands a client
    certificate signed by its CA: the lean pool takes TLS from the kubeconfig."""
    ca = trustme.CA()
    seen: list[tuple[str, Any, str]] = []

    async def handler(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(x[0] for x in peer["subject"]) if peer else {}
        seen.append(
            (request.path, orjson.loads(await request.read()), subject.get("commonName", ""))
        )
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async for url in serve(handler, _tls_server(ca)):
        client = await make_api_client(client_certificate_kubeconfig(tmp_path, url, ca))
        kube = Kube(client)
        try:
            await asyncio.gather(*(kube.bind("ns", f"p-{i}", "node-1", "uid") for i in range(5)))
        finally:
            await kube.close()
            await client.close()
    assert len(seen) == 5
    path, body, common_name = seen[0]
    assert path.startswith("/api/v1/namespaces/ns/pods/p-") and path.endswith("/binding")
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1"}
    assert common_name == "gang-scheduler"


def _tls_server(ca: trustme.CA) -> ssl.SSLContext:
    """A server context for 127.0.0.1 that demands a client certificate signed by ``ca`` and
    issues TLS 1.3 session tickets (OpenSSL's default)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


async def test_new_connections_resume_the_tls_session_and_still_authenticate(
    tmp_path: Path,
) -> None:
    """After the first answer, the connections a burst opens resume its TLS session (no
    certificate signed or checked again on either side), and the server still sees the
    client certificate on every one of them."""
    ca = trustme.CA()
    seen: list[tuple[Any, bool, str]] = []  # (connection, resumed, client certificate's CN)

    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        tls = request.transport.get_extra_info("ssl_object")
        subject = dict(x[0] for x in tls.getpeercert()["subject"])
        peer = request.transport.get_extra_info("peername")
        seen.append((peer, tls.session_reused, subject.get("commonName", "")))
        await asyncio.sleep(0.05)  # the burst's requests overlap: one connection each
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async for url in serve(handler, _tls_server(ca)):
        client = await make_api_client(client_certificate_kubeconfig(tmp_path, url, ca))
        kube = Kube(client)
        try:
            await kube.bind("ns", "first", "node-1", "uid")
            await asyncio.gather(*(kube.bind("ns", f"p-{i}", "node-1", "uid") for i in range(8)))
        finally:
            await kube.close()
            await client.close()
    first = seen[0][0]
    assert seen[0][1:] == (False, "gang-scheduler")  # the first connection: a full handshake
    # the burst: the first connection again (kept alive) and 7 new ones, every new one resumed
    assert len(seen) == 9 and len({peer for peer, _, _ in seen}) == 8
    assert all(resumed == (peer != first) for peer, resumed, _ in seen[1:])
    assert {name for _, _, name in seen} == {"gang-scheduler"}


async def test_a_session_the_server_does_not_know_falls_back_to_a_full_handshake() -> None:
    """The saved session offered to a server that never issued it (another server, or one
    restarted with new ticket keys): the handshake runs in full and the request is
    answered."""
    ca = trustme.CA()
    reused: list[bool] = []

    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        reused.append(request.transport.get_extra_info("ssl_object").session_reused)
        return web.json_response({})

    async def none() -> dict[str, str]:
        return {}

    client_tls = default_client_context()
    ca.configure_trust(client_tls)
    ca.issue_cert("gang-scheduler").configure_cert(client_tls)
    for _ in range(2):  # two servers, each with its own ticket keys
        async for url in serve(handler, _tls_server(ca)):
            lean = LeanHTTP(
                url, ssl_context=client_tls, server_hostname=None, headers=none, limit=2
            )
            try:
                for _ in range(2):  # the second request reuses the kept-alive connection
                    assert (await lean.request("GET", "/x", b"")).status == 200
                lean._idle[0].close()  # the next request opens a connection: it resumes
                assert (await lean.request("GET", "/x", b"")).status == 200
            finally:
                await lean.close()
        assert client_tls.session is not None
    assert reused == [False, False, True, False, False, True]


def test_the_resuming_context_keeps_the_default_contexts_settings() -> None:
    """Built by hand so that it can resume sessions, the context verifies what
    ``ssl.create_default_context`` verifies, on this Python."""
    ours, default = default_client_context(), ssl.create_default_context()
    for setting in (
        "verify_mode",
        "check_hostname",
        "verify_flags",
        "options",
        "minimum_version",
        "maximum_version",
        "protocol",
    ):
        assert getattr(ours, setting) == getattr(default, setting), setting
    assert ours.cert_store_stats()["x509_ca"] == default.cert_store_stats()["x509_ca"]


def client_certificate_kubeconfig(tmp_path: Path, url: str, ca: trustme.CA) -> str:
    """A kubeconfig for ``url`` trusting ``ca``, with a client certificate it signed for
    ``gang-scheduler`` (inline data, as clusters hand them out)."""
    client_cert = ca.issue_cert("gang-scheduler", common_name="gang-scheduler")

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    key_pem = client_cert.private_key_pem.bytes()
    cert_pem = b"".join(blob.bytes() for blob in client_cert.cert_chain_pems)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": url,
                            "certificate-authority-data": b64(ca.cert_pem.bytes()),
                        },
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "client-certificate-data": b64(cert_pem),
                            "client-key-data": b64(key_pem),
                        },
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(kubeconfig)


async def test_an_expired_token_is_read_again_at_once_after_a_401() -> None:
    tokens = iter(["old", "new", "newer"])
    current = {"token": next(tokens)}

    async def headers() -> dict[str, str]:
        return {"Authorization": f"Bearer {current['token']}"}

    async def handler(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "reason": "Unauthorized"}, status=401)
        return web.json_response({}, status=201)

    async for url in serve(handler):
        lean = _plain(url, headers)
        try:
            assert (await lean.request("POST", "/x", b"{}")).status == 401
            current["token"] = next(tokens)  # the hook now hands out a fresh token
            assert (await lean.request("POST", "/x", b"{}")).status == 201  # within the TTL
        finally:
            await lean.close()


async def test_connection_close_chunked_bodies_and_retry_after() -> None:
    calls = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        if request.path == "/close":
            return web.json_response({"n": calls}, headers={"Connection": "close"})
        if request.path == "/chunked":
            response = web.StreamResponse(status=200)
            response.enable_chunked_encoding()
            await response.prepare(request)
            for part in (b'{"items": [', b"1, 2, ", b"3]}"):
                await response.write(part)
            await response.write_eof()
            return response
        return web.json_response(
            {"kind": "Status", "reason": "TooManyRequests", "message": "slow down"},
            status=429,
            headers={"Retry-After": "3"},
        )

    async for url in serve(handler):
        lean = _plain(url)
        try:
            for n in (1, 2):  # the server closes after each: a new connection each time
                reply = await lean.request("GET", "/close", b"")
                assert orjson.loads(reply.body) == {"n": n}
            reply = await lean.request("GET", "/chunked", b"")
            assert orjson.loads(reply.body) == {"items": [1, 2, 3]}
            throttled = await lean.request("POST", "/busy", b"{}")
            assert (throttled.status, throttled.retry_after) == (429, "3")
        finally:
            await lean.close()


async def test_the_pool_never_opens_more_connections_than_its_limit() -> None:
    peers: set[Any] = set()
    in_flight = most = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal in_flight, most
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return web.json_response({"path": request.path})

    async for url in serve(handler):
        lean = _plain(url, limit=3)
        try:
            replies = await asyncio.gather(
                *(lean.request("POST", f"/p/{i}", b"{}") for i in range(30))
            )
        finally:
            await lean.close()
    assert [orjson.loads(r.body)["path"] for r in replies] == [f"/p/{i}" for i in range(30)]
    assert most <= 3 and len(peers) <= 3  # kept alive and reused


async def test_a_broken_or_silent_server_is_no_answer_and_the_pool_recovers() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/break":
            assert request.transport is not None
            request.transport.close()  # mid-request: no answer at all
            await asyncio.sleep(1)
        if request.path == "/stall":
            await asyncio.sleep(5)
        return web.json_response({"ok": True})

    async for url in serve(handler):
        lean = _plain(url, limit=1, timeout=0.3)
        try:
            with pytest.raises(LeanError, match="connection lost"):
                await lean.request("POST", "/break", b"{}")
            with pytest.raises(LeanError, match="no answer in time"):
                await lean.request("POST", "/stall", b"{}")
            # the only slot was given back both times
            assert orjson.loads((await lean.request("GET", "/fine", b"")).body) == {"ok": True}
        finally:
            await lean.close()


async def test_kube_turns_no_answer_into_a_retryable_error() -> None:
    """A refused connection is KubeError 0 (the binder then checks whether the pod bound)."""

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({})

    async for url in serve(handler):
        dead = url  # the server stops when the loop ends: its port then refuses
    client = await make_api_client_for(dead)
    kube = Kube(client)
    try:
        with pytest.raises(KubeError) as caught:
            await kube.bind("ns", "p", "node-1")
    finally:
        await kube.close()
        await client.close()
    assert caught.value.status == 0 and caught.value.retryable


async def make_api_client_for(url: str) -> Any:
    from kubernetes_asyncio import client

    configuration = client.Configuration()
    configuration.host = url
    return client.ApiClient(configuration)
