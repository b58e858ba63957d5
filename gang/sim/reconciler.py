"""What every in-process controller stand-in of the simulator shares: one base, written once.

Why: the Job and StatefulSet controllers (``gang.sim.controllers``), the PersistentVolume
controller (``gang.sim.volumes``), the ResourceClaim controller (``gang.sim.resourceclaims``),
the PodDisruptionBudget controller (``gang.sim.disruption``) and the kubelet
(``gang.sim.kubelet``) all attach to the store in the same way: a listener called on every
commit, keys queued and synced later on the event loop, timers per key, writes and Events through
the SimApi verbs. That machinery is written once, here, so a fix to the lifecycle or to the queue
reaches every stand-in, and each module keeps only its own rules.

``Reconciler`` gives a subclass:

- ``start()``: takes the running loop, registers the store listener, then calls ``_seed()``
  (the subclass's first look at what the store holds); ``stop()`` removes the listener, cancels
  the pending drain and every timer, empties the queues and forgets the loop. Store events reach
  ``_on_event`` only while started.
- ``queue(sync)``: a de-duplicating work queue. A key added twice before the drain is synced
  once. All of a reconciler's queues are drained together by one callback on the event loop
  (``call_soon``): every queue is taken first, then each is synced in sorted key order, the queues
  in the order they were made; keys added meanwhile wait for the next drain. A sync that raises
  ends that drain (the keys left in it are dropped) and the loop's exception handler logs it.
- ``call_later(key, …)``: at most one pending timer per key, forgotten as it fires;
  ``retry_later(queue, key)`` backs a key off after a failure (1 s doubling to 30 s for failures
  in a row, as the controllers' creation retries do), ``reset_backoff`` / ``drop_retry`` end it.
- ``write`` (an update without a resourceVersion precondition, None when refused) and
  ``post_event`` (a core/v1 Event, best effort, as client-go's event recorder).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from gang.sim.api import SimApi, rfc3339
from gang.sim.errors import ApiError
from gang.sim.resources import ResourceType
from gang.sim.store import Obj, ObjKey, StoredEvent

#: a queued key: an object's (namespace, name), or the name of a cluster-scoped object
K = TypeVar("K", ObjKey, str)
#: how long a failed key waits before its retry, doubling with each failure in a row to the max
RETRY_INITIAL_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0


def obj_key(obj: Obj) -> ObjKey:
    """The store's key of an object: (namespace, name), namespace "" when cluster-scoped."""
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


class WorkQueue(Generic[K]):
    """Keys waiting for their sync; made by ``Reconciler.queue``, drained by its reconciler."""

    def __init__(self, sync: Callable[[K], None], schedule: Callable[[], None]) -> None:
        self._sync: Callable[[K], None] = sync
        self._schedule = schedule
        self._keys: set[K] = set()

    def add(self, key: K) -> None:
        self._keys.add(key)
        self._schedule()

    def discard(self, key: K) -> None:
        self._keys.discard(key)

    def clear(self) -> None:
        self._keys.clear()

    def take(self) -> list[Callable[[], None]]:
        """Empty the queue: one call per key, in key order."""
        keys, self._keys = self._keys, set()
        return [functools.partial(self._sync, key) for key in sorted(keys)]


class Reconciler:
    """The base of a controller stand-in; see the module docstring."""

    def __init__(self, api: SimApi) -> None:
        self.api = api
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queues: list[WorkQueue[Any]] = []
        self._drain_handle: asyncio.Handle | None = None
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        #: failures in a row per key (``retry_later``)
        self._failures: dict[Hashable, int] = {}

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.api.store.add_listener(self._listen)
        self._seed()

    def stop(self) -> None:
        self.api.store.remove_listener(self._listen)
        if self._drain_handle is not None:
            self._drain_handle.cancel()
            self._drain_handle = None
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._failures.clear()
        for queue in self._queues:
            queue.clear()
        self._loop = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop; only while started (``_on_event`` is only called then)."""
        assert self._loop is not None, "not started"
        return self._loop

    def _seed(self) -> None:
        """At start, after the listener is registered: look at what the store holds."""

    def _on_event(self, storage_key: str, event: StoredEvent) -> None:
        """One store commit (of any kind), while started."""
        raise NotImplementedError

    def _listen(self, storage_key: str, event: StoredEvent) -> None:
        if self._loop is not None:
            self._on_event(storage_key, event)

    # --- the work queues -------------------------------------------------------------------

    def queue(self, sync: Callable[[K], None]) -> WorkQueue[K]:
        """A new work queue whose keys ``sync`` handles; drained after the ones made before."""
        made = WorkQueue(sync, self._schedule_drain)
        self._queues.append(made)
        return made

    def _schedule_drain(self) -> None:
        if self._drain_handle is None and self._loop is not None:
            self._drain_handle = self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_handle = None
        work = [call for queue in self._queues for call in queue.take()]
        for call in work:
            call()

    # --- timers and retries ----------------------------------------------------------------

    def call_later(
        self, key: Hashable, delay: float, callback: Callable[[], None], replace: bool = False
    ) -> None:
        """Run ``callback`` after ``delay`` s; a pending timer of the key stands, or with
        ``replace`` is cancelled. Nothing while stopped."""
        if self._loop is None:
            return
        old = self._timers.get(key)
        if old is not None:
            if not replace:
                return
            old.cancel()
        self._timers[key] = self._loop.call_later(delay, self._timer_fired, key, callback)

    def _timer_fired(self, key: Hashable, callback: Callable[[], None]) -> None:
        self._timers.pop(key, None)
        callback()

    def cancel_timer(self, key: Hashable) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def retry_later(self, queue: WorkQueue[K], key: K) -> None:
        """Back off after a failure: the key goes back on the queue later; a later event on
        it retries sooner. A pending retry stands."""
        if self._loop is None or key in self._timers:
            return
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(RETRY_MAX_SECONDS, RETRY_INITIAL_SECONDS * 2**failures)
        self.call_later(key, delay, functools.partial(queue.add, key))

    def reset_backoff(self, key: Hashable) -> None:
        """It worked: the next failure of the key backs off from the start again."""
        self._failures.pop(key, None)

    def drop_retry(self, key: Hashable) -> None:
        """The key is gone: no retry pending, no failures remembered."""
        self._failures.pop(key, None)
        self.cancel_timer(key)

    # --- writes ----------------------------------------------------------------------------

    def write(self, rt: ResourceType, obj: Obj, subresource: str | None = None) -> Obj | None:
        """An update through the API (no resourceVersion precondition); None when refused."""
        meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
        try:
            return self.api.update(
                rt, meta.get("namespace"), meta["name"], {**obj, "metadata": meta}, subresource
            )
        except ApiError:
            return None

    def post_event(
        self,
        involved: Obj,
        kind: str,
        api_version: str,
        type_: str,
        reason: str,
        message: str,
        component: str,
        host: str | None = None,
    ) -> None:
        """A core/v1 Event on ``involved`` (best effort); ``host``: the node of a kubelet's."""
        meta = involved["metadata"]
        now = rfc3339(self.api.clock())
        source = (
            {"component": component} if host is None else {"component": component, "host": host}
        )
        body = {
            "metadata": {
                "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
                "namespace": meta.get("namespace"),
            },
            "involvedObject": {
                "kind": kind,
                "namespace": meta.get("namespace"),
                "name": meta["name"],
                "uid": meta.get("uid"),
                "apiVersion": api_version,
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": type_,
            "reportingComponent": component,
            "reportingInstance": host or "",
        }
        with contextlib.suppress(ApiError):  # best effort, as client-go's event recorder
            self.api.create(self.api.rt_events, meta.get("namespace"), body)
