"""A post worker: a child process that sends the scheduler's bindings and hands back the answers.

Why a process of its own: see ``gang.kube.postpool``. This side owns nothing but a lean
keep-alive pool to the API server (``gang.kube.leanhttp``, the same code the scheduler uses in
process): it reads request frames from stdin, sends each at once — how many are in flight is
bounded by the scheduler's binding slots, so nothing bounds it again here — and writes each
answer frame to stdout as it comes, the answers of a few milliseconds in one write
(``FrameWriter``, ``ANSWER_FLUSH_INTERVAL``); a brief request's success (a binding's) is only
its id and status, those of one write together in a ``K`` frame.

It also reads watch streams for the scheduler (``W`` frames): the TLS and HTTP of every watch
event are then this process's work, and the scheduler reads the server's lines from the pipe,
many events to a read.

It exits when stdin closes (the scheduler stopped, or died: no worker outlives it), once the
requests in flight are answered; its watches are closed at once.

Run as ``python -m gang.kube.postworker``; the first frame on stdin is the configuration.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import orjson

from gang.kube.leanhttp import LeanError, LeanHTTP, Reply, ssl_context_of
from gang.kube.postframes import (
    ANSWER_FLUSH_INTERVAL,
    BRIEF,
    CANCEL,
    CONFIG,
    EVENTS,
    REQUEST,
    WATCH,
    FrameWriter,
    answer_frame,
    frame,
    frames,
)

log = logging.getLogger("gang.kube.postworker")


def lean_from(config: dict[str, Any], headers: dict[str, str]) -> LeanHTTP:
    """The keep-alive pool the scheduler's configuration describes (see PostPool.settings)."""
    url = str(config["host"])
    tls = SimpleNamespace(
        ssl_ca_cert=config.get("ssl_ca_cert"),
        cert_file=config.get("cert_file"),
        key_file=config.get("key_file"),
        verify_ssl=config.get("verify_ssl", True),
        disable_strict_ssl_verification=config.get("disable_strict_ssl_verification", False),
    )

    async def current() -> dict[str, str]:
        return headers

    return LeanHTTP(
        url,
        ssl_context=ssl_context_of(tls) if url.startswith("https") else None,
        server_hostname=config.get("tls_server_name"),
        headers=current,
        limit=int(config["limit"]),
        timeout=float(config["timeout"]),
    )


class Worker(asyncio.Protocol):
    """Reads request frames (the protocol on stdin) and answers them on ``out``."""

    def __init__(self, out: asyncio.WriteTransport) -> None:
        self.out = out
        self.lean: LeanHTTP | None = None
        #: the auth headers, updated in place by later config frames (the pool reads them)
        self.headers: dict[str, str] = {}
        self.buffer = bytearray()
        self.tasks: set[asyncio.Task[None]] = set()
        #: the watches being read, by id (each also in ``tasks``)
        self.watches: dict[int, asyncio.Task[None]] = {}
        self.answers = FrameWriter(self._write, ANSWER_FLUSH_INTERVAL)
        self.finished = asyncio.Event()
        self.stdin_open = True

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        for kind, ident, text, body in frames(self.buffer):
            if kind == CONFIG:
                self._configure(orjson.loads(body))
            elif kind in (REQUEST, BRIEF):
                task = asyncio.create_task(self._send(ident, text, body, kind == BRIEF))
                self.tasks.add(task)
                task.add_done_callback(self._sent)
            elif kind == WATCH:
                task = self.watches[ident] = asyncio.create_task(self._watch(ident, text))
                self.tasks.add(task)
                task.add_done_callback(self._sent)
            elif kind == CANCEL:
                watch = self.watches.pop(ident, None)
                if watch is not None:
                    watch.cancel()

    def eof_received(self) -> bool:
        self._closed()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed()

    def _configure(self, config: dict[str, Any]) -> None:
        self.headers.clear()
        self.headers.update(config.get("headers") or {})
        if self.lean is None:
            self.lean = lean_from(config, self.headers)
        else:  # a new token: let the pool read it before its next request
            self.lean.refresh_headers()

    async def _send(self, ident: int, text: bytes, body: bytes, brief: bool) -> None:
        method, path, content_type = text.decode("latin-1").split(" ", 2)
        outcome: Reply | LeanError
        try:
            if self.lean is None:
                raise LeanError("post worker not configured")
            outcome = await self.lean.request(method, path, body, content_type)
        except LeanError as err:
            outcome = err
        if brief and isinstance(outcome, Reply) and 200 <= outcome.status < 300:
            self.answers.add_success(ident, outcome.status)  # (its body is not read)
        else:
            self._answer(answer_frame(ident, outcome))

    async def _watch(self, ident: int, text: bytes) -> None:
        within, _, path = text.decode("latin-1").partition(" ")
        answers = self.answers

        def forward(chunk: bytes) -> None:
            answers.add(frame(EVENTS, ident, b"", chunk))

        outcome: Reply | LeanError
        try:
            if self.lean is None:
                raise LeanError("post worker not configured")
            outcome = await self.lean.stream(path, forward, float(within))
        except LeanError as err:
            outcome = err
        finally:
            self.watches.pop(ident, None)
        self._answer(answer_frame(ident, outcome))

    def _answer(self, answer: bytes) -> None:
        self.answers.add(answer)

    def _write(self, data: bytes) -> None:
        if not self.out.is_closing():
            self.out.write(data)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("post failed: %r", task.exception())
        self._maybe_done()

    def _closed(self) -> None:
        self.stdin_open = False
        for watch in self.watches.values():  # nobody reads them any more
            watch.cancel()
        self._maybe_done()

    def _maybe_done(self) -> None:
        if not self.stdin_open and not self.tasks:
            self.finished.set()


async def serve() -> None:
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    worker = Worker(out)
    await loop.connect_read_pipe(lambda: worker, sys.stdin.buffer)
    await worker.finished.wait()
    worker.answers.flush()
    if worker.lean is not None:
        await worker.lean.close()
    out.close()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="post worker: %(levelname)s %(message)s")
    try:
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve())


if __name__ == "__main__":
    main()
