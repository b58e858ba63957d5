"""The scheduling cycle and the Permit stage, along the Scheduling Framework's extension points.

One cycle takes one gang from the queue and, without awaiting anything (so no informer event
can change the world mid-decision), runs:

    PreFilter   the PodGroup exists and is valid; its minResources fit the cluster's free total
    Filter      \\
    Score        } gang.scheduling.placement, on one snapshot, for every member at once
    assign      /
    Reserve     assume every placed member in the cache (Unreserve = forget, symmetric)
    Permit      quorum (bound + reserved >= minMember) → allow: hand the gang to binding;
                otherwise wait, up to the gang's timeout, for the missing members

A failed cycle reserves nothing: it reports kube-scheduler-style FailedScheduling events and
parks the gang as unschedulable until a cluster event could change the answer. A Permit wait
that times out unreserves every member, backs the gang off and says why. Failures after Permit
(binding) never release the other members: a binding cannot be undone, so "all or nothing" is
decided here, before the first POST.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from gang.models.settings import SchedulerConfig
from gang.scheduling.framework import PreFilterPlugin
from gang.scheduling.gang import Gang
from gang.scheduling.placement import Placement, Placer, Unplaceable
from gang.scheduling.plugins import MinResources, PodGroupReady
from gang.scheduling.tracker import ClusterState
from gang.state.podinfo import PodInfo

log = logging.getLogger(__name__)

SCHEDULED, UNSCHEDULABLE, BACKOFF = "scheduled", "unschedulable", "backoff"
#: repeat an identical FailedScheduling event for a gang at most this often (seconds)
REPORT_EVERY = 30.0


class Cycle:
    def __init__(
        self,
        state: ClusterState,
        placer: Placer,
        config: SchedulerConfig,
        on_permitted: Callable[[Gang], None],
    ) -> None:
        self.state = state
        self.placer = placer
        self.config = config
        self.on_permitted = on_permitted
        self.pre_filters: list[PreFilterPlugin] = [PodGroupReady(), MinResources(state.cache.index)]
        #: Permit waits that ended without a quorum
        self.permit_timeouts = 0
        self._loop = asyncio.get_running_loop()

    # --- the cycle -----------------------------------------------------------------------

    def schedule(self, gang: Gang) -> str:
        """Run one scheduling cycle for ``gang``; the result is its next place in the queue."""
        pending = gang.pending()
        if not pending:
            return SCHEDULED
        if gang.waiting_since is None:
            gang.waiting_since = self._loop.time()
        required = max(0, gang.min_member - gang.placed())
        held = self.state.drop_placeholders(gang)  # re-planned with the real members below
        pods, need = list(pending), min(len(pending), required)
        if len(pending) < required:  # hold room for the members not created yet
            template = max(pending, key=lambda p: p.creation_timestamp)
            pods += [gang.placeholder(template, i) for i in range(required - len(pending))]
            need = len(pods)
        self.state.register_vectors(pods)
        snap = self.state.cache.snapshot()
        rejection = next(
            (r for r in (f.pre_filter(gang, snap) for f in self.pre_filters) if r), None
        )
        anchors = [p.node_name for p in gang.bound()] + list(gang.reserved.values())
        anchors += [node for _, node in held.values()]
        result = self.placer.place(snap, pods, need, anchors) if rejection is None else None
        if not isinstance(result, Placement):
            self._restore(gang, held)
            message = rejection if result is None else self._describe_failure(gang, result)
            self._fail(gang, pending, message or "unschedulable")
            return UNSCHEDULABLE
        by_key = {p.key: p for p in pods}
        for key, node in result.assignments.items():  # Reserve
            pod = by_key[key]
            self.state.cache.assume(pod, node)
            if key in gang.members:
                gang.reserved[key] = node
            else:
                gang.placeholders[key] = (pod, node)
        gang.last_failure = None
        self.permit(gang)
        self.state.reporter.gang_changed(gang)
        return SCHEDULED

    def _restore(self, gang: Gang, held: dict[tuple[str, str], tuple[PodInfo, str]]) -> None:
        """Put back placeholders dropped for a re-plan that failed (nothing else ran since)."""
        for key, (pod, node) in held.items():
            self.state.cache.assume(pod, node)
            gang.placeholders[key] = (pod, node)

    def _describe_failure(self, gang: Gang, failure: Unplaceable) -> str:
        if gang.single or failure.needed <= 1:
            return failure.message
        return (
            f"gang {gang.key} needs {failure.needed} more member(s) placed together, "
            f"only {failure.placed} fit; {failure.message}"
        )

    def _fail(self, gang: Gang, pods: list[PodInfo], message: str) -> None:
        gang.last_failure = message
        now = self._loop.time()
        if now - gang.reported.get(message, -REPORT_EVERY) >= REPORT_EVERY:
            gang.reported = {message: now}
            for pod in pods:
                self.state.reporter.pod_event(
                    pod.key, pod.uid, "Warning", "FailedScheduling", message
                )
        self.state.reporter.gang_changed(gang)

    # --- Permit --------------------------------------------------------------------------

    def permit(self, gang: Gang) -> None:
        """Allow a gang with quorum to bind; otherwise wait (once) until its timeout."""
        if gang.has_quorum():
            self._cancel_wait(gang)
            self.state.drop_placeholders(gang)
            self.on_permitted(gang)
            return
        if gang.permit_timer is None and (gang.reserved or gang.placeholders):
            timeout = gang.timeout or self.config.default_schedule_timeout_seconds
            gang.permit_deadline = self._loop.time() + timeout
            gang.permit_timer = self._loop.call_later(timeout, self._expire, gang)
        gang.last_failure = (
            f"waiting for quorum: {gang.placed()}/{gang.min_member} members placed, "
            f"{len(gang.members)} exist"
        )

    def _cancel_wait(self, gang: Gang) -> None:
        if gang.permit_timer is not None:
            gang.permit_timer.cancel()
        gang.permit_timer = None
        gang.permit_deadline = None

    def _expire(self, gang: Gang) -> None:
        gang.permit_timer = None
        if gang.has_quorum() or self.state.gangs.get(gang.key) is not gang:
            return
        self.permit_timeouts += 1
        message = (
            f"gang {gang.key} timed out waiting for quorum: {gang.placed()}/{gang.min_member} "
            f"members placed after {gang.timeout or self.config.default_schedule_timeout_seconds:g}s; "
            "released every reservation"
        )
        self.release(gang, message, backoff=True)

    def release(self, gang: Gang, message: str, backoff: bool) -> None:
        """Unreserve every member that is not already being bound, then requeue the gang."""
        self._cancel_wait(gang)
        released = 0
        for key in [k for k in gang.reserved if k not in gang.binding]:
            gang.reserved.pop(key, None)
            self.state.cache.forget(key)
            released += 1
        released += len(self.state.drop_placeholders(gang))
        gang.last_failure = message
        log.info("%s", message)
        if gang.podgroup is not None:
            self.state.reporter.podgroup_event(gang.podgroup, "Warning", "Unschedulable", message)
        for pod in gang.pending():
            self.state.reporter.pod_event(pod.key, pod.uid, "Warning", "FailedScheduling", message)
        queue = self.state.queue
        self.state.enqueue(gang)
        if backoff:
            queue.backoff(gang.key)
        if released:
            queue.activate_unschedulable()  # the freed room may let others fit
        self.state.reporter.gang_changed(gang)

    def disrupted(self, gang: Gang, why: str) -> None:
        """Something changed under a gang holding reservations (tracker's on_disruption)."""
        if gang.binding or (not gang.reserved and not gang.permit_timer):
            return  # permitted gangs are past the point of no return
        possible = len(gang.bound()) + len(gang.reserved) + len(gang.pending())
        if possible < gang.min_member or (gang.podgroup is None and not gang.single):
            self.release(gang, f"gang {gang.key}: {why}; released every reservation", backoff=False)
            return
        self.state.enqueue(gang)  # re-plan the members that lost a node
        self.permit(gang)
