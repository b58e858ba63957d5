"""What users see: Events on pods and PodGroups, and the PodGroup's status.

Users look in three places when a gang does not start: ``kubectl describe pod`` (Events such as
kube-scheduler's ``Scheduled`` and ``FailedScheduling``), ``kubectl get pg`` (phase and counts) and
the PodGroup's conditions. This module writes all three without ever slowing scheduling down:
the cycle only enqueues; background tasks post Events and coalesce status writes, so a gang whose
state changes fifty times in a second gets one status PATCH, and only when it actually changed.
Writes that fail are logged and dropped (Events) or retried on the next change (status).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any

from gang.kube.transport import Kind, Kube, KubeError
from gang.models.podgroup import (
    POD_GROUP_GROUP,
    POD_GROUP_PLURAL,
    POD_GROUP_VERSION,
    RESERVED_CONDITION,
    PodGroupInfo,
    held_nodes_text,
)
from gang.scheduling.gang import Gang
from gang.scheduling.plugins import unsupported_message

log = logging.getLogger(__name__)

Key = tuple[str, str]
PODGROUPS = Kind("podgroups", POD_GROUP_GROUP, POD_GROUP_VERSION, POD_GROUP_PLURAL)
EVENT_QUEUE_LIMIT = 10_000
STATUS_FLUSH_SECONDS = 0.2


def rfc3339_now() -> str:
    """The current time as the API writes it (RFC 3339, whole seconds, UTC)."""
    return _rfc3339(time.time())


def podgroup_status(gang: Gang, previous: dict[str, Any]) -> dict[str, Any]:
    """The PodGroup status for the gang's current state (Coscheduling's fields and phases)."""
    members = list(gang.members.values())
    scheduled = sum(1 for p in members if p.assigned)
    running = sum(1 for p in members if p.assigned and p.phase == "Running")
    succeeded = sum(1 for p in members if p.phase == "Succeeded")
    failed = sum(1 for p in members if p.phase == "Failed")
    need = gang.min_member
    if failed and running + succeeded < need:
        phase = "Failed"
    elif succeeded >= need and running == 0:
        phase = "Finished"
    elif running + succeeded >= need:
        phase = "Running"
    elif scheduled >= need:
        phase = "Scheduled"
    elif gang.reserved or gang.last_failure is not None:
        phase = "Scheduling"
    else:
        phase = "Pending"
    status: dict[str, Any] = {
        "phase": phase,
        "scheduled": scheduled,
        "running": running,
        "succeeded": succeeded,
        "failed": failed,
    }
    start = previous.get("scheduleStartTime")
    if start is None and phase != "Pending":
        start = rfc3339_now()
    if start is not None:
        status["scheduleStartTime"] = start
    conditions = []
    if gang.podgroup is not None and gang.podgroup.error is not None:
        conditions.append(
            _condition(previous, "Valid", "False", "InvalidSpec", gang.podgroup.error)
        )
    refused = unsupported_message(gang)
    if refused is not None:
        conditions.append(_condition(previous, "Supported", "False", "UnsupportedField", refused))
    if gang.preempted_by is not None:
        conditions.append(
            _condition(
                previous,
                "DisruptionTarget",
                "True",
                "PreemptionByScheduler",
                f"members preempted by {gang.preempted_by}",
            )
        )
    reserved = _reserved_condition(gang, previous)
    if reserved is not None:
        conditions.append(reserved)
    if phase in ("Pending", "Scheduling"):
        message = gang.last_failure or f"{gang.placed()}/{need} members placed"
        conditions.append(_condition(previous, "Scheduled", "False", "Unschedulable", message))
    elif phase != "Failed":
        conditions.append(
            _condition(
                previous,
                "Scheduled",
                "True",
                "GangScheduled",
                f"{scheduled} member(s) bound, minMember {need}",
            )
        )
    status["conditions"] = conditions
    return status


def _reserved_condition(gang: Gang, previous: dict[str, Any]) -> dict[str, Any] | None:
    """``Reserved``: True while capacity is held for the gang (which nodes, expected start);
    False after a reservation expired, until the gang places or may reserve again."""
    res = gang.reservation
    if res is not None:
        return _condition(
            previous,
            RESERVED_CONDITION,
            "True",
            "CapacityReserved",
            f"{held_nodes_text(res.nodes)}; expected start {_rfc3339(res.start)}, once "
            f"{res.waiting_for} running pod(s) there finish; expires {_rfc3339(res.expires)}",
        )
    if gang.reservation_expired is not None and time.time() < gang.reserve_after:
        return _condition(
            previous, RESERVED_CONDITION, "False", "ReservationExpired", gang.reservation_expired
        )
    return None


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(
    previous: dict[str, Any], kind: str, state: str, reason: str, message: str
) -> dict[str, Any]:
    """A condition keeping its lastTransitionTime while its status does not change."""
    old = next(
        (
            c
            for c in previous.get("conditions") or []
            if isinstance(c, dict) and c.get("type") == kind
        ),
        None,
    )
    since = old.get("lastTransitionTime") if old and old.get("status") == state else rfc3339_now()
    return {
        "type": kind,
        "status": state,
        "reason": reason,
        "message": message[:1024],
        "lastTransitionTime": since,
    }


class KubeReporter:
    """Implements the scheduling side's Reporter on top of the API."""

    def __init__(self, kube: Kube, component: str, instance: str) -> None:
        self.kube = kube
        self.component = component
        self.instance = instance
        self._events: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(EVENT_QUEUE_LIMIT)
        self._dirty: dict[tuple[str, str], Gang] = {}
        self._written: dict[tuple[str, str], dict[str, Any]] = {}
        self._wake = asyncio.Event()
        self.dropped_events = 0
        self.posted_events = 0
        self.status_writes = 0

    # --- Reporter protocol ---------------------------------------------------------------

    def pod_event(self, pod: Key, uid: str, kind: str, reason: str, message: str) -> None:
        self._enqueue(
            pod[0],
            {"kind": "Pod", "apiVersion": "v1", "namespace": pod[0], "name": pod[1], "uid": uid},
            kind,
            reason,
            message,
        )

    def podgroup_event(self, group: PodGroupInfo, kind: str, reason: str, message: str) -> None:
        self._enqueue(
            group.namespace,
            {
                "kind": "PodGroup",
                "apiVersion": f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}",
                "namespace": group.namespace,
                "name": group.name,
                "uid": group.uid,
            },
            kind,
            reason,
            message,
        )

    def gang_changed(self, gang: Gang) -> None:
        if gang.single or gang.podgroup is None:
            return
        self._dirty[(gang.key.namespace, gang.key.group)] = gang
        self._wake.set()

    # --- background work -----------------------------------------------------------------

    def _enqueue(
        self, namespace: str, involved: dict[str, Any], kind: str, reason: str, message: str
    ) -> None:
        now = rfc3339_now()
        event = {
            "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": self.component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
        }
        try:
            self._events.put_nowait((namespace, event))
        except asyncio.QueueFull:
            self.dropped_events += 1

    async def run_events(self) -> None:
        while True:
            namespace, event = await self._events.get()
            try:
                await self.kube.create_event(namespace, event)
                self.posted_events += 1
            except KubeError as err:
                log.debug("dropping event %s: %s", event["reason"], err)

    async def run_status(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(STATUS_FLUSH_SECONDS)  # coalesce bursts of changes
            dirty, self._dirty = self._dirty, {}
            for key, gang in dirty.items():
                await self._write(key, gang)

    async def _write(self, key: tuple[str, str], gang: Gang) -> None:
        if gang.podgroup is None:
            return
        previous = dict(self._written.get(key) or gang.podgroup.status or {})
        status = podgroup_status(gang, previous)
        if status == previous:
            return
        try:
            await self.kube.patch_custom_status(PODGROUPS, key[0], key[1], status)
            self._written[key] = status
            self.status_writes += 1
        except KubeError as err:
            if err.status != 404:
                log.warning("PodGroup %s/%s status not written: %s", key[0], key[1], err)
                self._dirty.setdefault(key, gang)

    async def flush(self, seconds: float = 5.0) -> None:
        """Write pending status and events now (shutdown, tests)."""
        deadline = time.monotonic() + seconds
        dirty, self._dirty = self._dirty, {}
        for key, gang in dirty.items():
            await self._write(key, gang)
        while not self._events.empty() and time.monotonic() < deadline:
            namespace, event = self._events.get_nowait()
            with contextlib.suppress(KubeError):
                await self.kube.create_event(namespace, event)
