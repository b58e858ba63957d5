"""What users see: Events on pods and PodGroups, and the PodGroup's status.

Users look in three places when a gang does not start: ``kubectl describe pod`` (Events such as
kube-scheduler's ``Scheduled`` and ``FailedScheduling``, and the ``PodScheduled`` condition),
``kubectl get pg`` (phase and counts) and the PodGroup's conditions. This module writes them all
without ever slowing scheduling down:
the cycle only enqueues; background tasks post Events and coalesce status writes, so a gang whose
state changes fifty times in a second gets one status PATCH, and only when it actually changed.
Both writers wait while bindings queue for a slot (``yield_to``): on a server that serves writes
with a fixed number of workers, an Event posted during a burst of bindings takes a worker from
one of them.
Writes that fail are logged and dropped (Events) or retried on the next change (status).

A member of a gang that failed its cycle gets ``PodScheduled: False``, reason ``Unschedulable``,
as kube-scheduler gives every pod it cannot place: cluster autoscalers scale up for exactly
those pods, and a lone pod has no PodGroup to carry its ``Reserved`` nodes, so its condition
names them. A gang of a thousand members waiting for the rest to be created fails with a new
count each cycle; rewriting every member each time would be quadratic, so a member's condition
is written at once when it appears or its held nodes change, and otherwise refreshed at most
every :data:`POD_NOTE_REFRESH_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from gang.binding.groupstatus import FitsCluster, group_status, rfc3339_now, rfc3339_second
from gang.kube.transport import Kind, Kube, KubeError
from gang.models.groupapis import API_BY_NAME
from gang.models.podgroup import PodGroupInfo, held_nodes_of, held_nodes_text
from gang.models.queueapis import QUEUE_API_BY_NAME, QueueSpec
from gang.scheduling.gang import Gang, GangKey
from gang.state.podinfo import POD_SCHEDULED, UNSCHEDULABLE_REASON, PodInfo

log = logging.getLogger(__name__)

Key = tuple[str, str]
EVENT_QUEUE_LIMIT = 10_000
STATUS_FLUSH_SECONDS = 0.2
#: status writes in flight together when ``flush`` empties the backlog
FLUSH_CONCURRENCY = 32
#: a pod's Unschedulable note whose held nodes did not change is rewritten at most this often
POD_NOTE_REFRESH_SECONDS = 30.0
#: a pod an Event is about, as (namespace, name, uid): its ``involvedObject`` is spelled out
#: when the Event is posted, not for every bound pod's ``Scheduled`` that waits or is dropped
_PodRef = tuple[str, str, str]
#: an Event waiting to be posted: namespace, involved object, type, reason, message, when (the
#: epoch second it happened, formatted when posted)
_Pending = tuple[str, "dict[str, Any] | _PodRef", str, str, str, float]


async def _no_wait() -> None:
    """``yield_to`` when nothing has priority over the reporter's writes."""


class KubeReporter:
    """Implements the scheduling side's Reporter on top of the API."""

    def __init__(
        self, kube: Kube, component: str, instance: str, fits: FitsCluster | None = None
    ) -> None:
        self.kube = kube
        #: whether requests fit the cluster's allocatable at all (None: not known yet)
        self.fits: FitsCluster = fits or (lambda requests: None)
        self.component = component
        self.instance = instance
        #: Events waiting to be posted, oldest first, at most ``EVENT_QUEUE_LIMIT``;
        #: ``_event_waits`` is set whenever it holds one (a deque and an Event: one append per
        #: bound pod, where ``asyncio.Queue.put_nowait`` cost three times as much)
        self._events: deque[_Pending] = deque()
        self._event_waits = asyncio.Event()
        #: groups whose status changed since it was last written; ``_writing``: those taken
        #: from it and being written now, in order. A group is in one of them until its
        #: status is written (or found unchanged), whatever cancels the writer.
        self._dirty: dict[tuple[str, str], Gang | PodGroupInfo] = {}
        self._writing: deque[tuple[tuple[str, str], Gang | PodGroupInfo]] = deque()
        self._written: dict[tuple[str, str], dict[str, Any]] = {}
        #: gangs whose pending members may need their ``PodScheduled`` note (re)written
        self._unplaced: dict[GangKey, Gang] = {}
        #: pod → (when, message) of our last note to it; entries older than the refresh
        #: period are pruned (the informer's copy of the pod is what is compared then)
        self._noted: dict[Key, tuple[float, str]] = {}
        self._wake = asyncio.Event()
        #: awaited before every Event and status write: bindings go first (set by the
        #: scheduler to its binder's ``no_backlog``)
        self.yield_to: Callable[[], Awaitable[None]] = _no_wait
        self.dropped_events = 0
        self.posted_events = 0
        self.status_writes = 0
        self.pod_notes = 0

    # --- Reporter protocol ---------------------------------------------------------------

    def pod_event(self, pod: Key, uid: str, kind: str, reason: str, message: str) -> None:
        self._enqueue(pod[0], (pod[0], pod[1], uid), kind, reason, message)

    def podgroup_event(self, group: PodGroupInfo, kind: str, reason: str, message: str) -> None:
        api = API_BY_NAME[group.api]
        self._enqueue(
            group.namespace,
            {
                "kind": api.kind,
                "apiVersion": f"{api.group}/{group.version}",
                "namespace": group.namespace,
                "name": group.name,
                "uid": group.uid,
            },
            kind,
            reason,
            message,
        )

    def queue_event(self, queue: QueueSpec, kind: str, reason: str, message: str) -> None:
        """An Event on a queue object (a cluster-scoped one's go to ``default``, as the API
        server's own do)."""
        api = QUEUE_API_BY_NAME[queue.api]
        namespace = queue.object_namespace or "default"
        involved = {"kind": api.kind, "apiVersion": f"{api.group}/{api.version}"}
        involved |= {"name": queue.object_name, "uid": queue.uid}
        if queue.object_namespace:
            involved["namespace"] = queue.object_namespace
        self._enqueue(namespace, involved, kind, reason, message)

    def gang_changed(self, gang: Gang) -> None:
        if gang.last_failure is not None and not gang.reserved:
            self._unplaced[gang.key] = gang
            self._wake.set()
        if gang.single or gang.podgroup is None:
            return
        self._dirty[(gang.key.namespace, gang.key.group)] = gang
        self._wake.set()

    def group_changed(self, group: PodGroupInfo) -> None:
        """A pod group without pods changed (a Volcano group may now be ``Inqueue``)."""
        self._dirty.setdefault(group.key, group)
        self._wake.set()

    # --- background work -----------------------------------------------------------------

    def _enqueue(
        self,
        namespace: str,
        involved: dict[str, Any] | _PodRef,
        kind: str,
        reason: str,
        message: str,
    ) -> None:
        """Queue an Event; its body is built when it is posted (Events are posted at
        ``event_qps``, far slower than pods bind, so most of a burst's wait here)."""
        events = self._events
        if len(events) >= EVENT_QUEUE_LIMIT:  # a burst (every bound pod's Scheduled): drop,
            self.dropped_events += 1  # as cheaply as can be
            return
        events.append((namespace, involved, kind, reason, message, time.time()))
        if len(events) == 1:  # the poster clears it only once it found none waiting
            self._event_waits.set()

    def _event(self, pending: _Pending) -> dict[str, Any]:
        namespace, involved, kind, reason, message, happened = pending
        when = rfc3339_second(int(happened))
        if isinstance(involved, tuple):
            pod_namespace, name, uid = involved
            involved = {
                "kind": "Pod",
                "apiVersion": "v1",
                "namespace": pod_namespace,
                "name": name,
                "uid": uid,
            }
        return {
            "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": self.component},
            "firstTimestamp": when,
            "lastTimestamp": when,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
        }

    async def run_events(self) -> None:
        events = self._events
        while True:
            if not events:
                self._event_waits.clear()
                await self._event_waits.wait()
                continue
            pending = events.popleft()
            await self.yield_to()
            try:
                await self.kube.create_event(pending[0], self._event(pending))
                self.posted_events += 1
            except KubeError as err:
                log.debug("dropping event %s: %s", pending[3], err)

    async def run_status(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(STATUS_FLUSH_SECONDS)  # coalesce bursts of changes
            dirty, self._dirty = self._dirty, {}
            self._writing.extend(dirty.items())
            try:
                while self._writing:
                    await self.yield_to()
                    await self._write(*self._writing[0])
                    self._writing.popleft()
            except asyncio.CancelledError:  # shutting down: ``flush`` writes what is left
                self._requeue()
                raise
            unplaced, self._unplaced = self._unplaced, {}
            for gang in unplaced.values():
                await self._note_pods(gang)

    def _requeue(self) -> None:
        """Put what was being written back with the changes to write."""
        writing, self._writing = self._writing, deque()
        for key, item in writing:
            self._dirty.setdefault(key, item)  # (a newer change already there wins)

    def status_backlog(self) -> int:
        """Groups whose status change is not written yet (written behind bindings); one
        changed again while its write waits counts once."""
        dirty = self._dirty
        return len(dirty) + sum(1 for key, _ in self._writing if key not in dirty)

    async def _write(self, key: tuple[str, str], item: Gang | PodGroupInfo) -> None:
        gang = item if isinstance(item, Gang) else None
        group = item.podgroup if isinstance(item, Gang) else item
        if group is None:
            return
        api = API_BY_NAME[group.api]
        if not api.has_status:
            return
        previous = dict(self._written.get(key) or group.status or {})
        status = group_status(group, gang, previous, self.fits)
        if status is None or status == previous:
            return
        kind = Kind(api.plural, api.group, group.version, api.plural)
        try:
            await self.kube.patch_custom_status(
                kind, group.namespace, group.name, status, api.status_subresource
            )
            self._written[key] = status
            self.status_writes += 1
        except KubeError as err:
            if err.status != 404:
                log.warning("%s %s/%s status not written: %s", api.kind, *key, err)
                self._dirty.setdefault(key, item)

    async def _note_pods(self, gang: Gang) -> None:
        """Give the gang's unplaced members kube-scheduler's ``PodScheduled: False`` note."""
        if gang.last_failure is None or gang.reserved:
            return  # placed since, or waiting in Permit: not unschedulable
        message = gang.last_failure
        if gang.reservation is not None:
            message += f"; {held_nodes_text(sorted(gang.reservation.held))}"
        message = message[:1024]
        now = time.monotonic()
        self._prune_notes(now)
        for pod in gang.pending():
            if self._note_due(pod, message, now):
                await self.yield_to()
                await self._note(pod, message, now)

    def _note_due(self, pod: PodInfo, message: str, now: float) -> bool:
        shown = self._noted.get(pod.key, (0.0, pod.unschedulable_message))
        if shown[1] == message:
            return False
        if shown[1] is None or held_nodes_of(shown[1]) != held_nodes_of(message):
            return True
        return now - shown[0] >= POD_NOTE_REFRESH_SECONDS

    async def _note(self, pod: PodInfo, message: str, now: float) -> None:
        condition = {
            "type": POD_SCHEDULED,
            "status": "False",
            "reason": UNSCHEDULABLE_REASON,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339_now(),
        }
        try:
            await self.kube.patch_pod_status(*pod.key, {"status": {"conditions": [condition]}})
            self._noted[pod.key] = (now, message)
            self.pod_notes += 1
        except KubeError as err:
            if err.status != 404:
                log.debug("pod %s/%s: PodScheduled not written: %s", *pod.key, err)

    def _prune_notes(self, now: float) -> None:
        if len(self._noted) > 1024:
            cutoff = now - POD_NOTE_REFRESH_SECONDS
            self._noted = {k: v for k, v in self._noted.items() if v[0] >= cutoff}

    async def flush(self, seconds: float = 5.0) -> None:
        """Write pending status and events now (shutdown, tests), within ``seconds``: a
        shutdown must end before the kubelet's SIGKILL (the lease is released after this).
        The status writes go out together, ``FLUSH_CONCURRENCY`` at a time (a burst of
        bindings leaves one per gang, and one at a time took 20 s at 2,500 gangs); what is not
        written by the deadline stays dirty, and the next leader writes every status that
        differs from what it reads."""
        deadline = time.monotonic() + seconds
        self._requeue()  # (what ``run_status`` was writing when it was cancelled)
        dirty, self._dirty = self._dirty, {}
        items = list(dirty.items())
        while items and time.monotonic() < deadline:
            batch = items[:FLUSH_CONCURRENCY]
            writes = asyncio.gather(*(self._write(key, item) for key, item in batch))
            try:
                await asyncio.wait_for(writes, deadline - time.monotonic())
            except TimeoutError:
                break  # (the batch is kept below: a write cut short may not have landed)
            del items[:FLUSH_CONCURRENCY]
        if items:
            log.warning("%d group status write(s) left unwritten at the deadline", len(items))
            for key, item in items:
                self._dirty.setdefault(key, item)
        while self._events and time.monotonic() < deadline:
            pending = self._events.popleft()
            with contextlib.suppress(KubeError):
                await self.kube.create_event(pending[0], self._event(pending))
