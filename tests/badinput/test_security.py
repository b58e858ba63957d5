"""Security properties of what gang serves and what it writes to its logs.

- Nothing that mutates cluster state is served without authentication: the extender's bind verb
  needs a bearer token or client certificates, or an explicit ``--allow-unauthenticated-bind``.
- The status server is read-only: every method but GET/HEAD is 405, and the cluster, the gangs
  and the metrics are exactly as before.
- Every server bounds request bodies (413).
- No credential reaches a log line: ``gang run`` and ``gang extender`` run as processes at DEBUG
  level with bearer tokens (the kubeconfig's, the extender's own, and a wrong one sent by a
  client), and none of them appears anywhere in their output.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gang.app.metrics import make_registry
from gang.app.server import MAX_REQUEST_BYTES, StatusServer
from gang.cli import main
from gang.extender.server import (
    ExtenderConfig,
    ExtenderServer,
    InsecureBindError,
    bind_authentication_problem,
)
from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from gang.sim.server import MAX_BODY_BYTES as SIM_MAX_BODY_BYTES
from tests.badinput.conftest import scheduler_on
from tests.extender.conftest import fixture, fixture_bytes
from tests.scheduler.conftest import Api, eventually, gang_pod, podgroup

ROOT = Path(__file__).resolve().parents[2]
STATUS_PATHS = ("/healthz", "/readyz", "/metrics", "/debug/gangs", "/debug/gangs?format=json")
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND", "MKCOL")

# --- bind needs authentication -------------------------------------------------------------------


def client_ca_context() -> ssl.SSLContext:
    """A server context that requires client certificates (no certificate loaded: not needed
    to decide whether callers are authenticated)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def test_bind_without_authentication_is_a_problem_unless_accepted() -> None:
    bind = ExtenderConfig(enable_bind=True)
    problem = bind_authentication_problem(bind, None)
    assert problem is not None
    for flag in ("--token-file", "--tls-client-ca", "--allow-unauthenticated-bind"):
        assert flag in problem
    # TLS alone is no authentication: it must require client certificates
    assert bind_authentication_problem(bind, ssl.create_default_context(ssl.Purpose.CLIENT_AUTH))
    assert bind_authentication_problem(bind, client_ca_context()) is None
    assert bind_authentication_problem(ExtenderConfig(enable_bind=True, token="t"), None) is None
    accepted = ExtenderConfig(enable_bind=True, allow_unauthenticated_bind=True)
    assert bind_authentication_problem(accepted, None) is None
    assert bind_authentication_problem(ExtenderConfig(), None) is None  # no bind, nothing to guard


async def test_an_extender_with_unauthenticated_bind_refuses_to_start() -> None:
    kube: Any = object()  # never called: the server must not even listen
    server = ExtenderServer(ExtenderConfig(enable_bind=True), kube=kube)
    with pytest.raises(InsecureBindError, match="must be authenticated"):
        await server.start("127.0.0.1", 0)
    assert server.port == 0
    for config in (
        ExtenderConfig(enable_bind=True, token="t0ken"),
        ExtenderConfig(enable_bind=True, allow_unauthenticated_bind=True),
    ):
        server = ExtenderServer(config, kube=kube)
        await server.start("127.0.0.1", 0)
        try:
            assert server.port
        finally:
            await server.stop()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--enable-bind"], "--enable-bind: the bind verb creates pods/binding"),
        (["--allow-unauthenticated-bind"], "only applies with --enable-bind"),
    ],
)
def test_the_command_refuses_unauthenticated_bind(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["extender", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err
    if "--enable-bind" in flags:
        assert "--token-file" in err and "--allow-unauthenticated-bind" in err


def test_a_token_in_the_configuration_stays_out_of_its_repr() -> None:
    config = ExtenderConfig(enable_bind=True, token="do-not-print-me")
    assert "do-not-print-me" not in repr(config)
    assert "do-not-print-me" not in str(config)


# --- the status server is read-only --------------------------------------------------------------


@contextlib.asynccontextmanager
async def status_server(current: Any = None) -> AsyncIterator[str]:
    server = StatusServer(
        make_registry(lambda: current, lambda: current is not None),
        lambda: current,
        lambda: (True, "ok"),
    )
    await server.start("127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()


async def test_status_endpoints_are_read_only() -> None:
    async with (
        SimCluster("2:gpu=8") as cluster,
        cluster.api_client() as client,
        scheduler_on(cluster) as running,
        status_server(running.scheduler) as base,
        aiohttp.ClientSession() as http,
    ):
        api = Api(client)
        await api.create_podgroup(podgroup("ro", 2))
        await api.create_pods([gang_pod(f"ro-{i}", "ro", gpu=1) for i in range(2)])
        await api.create_podgroup(podgroup("waiting", 3))
        await api.create_pods([gang_pod("waiting-0", "waiting", gpu=9)])

        async def settled() -> bool:
            before = cluster.store.rv
            await asyncio.sleep(0.4)  # status writes and events are done: nothing moves
            ro = (await api.get_podgroup("ro")).get("status") or {}
            return ro.get("phase") == "Scheduled" and cluster.store.rv == before

        await eventually(settled)

        async def snapshot() -> tuple[int, Any, list[str]]:
            async with http.get(base + "/debug/gangs?format=json") as resp:
                gangs = await resp.json()
            async with http.get(base + "/metrics") as resp:
                metrics = [
                    line
                    for line in (await resp.text()).splitlines()
                    if not line.startswith(CLOCK_GAUGES)  # they move with time alone
                ]
            return cluster.store.rv, gangs, metrics

        before = await snapshot()
        refused = 0
        for path in STATUS_PATHS:
            for method in WRITE_METHODS:
                for body in (None, b'{"spec": {"minMember": 0}}', b"x" * (4 * MAX_REQUEST_BYTES)):
                    async with http.request(method, base + path, data=body) as resp:
                        assert resp.status == 405, (method, path, resp.status)
                        assert set(resp.headers["Allow"].split(",")) == {"GET", "HEAD"}
                        refused += 1
        for path in STATUS_PATHS:
            async with http.head(base + path) as resp:
                assert resp.status == 200
        after = await snapshot()
        assert after == before  # not a resourceVersion, a gang or a counter moved
        assert running.crashed() is None
    print(f"\nFIGURES read-only: {refused} non-GET requests to the status server, all 405")


#: gauges that are a time since something: read twice, they differ with nothing changed
CLOCK_GAUGES = ("gang_informer_silence_seconds",)


# --- request size limits on every server ---------------------------------------------------------


async def _chunked(total: int) -> AsyncIterator[bytes]:
    """A body without Content-Length: the limit must hold while reading."""
    for _ in range(total // 512):
        yield b"x" * 512


async def test_every_server_bounds_request_bodies() -> None:
    limit = 2048
    async with (
        status_server() as status_base,
        SimCluster("1:gpu=8") as cluster,
        aiohttp.ClientSession() as http,
    ):
        # the status server: a body is ignored up to its limit, refused beyond
        for size, expected in ((MAX_REQUEST_BYTES, 200), (MAX_REQUEST_BYTES + 1, 413)):
            async with http.get(status_base + "/metrics", data=b"x" * size) as resp:
                assert resp.status == expected, size
        async with http.get(status_base + "/healthz", data=_chunked(8 * MAX_REQUEST_BYTES)) as resp:
            assert resp.status == 413
        async with http.get(status_base + "/healthz") as resp:
            assert resp.status == 200

        # the extender: on the verbs and on the open paths alike
        extender = ExtenderServer(ExtenderConfig(max_body_bytes=limit))
        await extender.start("127.0.0.1", 0)
        try:
            ext_base = f"http://127.0.0.1:{extender.port}"
            for path in (
                "/gang-extender/filter",
                "/gang-extender/prioritize",
                "/gang-extender/bind",
            ):
                async with http.post(ext_base + path, data=b"{" * (limit + 1)) as resp:
                    assert resp.status == 413, path
                    assert (await resp.json())[
                        "Error"
                    ] == f"request body over the limit of {limit} bytes"
            for path in ("/healthz", "/readyz"):
                async with http.get(ext_base + path, data=b"x" * limit) as resp:
                    assert resp.status == 200  # ignored
                async with http.get(ext_base + path, data=b"x" * (limit + 1)) as resp:
                    assert resp.status == 413
        finally:
            await extender.stop()

        # the simulator, as a real apiserver: 413 with a Status
        async with http.post(
            cluster.url + "/api/v1/namespaces/default/pods",
            data=b" " * (SIM_MAX_BODY_BYTES + 1),
            headers={"Content-Type": "application/json"},
        ) as resp:
            assert resp.status == 413
            answer = await resp.json()
            assert answer["kind"] == "Status" and answer["reason"] == "RequestEntityTooLarge"


# --- no credentials in logs ----------------------------------------------------------------------

SIM_TOKEN = "sim-token-3f9a7c1e5d"
EXTENDER_TOKEN = "ext-token-8b2d4f6a0c"
WRONG_TOKEN = "wrong-token-1a2b3c4d5e"


def bound(cluster: SimCluster) -> dict[str, str]:
    """Bound pods, read from the simulator's store (the API may be injecting faults)."""
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in cluster.store.items(cluster.api.rt_pods.storage_key)
        if p["spec"].get("nodeName")
    }


class Process:
    """A ``python -m gang`` subprocess whose whole output is kept."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.output: list[str] = []
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, *args: str) -> Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gang",
            *args,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.output.append(line.decode(errors="replace"))

    def text(self) -> str:
        return "".join(self.output)

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(20):
                code = await self.proc.wait()
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
        await self._reader
        return code


async def test_no_token_reaches_the_logs_at_debug_level(tmp_path: Path) -> None:
    token_file = tmp_path / "extender-token"
    token_file.write_text(EXTENDER_TOKEN + "\n")
    faults = Faults(error_rate=0.05, seed=7)  # retried errors: the log lines they leave too
    async with (
        SimCluster("4:gpu=8", token=SIM_TOKEN, faults=faults) as cluster,
        cluster.api_client() as client,
        aiohttp.ClientSession() as http,
    ):
        assert SIM_TOKEN in cluster.kubeconfig_path.read_text()  # the token is in the kubeconfig
        api = Api(client)
        kubeconfig = str(cluster.kubeconfig_path)
        scheduler = await Process.start(
            "run",
            "--kubeconfig",
            kubeconfig,
            "--port",
            "0",
            "--log-level",
            "DEBUG",
            "--no-leader-elect",
        )
        extender = await Process.start(
            "extender", "--kubeconfig", kubeconfig, "--port", "0", "--log-level", "DEBUG",
            "--node-cache", "--enable-bind", "--token-file", str(token_file),
        )  # fmt: skip
        try:
            faults.error_rate = 0.0
            await api.create_podgroup(podgroup("logged", 2))
            await api.create_pods([gang_pod(f"logged-{i}", "logged", gpu=2) for i in range(2)])
            faults.error_rate = 0.05

            async def gang_bound() -> bool:
                return {"logged-0", "logged-1"} <= set(bound(cluster))

            await eventually(gang_bound, within=30)

            async def extender_port() -> bool:
                return re.search(r"serving http://127\.0\.0\.1:(\d+)/", extender.text()) is not None

            await eventually(extender_port, within=30)
            found = re.search(r"serving http://127\.0\.0\.1:(\d+)/", extender.text())
            assert found is not None
            base = f"http://127.0.0.1:{found.group(1)}/gang-extender"
            faults.error_rate = 0.0
            await api.create_pods([gang_pod("by-extender", None, gpu=1, scheduler="nobody")])
            for token in (WRONG_TOKEN, EXTENDER_TOKEN):
                headers = {"Authorization": f"Bearer {token}"}
                async with http.post(
                    base + "/filter",
                    data=fixture_bytes("filter-args-nodenames.json"),
                    headers=headers,
                ) as resp:
                    assert resp.status == (401 if token == WRONG_TOKEN else 200)
                bind = {
                    **fixture("bind-args.json"),
                    "PodName": "by-extender",
                    "PodUID": "",
                    "Node": "node-00003",
                }
                async with http.post(base + "/bind", json=bind, headers=headers) as resp:
                    assert resp.status == (401 if token == WRONG_TOKEN else 200)
            assert bound(cluster)["by-extender"] == "node-00003"
        finally:
            codes = await asyncio.gather(scheduler.stop(), extender.stop())
        assert codes == [0, 0], (codes, scheduler.text()[-2000:], extender.text()[-2000:])
    for process in (scheduler, extender):
        text = process.text()
        assert " DEBUG " in text, "the process did not log at DEBUG level"
        for secret in (SIM_TOKEN, EXTENDER_TOKEN, WRONG_TOKEN):
            assert secret not in text
    lines = len(scheduler.output) + len(extender.output)
    print(f"\nFIGURES logs: {lines} log lines at DEBUG from gang run and gang extender, 0 tokens")
