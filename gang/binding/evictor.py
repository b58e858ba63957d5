"""Carrying out a preemption: mark every victim, then evict, gang by gang, never half a gang.

The scheduling cycle decides (``gang.scheduling.preemption``) and nominates; this module does the
I/O, in an order chosen so that no crash, refusal or lost request can leave a victim gang
running below its quorum:

1. **Nominate**: ``status.nominatedNodeName`` on the preemptor's members, as kube-scheduler
   writes it (``kubectl get pod -o wide`` shows it).
2. **Mark**: each victim pod gets the ``DisruptionTarget`` condition (reason
   ``PreemptionByScheduler``), as kube-scheduler writes it before deleting a victim. The marks are
   the intent, written to the API before the first eviction: a scheduler that restarts finds them
   and finishes the job (``recover``). A victim gang that cannot be marked whole is not touched.
3. **Evict** through the Eviction API (policy/v1), so the API server enforces every
   PodDisruptionBudget. Per victim gang one pod goes first: a budget refusing it (429) leaves the
   gang whole — its marks are withdrawn and the preemptor, once the others are gone, plans again
   without it. The rest go concurrently; a refusal after the first member is gone (a budget
   changed in between) is overridden with a plain DELETE, said out loud, because a gang broken
   in half is worse than a budget overdrawn by one. Victims the plan knowingly takes past their
   budget (no set respecting every budget existed) are deleted directly, and said so.

Recovery rule after a restart, per victim gang with marked, live members: if the unmarked live
members still reach its minMember (an elastic gang losing extras), or none is unmarked (the whole
gang was marked), the marked members are evicted; otherwise the marking was cut short before any
eviction (evictions start only once a gang is marked whole), so the marks are withdrawn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from gang.binding.groupstatus import rfc3339_now
from gang.kube.transport import Kube, KubeError, backoff_delay
from gang.scheduling.gang import Gang
from gang.scheduling.preemption import Plan, VictimGang, quorum, victim_key
from gang.scheduling.tracker import ClusterState
from gang.state.cache import PodState
from gang.state.podinfo import DISRUPTION_TARGET, PREEMPTION_REASON, PodInfo

log = logging.getLogger(__name__)

Key = tuple[str, str]
#: tries of one mark / nomination write before a transient failure counts as a failure
WRITE_ATTEMPTS = 5


def _condition(status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": DISRUPTION_TARGET,
        "status": status,
        "reason": reason,
        "message": message[:1024],
        "lastTransitionTime": rfc3339_now(),
    }


class Evictor:
    def __init__(
        self, kube: Kube, state: ClusterState, scheduler_name: str, concurrency: int = 16
    ) -> None:
        self.kube = kube
        self.state = state
        self.scheduler_name = scheduler_name
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        #: victim pods evicted (or deleted), refused by a budget, and deleted past one
        self.evicted = 0
        self.refused = 0
        self.past_budget = 0

    # --- entry points ----------------------------------------------------------------------

    def preempt(self, gang: Gang, plan: Plan) -> None:
        """Carry out ``plan`` for ``gang`` in the background (the cycle's ``on_preempt``)."""
        self._spawn(self._carry_out(gang, plan), f"preempt for {gang.key}")

    def nominate(self, gang: Gang, assignments: Mapping[Key, str]) -> None:
        """Tell members nominated after the preemption began (the cycle's ``on_nominate``)."""
        self._spawn(self._nominate(gang, assignments), f"nominate {gang.key}")

    async def _nominate(self, gang: Gang, assignments: Mapping[Key, str]) -> None:
        await asyncio.gather(
            *(
                self._write_status(key, {"status": {"nominatedNodeName": node}})
                for key, node in assignments.items()
                if key in gang.members
            )
        )

    def recover(self) -> None:
        """After a restart: finish (or withdraw) the preemptions the marks in the API record."""
        marked: dict[tuple[str, str], list[PodInfo]] = {}
        live: dict[tuple[str, str], list[PodInfo]] = {}
        for record in self.state.cache.pods.values():
            info = record.info
            if record.state is not PodState.BOUND or info is None or info.deleting:
                continue
            key = victim_key(info)
            live.setdefault(key, []).append(info)
            if info.preemption_marked:
                marked.setdefault(key, []).append(info)
        for key, pods in marked.items():
            members = live[key]
            unmarked = len(members) - len(pods)
            name = f"{key[0]}/{key[1].lstrip('/')}"
            if unmarked == 0 or unmarked >= quorum(key, len(members), self.state.podgroups):
                log.info("resuming the preemption of %d pod(s) of gang %s", len(pods), name)
                self._spawn(self._evict_resumed(pods), f"resume eviction of {name}")
            else:
                log.info("withdrawing the unfinished marks on %d pod(s) of %s", len(pods), name)
                self._spawn(self._unmark(pods, "marking was not finished"), f"unmark {name}")

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def _spawn(self, work: Any, name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- one preemption --------------------------------------------------------------------

    async def _carry_out(self, gang: Gang, plan: Plan) -> None:
        who = f"gang {gang.key} (priority {gang.priority})"
        reporter = self.state.reporter
        reason, text = "Preempting", plan.summary()
        if plan.reclaim is not None:
            reason, text = "Reclaiming", f"{text}: {plan.reclaim}"
        if gang.podgroup is not None:
            reporter.podgroup_event(gang.podgroup, "Normal", reason, text)
        elif gang.members:
            pod = next(iter(gang.members.values()))
            reporter.pod_event(pod.key, pod.uid, "Normal", reason, text)
        await self._nominate(gang, plan.assignments)
        await asyncio.gather(*(self._victim_gang(gang, who, v, plan) for v in plan.victims))

    async def _victim_gang(self, gang: Gang, who: str, victim: VictimGang, plan: Plan) -> None:
        message = f"{self.scheduler_name}: preempting to accommodate a higher priority {who}"
        if plan.reclaim is not None:
            message = f"{self.scheduler_name}: reclaimed for {who}: {plan.reclaim}"
        marks = await asyncio.gather(
            *(
                self._write_status(
                    p.key,
                    {"status": {"conditions": [_condition("True", PREEMPTION_REASON, message)]}},
                )
                for p in victim.pods
            )
        )
        if not all(marks):
            await self._unmark(victim.pods, "its members could not all be marked")
            self._spare(gang, victim, "could not be marked for preemption")
            return
        self._say_preempted(who, victim, plan.reclaim)
        first, rest = victim.pods[0], victim.pods[1:]
        if not await self._evict(first, who, plan.past_budget, refusal_spares=True):
            await self._unmark(victim.pods, "a PodDisruptionBudget refused the eviction")
            self._spare(gang, victim, "a PodDisruptionBudget refused its eviction")
            return
        await asyncio.gather(*(self._evict(p, who, plan.past_budget) for p in rest))

    async def _evict(
        self, pod: PodInfo, who: str, past_budget: frozenset[Key], refusal_spares: bool = False
    ) -> bool:
        """Evict one victim; False only if a budget refused it and ``refusal_spares``."""
        force = pod.key in past_budget
        attempt = 0
        while True:
            try:
                async with self._slots:
                    if force:
                        await self.kube.delete_pod(*pod.key, uid=pod.uid)
                    else:
                        await self.kube.evict(*pod.key, uid=pod.uid)
                self.evicted += 1
                if force:
                    self.past_budget += 1
                    self.state.reporter.pod_event(
                        pod.key,
                        pod.uid,
                        "Warning",
                        "PreemptedPastBudget",
                        f"deleted past its PodDisruptionBudget to make room for {who}: "
                        "no set of victims kept every budget",
                    )
                return True
            except KubeError as err:
                if err.status in (404, 409):  # gone already, or another pod by that name now
                    return True
                if (
                    err.status == 429
                    and err.reason == "TooManyRequests"
                    and "budget" in (err.message.lower())
                ):
                    self.refused += 1
                    if refusal_spares:
                        return False
                    log.warning(
                        "eviction of %s/%s refused by a budget after its gang began to go; "
                        "deleting it so the gang does not run broken",
                        *pod.key,
                    )
                    force = True
                    continue
                if not err.retryable and err.status != 429:
                    log.warning("eviction of %s/%s failed: %s", *pod.key, err)
                    return True  # nothing more to do here; recovery or expiry takes over
                delay = err.retry_after if err.retry_after is not None else backoff_delay(attempt)
                attempt += 1
                await asyncio.sleep(delay)

    async def _evict_resumed(self, pods: Iterable[PodInfo]) -> None:
        """Recovery: evict marked members (their gang's eviction was already committed)."""
        everyone: frozenset[Key] = frozenset()
        await asyncio.gather(
            *(self._evict(p, "a preemption decided before a restart", everyone) for p in pods)
        )

    async def _unmark(self, pods: Iterable[PodInfo], why: str) -> None:
        condition = _condition("False", "PreemptionCancelled", f"preemption withdrawn: {why}")
        await asyncio.gather(
            *(self._write_status(p.key, {"status": {"conditions": [condition]}}) for p in pods)
        )

    async def _write_status(self, key: Key, patch: Mapping[str, Any]) -> bool:
        """A pods/status patch, retried; False if it could not be written (a gone pod is
        True: there is nothing left to mark)."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                async with self._slots:
                    await self.kube.patch_pod_status(key[0], key[1], dict(patch))
                return True
            except KubeError as err:
                if err.status == 404:
                    return True
                if not err.retryable or attempt + 1 == WRITE_ATTEMPTS:
                    log.warning("pods/status of %s/%s not written: %s", *key, err)
                    return False
                await asyncio.sleep(
                    err.retry_after if err.retry_after is not None else backoff_delay(attempt)
                )
        return False

    # --- what users see --------------------------------------------------------------------

    def _say_preempted(self, who: str, victim: VictimGang, reclaim: str | None) -> None:
        """Events on the victim's pods and group, and the condition on its group: "Preempted"
        by a higher priority, or "Reclaimed" by a queue below its fair share (with the shares)."""
        reporter = self.state.reporter
        reason, verb = ("Reclaimed", "reclaimed") if reclaim else ("Preempted", "preempted")
        why = f" ({reclaim})" if reclaim else ""
        for pod in victim.pods:
            reporter.pod_event(
                pod.key,
                pod.uid,
                "Normal",
                reason,
                f"{verb.capitalize()} by {who} on node {pod.node_name}{why}",
            )
        if not victim.group:
            return
        self.state.disrupted[(victim.namespace, victim.group)] = (
            f"{who}: {reclaim}" if reclaim else who,
            reclaim is not None,
        )
        podgroup = self.state.podgroups.get((victim.namespace, victim.group))
        if podgroup is not None:
            reporter.podgroup_event(
                podgroup,
                "Normal",
                reason,
                f"{len(victim.pods)} of {victim.bound} running member(s) {verb} by {who}"
                + ("" if victim.whole else f", keeping minMember {victim.min_member}")
                + (f": {reclaim}" if reclaim else ""),
            )
        for ours in self.state.gangs.values():
            if ours.key.namespace == victim.namespace and ours.key.group == victim.group:
                ours.preempted_by, ours.reclaimed = self.state.disrupted[
                    (victim.namespace, victim.group)
                ]
                reporter.gang_changed(ours)

    def _spare(self, gang: Gang, victim: VictimGang, why: str) -> None:
        """A victim gang left whole: it no longer counts among the preemption's victims."""
        if gang.preempting is not None:
            for pod in victim.pods:
                gang.preempting.victims.pop(pod.key, None)
        log.info("victim %s spared: %s", victim, why)
        if gang.podgroup is not None:
            self.state.reporter.podgroup_event(
                gang.podgroup, "Warning", "PreemptionRefused", f"victim {victim} {why}"
            )
        self.state.queue.activate_unschedulable()
