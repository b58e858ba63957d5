"""The wire between the scheduler and its post workers: length-prefixed frames on a pipe.

Why not JSON lines: a request's body is already the JSON the API server gets, and a reply's body
is the API server's answer; wrapping either in JSON again would encode and escape it twice, on
the one core the workers are there to spare. A frame is a fixed header then raw bytes:

- ``R`` request: id, method + path + content type (one latin-1 line, space-separated), body.
- ``B`` brief request: an ``R`` whose success is answered without its body (a binding: the
  server's ``Status`` says nothing the scheduler reads), in a ``K`` frame.
- ``C`` config: JSON with the connection settings and the auth headers (sent first, and again
  whenever the headers change: a refreshed bearer token).
- ``A`` answer: id, HTTP status (0: no answer — the message says why), Retry-After, body.
- ``K`` successes of brief requests: no id, no text; the body is one (id, status) pair per
  success (``oks_frame``), the successes of one write together. Any other outcome of a brief
  request is an ``A`` frame. One frame and two integers per binding, instead of a frame with
  its status line and body: the scheduler's pipe reader did about a third of the work.
- ``W`` watch: id, timeout seconds and path (``"300 /api/v1/pods?watch=true&…"``), no body: a
  GET whose 200 answer comes back as it arrives, in ``E`` frames, then its ``A`` frame (status
  200, no body) when the server ends it; any other status is one ``A`` frame, as for a request.
- ``E`` events: id, no text, a piece of a watch's body (the server's lines, cut anywhere).
- ``X`` cancel: id: the scheduler stopped reading that watch; the worker closes it, answering
  nothing more for it.

Both ends write through a ``FrameWriter``: every pipe write is a system call and wakes the
reader, so under load one write carries many frames.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Iterable, Iterator

from gang.kube.leanhttp import LeanError, Reply

REQUEST = b"R"
BRIEF = b"B"
CONFIG = b"C"
ANSWER = b"A"
OKS = b"K"
WATCH = b"W"
EVENTS = b"E"
CANCEL = b"X"

#: kind, id, length of the text part, length of the body
_HEADER = struct.Struct("!cIHI")
HEADER_SIZE = _HEADER.size
#: one success in a ``K`` frame: id, status
_OK = struct.Struct("!IH")


def frame(kind: bytes, ident: int, text: bytes, body: bytes) -> bytes:
    return _HEADER.pack(kind, ident, len(text), len(body)) + text + body


def frames(buffer: bytearray) -> list[tuple[bytes, int, bytes, bytes]]:
    """Every whole frame at the front of ``buffer``, removed from it; a partial one stays."""
    found: list[tuple[bytes, int, bytes, bytes]] = []
    offset = 0
    size = len(buffer)
    while size - offset >= HEADER_SIZE:
        kind, ident, text_len, body_len = _HEADER.unpack_from(buffer, offset)
        end = offset + HEADER_SIZE + text_len + body_len
        if end > size:
            break
        start = offset + HEADER_SIZE
        found.append(
            (
                kind,
                ident,
                bytes(buffer[start : start + text_len]),
                bytes(buffer[start + text_len : end]),
            )
        )
        offset = end
    del buffer[:offset]
    return found


def answer_frame(ident: int, outcome: Reply | LeanError) -> bytes:
    """The ``A`` frame of a request's or watch's outcome: the server's answer, or none (status
    0, the body saying why)."""
    if isinstance(outcome, LeanError):
        return frame(ANSWER, ident, b"0 ", str(outcome).encode())
    status = f"{outcome.status} {outcome.retry_after or ''}".encode("latin-1")
    return frame(ANSWER, ident, status, outcome.body)


def answer_of(text: bytes, body: bytes) -> Reply | LeanError:
    """What an ``A`` frame's text and body say (``answer_frame`` read back)."""
    status, _, retry_after = text.decode("latin-1").partition(" ")
    if status == "0":
        return LeanError(body.decode(errors="replace"))
    return Reply(int(status), body, retry_after or None)


def oks_frame(successes: list[tuple[int, int]]) -> bytes:
    """The ``K`` frame of brief requests' successes: (id, status) each."""
    return frame(OKS, 0, b"", b"".join(_OK.pack(ident, status) for ident, status in successes))


def oks_of(body: bytes) -> Iterator[tuple[int, int]]:
    """The (id, status) pairs of a ``K`` frame's body (``oks_frame`` read back)."""
    return _OK.iter_unpack(body)


#: the least time between two writes to one pipe (a few frames' worth of bindings)
FLUSH_INTERVAL = 0.001
#: the same for a worker's answers. Every write wakes the scheduler's core for its read, its
#: frames and the binding slots it frees, and slots freed a few at a time send the gangs waiting
#: for them a few members at a time. Answers a few milliseconds apart cost a binding's round
#: trip about that much (tens of milliseconds under load) and the scheduler 15 % less CPU per
#: bound pod than at 1 ms (simulator, many-core profile, 5,000 nodes, one worker: 145-152
#: against 169-188 µs), the worker 12 % less.
ANSWER_FLUSH_INTERVAL = 0.005


class FrameWriter:
    """Frames bound for one pipe, written together: at the end of this turn of the event
    loop, or, within ``interval`` of the last write, once that has passed. A lone frame goes
    out at once; a stream of them goes out a few at a time.

    Invariant: while ``pending`` or ``successes`` is non-empty, a write of them is scheduled
    (one scheduled after an early ``flush`` finds nothing, and does nothing)."""

    def __init__(self, write: Callable[[bytes], None], interval: float = FLUSH_INTERVAL) -> None:
        self._write = write
        self.interval = interval
        self.pending: list[bytes] = []
        #: brief requests' successes (id, status), written as one ``K`` frame after ``pending``
        self.successes: list[tuple[int, int]] = []
        self._written_at = float("-inf")

    def add(self, data: bytes) -> None:
        self._hold()
        self.pending.append(data)

    def extend(self, data: Iterable[bytes]) -> None:
        self._hold()
        self.pending.extend(data)

    def add_success(self, ident: int, status: int) -> None:
        """A brief request's success: its id and status go in this write's ``K`` frame."""
        self._hold()
        self.successes.append((ident, status))

    def flush(self) -> None:
        """Write what is pending now (a scheduled write that finds nothing does nothing)."""
        if not self.pending and not self.successes:
            return
        self._written_at = asyncio.get_running_loop().time()
        if self.successes:
            self.pending.append(oks_frame(self.successes))
            self.successes = []
        data, self.pending = b"".join(self.pending), []
        self._write(data)

    def _hold(self) -> None:
        """Something is about to be held: schedule the write if nothing was."""
        if not self.pending and not self.successes:
            self._schedule()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        wait = self._written_at + self.interval - loop.time()
        if wait > 0:
            loop.call_later(wait, self.flush)
        else:
            loop.call_soon(self.flush)
