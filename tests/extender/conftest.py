"""Extender fixtures: the extender served over real HTTP on loopback, and kube-scheduler's bodies.

``fixtures/*.json`` are shaped byte for byte like what kube-scheduler POSTs (see
``fixtures/README.md``); tests send those bytes, or small edits of them, exactly as
kube-scheduler's HTTPExtender would: ``POST {urlPrefix}/{verb}``, ``Content-Type:
application/json``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from gang.extender.server import ExtenderConfig, ExtenderServer

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(fixture_bytes(name))
    return data


@dataclass
class Client:
    """Speaks to one running extender the way kube-scheduler does."""

    session: aiohttp.ClientSession
    base: str
    server: ExtenderServer
    prefix: str = "/gang-extender"

    async def post(
        self,
        verb: str,
        body: Any,
        *,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, bytes]:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        async with self.session.post(
            f"{self.base}{self.prefix}/{verb}", data=data, headers=hdrs
        ) as resp:
            raw = await resp.read()
            return resp.status, _parse(raw), raw

    async def get(self, path: str) -> tuple[int, Any, bytes]:
        async with self.session.get(self.base + path) as resp:
            raw = await resp.read()
            return resp.status, _parse(raw), raw


def _parse(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode(errors="replace")


@asynccontextmanager
async def serving(config: ExtenderConfig | None = None, **kwargs: Any) -> AsyncIterator[Client]:
    server = ExtenderServer(config, **kwargs)
    await server.start("127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            yield Client(session, f"http://127.0.0.1:{server.port}", server, server.prefix)
    finally:
        await server.stop()


def names(filter_result: dict[str, Any]) -> list[str]:
    """The passing nodes of a filter answer, in either mode."""
    if filter_result["NodeNames"] is not None:
        return list(filter_result["NodeNames"])
    return [n["metadata"]["name"] for n in filter_result["Nodes"]["items"]]
