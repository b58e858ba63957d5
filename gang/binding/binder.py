"""The binding cycle: POST every permitted member's binding, concurrently, until each is done.

Once Permit has allowed a gang, binding it is a promise: every member gets bound, and a failure
of one member never releases the others (a binding cannot be undone, so all-or-nothing was
decided before the first POST). Each member is bound by its own task under a global
concurrency bound and the client's QPS limit, and retried with backoff on transient errors.

Outcomes of one POST, as the recorded apiserver answers them:
- 201: done.
- 409 "already assigned": read the pod; on the node we chose it is done (our earlier attempt
  landed, or a restarted scheduler re-bound it); on another node someone else bound it — that
  is now a fact the informer will count, so our reservation is forgotten.
- 404: the pod is gone; forget the reservation.
- 429 / 5xx / connection errors: retry with backoff (``Retry-After`` honoured by transport).
- anything else (403, 422...): forget the reservation and report it; the member returns to the
  queue on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from gang.kube.transport import Kube, KubeError, backoff_delay
from gang.scheduling.gang import Gang
from gang.scheduling.tracker import ClusterState

log = logging.getLogger(__name__)

Key = tuple[str, str]


class Binder:
    def __init__(
        self,
        kube: Kube,
        state: ClusterState,
        concurrency: int,
        on_bound: Callable[[Gang, Key, str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.state = state
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_bound = on_bound
        self.bound = 0
        self.errors = 0

    def bind_gang(self, gang: Gang) -> None:
        """Start binding every reserved member of a permitted gang not already in flight."""
        for key, node in list(gang.reserved.items()):
            if key in gang.binding:
                continue
            gang.binding.add(key)
            task = asyncio.create_task(self._bind(gang, key, node), name=f"bind {key[0]}/{key[1]}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for every bind in flight (graceful shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _bind(self, gang: Gang, key: Key, node: str) -> None:
        pod = gang.members.get(key)
        uid = pod.uid if pod is not None else None
        attempt = 0
        try:
            while gang.reserved.get(key) == node:
                try:
                    async with self._slots:
                        await self.kube.bind(key[0], key[1], node, uid)
                    self._done(gang, key, node)
                    return
                except KubeError as err:
                    if await self._settled(gang, key, node, err):
                        return
                    self.errors += 1
                    delay = (
                        err.retry_after
                        if err.retry_after is not None
                        else backoff_delay(attempt, 0.1, 5.0)
                    )
                    attempt += 1
                    log.info(
                        "bind %s/%s to %s failed (%s); retry %d in %.2fs",
                        *key,
                        node,
                        err,
                        attempt,
                        delay,
                    )
                    await asyncio.sleep(delay)
        finally:
            gang.binding.discard(key)

    async def _settled(self, gang: Gang, key: Key, node: str, err: KubeError) -> bool:
        """True when ``err`` ends this member's binding one way or another."""
        if err.retryable:
            return False
        if err.status == 409:
            try:
                current = await self.kube.get_pod(*key)
            except KubeError:
                return False  # cannot tell yet: retry
            if ((current or {}).get("spec") or {}).get("nodeName") == node:
                self._done(gang, key, node)
            else:  # bound elsewhere (a fact the informer counts), gone, or terminating
                self._forget(gang, key)
            return True
        self._forget(gang, key)
        if err.status != 404:
            self.errors += 1
            message = f"binding to {node} failed: {err.status} {err.reason}: {err.message}"
            self._event(gang, key, "Warning", "FailedBinding", message)
        return True

    def _event(self, gang: Gang, key: Key, kind: str, reason: str, message: str) -> None:
        pod = gang.members.get(key)
        self.state.reporter.pod_event(key, pod.uid if pod else "", kind, reason, message)

    def _done(self, gang: Gang, key: Key, node: str) -> None:
        self.bound += 1
        self._event(
            gang, key, "Normal", "Scheduled", f"Successfully assigned {key[0]}/{key[1]} to {node}"
        )
        if self.on_bound is not None:
            self.on_bound(gang, key, node)

    def _forget(self, gang: Gang, key: Key) -> None:
        """Drop a reservation whose bind cannot happen; a member still unassigned and alive
        goes back to the queue (no API event would bring it back otherwise)."""
        if gang.reserved.pop(key, None) is not None:
            self.state.cache.forget(key)
            self.state.queue.activate_unschedulable()
        if self.state.gangs.get(gang.key) is gang and gang.pending():
            self.state.enqueue(gang)
