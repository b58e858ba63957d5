"""How the informers decode list pages and watch lines: without ``managedFields``, and a pod's
update as far as its binding's confirmation reads it.

Why: on a real API server every object carries ``metadata.managedFields`` (a third of a small
pod's JSON: which manager set which field), and nothing in a scheduler reads it; kube-scheduler
drops it from its informers' objects too (``TransformStripManagedFields``). msgspec decodes an
object into typed structs and skips what they do not name without building it, so a pod or
node here is decoded with every field it has except that one. And every pod the scheduler binds
comes back once as a ``MODIFIED`` event, whose eight fields the pod handler reads to see that it
is the binding it sent (``ClusterState._binding_confirmed``), keeping what it parsed before:
that event is decoded only that far, into a ``LazyPod``, and whole only where the handler needs
more (``whole``). Figures: ``docs/performance.md``.

What is decoded this way, and the way back: only objects of the metadata/spec/status shape
(pods, nodes), and only ADDED, MODIFIED and DELETED events (an ERROR's Status and a BOOKMARK
are decoded whole, as everything of other kinds). A line or page that does not decode into
these structs (a field of the wrong type) is decoded whole with orjson, so malformed input
reaches the parsers and is reported as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson
from msgspec import UNSET, UnsetType

Obj = dict[str, Any]
Decode = Callable[[bytes], Any]

#: the watch events whose object is the resource itself
_OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})


class _Meta(msgspec.Struct, omit_defaults=True):
    """``ObjectMeta`` (k8s.io/apimachinery, v1) without ``managedFields``."""

    name: Any = UNSET
    generateName: Any = UNSET
    namespace: Any = UNSET
    selfLink: Any = UNSET
    uid: Any = UNSET
    resourceVersion: Any = UNSET
    generation: Any = UNSET
    creationTimestamp: Any = UNSET
    deletionTimestamp: Any = UNSET
    deletionGracePeriodSeconds: Any = UNSET
    labels: Any = UNSET
    annotations: Any = UNSET
    ownerReferences: Any = UNSET
    finalizers: Any = UNSET


class _Object(msgspec.Struct):
    apiVersion: Any = UNSET
    kind: Any = UNSET
    metadata: _Meta | UnsetType | None = UNSET
    spec: Any = UNSET
    status: Any = UNSET


class _Event(msgspec.Struct):
    type: str
    object: _Object


class _Page(msgspec.Struct):
    metadata: Any = None
    items: list[_Object] = msgspec.field(default_factory=list)


def _built(obj: _Object) -> Obj:
    """The object as orjson would have decoded it, less ``managedFields``."""
    out: Obj = {}
    if obj.apiVersion is not UNSET:
        out["apiVersion"] = obj.apiVersion
    if obj.kind is not UNSET:
        out["kind"] = obj.kind
    if obj.metadata is not UNSET:
        out["metadata"] = None if obj.metadata is None else msgspec.to_builtins(obj.metadata)
    if obj.spec is not UNSET:
        out["spec"] = obj.spec
    if obj.status is not UNSET:
        out["status"] = obj.status
    return out


_event = msgspec.json.Decoder(_Event).decode
_page = msgspec.json.Decoder(_Page).decode


def lean_event(line: bytes) -> Obj:
    """A watch line; an ADDED, MODIFIED or DELETED object without ``managedFields``."""
    try:
        event = _event(line)
    except msgspec.DecodeError:  # ValidationError included: let the full decode judge
        return orjson.loads(line)  # type: ignore[no-any-return]
    if event.type not in _OBJECT_EVENTS:
        return orjson.loads(line)  # type: ignore[no-any-return]
    return {"type": event.type, "object": _built(event.object)}


def lean_page(body: bytes) -> Obj:
    """A list page (``metadata`` and ``items``), its items without ``managedFields``."""
    try:
        page = _page(body)
    except msgspec.DecodeError:
        return orjson.loads(body)  # type: ignore[no-any-return]
    return {"metadata": page.metadata, "items": [_built(item) for item in page.items]}


# --- a pod's update, as far as its binding's confirmation reads it ------------------------

#: how every MODIFIED line of a Kubernetes watch begins (``metav1.WatchEvent``'s field order)
MODIFIED_PREFIX = b'{"type":"MODIFIED",'


class _DigestMeta(msgspec.Struct):
    name: Any = None
    namespace: Any = None
    uid: Any = None
    resourceVersion: Any = None
    labels: Any = None
    deletionTimestamp: Any = None


class _DigestSpec(msgspec.Struct):
    nodeName: Any = None


class _DigestStatus(msgspec.Struct):
    phase: Any = None


class _DigestPod(msgspec.Struct):
    metadata: _DigestMeta | None = None
    spec: _DigestSpec | None = None
    status: _DigestStatus | None = None


class _DigestEvent(msgspec.Struct):
    type: str
    object: _DigestPod


_digest = msgspec.json.Decoder(_DigestEvent).decode


class LazyPod(dict[str, Any]):
    """A pod from a MODIFIED event: metadata (name, namespace, uid, resourceVersion, labels,
    deletionTimestamp), ``spec.nodeName`` and ``status.phase``; the rest is in ``line``."""

    __slots__ = ("line",)

    def __init__(self, line: bytes, pod: _DigestPod) -> None:
        meta, spec, status = pod.metadata, pod.spec, pod.status
        super().__init__(
            metadata={}
            if meta is None
            else {
                "name": meta.name,
                "namespace": meta.namespace,
                "uid": meta.uid,
                "resourceVersion": meta.resourceVersion,
                "labels": meta.labels,
                "deletionTimestamp": meta.deletionTimestamp,
            },
            spec={} if spec is None else {"nodeName": spec.nodeName},
            status={} if status is None else {"phase": status.phase},
        )
        self.line = line


def digest_event(line: bytes) -> Obj:
    """A watch line of pods: a MODIFIED pod as a ``LazyPod``, anything else as ``lean_event``."""
    if line.startswith(MODIFIED_PREFIX):
        try:
            event = _digest(line)
        except msgspec.DecodeError:  # not the digest's shape: lean_event (or orjson) judges
            event = None
        if event is not None and event.type == "MODIFIED":
            return {"type": "MODIFIED", "object": LazyPod(line, event.object)}
    return lean_event(line)


def whole(pod: Obj) -> Obj:
    """The full object of ``pod`` (a ``LazyPod`` is decoded now, less ``managedFields``; any
    other dict is itself)."""
    if isinstance(pod, LazyPod):
        obj = lean_event(pod.line).get("object")
        return obj if isinstance(obj, dict) else {}
    return pod


@dataclass(frozen=True, slots=True)
class Decoding:
    """How an informer turns its list pages and watch lines into objects; a handler names its
    own as ``decoding`` (it then reads what that makes)."""

    page: Decode = orjson.loads
    event: Decode = orjson.loads


#: objects decoded as they are
WHOLE = Decoding()
#: objects of the metadata/spec/status shape (nodes), without ``managedFields``
LEAN = Decoding(lean_page, lean_event)
#: the scheduler's pods: ``LEAN``, and MODIFIED as a ``LazyPod`` (the handler calls ``whole``)
DIGESTED_PODS = Decoding(lean_page, digest_event)
