"""Keep-alive HTTP/1.1 for the hot writes: one binding (and one Event) per pod.

aiohttp's client is built for every use — cookies, redirects, tracing, a timer, a header
multidict and a request object per call — and spends about 150 µs of CPU per small POST, more
than the scheduler spends deciding where the pod goes. These writes need none of that: one
host, small JSON bodies, answers of a few hundred bytes. So they go over a pool of persistent
connections that write one pre-formatted request and parse the answer with httptools (the llhttp
parser in C), a few µs each. TLS, client certificates and the CA come from the same
kubernetes-asyncio configuration as every other request; bearer tokens from its auth hooks,
re-read once a second and at once after a 401.

New connections resume the TLS session of an earlier one (``ResumingContext``): a bind limit of
256 opens 256 connections in the first second of a burst, and a full TLS 1.3 handshake cost
1.2 ms of the client's CPU and 1.9 ms of the API server's (kube-apiserver v1.23, measured on 2
cores), a resumed one 0.6 and 0.5 ms. A server that no longer knows the session answers with a
full handshake; nothing else changes.

Invariant: a connection carries at most one request at a time, and goes back to the pool only
after its answer was read in full and the server kept it open; any failure closes it, so a
half-read answer can never be taken for the next request's.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, cast
from urllib.parse import urlsplit

import httptools

#: how long a request may wait for its answer before the connection is dropped
REQUEST_TIMEOUT = 60.0
#: how long auth headers (a bearer token that may be refreshed) are reused
AUTH_TTL = 1.0

HeaderSource = Callable[[], Awaitable[dict[str, str]]]


class LeanError(Exception):
    """No answer: the connection failed, broke, timed out, or the answer did not parse."""


class Reply(NamedTuple):
    """An answer: made once per request on both sides of the post workers' pipe, so a tuple
    (about 3,900 instructions against a frozen dataclass's 6,400: its ``__init__`` sets each
    field through ``object.__setattr__``)."""

    status: int
    body: bytes
    retry_after: str | None


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time."""

    def __init__(self, pool: LeanHTTP) -> None:
        self._pool = pool
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Reply] | None = None
        self._body: list[bytes] = []
        self._retry_after: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        #: where a streamed answer's body goes as it arrives (``LeanHTTP.stream``), once its
        #: status is 200; None: the body is kept for the Reply
        self._on_chunk: Callable[[bytes], None] | None = None
        self._streaming = False
        self.reusable = True
        #: no answer read yet (after the first, a TLS 1.3 session ticket has arrived)
        self._first = True

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(LeanError(f"unparsable answer: {err}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self._transport = None
        self._fail(LeanError(f"connection lost: {exc or 'closed by the server'}"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"retry-after":
            self._retry_after = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._streaming = self._on_chunk is not None and self._parser.get_status_code() == 200

    def on_body(self, body: bytes) -> None:
        if self._streaming:
            self._on_chunk(body)  # type: ignore[misc]  # (set whenever streaming is)
        else:
            self._body.append(body)

    def on_message_complete(self) -> None:
        waiter, self._waiter = self._waiter, None
        if self._timer is not None:
            self._timer.cancel()
        self.reusable = self._parser.should_keep_alive()
        reply = Reply(self._parser.get_status_code(), b"".join(self._body), self._retry_after)
        if self._first:
            self._first = False
            self._pool.remember_session(self._transport)
        if waiter is not None and not waiter.done():
            waiter.set_result(reply)
        else:  # an answer nobody asked for: the stream cannot be trusted any more
            self.close()

    # the pool's side
    @property
    def open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def send(
        self, request: bytes, timeout: float, on_chunk: Callable[[bytes], None] | None = None
    ) -> asyncio.Future[Reply]:
        if self._transport is None or self._waiter is not None:
            raise LeanError("connection not ready for a request")
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        self._body = []
        self._retry_after = None
        self._on_chunk = on_chunk
        self._streaming = False
        self._timer = loop.call_later(timeout, self._timed_out)
        self._transport.write(request)
        return self._waiter

    def close(self) -> None:
        self.reusable = False
        if self._transport is not None:
            self._transport.close()

    def _timed_out(self) -> None:
        self._fail(LeanError("no answer in time"))
        self.close()

    def _fail(self, err: LeanError) -> None:
        self.reusable = False
        if self._timer is not None:
            self._timer.cancel()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)


class LeanHTTP:
    """A pool of up to ``limit`` keep-alive connections to one API server."""

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        headers: HeaderSource,
        limit: int,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        self._host_line = f"Host: {host_header}\r\n".encode("latin-1")
        self._ssl = ssl_context if self._https else None
        self._server_hostname = server_hostname if self._https else None
        self._headers = headers
        self._header_block = b""
        self._header_time = float("-inf")
        self._limit = limit
        self._timeout = timeout
        self._idle: list[_Connection] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._closed = False

    async def request(
        self,
        method: str,
        path: str,
        body: bytes,
        content_type: str = "application/json",
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> Reply:
        """Send one request, return the server's answer (any status); LeanError if none came.
        ``gate`` (a rate limiter's acquire) is awaited with the connection in hand, just before
        the request is written: what it lets through is what the server sees, not bunched
        behind a connection being opened."""
        head = await self._head()
        request = b"".join(
            (
                f"{method} {self._prefix}{path} HTTP/1.1\r\n".encode("latin-1"),
                self._host_line,
                head,
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode(
                    "latin-1"
                ),
                body,
            )
        )
        conn = await self._acquire()
        try:
            if gate is not None:
                await gate()
            reply = await conn.send(request, self._timeout)
        except BaseException:
            conn.close()
            self._release(conn)
            raise
        self._release(conn)
        if reply.status == 401:
            self.refresh_headers()  # a token may have expired: read it afresh
        return reply

    async def stream(self, path: str, on_chunk: Callable[[bytes], None], within: float) -> Reply:
        """GET ``path`` on a connection of its own (a watch: it may last minutes, and must not
        hold one of the pool's slots) and hand a 200 answer's body to ``on_chunk`` piece by
        piece as it arrives; the Reply then has an empty body. Any other status is answered
        whole, as by ``request``. LeanError: no (complete) answer ``within`` seconds. The
        connection is closed afterwards, and at once if the caller is cancelled."""
        head = await self._head()
        request = b"".join(
            (
                f"GET {self._prefix}{path} HTTP/1.1\r\n".encode("latin-1"),
                self._host_line,
                head,
                b"\r\n",
            )
        )
        conn = await self._connect()
        try:
            reply = await conn.send(request, within, on_chunk)
        finally:
            conn.close()
        if reply.status == 401:
            self.refresh_headers()
        return reply

    def remember_session(self, transport: asyncio.BaseTransport | None) -> None:
        """A connection read its first answer: its TLS session (ticket) is the one new
        connections offer."""
        if isinstance(self._ssl, ResumingContext) and transport is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            session = getattr(ssl_object, "session", None)
            if session is not None and session.has_ticket:
                self._ssl.session = session

    def refresh_headers(self) -> None:
        """Read the auth headers afresh before the next request (a token changed)."""
        self._header_time = float("-inf")

    async def close(self) -> None:
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # --- pieces ----------------------------------------------------------------------------

    async def _head(self) -> bytes:
        now = time.monotonic()
        if now - self._header_time > AUTH_TTL:
            headers = await self._headers()
            self._header_block = "".join(
                f"{name}: {value}\r\n"
                for name, value in headers.items()
                if name.lower() not in ("host", "content-type", "content-length")
            ).encode("latin-1")
            self._header_time = now
        return self._header_block

    async def _acquire(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.open:
                return conn
            self._open -= 1
        if self._closed:
            raise LeanError("client closed")
        if self._open < self._limit:
            self._open += 1
            try:
                return await self._connect()
            except BaseException:
                self._open -= 1
                self._wake_one()
                raise
        waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            handed = await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                late = waiter.result()
                if late is not None:  # handed over just as we were cancelled
                    self._release(late)
            raise
        if handed is None:  # a slot freed (a connection closed) or the pool closed
            return await self._acquire()
        return handed

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        kwargs: dict[str, Any] = {}
        if self._ssl is not None:
            kwargs = {"ssl": self._ssl, "server_hostname": self._server_hostname or self._host}
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for lost a cancellation that met
        # the connection's completion, and a cancelled request went on
        try:
            async with asyncio.timeout(10):
                _, conn = await loop.create_connection(
                    lambda: _Connection(self), self._host, self._port, **kwargs
                )
        except (OSError, TimeoutError, ssl.SSLError) as err:
            raise LeanError(f"cannot connect to {self._host}:{self._port}: {err}") from err
        return conn

    def _release(self, conn: _Connection) -> None:
        if not (conn.reusable and conn.open) or self._closed:
            conn.close()
            self._open -= 1
            self._wake_one()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    def _wake_one(self) -> None:
        """A connection slot freed: the first waiter opens a new connection."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


class ResumingContext(ssl.SSLContext):
    """A client context whose new connections offer ``session``, the latest one a connection
    of its pool saved, so the server can resume it instead of a full handshake (no
    certificate signed or verified again). OpenSSL offers only a session still valid, and a
    server that rejects it runs the full handshake: resuming is never required."""

    session: ssl.SSLSession | None = None

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        # both asyncio's and uvloop's TLS transports create their SSLObject here
        if session is None and not server_side:
            session = self.session
        return super().wrap_bio(
            incoming,
            outgoing,
            server_side=server_side,
            server_hostname=server_hostname,
            session=session,
        )


def default_client_context(cafile: str | None = None) -> ResumingContext:
    """What ``ssl.create_default_context(cafile=...)`` builds for a client, as a
    ResumingContext: the certificate and host name verified, the CA file's or the system's
    trust."""
    context = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
    if sys.version_info >= (3, 13):  # create_default_context's stricter chain checks there
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
    if cafile:
        context.load_verify_locations(cafile)
    else:
        context.load_default_certs()
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog and not sys.flags.ignore_environment:
        context.keylog_filename = keylog
    return context


def ssl_context_of(configuration: Any) -> ResumingContext:
    """The TLS settings kubernetes-asyncio's own REST client derives from a Configuration
    (CA, client certificate, verification switches), for connections it does not open."""
    context = default_client_context(configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context
