"""``gang extender``: the extender server, plus the node cache and API client when needed.

Without ``--node-cache`` and ``--enable-bind`` the extender needs no access to the cluster at
all: every answer comes from the request. With either, it builds an API client from the
kubeconfig (or the in-cluster config) — read nodes and pods for the cache, create
``pods/binding`` for bind. The node cache's informers are supervised: if they die, the process
exits non-zero for its supervisor to restart it whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from dataclasses import dataclass
from typing import Any

from gang.extender.nodecache import NodeCache
from gang.extender.server import (
    DEFAULT_PORT,
    ExtenderConfig,
    ExtenderServer,
    InsecureBindError,
)
from gang.kube.client import make_api_client
from gang.kube.transport import Kube

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ExtenderProcess:
    config: ExtenderConfig
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    node_cache: bool = False
    kubeconfig: str | None = None
    ssl_context: ssl.SSLContext | None = None

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until ``stop`` is set (0) or the node cache fails (1)."""
        api_client = None
        if self.node_cache or self.config.enable_bind:
            try:
                api_client = await make_api_client(self.kubeconfig)
            except Exception as err:  # kubeconfig missing or invalid: say so, no traceback
                log.error("gang extender: cannot configure the API client: %s", err)
                return 2
        try:
            kube = Kube(api_client) if api_client is not None else None
            cache = NodeCache(kube) if self.node_cache and kube is not None else None
            server = ExtenderServer(self.config, node_cache=cache, kube=kube)
            try:
                await server.start(self.host, self.port, self.ssl_context)
            except OSError as err:  # address in use, no such interface
                log.error("gang extender: cannot listen on %s:%d: %s", self.host, self.port, err)
                return 1
            except InsecureBindError as err:
                log.error("gang extender: %s", err)
                return 2
            scheme = "https" if self.ssl_context is not None else "http"
            log.info(
                "gang extender serving %s://%s:%d%s/{filter,prioritize%s} (%s)",
                scheme,
                self.host,
                server.port,
                server.prefix,
                ",bind" if self.config.enable_bind else "",
                "node cache" if cache is not None else "nodes from each request",
            )
            try:
                return await self._wait(stop, cache)
            finally:
                await server.stop()
        finally:
            if api_client is not None:
                await api_client.close()

    async def _wait(self, stop: asyncio.Event, cache: NodeCache | None) -> int:
        stopper = asyncio.create_task(stop.wait(), name="extender stop")
        tasks: set[asyncio.Task[Any]] = {stopper}
        feeder = None
        if cache is not None:
            feeder = asyncio.create_task(cache.run(), name="extender node cache")
            tasks.add(feeder)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if feeder is not None and feeder.done() and not feeder.cancelled():
            err = feeder.exception()
            if err is not None or not stop.is_set():
                log.error("gang extender: the node cache stopped: %r", err)
                return 1
        return 0
