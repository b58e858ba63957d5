"""Informers: list, then watch from the list's resourceVersion, forever, without losing anything.

Everything the scheduler knows comes through here, so the contract is strict:
- after a list, the handler's view equals the list (``replace``: adds, updates and deletes are
  derived by comparing with what was known — a relist never double-counts);
- a watch resumes from the last resourceVersion seen (events or BOOKMARKs), so a clean end of
  stream (timeoutSeconds, a load balancer cut) loses nothing;
- a watch that is throttled (429), cannot connect or breaks mid-stream is re-opened from the
  last resourceVersion after a backoff (never sooner than ``Retry-After``), as client-go's
  reflector does: a relist of every object is the last thing an overloaded or restarting
  apiserver needs, and the resumed watch either delivers what was missed or answers 410;
- an in-stream 410 Expired, or any other failed request, leads to a fresh list (after
  backoff, and never sooner than a 429's ``Retry-After``);
- every ``resync_period`` the informer relists anyway, repairing any drift a bug or a missed
  event could have left.

The informer keeps only ``key → resourceVersion``; the handler keeps its own compact shapes,
so raw objects are not held twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gang.kube.decoding import WHOLE, Decoding
from gang.kube.transport import Kind, Kube, KubeError, backoff_delay

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]


class Handler(Protocol):
    """Receives the changes of one resource kind, in order, on the event loop."""

    def upsert(self, obj: Obj) -> None: ...
    def delete(self, key: Key, obj: Obj | None) -> None: ...
    def synced(self) -> None:
        """Called after each complete list has been applied."""


# A handler may also carry ``decoding`` (``gang.kube.decoding.Decoding``): how its kind's list
# pages and watch lines are decoded for it (the scheduler's pod handler takes ``LazyPod``s).


def object_key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _retry_delay(failures: int, err: KubeError) -> float:
    """Backoff after the ``failures``-th failure in a row, never sooner than ``Retry-After``."""
    delay = backoff_delay(min(failures, 6), initial=0.2, cap=5.0)
    return delay if err.retry_after is None else max(delay, err.retry_after)


def _resumable(err: KubeError) -> bool:
    """A watch failure that loses no event: throttled, or no (complete) answer at all."""
    return err.status in (0, 429)


class Informer:
    def __init__(
        self,
        kube: Kube,
        kind: Kind,
        handler: Handler,
        *,
        resync_period: float = 300.0,
        watch_timeout: int = 300,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.kube = kube
        self.kind = kind
        self.handler = handler
        self.resync_period = resync_period
        self.watch_timeout = watch_timeout
        #: how list pages and watch lines become objects: the handler's own ``decoding``
        #: where it names one (it then reads what that makes), else as they are
        self.decoding: Decoding = getattr(handler, "decoding", WHOLE)
        self._known: dict[Key, str] = {}
        self.resource_version = ""
        self.has_synced = asyncio.Event()
        self.relists = 0
        #: watches re-opened from the last resourceVersion after a failure (no relist)
        self.rewatches = 0
        #: watch events applied (ADDED, MODIFIED, DELETED; not BOOKMARKs)
        self.events = 0
        self._clock = clock or asyncio.get_running_loop().time
        #: when the server last said anything: a list, a watch event or a BOOKMARK (a kind
        #: whose objects change while this stays old has a watch that went silent)
        self.heard_at = self._clock()

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                await self._relist()
                failures = 0
                await self._watch_until_resync()
            except KubeError as err:
                failures += 1
                delay = _retry_delay(failures, err)
                log.warning("%s informer: %s; relisting in %.2fs", self.kind.name, err, delay)
                await asyncio.sleep(delay)

    async def _relist(self) -> None:
        """List, apply, and delete what the list no longer holds. The first list is applied
        page by page as pages arrive (nothing is scheduled before every informer synced, and
        the server prepares the next page meanwhile); a later relist is applied at once, as
        one picture, after its last page."""
        first = not self.has_synced.is_set()
        seen: dict[Key, str] = {}
        held: list[Obj] = []
        rv = ""
        async for items, list_rv in self.kube.list_pages(self.kind, self.decoding.page):
            rv = list_rv  # (every page carries the list's)
            if first:
                self._apply_listed(items, seen)
            else:
                held.extend(items)
        self._apply_listed(held, seen)
        self.relists += 1
        for key in self._known.keys() - seen.keys():
            self.handler.delete(key, None)
        self._known = seen
        self.resource_version = rv
        self.heard_at = self._clock()
        self.handler.synced()
        self.has_synced.set()

    def _apply_listed(self, items: list[Obj], seen: dict[Key, str]) -> None:
        """Upsert listed objects that changed; each is then known (a list that breaks half way
        leaves what it applied known, so the next one deletes what has gone since)."""
        for obj in items:
            key = object_key(obj)
            obj_rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            seen[key] = obj_rv
            if self._known.get(key) != obj_rv:
                self.handler.upsert(obj)
                self._known[key] = obj_rv

    async def _watch_until_resync(self) -> None:
        """Watch (reconnecting on clean ends) until the resync is due; raise to force a relist."""
        resync_at = self._clock() + self.resync_period
        failures = 0
        while True:
            remaining = resync_at - self._clock()
            if remaining <= 0:
                return
            timeout = max(1, min(self.watch_timeout, int(remaining) + 1))
            try:
                async for events in self.kube.watch(
                    self.kind, self.resource_version, timeout, self.decoding.event
                ):
                    failures = 0
                    for event in events:
                        self._apply(event)
            except KubeError as err:
                if not _resumable(err):
                    raise
                failures += 1
                self.rewatches += 1
                delay = _retry_delay(failures, err)
                log.info("%s watch: %s; resuming in %.2fs", self.kind.name, err, delay)
                await asyncio.sleep(delay)

    def silence(self) -> float:
        """Seconds since the server last said anything about this kind."""
        return max(0.0, self._clock() - self.heard_at)

    def _apply(self, event: Obj) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        self.heard_at = self._clock()
        if kind == "ERROR":
            code = obj.get("code")
            raise KubeError(
                int(code or 0), str(obj.get("reason") or "Error"), str(obj.get("message") or "")
            )
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        key = object_key(obj)
        self.events += 1
        if kind == "DELETED":
            self._known.pop(key, None)
            self.handler.delete(key, obj)
        elif kind in ("ADDED", "MODIFIED"):
            self._known[key] = rv
            self.handler.upsert(obj)
        if rv:
            self.resource_version = rv
