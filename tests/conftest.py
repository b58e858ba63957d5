"""Shared fixtures: a simulated cluster per test, reached over real HTTP.

Every scheduler and simulator test talks to the cluster the way production code talks to a real
apiserver: a kubeconfig, kubernetes-asyncio, HTTP on loopback. ``raw`` is a plain aiohttp session
for the tests that check bytes and status codes exactly.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from gang.sim.cluster import SimCluster


class Raw:
    """Minimal HTTP helper returning (status, parsed JSON or text, raw bytes)."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        data: bytes | None = None,
    ) -> tuple[int, Any, bytes]:
        import orjson

        hdrs = {"Content-Type": content_type, **(headers or {})}
        payload = data if data is not None else (orjson.dumps(body) if body is not None else None)
        async with self.session.request(
            method, self.base + path, data=payload, headers=hdrs
        ) as resp:
            raw = await resp.read()
            try:
                parsed: Any = orjson.loads(raw)
            except orjson.JSONDecodeError:
                parsed = raw.decode(errors="replace")
            return resp.status, parsed, raw

    async def get(self, path: str, **kw: Any) -> tuple[int, Any, bytes]:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, bytes]:
        return await self.request("POST", path, body, **kw)

    async def put(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, bytes]:
        return await self.request("PUT", path, body, **kw)

    async def patch(
        self, path: str, body: Any, content_type: str = "application/merge-patch+json"
    ) -> tuple[int, Any, bytes]:
        return await self.request("PATCH", path, body, content_type=content_type)

    async def delete(self, path: str, body: Any = None) -> tuple[int, Any, bytes]:
        return await self.request("DELETE", path, body)

    async def watch_lines(
        self, path: str, *, max_events: int, seconds: float = 5.0
    ) -> list[dict[str, Any]]:
        """Open a watch and read up to ``max_events`` event lines (or until the stream ends)."""
        import asyncio
        import contextlib

        import orjson

        events: list[dict[str, Any]] = []
        async with self.session.get(self.base + path) as resp:
            assert resp.status == 200, await resp.text()

            async def read() -> None:
                while len(events) < max_events:
                    line = await resp.content.readline()
                    if not line:
                        return
                    events.append(orjson.loads(line))

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(read(), seconds)
        return events


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Commands run in-process (``gang.cli.main``) configure logging: handlers on streams
    pytest closes after the test. Every test gives the root logger back as it found it, so no
    later test logs into a closed stream."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster("4:gpu=8,zones=2", bookmark_interval=0.2) as sim:
        yield sim


@pytest.fixture
async def client(cluster: SimCluster) -> AsyncIterator[Any]:
    async with cluster.api_client() as api_client:
        yield api_client


@pytest.fixture
async def raw(cluster: SimCluster) -> AsyncIterator[Raw]:
    async with aiohttp.ClientSession() as session:
        yield Raw(session, cluster.url)


def binding(name: str, node: str) -> dict[str, Any]:
    """A Binding body as kube-scheduler posts it to pods/{name}/binding."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def pod(
    name: str,
    *,
    group: str | None = None,
    cpu: str = "1",
    gpu: int = 0,
    scheduler: str = "gang-scheduler",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod manifest as a user would write it."""
    all_labels = dict(labels or {})
    if group:
        all_labels["scheduling.x-k8s.io/pod-group"] = group
    limits = {"cpu": cpu, "memory": "1Gi"}
    if gpu:
        limits["nvidia.com/gpu"] = str(gpu)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "busybox:1.36", "resources": {"limits": limits}}],
            **spec,
        },
    }
