"""The cluster snapshot file: one format shared by ``gang snapshot`` (which writes it), the
simulator (``--from-snapshot``, which replays it) and ``gang fit`` (which answers on it).

A JSON object ``{"kind": "ClusterSnapshot", "version": 1, "taken": <epoch s>, "items": [...]}``
whose items are Kubernetes objects as the API server returned them; gzip-compressed when the
file name ends in ``.gz``. Reading checks the envelope and says plainly what is wrong.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson

Obj = dict[str, Any]
SNAPSHOT_KIND = "ClusterSnapshot"
SNAPSHOT_VERSION = 1


def dump(snapshot: Obj, path: Path) -> None:
    """Write ``snapshot`` as JSON (gzip-compressed when the name ends in ``.gz``)."""
    data = orjson.dumps(snapshot)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def load(path: Path) -> Obj:
    """Read a snapshot file; a clear error for anything else."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise ValueError(f"{path}: not a snapshot (invalid JSON: {err})") from None
    if not isinstance(doc, dict) or doc.get("kind") != SNAPSHOT_KIND:
        raise ValueError(f"{path}: not a snapshot (kind is not {SNAPSHOT_KIND})")
    if doc.get("version") != SNAPSHOT_VERSION:
        raise ValueError(f"{path}: snapshot version {doc.get('version')!r} is not supported")
    if not isinstance(doc.get("items"), list):
        raise ValueError(f"{path}: not a snapshot (no items list)")
    return doc
