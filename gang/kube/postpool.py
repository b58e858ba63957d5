"""Bindings (and Events and status patches) sent from worker processes, so the scheduler's one
core is spent on deciding.

Why: on a 16-core control plane gang's single process is the bottleneck (issue 29's figures:
241 to 511 µs of its CPU per bound pod, against about 100 µs for a binder that only posts). Each
binding is one small POST whose answer the scheduler needs only as a status; formatting the
request, TLS, the socket writes and reads and parsing the answer are work any core can do.
``PostPool.request`` has ``LeanHTTP.request``'s signature and meaning, so the transport hands a
binding to it unchanged; it frames the request onto a worker's stdin (``gang.kube.postframes``;
the frames of one event-loop turn in one write) and resolves the caller's future from the
worker's answer frame.

What an answer means is the transport's: any HTTP status is an answer; no answer — the worker
lost its connection, timed out, or exited — is ``LeanError``, which the transport reports as a
connection error (status 0, retryable). A binding that landed before its answer was lost is
settled by the binder's 409 check, exactly as for a dropped connection in process. A worker
that exits is replaced on the next request; one that cannot be kept running (three quick exits
in a row) leaves the pool sending in process, over ``fallback``, with an error logged once.

A gang's bindings can also go as one batch (``send_many``): the same frames, with no task,
future or timer per request on the scheduler's core; each outcome goes to one callback. Sent
``brief``, as bindings are, their successes come back as (id, status) pairs, many to a ``K``
frame, with a shared bodiless ``Reply`` per status: nobody reads a binding's ``Status`` body.

Watches are read by the workers too (``open_watch``): a worker holds the stream's connection and
sends its body back as it arrives, so the scheduler reads many events per pipe read, with no TLS
or HTTP of its own; a ``WatchStream`` hands the pieces to the informer's reader. A worker that
exits ends its watches as broken streams, which the informers resume from their last
resourceVersion, as after any broken connection.

Invariants: every request written to a worker has its taker (a future's setter, or a batch's
callback) in that worker's ``pending`` until its answer, its timer (its own or its batch's), or
the worker's exit hands it exactly one outcome; every watch is in its worker's ``streams``
until its end (its ``A`` frame, its timer, the worker's exit, or the reader's cancel) and is
ended exactly once; ids are unique per pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

import orjson

from gang.kube.leanhttp import AUTH_TTL, HeaderSource, LeanError, LeanHTTP, Reply
from gang.kube.postframes import (
    ANSWER,
    BRIEF,
    CANCEL,
    CONFIG,
    EVENTS,
    OKS,
    REQUEST,
    WATCH,
    FrameWriter,
    answer_of,
    frame,
    frames,
    oks_of,
)

log = logging.getLogger(__name__)

#: a worker that exits this soon after it started counts as failing to run
QUICK_EXIT_SECONDS = 2.0
#: quick exits in a row after which the pool stops starting workers and sends in process
MAX_QUICK_EXITS = 3
#: how much longer than the worker's own request timeout the pool waits for an answer
ANSWER_GRACE = 5.0


def worker_settings(configuration: Any, timeout: float) -> dict[str, Any]:
    """What a worker needs of a kubernetes-asyncio Configuration to reach the same server the
    same way (its auth headers travel separately: they change)."""
    return {
        "host": configuration.host,
        "ssl_ca_cert": configuration.ssl_ca_cert,
        "cert_file": configuration.cert_file,
        "key_file": configuration.key_file,
        "verify_ssl": bool(configuration.verify_ssl),
        "disable_strict_ssl_verification": bool(
            getattr(configuration, "disable_strict_ssl_verification", False)
        ),
        "tls_server_name": configuration.tls_server_name,
        "limit": int(configuration.connection_pool_maxsize or 100),
        "timeout": timeout,
    }


class WatchStream:
    """A watch a worker reads, seen from the scheduler: the pieces of its body as they came,
    then its end (a ``Reply``: 200 when the server ended it cleanly; ``LeanError``: no
    complete answer)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        ident: int,
        on_close: Callable[[WatchStream], None],
    ) -> None:
        self.ident = ident
        self._loop = loop
        self._on_close = on_close
        self._pieces: list[bytes] = []
        self.end: Reply | LeanError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None

    def feed(self, piece: bytes) -> None:
        if self.end is None:
            self._pieces.append(piece)
            self._wake()

    def finish(self, outcome: Reply | LeanError) -> None:
        if self.end is None:
            self.end = outcome
            if self.timer is not None:
                self.timer.cancel()
            self._wake()

    async def read(self) -> bytes | None:
        """What came since the last read, joined (waiting for something); None once the
        stream has ended (``end`` says how)."""
        while not self._pieces:
            if self.end is not None:
                return None
            self._waiter = self._loop.create_future()
            await self._waiter
        pieces, self._pieces = self._pieces, []
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def close(self) -> None:
        """The reader is done with it: the worker closes the watch if it still reads it."""
        self._on_close(self)

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Child(asyncio.SubprocessProtocol):
    """One worker process, seen from the scheduler: its stdin, its answers, its requests."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.timeout = timeout
        self.transport: asyncio.SubprocessTransport | None = None
        self.stdin: asyncio.WriteTransport | None = None
        #: per request in flight: what takes its outcome, and its own timer (None: its batch's)
        self.pending: dict[int, tuple[Resolve, asyncio.TimerHandle | None]] = {}
        #: the watches this worker reads for us, by id
        self.streams: dict[int, WatchStream] = {}
        self.buffer = bytearray()
        self.outgoing = FrameWriter(self._write)
        self.started = time.monotonic()
        self.exited = asyncio.Event()
        self.alive = True

    # asyncio.SubprocessProtocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.SubprocessTransport, transport)
        self.stdin = cast(asyncio.WriteTransport | None, self.transport.get_pipe_transport(0))

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        self.buffer += data
        for kind, ident, text, body in frames(self.buffer):
            if kind == EVENTS:
                stream = self.streams.get(ident)
                if stream is not None:
                    stream.feed(body)
                continue
            if kind == OKS:
                self._succeeded(body)
                continue
            if kind != ANSWER:
                continue
            stream = self.streams.pop(ident, None)
            if stream is not None:
                stream.finish(answer_of(text, body))
                continue
            resolve = self._taken(ident)
            if resolve is not None:
                _resolve(resolve, answer_of(text, body))

    def _succeeded(self, body: bytes) -> None:
        """A ``K`` frame: brief requests that succeeded, each answered with its status and no
        body (one Reply per status, shared: a Reply is immutable)."""
        for ident, status in oks_of(body):
            resolve = self._taken(ident)
            if resolve is None:
                continue
            reply = _SUCCESSES.get(status)
            if reply is None:
                reply = _SUCCESSES[status] = Reply(status, b"", None)
            _resolve(resolve, reply)

    def _taken(self, ident: int) -> Resolve | None:
        """The taker of request ``ident``'s outcome, no longer pending, its own timer stopped
        (None: it timed out already)."""
        entry = self.pending.pop(ident, None)
        if entry is None:
            return None
        resolve, timer = entry
        if timer is not None:
            timer.cancel()
        return resolve

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 0:
            self.stdin = None

    def process_exited(self) -> None:
        self.alive = False
        self.exited.set()
        code = self.transport.get_returncode() if self.transport is not None else None
        self._fail_all(LeanError(f"post worker exited (code {code})"))

    # the pool's side
    def send(self, ident: int, head: bytes, body: bytes) -> asyncio.Future[Reply]:
        future: asyncio.Future[Reply] = self.loop.create_future()
        timer = self.loop.call_later(self.timeout, self._timed_out, (ident,))
        self.pending[ident] = (functools.partial(_settle_future, future), timer)
        self.outgoing.add(frame(REQUEST, ident, head, body))
        return future

    def send_many(
        self, first: int, requests: list[tuple[bytes, bytes]], resolve: Batch, brief: bool
    ) -> None:
        """``requests`` as ids ``first``, ``first + 1``...; each outcome goes to ``resolve``
        with the request's index. One timer watches the lot. ``brief``: a success comes
        without its body (``BRIEF``)."""
        idents = range(first, first + len(requests))
        self.loop.call_later(self.timeout, self._timed_out, idents)
        pending = self.pending
        for index, ident in enumerate(idents):
            pending[ident] = (functools.partial(resolve, index), None)
        kind = BRIEF if brief else REQUEST
        self.outgoing.extend(
            frame(kind, ident, head, body)
            for ident, (head, body) in zip(idents, requests, strict=True)
        )

    def watch(self, ident: int, path: str, timeout: float) -> WatchStream:
        """Have the worker GET ``path`` (a watch, ending within ``timeout``) and stream it."""
        stream = self.streams[ident] = WatchStream(self.loop, ident, self.cancel)
        stream.timer = self.loop.call_later(timeout + ANSWER_GRACE, self._stream_timed_out, ident)
        self.outgoing.add(frame(WATCH, ident, f"{int(timeout)} {path}".encode("latin-1"), b""))
        return stream

    def cancel(self, stream: WatchStream, why: str = "the watch's reader stopped") -> None:
        """Stop a watch before its end: the worker closes it (one that ended is left)."""
        if self.streams.pop(stream.ident, None) is not None:
            stream.finish(LeanError(why))
            if self.alive:
                self.outgoing.add(frame(CANCEL, stream.ident, b"", b""))

    def _stream_timed_out(self, ident: int) -> None:
        stream = self.streams.get(ident)
        if stream is not None:
            self.cancel(stream, "the watch outlived its timeout in the post worker")

    def configure(self, settings: dict[str, Any]) -> None:
        self.outgoing.add(frame(CONFIG, 0, b"", orjson.dumps(settings)))

    def _write(self, data: bytes) -> None:
        if self.stdin is None or self.stdin.is_closing():
            self._fail_all(LeanError("post worker's stdin is closed"))
            return
        self.stdin.write(data)

    def close(self) -> None:
        """No more requests: the worker answers those in flight, then exits."""
        self.alive = False
        self.outgoing.flush()
        if self.stdin is not None:
            self.stdin.close()

    def kill(self) -> None:
        if self.transport is not None and self.transport.get_returncode() is None:
            with contextlib.suppress(ProcessLookupError):
                self.transport.kill()

    def _timed_out(self, idents: Iterable[int]) -> None:
        for ident in idents:
            entry = self.pending.pop(ident, None)
            if entry is not None:
                _resolve(entry[0], LeanError("no answer from the post worker in time"))

    def _fail_all(self, err: LeanError) -> None:
        streams, self.streams = self.streams, {}
        for stream in streams.values():
            stream.finish(err)
        pending, self.pending = self.pending, {}
        for resolve, timer in pending.values():
            if timer is not None:
                timer.cancel()
            _resolve(resolve, err)


Outcome = Reply | LeanError
#: the answer to a brief request's success, per status (``_Child._succeeded``)
_SUCCESSES: dict[int, Reply] = {}
#: takes one request's outcome
Resolve = Callable[[Outcome], None]
#: takes the outcome of a batch's request, by its index in the batch
Batch = Callable[[int, Outcome], None]


def _settle_future(future: asyncio.Future[Reply], outcome: Outcome) -> None:
    if future.done():
        return
    if isinstance(outcome, LeanError):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _resolve(resolve: Resolve, outcome: Outcome) -> None:
    """Hand one outcome over; a taker that raises is logged, never allowed to stop the
    answers read after it."""
    try:
        resolve(outcome)
    except Exception:
        log.exception("handling a post worker's answer failed")


class PostPool:
    """``size`` worker processes sending requests to one API server (see the module doc)."""

    def __init__(
        self,
        size: int,
        settings: dict[str, Any],
        headers: HeaderSource,
        fallback: LeanHTTP,
        command: tuple[str, ...] = (sys.executable, "-m", "gang.kube.postworker"),
    ) -> None:
        if size < 1:
            raise ValueError("a post pool needs at least one worker")
        self.size = size
        self.settings = settings
        self.command = command
        self.fallback = fallback
        self._headers = headers
        self._header_values: dict[str, str] | None = None
        self._header_time = float("-inf")
        self._children: list[_Child | None] = [None] * size
        self._starting: dict[int, asyncio.Task[_Child]] = {}
        #: the next request id (a batch takes a run of them)
        self._next_id = 1
        self._turn = itertools.cycle(range(size))
        self._quick_exits = 0
        self._in_process = False
        self._closed = False
        self.started_workers = 0
        #: answers that came back from workers (not counting those sent in process)
        self.answered = 0
        #: watches handed to workers
        self.watches_opened = 0

    @property
    def running(self) -> int:
        """Workers running now (0 once the pool sends in process)."""
        if self._in_process:
            return 0
        return sum(1 for child in self._children if child is not None and child.alive)

    @property
    def in_process(self) -> bool:
        """True once the workers could not be kept running: requests go over ``fallback``."""
        return self._in_process

    async def start(self) -> None:
        """Start every worker now (they load while the scheduler lists the cluster)."""
        await self._fresh_headers()
        await asyncio.gather(*(self._child(slot) for slot in range(self.size)))

    async def request(
        self,
        method: str,
        path: str,
        body: bytes,
        content_type: str = "application/json",
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> Reply:
        """``LeanHTTP.request``, answered by a worker."""
        child = await self._next_child()
        if child is None:
            return await self.fallback.request(method, path, body, content_type, gate)
        if gate is not None:
            await gate()
        head = f"{method} {path} {content_type}".encode("latin-1")
        ident, self._next_id = self._next_id, self._next_id + 1
        reply = await child.send(ident, head, body)
        self.answered += 1
        if reply.status == 401:
            self._header_time = float("-inf")  # a token may have expired: read it afresh
        return reply

    async def send_many(
        self, requests: list[tuple[bytes, bytes]], resolve: Batch, brief: bool = False
    ) -> bool:
        """Hand ``requests`` (each a head ``METHOD PATH CONTENT-TYPE`` and a body) to one
        worker at once, without a task or future each: every outcome, a ``Reply`` or a
        ``LeanError``, goes to ``resolve`` with the request's index, once. ``brief``: a
        success's Reply has no body (bindings: nobody reads it). False (nothing sent): the
        pool sends in process now, and the caller sends them one by one."""
        child = await self._next_child()
        if child is None:
            return False
        first, self._next_id = self._next_id, self._next_id + len(requests)

        def answered(index: int, outcome: Outcome) -> None:
            if isinstance(outcome, Reply):
                self.answered += 1
                if outcome.status == 401:
                    self._header_time = float("-inf")  # a token may have expired
            resolve(index, outcome)

        child.send_many(first, requests, answered, brief)
        return True

    async def open_watch(self, path: str, within: float) -> WatchStream | None:
        """Have a worker read the watch ``path`` (a list path with a watch's query), ending ``within``
        seconds; None: no worker runs (the caller watches in process)."""
        child = await self._next_child()
        if child is None:
            return None
        ident, self._next_id = self._next_id, self._next_id + 1
        self.watches_opened += 1
        return child.watch(ident, path, within)

    async def close(self) -> None:
        """Let every worker answer what it has in flight, then stop it."""
        self._closed = True
        for task in list(self._starting.values()):
            with contextlib.suppress(Exception):
                await task
        children = [c for c in self._children if c is not None]
        for child in children:
            child.close()
        for child in children:
            try:
                await asyncio.wait_for(child.exited.wait(), timeout=ANSWER_GRACE)
            except TimeoutError:
                child.kill()

    # --- pieces ----------------------------------------------------------------------------

    async def _next_child(self) -> _Child | None:
        """The next worker in turn, told the current auth headers; None: the pool sends in
        process now (or is closed)."""
        if self._in_process or self._closed:
            return None
        if time.monotonic() - self._header_time > AUTH_TTL:
            await self._fresh_headers()
        return await self._child(next(self._turn))

    async def _fresh_headers(self) -> None:
        self._header_time = time.monotonic()
        headers = dict(await self._headers())
        if headers != self._header_values:
            self._header_values = headers
            for child in self._children:
                if child is not None and child.alive:
                    child.configure({**self.settings, "headers": headers})

    async def _child(self, slot: int) -> _Child | None:
        """The worker in ``slot``, started if it is not running; None: send in process."""
        child = self._children[slot]
        if child is not None and child.alive:
            return child
        if child is not None:  # it exited: a quick exit counts against the pool
            self._children[slot] = None
            quick = time.monotonic() - child.started < QUICK_EXIT_SECONDS
            self._quick_exits = self._quick_exits + 1 if quick else 0
            if self._quick_exits >= MAX_QUICK_EXITS and not self._in_process:
                self._in_process = True
                log.error(
                    "post workers keep exiting at start (%d in a row): sending bindings from "
                    "the scheduler's own process",
                    self._quick_exits,
                )
            else:
                log.warning("post worker %d exited; starting another", slot)
        if self._in_process:
            return None
        task = self._starting.get(slot)
        if task is None:
            task = self._starting[slot] = asyncio.create_task(self._spawn(slot))
        try:
            return await task
        finally:
            self._starting.pop(slot, None)

    async def _spawn(self, slot: int) -> _Child:
        loop = asyncio.get_running_loop()
        timeout = float(self.settings["timeout"]) + ANSWER_GRACE
        _, child = await loop.subprocess_exec(
            lambda: _Child(loop, timeout),
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,
        )
        child.configure({**self.settings, "headers": self._header_values or {}})
        self._children[slot] = child
        self.started_workers += 1
        return child
