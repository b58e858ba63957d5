"""The wire between the scheduler and its post workers: length-prefixed frames on a pipe.

Why not JSON lines: a request's body is already the JSON the API server gets, and a reply's body
is the API server's answer; wrapping either in JSON again would encode and escape it twice, on
the one core the workers are there to spare. A frame is a fixed header then raw bytes:

- ``R`` request: id, method + path + content type (one latin-1 line, space-separated), body.
- ``C`` config: JSON with the connection settings and the auth headers (sent first, and again
  whenever the headers change: a refreshed bearer token).
- ``A`` answer: id, HTTP status (0: no answer — the message says why), Retry-After, body.
"""

from __future__ import annotations

import struct

REQUEST = b"R"
CONFIG = b"C"
ANSWER = b"A"

#: kind, id, length of the text part, length of the body
_HEADER = struct.Struct("!cIHI")
HEADER_SIZE = _HEADER.size


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
