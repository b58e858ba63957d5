"""A one-handler HTTP server on loopback: the stand-in for an API server that answers what the
simulator never does (silence, broken connections, TLS with client certificates)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """Serve every path with ``handler`` while iterated once; yields the server's URL."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
