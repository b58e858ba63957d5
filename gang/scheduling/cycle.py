"""The scheduling cycle and the Permit stage, along the Scheduling Framework's extension points.

One cycle takes one gang from the queue and, without awaiting anything (so no informer event
can change the world mid-decision), runs the plugins of the gang's profile:

    PreFilter   e.g. PodGroupReady (exists, valid), MinResources (fits the cluster's free total)
    PreScore    per-cycle preparation
    Filter      \\
    Score        } gang.scheduling.placement, on one snapshot, for every member at once
    assign      /
    PostFilter  on failure only: may improve the message; GangPreemption may plan to evict
                lower-priority gangs, and the gang is *nominated* onto the capacity they free
                (assumed in the cache, so no gang that may not take it sees it free) while the
                binding side evicts them; the nomination expires if they do not go in time
    Reserve     assume every placed member in the cache, then the Reserve plugins in order;
                a refusal unreserves in reverse order
    Permit      every plugin Allows → hand the gang to binding; a Deny releases it; a Wait
                (GangPermit: no quorum yet) holds the reservations until the shortest timeout

A failed cycle reserves nothing: it reports kube-scheduler-style FailedScheduling events and
parks the gang as unschedulable until a cluster event could change the answer. A Permit wait
that times out unreserves every member, backs the gang off and says why. A change under a
waiting gang (``disrupted``) either releases it the same way — its PodGroup is gone or invalid,
or a member left and what exists no longer reaches minMember (Coscheduling rejects the whole
group when one waiting member is rejected) — or re-plans only what was lost inside the same wait:
members whose node went away or turned unfit, placeholders topped up to a raised minMember; a
lowered minMember may let the gang bind at once. Failures after Permit
(binding) never release the other members: a binding cannot be undone, so "all or nothing" is
decided here, before the first POST.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from gang.models.quantity import units_text
from gang.models.settings import SchedulerConfig
from gang.scheduling.framework import (
    Deny,
    PluginError,
    PreemptionPlugin,
    Profile,
    ReservePlugin,
    StaticFilterPlugin,
    Wait,
    call,
)
from gang.scheduling.gang import Gang, GangKey, Preempting, Reservation
from gang.scheduling.histogram import DECISION_BUCKETS, DurationHistogram
from gang.scheduling.placement import Placement, Placer, Unplaceable
from gang.scheduling.preemption import Plan, Request, leaving
from gang.scheduling.queues import ReclaimScope
from gang.scheduling.reservation import (
    MOVE_CHECK_SECONDS,
    NoReservation,
    ReservationPlanner,
    ReservePlan,
    apply_holds,
    avoiding,
    declared_run,
    held_share,
    refreshed_start,
    slip_margin,
    slipped,
)
from gang.scheduling.tracker import ClusterState
from gang.scheduling.trials import Free, Trials
from gang.state.cache import PodState, Snapshot
from gang.state.podinfo import PodInfo

log = logging.getLogger(__name__)
#: a retry at a known moment comes this much after it (timestamps are whole seconds)
RETRY_SLACK_SECONDS = 0.05

SCHEDULED, UNSCHEDULABLE, BACKOFF = "scheduled", "unschedulable", "backoff"


class ReplanWhole:
    """``_schedule``'s answer where a gang waiting in Permit must be placed again as a whole."""


Key = tuple[str, str]
Held = dict[Key, tuple[PodInfo, str]]
#: repeat an identical FailedScheduling event for a gang at most this often (seconds)
REPORT_EVERY = 30.0
#: a gang refused a reservation after planning one plans again after this long at the earliest,
#: unless the node set or the reservations change first (planning runs placement many times)
REPLAN_AFTER = 5.0


class Cycle:
    def __init__(
        self,
        state: ClusterState,
        profiles: Mapping[str, Profile],
        placers: Mapping[str, Placer],
        config: SchedulerConfig,
        on_permitted: Callable[[Gang], None],
        on_preempt: Callable[[Gang, Plan], None] | None = None,
        on_nominate: Callable[[Gang, Mapping[Key, str]], None] | None = None,
    ) -> None:
        self.state = state
        self.profiles = profiles
        self.placers = placers
        self.config = config
        self.on_permitted = on_permitted
        #: the binding side's evictor: carries out a preemption the cycle has nominated
        self.on_preempt = on_preempt
        #: writes ``status.nominatedNodeName`` for members nominated after the preemption began
        self.on_nominate = on_nominate
        #: Permit waits that ended without a quorum
        self.permit_timeouts = 0
        #: members created during their gang's Permit wait that took a placeholder's node
        self.newcomers_placed = 0
        #: preemptions decided, pods they evict, and seconds each decision took
        self.preemptions = 0
        self.preempted_pods = 0
        self.preemption_decisions = DurationHistogram(DECISION_BUCKETS)
        #: reclaims decided (a preemption across queues), and per victim queue the gangs and
        #: pods they took
        self.reclaims = 0
        self.reclaimed_gangs: dict[str, int] = {}
        self.reclaimed_pods: dict[str, int] = {}
        #: cycles failed by a plugin error, per plugin name
        self.plugin_failures: dict[str, int] = {}
        #: gangs to try again at a known moment (a reclaim victim's min runtime ending)
        self._retries: dict[GangKey, asyncio.TimerHandle] = {}
        self._loop = asyncio.get_running_loop()
        book = state.reservations
        book.limit, book.share = config.max_reservations, config.reservation_max_share
        #: this cycle's gang: the reservations holding capacity against it, those it may
        #: backfill, its declared run time, the wall clock the cycle decides at
        self._holding: list[Reservation] = []
        self._backfill: list[Reservation] = []
        self._run: float | None = None
        self._now = 0.0
        #: what the gang held until this cycle began (dropped to be re-planned): not held
        #: against it
        self._kept: list[tuple[PodInfo, str]] = []
        # the tracker re-checks reservations on a re-tainted or cordoned node with these
        state.filters_for = self._static_filters

    def _profile(self, gang: Gang) -> Profile:
        return self.profiles.get(gang.scheduler_name) or next(iter(self.profiles.values()))

    def _static_filters(self, gang: Gang) -> Sequence[StaticFilterPlugin]:
        return self._profile(gang).static_filters

    # --- the cycle -----------------------------------------------------------------------

    def schedule(self, gang: Gang) -> str:
        """Run one scheduling cycle for ``gang``; the result is its next place in the queue."""
        pending = gang.pending()
        if not pending and not gang.short_of_quorum():
            return SCHEDULED
        going = self._leaving(gang)
        if going and gang.placed() - going < gang.min_member:
            self._fail(gang, pending, _leaving_note(going))
            return UNSCHEDULABLE
        if gang.waiting_since is None:
            gang.waiting_since = self._loop.time()
        if pending and gang.placeholders and not going:
            pending = self._newcomers_take_placeholders(gang, pending)
            if not pending and gang.placed() + len(gang.placeholders) == gang.min_member:
                # each took the node held for it, and what is held is still the quorum (a
                # minMember changed meanwhile is planned for below): nothing to plan again
                self.permit(gang)
                self.state.reporter.gang_changed(gang)
                return SCHEDULED
        held = self.state.drop_placeholders(gang)  # re-planned with the real members below
        nominated = self.state.drop_nominations(gang)  # the gang's own: free for it to use
        self._reservations_against(gang, pending)
        self._kept = [*held.values(), *nominated.values()]
        try:
            outcome = self._schedule(gang, pending, held)
            if isinstance(outcome, ReplanWhole):
                held, pending = {}, self._unreserve_to_replan(gang, nominated)
                outcome = self._schedule(gang, pending, held)
                assert not isinstance(outcome, ReplanWhole)  # nothing is reserved now
        except PluginError as err:
            self.plugin_failures[err.plugin] = self.plugin_failures.get(err.plugin, 0) + 1
            self._restore(gang, held, nominated)
            self._fail(gang, pending, str(err))
            return BACKOFF
        if isinstance(outcome, str):
            self._restore(gang, held, nominated)
            self._fail(gang, pending, outcome)
            return UNSCHEDULABLE
        self._preemption_over(gang)  # placed: what was nominated for it is now reserved
        self._placed_with_reservations(gang, outcome)
        self.permit(gang)
        self.state.reporter.gang_changed(gang)
        # members beyond the quorum that did not fit wait, like any pod, for room to free up
        left: dict[str, list[PodInfo]] = {}
        for pod in gang.pending() if outcome.unplaced else ():
            if pod.key in outcome.unplaced:
                left.setdefault(outcome.unplaced[pod.key], []).append(pod)
        for message, pods in left.items():
            self._fail(gang, pods, message)
        return UNSCHEDULABLE if left else SCHEDULED

    def _newcomers_take_placeholders(self, gang: Gang, pending: list[PodInfo]) -> list[PodInfo]:
        """Members created while their gang waits in Permit take the nodes held for them: a
        member a placeholder stands in for exactly (``_stands_in_for``) is reserved on that
        placeholder's node, as a nominated one takes its node (``_fill_from_placeholders``),
        instead of the placeholders being planned again with it. Only where a placeholder is
        placed exactly as the member would be: a member with no rules about other pods,
        volumes or devices, in a gang with no topology ask (those are planned as a whole, by
        domain and rank, as before). The node is as fit as a reserved member's: one cordoned,
        tainted or deleted since has dropped the placeholders on it
        (``ClusterState._recheck_reservations``). A job of n pods created in batches
        was otherwise planned anew per batch, O(n²) placements (1,024 members arriving 32 at
        a time: 1.2 s of cycles). Returns the members still to place; a Reserve plugin's
        refusal or error puts the placeholder back and leaves the rest to the full path."""
        if (
            gang.preempting is not None
            or gang.nominated
            or gang.reservation is not None
            or gang.topology is not None  # (placed by domain and rank: planned as a whole)
        ):
            return pending
        profile = self._profile(gang)
        left: list[PodInfo] = []
        for i, pod in enumerate(pending):
            # one with rules about other pods, volumes or devices is planned anew: a
            # placeholder is placed without its claims, and as no pod's peer
            held = None if pod.rules else _held_for(gang, pod)
            if held is None:
                left.append(pod)
                continue
            key, stand_in, node = held
            self.state.drop_placeholders(gang, (key,))
            try:
                refusal = self._reserve(gang, profile, {pod.key: pod}, {pod.key: node})
            except PluginError:
                refusal = "error"
            if refusal is not None:
                self.state.cache.assume(stand_in, node)
                gang.placeholders[key] = (stand_in, node)
                return left + pending[i:]
            self.newcomers_placed += 1
        return left

    def _unreserve_to_replan(self, gang: Gang, nominated: Held) -> list[PodInfo]:
        """Members that arrived during the gang's Permit wait fit nowhere beside the members
        reserved before them (a launcher that needs a whole host, after its workers took a
        share of every host in the rack): the gang gives up its reservations and placeholders
        and is placed again as a whole, as if it had just come — else it would sit out its
        Permit timeout holding room it can never complete. Nothing of it is bound, so nothing
        is lost. Returns the members to place: all of them."""
        self.unreserve(gang)
        pending = gang.pending()
        self._reservations_against(gang, pending)
        self._kept = list(nominated.values())
        return pending

    def _schedule(
        self, gang: Gang, pending: list[PodInfo], held: Held
    ) -> str | Placement | ReplanWhole:
        """PreFilter → PreScore → Filter/Score/assign → Reserve: a failure message, or the
        placement reserved; ``ReplanWhole`` where the members pending do not fit beside
        those reserved in the gang's Permit wait (decided before any preemption or
        reservation is tried for the pending members alone)."""
        profile = self._profile(gang)
        budget = profile.budgets.sync
        topology = self.state.topologies.constraint(
            gang.podgroup, gang.members.values(), gang.min_member
        )
        if isinstance(topology, str):  # an ask no topology can honour: nothing is placed
            return f"gang {gang.key} cannot be placed: {topology}"
        gang.topology = topology
        required = max(0, gang.min_member - gang.placed())
        pods, need = list(pending), min(len(pending), required)
        shapes = pending or [gang.members[k] for k in gang.reserved if k in gang.members]
        if len(pending) < required and shapes:  # hold room for the members not created yet
            template = max(shapes, key=lambda p: p.creation_timestamp)
            if topology is not None and topology.slice_size > 1:
                pods = []  # slices go by rank: its members are placed once all of them exist
            pods += [gang.placeholder(template, i) for i in range(required - len(pods))]
            need = len(pods)
        if gang.tasks_missing(()):  # Volcano minTaskMember: some task is short of its minimum
            lacking = gang.tasks_missing(p.key for p in pods)
            if lacking:  # even every member there is would not do: wait for the rest, holding
                return "waiting for members: " + ", ".join(  # nothing (Volcano: not valid)
                    f"task {task or '(none)'} needs {count} more" for task, count in lacking.items()
                )
        refusal = self.state.ledger.admit(gang, pods)
        if refusal is not None:  # its queue is unusable or at its limit: no capacity helps
            return refusal
        self.state.register_vectors(pods)
        snap = self._snapshot(gang)
        anchors = [p.node_name for p in gang.bound()] + list(gang.reserved.values())
        if topology is None:  # re-planned placeholders: only a packing preference; a topology
            anchors += [node for _, node in held.values()]  # holds to the members placed
        placer = self.placers[profile.scheduler_name]
        gang.last_unplaceable = None
        for plugin in profile.pre_filters:
            rejection = call(plugin, "PreFilter", budget, plugin.pre_filter, gang, snap)
            if rejection:
                if getattr(plugin, "about_capacity", False):  # running pods finishing may help
                    never = self._never_fits(gang, placer, pods, need, snap)
                    if never is not None:
                        return never
                    return self._reserve_capacity(gang, placer, pods, need, anchors, rejection)
                return rejection
        for pre_score in profile.pre_scores:
            call(pre_score, "PreScore", budget, pre_score.pre_score, gang, pods, snap)
        result = placer.place(snap, pods, need, anchors, gang.topology, gang.task_minimums(pods))
        if not isinstance(result, Placement):
            if pending and gang.reserved and not gang.binding and not gang.bound():
                return ReplanWhole()
            gang.last_unplaceable = result
            never = self._never_fits(gang, placer, pods, need, snap)
            if never is not None:  # no victim or finishing pod can help: an impossible gang
                return never  # blocks nobody (no preemption, no reservation)
            message = self._describe_failure(gang, result)
            standing = self.state.ledger.waiting_note(gang)
            if standing is not None:
                message = _append(message, standing)
            if profile.post_filters:  # shown the cluster as the cycle saw it: the failed try
                snap = self._snapshot(gang)  # took part of its snapshot's free capacity
            for post in profile.post_filters:
                message = (
                    call(post, "PostFilter", budget, post.post_filter, gang, snap, message)
                    or message
                )
            message = self._preempt(gang, profile, placer, pods, need, anchors, message)
            if gang.preempting is not None:
                return message  # victims are going: the capacity they free is nominated
            return self._reserve_capacity(gang, placer, pods, need, anchors, message)
        refusal = self._reserve(gang, profile, {p.key: p for p in pods}, result.assignments)
        return result if refusal is None else refusal

    def _reserve(
        self,
        gang: Gang,
        profile: Profile,
        pods: Mapping[Key, PodInfo],
        assignments: Mapping[Key, str],
    ) -> str | None:
        """The cache assumption first (always), then the Reserve plugins in order; on a refusal
        everything this call reserved is undone, plugins in reverse order."""
        self.state.cache.assume_all([(pods[key], node) for key, node in assignments.items()])
        members = {k: n for k, n in assignments.items() if k in gang.members}
        done: list[ReservePlugin] = []
        refusal: str | None = None
        try:
            for plugin in profile.reserves:
                refusal = call(
                    plugin, "Reserve", profile.budgets.sync, plugin.reserve, gang, members
                )
                if refusal:
                    refusal = f"plugin {plugin.name} refused Reserve: {refusal}"
                    break
                done.append(plugin)
        except PluginError:
            self._unreserve_plugins(done, gang, members)
            for key in assignments:
                self.state.cache.forget(key)
            raise
        if refusal:
            self._unreserve_plugins(done, gang, members)
            for key in assignments:
                self.state.cache.forget(key)
            return refusal
        for key, node in assignments.items():
            if key in gang.members:
                gang.reserved[key] = node
            else:
                gang.placeholders[key] = (pods[key], node)
        gang.last_failure = None
        gang.preempted_by = None  # placed again after a preemption took its members
        gang.reclaimed = False
        self.state.disrupted.pop((gang.key.namespace, gang.key.group), None)
        return None

    def _unreserve_plugins(
        self, plugins: Sequence[ReservePlugin], gang: Gang, members: Mapping[Key, str]
    ) -> None:
        for plugin in reversed(plugins):
            try:
                call(plugin, "Unreserve", None, plugin.unreserve, gang, members)
            except PluginError as err:
                log.warning("%s", err)  # Unreserve must not stop the others from running

    def _restore(self, gang: Gang, held: Held, nominated: Held) -> None:
        """Put back placeholders and nominations dropped for a re-plan that failed (nothing
        else ran since); a nomination only while its preemption lasts."""
        for key, (pod, node) in held.items():
            if key in gang.nominated:
                continue  # a preemption this cycle nominated it instead
            self.state.cache.assume(pod, node)
            gang.placeholders[key] = (pod, node)
        if gang.preempting is not None and not gang.nominated:
            self._nominate(gang, self._fill_from_placeholders(gang, nominated))

    def _fill_from_placeholders(self, gang: Gang, nominated: Held) -> Held:
        """Members created since the gang was nominated take over the placeholders' nominated
        nodes (and are told so), so every real member carries its nomination."""
        spare = [k for k in nominated if k not in gang.members]
        if not spare:
            return nominated
        taken: dict[Key, str] = {}
        for pod in gang.pending():
            if pod.key in nominated or not spare:
                continue
            _, node = nominated.pop(spare.pop())
            nominated[pod.key] = (pod, node)
            taken[pod.key] = node
        if taken and self.on_nominate is not None:
            self.on_nominate(gang, taken)
        return nominated

    # --- preemption (PostFilter) ---------------------------------------------------------------

    def _snapshot(self, gang: Gang, overlaid: bool = True) -> Snapshot:
        """The cache's snapshot as ``gang`` may use it: capacity held by reservations ahead of
        it taken off (unless it may backfill them), the nodes of the others avoided; capacity
        nominated for lower-priority gangs lent to it (kube-scheduler lets a pod ignore
        lower-priority nominations).

        ``overlaid``: a nomination is assumed on top of the victims it waits for, so until they
        go the cache counts that capacity twice. On each node, what other preemptions' victims
        still hold is counted once against what is nominated there (a node's use is its running
        pods plus what nominations add beyond its victims): else capacity another victim frees
        is eaten by a nomination whose own victim still runs, and the gang it was freed for no
        longer fits. The preemption planner asks without it: it counts every leaving pod as
        free room itself."""
        cache = self.state.cache
        snap = apply_holds(cache.snapshot(), self._holding, cache, self._kept)
        if overlaid:
            snap = self._overlay(gang, snap)
        holding = {r.gang for r in self._holding}
        others = [
            r
            for r in self.state.reservations.by_gang.values()
            if r.gang != gang.key and r.gang not in holding
        ]
        snap = avoiding(snap, others, cache)
        lenders = [
            other
            for key in self.state.nominating
            if (other := self.state.gangs.get(key)) is not None
            and other is not gang
            and other.priority < gang.priority
        ]
        if any(other.nominated for other in lenders):
            snap = _own_free(snap)
        for other in lenders:
            for pod, node in other.nominated.values():
                row = cache.row_of(node)
                record = cache.pods.get(pod.key)
                if row is not None and record is not None:
                    lent = cache.index.fit(record.vector)[: snap.free.shape[1]]
                    snap.free[row] += lent
                    if snap.unheld is not None:
                        snap.unheld[row] += lent
        return snap

    def _overlay(self, gang: Gang, snap: Snapshot) -> Snapshot:
        cache = self.state.cache
        width = snap.free.shape[1]
        victims: dict[int, npt.NDArray[np.int64]] = {}
        nominated: dict[int, npt.NDArray[np.int64]] = {}
        for key in self.state.nominating:
            other = self.state.gangs.get(key)
            if other is None or other is gang or other.preempting is None:
                continue
            for pod_key, uid in other.preempting.victims.items():
                record = cache.pods.get(pod_key)
                if record is None or record.uid != uid or record.state is not PodState.BOUND:
                    continue
                row = cache.row_of(record.node)
                if row is not None:
                    into = victims.setdefault(row, np.zeros(width, dtype=np.int64))
                    into += cache.index.fit(record.vector)[:width]
            for pod, node in other.nominated.values():
                row = cache.row_of(node)
                record = cache.pods.get(pod.key)
                if row is not None and record is not None:
                    into = nominated.setdefault(row, np.zeros(width, dtype=np.int64))
                    into += cache.index.fit(record.vector)[:width]
        if victims:
            snap = _own_free(snap)
        for row, held in victims.items():
            twice = np.minimum(held, nominated.get(row, np.zeros(width, dtype=np.int64)))
            snap.free[row] += twice
            if snap.unheld is not None:
                snap.unheld[row] += twice
        return snap

    def _preempt(
        self,
        gang: Gang,
        profile: Profile,
        placer: Placer,
        pods: list[PodInfo],
        need: int,
        anchors: list[str],
        message: str,
    ) -> str:
        """GangPreemption: plan victims, nominate the gang onto what they free, hand the
        evictions to the binding side. At most one preemption per gang at a time."""
        if not profile.preemptions:
            return message
        if gang.preempting is not None:
            left = self._victims_left(gang)
            if left:
                what = "reclaim" if gang.preempting.reclaim else "preemption"
                return _append(
                    message,
                    f"{what}: waiting for {left} victim pod(s) of "
                    f"{gang.preempting.summary} to terminate",
                )
            self._preemption_over(gang)  # the victims are gone and still it does not fit
        claimed = self._claimed(gang)
        request = Request(
            gang,
            pods,
            need,
            anchors,
            lambda: self._snapshot(gang, overlaid=False),
            placer,
            self.state.cache,
            self.state.podgroups,
            claimed,
            lambda pod: self.state.ledger.may_evict(gang, pod),
        )
        members = {p.key: p for p in pods}
        # reclaim first: a queue below its fair share takes back what others borrow before
        # it evicts its own lower-priority gangs
        reclaimers = [p for p in profile.preemptions if getattr(p, "reclaims", False)]
        scope = (
            self.state.ledger.reclaim_scope(
                gang, pods[:need], lambda pod: leaving(pod, claimed), time.time()
            )
            if reclaimers
            else None
        )
        why_not: list[str] = [scope] if isinstance(scope, str) else []
        if isinstance(scope, ReclaimScope):
            plan, said = self._decide(
                profile, dataclasses.replace(request, reclaim=scope), reclaimers
            )
            if plan is not None:
                why = scope.describe(v.queue for v in plan.victims if v.queue)
                plan = dataclasses.replace(plan, reclaim=why)
                return self._start_preemption(gang, members, plan, message)
            why_not = said[-1:]
            if scope.spared_until is not None:  # a spared gang's min runtime ends: try again
                self._retry_at(gang, scope.spared_until)
        plan, said = self._decide(profile, request, profile.preemptions)
        if plan is not None:
            return self._start_preemption(gang, members, plan, message)
        for text in said + why_not:
            message = _append(message, text)
        return message

    def _retry_at(self, gang: Gang, when: float) -> None:
        """Make ``gang`` active again at epoch ``when`` (one timer per gang, the latest asked)."""
        old = self._retries.pop(gang.key, None)
        if old is not None:
            old.cancel()

        def retry() -> None:
            self._retries.pop(gang.key, None)
            self.state.queue.activate(gang.key)

        delay = max(0.0, when - time.time()) + RETRY_SLACK_SECONDS
        self._retries[gang.key] = self._loop.call_later(delay, retry)

    def _decide(
        self, profile: Profile, request: Request, plugins: Sequence[PreemptionPlugin]
    ) -> tuple[Plan | None, list[str]]:
        """The first plan the plugins make for ``request``, or what they said instead."""
        said: list[str] = []
        for plugin in plugins:
            start = time.perf_counter()
            outcome = call(
                plugin, "PostFilter", profile.budgets.preemption, plugin.preempt, request
            )
            if isinstance(outcome, Plan):
                self.preemption_decisions.observe(time.perf_counter() - start)
                return outcome, said
            if isinstance(outcome, str):
                said.append(outcome)
        return None, said

    def _leaving(self, gang: Gang) -> int:
        """How many of the gang's bound members are on their way out (:func:`leaving`). They do
        not count towards its quorum: completing a quorum around them binds members that end
        up a partial gang once they are gone."""
        claimed = self._claimed(gang)
        return sum(1 for p in gang.bound() if leaving(p, claimed))

    def _claimed(self, gang: Gang) -> frozenset[Key]:
        """Victims of the other gangs' preemptions still under way."""
        claimed: set[Key] = set()
        for key in self.state.nominating:
            other = self.state.gangs.get(key)
            if other is not None and other is not gang and other.preempting is not None:
                claimed.update(other.preempting.victims)
        return frozenset(claimed)

    def _start_preemption(
        self, gang: Gang, pods: Mapping[Key, PodInfo], plan: Plan, message: str
    ) -> str:
        self.preemptions += 1
        self.preempted_pods += plan.pods
        summary = plan.summary()
        if plan.reclaim is not None:
            self.reclaims += 1
            for victim in plan.victims:
                queue = victim.queue or ""
                self.reclaimed_gangs[queue] = self.reclaimed_gangs.get(queue, 0) + 1
                self.reclaimed_pods[queue] = self.reclaimed_pods.get(queue, 0) + len(victim.pods)
            summary = f"{summary} (reclaim: {plan.reclaim})"
        victims = {p.key: p.uid for v in plan.victims for p in v.pods}
        gang.preempting = Preempting(victims, summary, reclaim=plan.reclaim is not None)
        gang.preempting.timer = self._loop.call_later(
            self.config.nomination_timeout_seconds, self._nomination_expired, gang
        )
        self._nominate(gang, {k: (pods[k], node) for k, node in plan.assignments.items()})
        log.info("gang %s %s %s", gang.key, "reclaims" if plan.reclaim else "preempts", summary)
        if self.on_preempt is not None:
            self.on_preempt(gang, plan)
        self._drop_reservation(gang)  # nominated instead
        what = "reclaim" if plan.reclaim is not None else "preemption"
        return _append(message, f"{what}: evicting {summary}")

    def _nominate(self, gang: Gang, nominated: Held) -> None:
        for key, (pod, node) in nominated.items():
            self.state.cache.assume(pod, node)
            gang.nominated[key] = (pod, node)
        if gang.nominated:
            self.state.nominating.add(gang.key)

    def _victims_left(self, gang: Gang) -> int:
        """Victims of the gang's preemption still holding their node."""
        if gang.preempting is None:
            return 0
        pods = self.state.cache.pods
        left = 0
        for key, uid in gang.preempting.victims.items():
            record = pods.get(key)
            if record is not None and record.uid == uid:
                left += 1
        return left

    def _preemption_over(self, gang: Gang) -> None:
        if gang.preempting is not None:
            gang.preempting.cancel()
            gang.preempting = None
        self.state.drop_nominations(gang)

    def _nomination_expired(self, gang: Gang) -> None:
        if gang.preempting is None:
            return
        gang.preempting.timer = None
        left = self._victims_left(gang)
        self._preemption_over(gang)
        if self.state.gangs.get(gang.key) is not gang:
            return
        message = (
            f"gang {gang.key}: released the capacity nominated for it: {left} victim pod(s) "
            f"still running after {self.config.nomination_timeout_seconds:g}s"
        )
        log.info("%s", message)
        if gang.podgroup is not None:
            self.state.reporter.podgroup_event(
                gang.podgroup, "Warning", "NominationExpired", message
            )
        self.state.enqueue(gang)
        self.state.queue.activate(gang.key)
        self.state.queue.activate_unschedulable()

    # --- reservation and backfill ----------------------------------------------------------------

    def _reservations_against(self, gang: Gang, pending: list[PodInfo]) -> None:
        """Set up the cycle's view of the reservations: which hold against ``gang``, which
        it may backfill."""
        self._now = time.time()
        book = self.state.reservations
        if not book.by_gang:
            self._holding, self._backfill, self._run = [], [], None
            return
        self._run = declared_run(pending) if pending else None
        sort_key = self._reservation_order(gang)
        self._holding, self._backfill = book.against(gang, sort_key, self._run, self._now)
        if gang.preempting is not None:
            # its victims are going for it: what they free was its before any reservation
            # made since could plan on it (else a reservation behind takes the room, the
            # preemption ends unused and the next gang evicts again)
            self._holding = []
            return
        if self.state.ledger.in_use() and self.state.ledger.borrowing(gang) is None:
            # a queue below its fair share is entitled to what frees up: another queue's
            # reservation holds only against that queue's own gangs and borrowing ones
            queue = gang.membership.queue
            self._holding = [
                r for r in self._holding if self.state.ledger.queue_of(r.gang) == queue
            ]

    def _placed_with_reservations(self, gang: Gang, placement: Placement) -> None:
        """The gang placed: its own reservation has done its work; a placement on capacity
        held for others is recorded as backfill."""
        book = self.state.reservations
        own = book.drop(gang)
        if own is not None:
            book.waits.observe(max(0.0, self._now - own.made))
            self.state.queue.activate_unschedulable()  # what it held and did not use is free
        if not self._backfill or self._run is None:
            return
        into = book.backfilled(
            self._backfill, str(gang.key), placement.assignments.values(), self._run, self._now
        )
        if into and gang.podgroup is not None:
            names = ", ".join(str(r.gang) for r in into)
            self.state.reporter.podgroup_event(
                gang.podgroup,
                "Normal",
                "Backfilled",
                f"placed on capacity reserved for {names}: its declared run time of "
                f"{self._run:g}s ends before that reservation is expected to start",
            )

    def _reserve_capacity(
        self,
        gang: Gang,
        placer: Placer,
        pods: list[PodInfo],
        need: int,
        anchors: list[str],
        message: str,
    ) -> str:
        """The gang did not place (and preemption did not help): keep or make its reservation,
        and say so in the failure message."""
        if not self.config.reservations:
            return message
        book, cache, now = self.state.reservations, self.state.cache, self._now
        own = gang.reservation
        borrowing = self.state.ledger.borrowing(gang)
        if own is not None and borrowing is not None:
            self._drop_reservation(gang, "its queue is at or above its fair share now")
            own = None
        if own is not None:
            refreshed = refreshed_start(own, cache, now, book.ahead_of(gang.key, own.sort_key))
            if refreshed is not None:
                own.start, own.waiting_for = refreshed
                if slipped(own, now):
                    self._move_if_sooner(gang, own, placer, pods, need, anchors)
                self.state.reporter.gang_changed(gang)
                return _append(message, _holding_note(own))
            self._drop_reservation(gang)  # its nodes can no longer hold it: plan again
            log.info("gang %s: reservation dropped: its nodes can no longer hold it", gang.key)
        if now < gang.reserve_after:
            return self._not_reserved(gang, message, str(gang.reservation_expired))
        refused = borrowing or self._queue_reserved(gang)
        if refused is not None:
            return self._not_reserved(gang, message, refused)
        memo = gang.reservation_memo
        if memo is not None and memo[:2] == (cache.version, book.version) and now < memo[2]:
            return message  # refused moments ago, and nothing it depends on has moved
        sort_key = self._reservation_order(gang)
        refusal = book.room_for(sort_key, self._measure)
        if refusal is not None:
            return self._not_reserved(gang, message, refusal)
        planned = self._plan_reservation(gang, placer, pods, need, anchors, sort_key)
        if isinstance(planned, str):
            return self._not_reserved(gang, message, planned, planned=True)
        plan, yielding = planned
        self._give_way(gang, yielding)
        reservation = Reservation(
            gang.key,
            sort_key,
            plan.held,
            plan.start,
            now,
            now + self.config.max_reservation_seconds,
            plan.waiting_for,
            self._measure([plan.held]),
            declared_run(gang.members.values()),
        )
        reservation.timer = self._loop.call_later(
            self.config.max_reservation_seconds, self._reservation_expired, gang, reservation
        )
        book.add(gang, reservation)
        gang.reservation_refused = None
        note = _holding_note(reservation)
        log.info("gang %s: %s, expected to start in %.1fs", gang.key, note, plan.start - now)
        self._tell(gang, "Normal", "Reserved", f"gang {gang.key}: {note}")
        self.state.reporter.gang_changed(gang)
        return _append(message, note)

    def _queue_reserved(self, gang: Gang) -> str | None:
        """With queues in use, a queue holds at most one reservation, for its first waiting
        gang: many reservations of one queue's small gangs would hold capacity against the
        queues further below their fair share."""
        if not self.state.ledger.in_use():
            return None
        queue = gang.membership.queue
        for key in self.state.reservations.by_gang:
            if key != gang.key and self.state.ledger.queue_of(key) == queue:
                return f"gang {key} of its queue holds the queue's reservation"
        return None

    def _reservation_order(self, gang: Gang) -> tuple[object, ...]:
        """Reservations follow the queues' order: a gang of a queue below its fair share is
        ahead of every gang of a queue at or above it (whose gangs only borrow, and reserve
        nothing), then QueueSort's order."""
        tier = 0 if self.state.ledger.borrowing(gang) is None else 1
        return (tier, *self.state.queue_sort.sort_key(gang))

    def _measure(self, holds: Iterable[Mapping[str, Free]]) -> float:
        """The share of the cluster ``holds`` take together (the book's bound)."""
        return held_share(holds, self.state.cache)

    def _plan_reservation(
        self,
        gang: Gang,
        placer: Placer,
        pods: list[PodInfo],
        need: int,
        anchors: list[str],
        sort_key: tuple[object, ...],
    ) -> tuple[ReservePlan, list[Reservation]] | str:
        """Choose the nodes to hold for ``gang`` and admit them to the book: the plan and the
        reservations behind it that must give way, or why there is none. A reservation plans
        through every hold ahead of it, backfillable or not."""
        book, cache = self.state.reservations, self.state.cache
        ahead = book.ahead_of(gang.key, sort_key)
        saved, self._holding = self._holding, ahead
        try:
            snap = self._snapshot(gang)
        finally:
            self._holding = saved
        trials = Trials(
            snap, pods, need, anchors, placer, cache.index, gang.topology, gang.task_minimums(pods)
        )
        plan = ReservationPlanner(trials, cache, gang.members, self._now, ahead).plan()
        if isinstance(plan, NoReservation):
            return plan.why
        admitted = book.admit(gang.key, sort_key, plan.held, self._measure)
        return admitted if isinstance(admitted, str) else (plan, admitted)

    def _give_way(self, gang: Gang, yielding: Sequence[Reservation]) -> None:
        """Drop the reservations behind ``gang`` that its own displaces (the book's bounds)."""
        for res in yielding:
            other = self.state.gangs.get(res.gang)
            if other is not None:
                self._drop_reservation(other, f"gave way to {gang.key}, ahead of it in the queue")
                self.state.reservations.yielded += 1

    def _move_if_sooner(
        self,
        gang: Gang,
        own: Reservation,
        placer: Placer,
        pods: list[PodInfo],
        need: int,
        anchors: list[str],
    ) -> None:
        """The reservation has slipped (:func:`slipped`): choose its nodes afresh, as if it
        were made now, and move it there if they free sooner by more than its margin. The
        same nodes may come back with an earlier start: the planner's estimate is then
        taken over the refreshed one, which keeps the backfill into them to what ends by
        the earlier start."""
        now = self._now
        own.replan_after = now + MOVE_CHECK_SECONDS
        # the planning never counts the gang's own hold: it is neither ahead of it nor behind
        planned = self._plan_reservation(gang, placer, pods, need, anchors, own.sort_key)
        if isinstance(planned, str) or planned[0].start > own.start - slip_margin(own):
            return
        plan, yielding = planned
        self._give_way(gang, yielding)
        before, moved = own.start, len(set(plan.held) - set(own.held))
        self.state.reservations.move(own, plan, self._measure([plan.held]))
        self.state.queue.activate_unschedulable()  # the nodes it left are free for others
        message = (
            f"reservation moved: {moved} of {len(plan.held)} node(s) changed, expected to "
            f"start in {plan.start - now:.1f}s instead of {before - now:.1f}s"
        )
        log.info("gang %s: %s", gang.key, message)
        self._tell(gang, "Normal", "ReservationMoved", f"gang {gang.key}: {message}")

    def _not_reserved(self, gang: Gang, message: str, why: str, planned: bool = False) -> str:
        """No reservation: the reason is kept for /debug (and explain), the failure message
        stays as the filters wrote it. A refusal that took a planning decision is not
        planned again for a while unless the nodes or the reservations change."""
        if why != gang.reservation_refused:
            log.info("gang %s: no reservation: %s", gang.key, why)
        gang.reservation_refused = why
        if planned:
            cache, book = self.state.cache, self.state.reservations
            gang.reservation_memo = (cache.version, book.version, self._now + REPLAN_AFTER)
        return message

    def _drop_reservation(self, gang: Gang, why: str | None = None) -> None:
        if self.state.reservations.drop(gang) is None:
            return
        self.state.queue.activate_unschedulable()  # what it held is free for everyone again
        if why is not None:
            log.info("gang %s: reservation released: %s", gang.key, why)
            self._tell(gang, "Normal", "ReservationReleased", f"gang {gang.key}: {why}")
            self.state.enqueue(gang)
            self.state.queue.activate(gang.key)
        self.state.reporter.gang_changed(gang)

    def _reservation_expired(self, gang: Gang, reservation: Reservation) -> None:
        reservation.timer = None
        if gang.reservation is not reservation or self.state.gangs.get(gang.key) is not gang:
            return
        self.state.reservations.expired += 1
        seconds = self.config.max_reservation_seconds
        gang.reserve_after = time.time() + seconds
        gang.reservation_expired = (
            f"the last one expired after {seconds:g}s without the gang placing; "
            f"none is made for another {seconds:g}s"
        )
        self.state.reservations.drop(gang)
        message = (
            f"gang {gang.key}: reservation of {len(reservation.held)} node(s) dropped: the gang "
            f"did not place within max_reservation_seconds ({seconds:g}s)"
        )
        log.info("%s", message)
        self._tell(gang, "Warning", "ReservationExpired", message)
        self.state.enqueue(gang)
        self.state.queue.activate(gang.key)
        self.state.queue.activate_unschedulable()
        self.state.reporter.gang_changed(gang)

    def _tell(self, gang: Gang, kind: str, reason: str, message: str) -> None:
        """An Event on the gang's PodGroup, or on its pod for a gang of one."""
        if gang.podgroup is not None:
            self.state.reporter.podgroup_event(gang.podgroup, kind, reason, message)
        elif gang.single:
            for pod in gang.members.values():
                self.state.reporter.pod_event(pod.key, pod.uid, kind, reason, message)

    def _never_fits(
        self, gang: Gang, placer: Placer, pods: list[PodInfo], need: int, snap: Snapshot
    ) -> str | None:
        """Whether the gang fails even on the empty cluster (every node's allocatable free, no
        pod anywhere), judged once per node set and gang shape: then the failure message
        says so, distinct from "not now". ``minResources`` beyond the cluster's allocatable
        total never fit either. A gang of one keeps kube-scheduler's own words."""
        if gang.single:
            return None
        cache = self.state.cache
        memo = (cache.version, need, tuple(p.key for p in pods), gang.topology)
        if gang.never_memo != memo:
            gang.never_memo = memo
            gang.never_fits, gang.never_placed = None, need
            group = gang.podgroup
            if group is not None and cache.fits_allocatable(group.min_resources) is False:
                total = cache.index.describe(cache.allocatable[cache.valid].sum(axis=0))
                gang.never_fits = (
                    "its minResources exceed the cluster's allocatable capacity "
                    f"({_short_of(total, group.min_resources)})"
                )
            else:
                trials = Trials(
                    snap,
                    pods,
                    need,
                    (),
                    placer,
                    cache.index,
                    gang.topology,
                    gang.task_minimums(pods),
                )
                result = trials.empty_result()
                if isinstance(result, Unplaceable):
                    gang.never_placed = result.placed
                    gang.never_fits = self._describe_failure(gang, result).removeprefix(
                        f"gang {gang.key} "
                    )
        if gang.never_fits is None:
            return None
        return f"gang {gang.key} can never fit this cluster, even with every node empty: " + (
            gang.never_fits
        )

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
        """Ask the Permit plugins: all Allow → bind; a Deny → release; otherwise wait (the
        timer starts once, at the shortest Wait timeout)."""
        profile = self._profile(gang)
        waits: list[Wait] = []
        try:
            for plugin in profile.permits:
                decision = call(plugin, "Permit", profile.budgets.sync, plugin.permit, gang)
                if isinstance(decision, Deny):
                    self.release(
                        gang,
                        f"gang {gang.key}: plugin {plugin.name} denied Permit: {decision.reason}",
                        backoff=True,
                    )
                    return
                if isinstance(decision, Wait):
                    waits.append(decision)
        except PluginError as err:
            self.release(gang, f"gang {gang.key}: {err}", backoff=True)
            return
        if not waits:
            self._cancel_wait(gang)
            self.state.drop_placeholders(gang)
            self.on_permitted(gang)
            return
        if gang.permit_timer is None and (gang.reserved or gang.placeholders):
            timeout = min(w.timeout for w in waits)
            gang.permit_deadline = self._loop.time() + timeout
            gang.permit_timer = self._loop.call_later(timeout, self._expire, gang)
        gang.last_failure = next((w.reason for w in waits if w.reason), "waiting in Permit")

    def _cancel_wait(self, gang: Gang) -> None:
        if gang.permit_timer is not None:
            gang.permit_timer.cancel()
        gang.permit_timer = None
        gang.permit_deadline = None

    def _expire(self, gang: Gang) -> None:
        gang.permit_timer = None
        if self.state.gangs.get(gang.key) is not gang or not (gang.reserved or gang.placeholders):
            return
        self.permit_timeouts += 1
        message = (
            f"gang {gang.key} timed out waiting for quorum: {gang.placed()}/{gang.min_member} "
            f"members placed after {gang.timeout or self.config.default_schedule_timeout_seconds:g}s; "
            "released every reservation"
        )
        self.release(gang, message, backoff=True)

    def unreserve(self, gang: Gang) -> int:
        """Unreserve every member not already being bound (Reserve plugins in reverse order),
        and the placeholders; stop the Permit wait. Returns how many reservations were freed."""
        self._cancel_wait(gang)
        members = {k: n for k, n in gang.reserved.items() if k not in gang.binding}
        if members:
            self._unreserve_plugins(self._profile(gang).reserves, gang, members)
        for key in members:
            gang.reserved.pop(key, None)
            self.state.cache.forget(key)
        return len(members) + len(self.state.drop_placeholders(gang))

    def settle(self, gang: Gang) -> None:
        """Shutting down: unreserve, and give up any nomination. A reservation only stops its
        expiry timer: it ends with the process, and its ``Reserved`` condition stays written,
        as the next scheduler makes it again first (queue order) — the status written on the
        way out must not say the capacity became free."""
        self.unreserve(gang)
        self._preemption_over(gang)
        if gang.reservation is not None:
            gang.reservation.cancel()

    def release(self, gang: Gang, message: str, backoff: bool) -> None:
        """Unreserve the gang, say why, and requeue it."""
        released = self.unreserve(gang)
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
        """Something changed under a gang in its Permit wait (the tracker's ``on_disruption``,
        called once the tracker has dropped the reservations that are lost).

        Released, with backoff so the freed room goes to others first: a gang whose PodGroup is
        deleted or invalid, and one that lost a member (deleted, relabelled) when its live
        members no longer reach minMember. Otherwise the wait goes on, deadline unchanged: the
        gang is queued to re-plan members that lost their node and placeholders short of a
        (raised) minMember, and Permit is asked again — a lowered minMember may allow it now.
        """
        member_left, gang.member_left = gang.member_left, False
        if gang.binding or not (gang.reserved or gang.placeholders or gang.permit_timer):
            return  # permitted gangs are past the point of no return
        podgroup = gang.podgroup
        orphaned = not gang.single and (podgroup is None or podgroup.error is not None)
        alive = len(gang.bound()) + len(gang.reserved) + len(gang.pending())
        if orphaned or (member_left and alive < gang.min_member):
            self.release(gang, f"gang {gang.key}: {why}; released every reservation", backoff=True)
            return
        self.state.enqueue(gang)
        self.permit(gang)


def _own_free(snap: Snapshot) -> Snapshot:
    """``snap`` with a copy of its free capacity, to change: a ``free`` array other than the
    one the cache handed out no longer claims to be the cache's (``Snapshot.origin``)."""
    return dataclasses.replace(snap, free=snap.free.copy())


def _append(message: str, preemption: str) -> str:
    """kube-scheduler's form: the Filter verdict, then what preemption said about it."""
    return f"{message} {preemption}" if message.endswith(".") else f"{message}; {preemption}"


#: what a placeholder copies of its template but may differ between members of a job
_OWN_FIELDS = frozenset(
    {
        "namespace",
        "name",
        "uid",
        "key",
        "resource_version",
        "creation_timestamp",
        "start_time",
        "phase",
        "unschedulable_message",
        "claim_statuses",
        "preemption_marked",
    }
)
_COMPARED = tuple(f.name for f in dataclasses.fields(PodInfo) if f.name not in _OWN_FIELDS)


def _held_for(gang: Gang, pod: PodInfo) -> tuple[Key, PodInfo, str] | None:
    """A placeholder of ``gang`` that stands in for ``pod``: its key, itself and its node."""
    for key, (stand_in, node) in gang.placeholders.items():
        if _stands_in_for(stand_in, pod):
            return key, stand_in, node
    return None


def _stands_in_for(stand_in: PodInfo, pod: PodInfo) -> bool:
    """``stand_in`` (a placeholder) was placed as ``pod`` would be: every field placement,
    its rules and its queue read is equal (requests, node constraints, rules, labels, task,
    priority, scheduler...); only a pod's own identity, times and status may differ."""
    return all(getattr(stand_in, name) == getattr(pod, name) for name in _COMPARED)


def _leaving_note(leaving: int) -> str:
    return (
        f"{leaving} bound member(s) of the gang are terminating (preempted or deleted): the "
        "rest waits until they are gone, so that no quorum is completed around them"
    )


def _holding_note(reservation: Reservation) -> str:
    """The failure message's reservation part (no times in it: an identical message is not
    repeated as a new Event; the PodGroup's Reserved condition has them)."""
    return (
        f"reservation: holding {len(reservation.held)} node(s) for it until running pods "
        "there finish"
    )


def _short_of(total: Mapping[str, int], wanted: Mapping[str, int]) -> str:
    """``nvidia.com/gpu: wants 72, 64 allocatable``, per resource beyond the total."""
    return ", ".join(
        f"{res}: wants {units_text(res, amount)}, {units_text(res, total.get(res, 0))} allocatable"
        for res, amount in sorted(wanted.items())
        if amount > total.get(res, 0)
    )
