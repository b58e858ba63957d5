"""The simulator's in-memory object store: one global resourceVersion, history, and watch fan-out.

A scheduler's correctness rests on the list-then-watch contract: a list answers with the
resourceVersion it reflects, and a watch from that version delivers every later change exactly
once, in order — or, when the server no longer remembers that far back, says so with a 410
instead of silently skipping. This module keeps exactly that contract and nothing else; what an
object *means* (defaulting, validation, bindings) lives in ``gang.sim.api``.

Invariants:
- ``rv`` only grows; every committed change gets ``rv + 1`` and carries it in
  ``metadata.resourceVersion`` (deletions too, as in etcd).
- Stored objects are never mutated after commit: writers build a new dict. Readers (lists,
  watch events, snapshots for paging) can therefore share them without copying.
- Per storage, history holds every event with ``rv > compacted_rv``; a watch may resume from
  any ``rv >= compacted_rv`` and gets exactly the events after it, else a 410.
- A watcher's queue receives each event synchronously at commit, so an empty queue means the
  watcher has seen everything up to the current ``rv`` (which makes bookmarks honest).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(slots=True)
class StoredEvent:
    """One committed change. ``prev`` is the object before it (None for ADDED)."""

    rv: int
    type: str
    obj: Obj
    prev: Obj | None


class Expired(Exception):
    """The requested resourceVersion is older than the retained history."""

    def __init__(self, requested: int, oldest_known: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest_known})")
        self.requested = requested
        self.oldest_known = oldest_known


@dataclass(slots=True)
class _History:
    events: deque[StoredEvent]
    compacted_rv: int = 0  # the newest rv that is no longer retained


@dataclass(eq=False, slots=True)
class Subscription:
    """A watcher's feed: events after ``since`` for one storage, then live ones."""

    storage_key: str
    queue: asyncio.Queue[StoredEvent | None] = field(default_factory=asyncio.Queue)
    closed: bool = False


Listener = Callable[[str, StoredEvent], None]


class Store:
    def __init__(self, history_size: int = 10_000) -> None:
        self.rv = 1  # a fresh real cluster is never at 0; 0 means "any" to clients
        self.history_size = history_size
        self._objects: dict[str, dict[ObjKey, Obj]] = {}
        self._history: dict[str, _History] = {}
        self._subscriptions: dict[str, set[Subscription]] = {}
        self._listeners: list[Listener] = []

    # --- reads -------------------------------------------------------------------------

    def get(self, storage_key: str, namespace: str, name: str) -> Obj | None:
        return self._objects.get(storage_key, {}).get((namespace, name))

    def items(self, storage_key: str, namespace: str | None = None) -> Iterator[Obj]:
        """Objects in key order (namespace, name), like etcd's ordered keys."""
        objects = self._objects.get(storage_key, {})
        for key in sorted(objects):
            if namespace is None or key[0] == namespace:
                yield objects[key]

    def count(self, storage_key: str) -> int:
        return len(self._objects.get(storage_key, {}))

    # --- writes ------------------------------------------------------------------------

    def commit(self, storage_key: str, obj: Obj, *, deleted: bool = False) -> Obj:
        """Store (or remove) ``obj`` under a new resourceVersion and publish the event.

        ``obj`` must be a fresh dict the caller will not touch again; its metadata gets the
        new resourceVersion here.
        """
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        objects = self._objects.setdefault(storage_key, {})
        prev = objects.get(key)
        self.rv += 1
        obj["metadata"] = {**meta, "resourceVersion": str(self.rv)}
        if deleted:
            objects.pop(key, None)
            kind = DELETED
        else:
            objects[key] = obj
            kind = MODIFIED if prev is not None else ADDED
        self._publish(storage_key, StoredEvent(self.rv, kind, obj, prev))
        return obj

    def _publish(self, storage_key: str, event: StoredEvent) -> None:
        history = self._history.setdefault(storage_key, _History(deque()))
        history.events.append(event)
        while len(history.events) > self.history_size:
            history.compacted_rv = history.events.popleft().rv
        for sub in self._subscriptions.get(storage_key, ()):
            sub.queue.put_nowait(event)
        for listener in self._listeners:
            listener(storage_key, event)

    # --- watching ----------------------------------------------------------------------

    def subscribe(self, storage_key: str, since: int) -> Subscription:
        """Queue every event after ``since``, then keep feeding live events.

        Raises ``Expired`` when events after ``since`` have already been dropped.
        """
        history = self._history.get(storage_key)
        if history is not None and since < history.compacted_rv:
            raise Expired(since, history.compacted_rv)
        sub = Subscription(storage_key)
        if history is not None:
            for event in history.events:
                if event.rv > since:
                    sub.queue.put_nowait(event)
        self._subscriptions.setdefault(storage_key, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.closed = True
        self._subscriptions.get(sub.storage_key, set()).discard(sub)

    def close_all_watches(self) -> int:
        """End every open watch stream (as a server restart or a load balancer would)."""
        closed = 0
        for subs in self._subscriptions.values():
            for sub in subs:
                sub.queue.put_nowait(None)
                closed += 1
        return closed

    def expire_history(self) -> None:
        """Forget all history, so any watch resumed from an older resourceVersion gets 410."""
        for key in set(self._history) | set(self._objects):
            history = self._history.setdefault(key, _History(deque()))
            history.events.clear()
            history.compacted_rv = self.rv

    def add_listener(self, listener: Listener) -> None:
        """In-process observers (the kubelet stand-in) called synchronously on every commit."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)
