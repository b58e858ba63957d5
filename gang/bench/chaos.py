"""``gang chaos``: the real scheduler through every fault at once, then its promises checked.

One run: a simulated cluster in this process (so faults can be injected at exact moments and
the evidence read from the server's side), ``gang run`` as a child process (so it can be
SIGKILLed), and a seeded plan (``gang.bench.chaosplan``) of gangs of mixed sizes and priorities
arriving and being deleted while the apiserver is slow, throttles (429 + Retry-After), fails
(500), cuts watches, loses watch events, compacts its history and restarts — and while the
scheduler is killed at planned moments and at planned bindings, so some kills land between a
gang's first and last binding. Then every knob goes off and the run settles, and the invariants
are checked on what the API holds (``gang.bench.invariants``) and on the simulator's audit of
binding POSTs: no partial gang, no over-committed node, no pod bound twice, no gang left
unbound that fits.

``--mode preempt`` aims the kills at preemption (see ``gang.bench.chaosplan``): the cluster is
filled with low-priority gangs, high-priority gangs arrive that fit only by evicting some, and
the scheduler is SIGKILLed at planned evictions (read from the store as they commit), so kills
fall between a victim gang's first and last eviction and between the evictions and the
preemptor's binding. On top of the invariants it checks what preemption promises: no victim
gang left below its quorum (the judge's partial gangs, now fed by evictions), and no preemptor
left unbound that would fit if the low-priority pods were gone (``unserved_preemptors``: the
judge sees only free capacity, so a scheduler that never preempted would pass it).

``--mode reclaim`` does the same for reclaim (see ``gang.bench.chaosplan``): one queue fills the
cluster, another returns and must take back its fair share in whole gangs while the scheduler is
killed at planned evictions and the queues change under it. On top of the invariants: no victim
gang left partial, every returning gang bound, and the queue reclaimed from never left below its
fair share (``queue_below_share``).

The result says what was injected and survived, so a README can report "N seeded runs,
0 partial gangs" with the command that produced it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gang.bench.chaosplan import (
    CUT_WATCHES,
    DELETE_GANG,
    EXPIRE_HISTORY,
    HIGH,
    IDLE,
    KILL,
    LOW,
    PRIORITIES,
    QUEUE_ADD,
    QUEUE_REMOVE,
    QUEUE_RESTORE,
    QUEUE_SKEW,
    RESTART_SIM,
    TAKEN,
    TAKER,
    Action,
    ChaosConfig,
    ChaosPlan,
    GangPlan,
    cluster_gpus,
    kai_queue,
    make_plan,
    pod_manifests,
    podgroup_manifest,
)
from gang.bench.invariants import Verdict, free_capacity, judge, parse_pods
from gang.bench.supervisor import SchedulerProcess
from gang.models.podgroup import POD_GROUP_LABEL
from gang.models.queueapis import KAI_QUEUE_LABEL
from gang.sim.api import DeleteOptions
from gang.sim.cluster import SimCluster
from gang.sim.errors import ApiError
from gang.sim.faults import FaultCounts
from gang.sim.kubelet import KubeletConfig
from gang.sim.store import MODIFIED, StoredEvent
from gang.state.podinfo import DISRUPTION_TARGET, PREEMPTION_REASON, PodInfo

Obj = dict[str, Any]
#: the scheduler's settings for a chaos run: relist often (dropped events are repaired by the
#: resync), retry soon, and time out a quorum wait within the run
SCHEDULER_ENV = {
    "GANG_SCHEDULER__RESYNC_PERIOD_SECONDS": "3",
    "GANG_SCHEDULER__BACKOFF_INITIAL_SECONDS": "0.2",
    "GANG_SCHEDULER__BACKOFF_MAX_SECONDS": "2",
    "GANG_SCHEDULER__UNSCHEDULABLE_FLUSH_SECONDS": "3",
    "GANG_SCHEDULER__DEFAULT_SCHEDULE_TIMEOUT_SECONDS": "10",
}
PODGROUPS_KEY = "scheduling.x-k8s.io/v1alpha1/podgroups"
GPU = "nvidia.com/gpu"
KAI_QUEUES_KEY = "scheduling.run.ai/v2/queues"
MERGE_PATCH = "application/merge-patch+json"
#: preempt mode's kubelet stand-in: pods start soon; an evicted pod lingers for its grace
#: period (``PREEMPT_GRACE_SECONDS``) — the window between eviction and the preemptor's binding
PREEMPT_KUBELET = KubeletConfig(start_delay=0.2, termination_delay=1.0)
#: seconds between two checks on the scheduler during the chaos (``_supervise``: a restart
#: after an exit of its own, a watch cut still owed)
SUPERVISE_INTERVAL = 0.2


@dataclass(slots=True)
class ChaosResult:
    config: ChaosConfig
    plan: str
    faults: FaultCounts
    verdict: Verdict
    kills: int = 0
    #: kills that fell while the gang of the pod just bound was not yet wholly bound
    mid_gang_kills: int = 0
    scheduler_starts: int = 0
    unexpected_exits: list[int] = field(default_factory=list)
    gangs_deleted: int = 0
    bindings: int = 0
    #: binding POSTs for a pod already bound elsewhere / on the same node (a lost answer retried)
    double_binds: int = 0
    repeated_binds: int = 0
    #: pods the simulator accepted more than one binding for (0 while its check holds)
    pods_bound_twice: int = 0
    settle_seconds: float = 0.0
    #: preempt mode: eviction POSTs the apiserver accepted (201) and answered at all
    evictions: int = 0
    eviction_posts: int = 0
    #: gangs that lost at least one member to an eviction, and those of them left partial
    victim_gangs: int = 0
    victim_gangs_partial: list[str] = field(default_factory=list)
    #: high-priority gangs created, and those with their quorum bound at the end
    preemptors: int = 0
    preemptors_bound: int = 0
    #: high-priority gangs unbound at the end whose quorum would fit without the low ones
    #: (reclaim mode: the returning queue's gangs left unbound)
    unserved_preemptors: list[str] = field(default_factory=list)
    #: reclaim mode: the queue reclaimed from, when it ends below its fair share (what it holds)
    queue_below_share: list[str] = field(default_factory=list)
    #: reclaim mode: queue changes made under the scheduler
    queue_changes: int = 0
    #: kills fired at a planned eviction, those of them with members of the victim gang still
    #: marked and not yet evicted, and kills (any) while a preemptor was nominated, not bound
    eviction_kills: int = 0
    mid_victim_kills: int = 0
    preemption_kills: int = 0
    log_tail: str = ""
    #: seconds since the start → what happened (kills, starts, restarts, binding conflicts)
    timeline: list[tuple[float, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.verdict.clean
            and self.double_binds == 0
            and self.pods_bound_twice == 0
            and not self.unexpected_exits
            and not self.unserved_preemptors
            and not self.queue_below_share
        )

    def report(self) -> str:
        c, v, f = self.config, self.verdict, self.faults
        head = (
            f"seed {c.seed} ({c.mode}, {c.duration:g}s): {'OK' if self.ok else 'FAILED'} - "
            f"{v.gangs_complete}/{v.gangs} gangs complete, {v.pods_bound}/{v.pods} pods bound, "
            f"{len(v.partial_gangs)} partial gangs, {len(v.overcommitted_nodes)} over-committed "
            f"nodes, {self.double_binds} double binds, {self.pods_bound_twice} pods bound twice, "
            f"{len(v.fitting_unbound)} fitting gangs unbound"
            + (
                f", {len(self.unserved_preemptors)} preemptors unserved"
                if c.mode == "preempt"
                else ""
            )
            + (
                f", {len(self.unserved_preemptors)} reclaimers unserved, "
                f"{len(self.queue_below_share)} queues left below their fair share"
                if c.mode == "reclaim"
                else ""
            )
            + f"; settled in {self.settle_seconds:.1f}s"
        )
        stranded = len(v.stranded_members)
        lines = [
            head,
            f"  workload: {self.plan}; {self.gangs_deleted} gangs deleted, {self.bindings} "
            f"bindings, {self.repeated_binds} repeated binding POSTs (409, same node), "
            f"{stranded} gangs with a fitting member beyond the quorum left pending",
            f"  scheduler: {self.kills} SIGKILLs ({self.mid_gang_kills} mid-gang), "
            f"{self.scheduler_starts} starts, {len(self.unexpected_exits)} unexpected exits",
        ]
        if c.mode == "reclaim":
            lines.append(
                f"  reclaim: {self.evictions} evictions ({self.eviction_posts} POSTs) of "
                f"{self.victim_gangs} victim gangs, {len(self.victim_gangs_partial)} left partial; "
                f"{self.preemptors_bound}/{self.preemptors} reclaiming gangs bound; "
                f"{self.eviction_kills} SIGKILLs at an eviction ({self.mid_victim_kills} "
                f"mid-victim-gang), {self.preemption_kills} while a reclaimer was nominated "
                f"and not yet bound; {self.queue_changes} queue changes mid-run"
            )
        if c.mode == "preempt":
            lines.append(
                f"  preemption: {self.evictions} evictions ({self.eviction_posts} POSTs) of "
                f"{self.victim_gangs} victim gangs, {len(self.victim_gangs_partial)} left partial; "
                f"{self.preemptors_bound}/{self.preemptors} preemptor gangs bound; "
                f"{self.eviction_kills} SIGKILLs at an eviction ({self.mid_victim_kills} "
                f"mid-victim-gang), {self.preemption_kills} while a preemptor was nominated "
                "and not yet bound"
            )
        lines += [
            f"  apiserver: {f.restarts} restarts, {f.watches_cut} watches cut, "
            f"{f.history_expiries} history expiries, {f.throttled} throttled (429), "
            f"{f.server_errors} errors (500), {f.events_dropped} watch events dropped, "
            f"{f.delayed} requests delayed, {f.watches_opened} watches opened",
        ]
        problems = (
            v.partial_gangs
            + v.overcommitted_nodes
            + v.fitting_unbound
            + [f"{g} unserved" for g in self.unserved_preemptors]
            + self.queue_below_share
            + v.stranded_members
        )
        if problems:
            lines.append("  problems: " + "; ".join(problems[:10]))
        if self.unexpected_exits:
            lines.append(f"  scheduler exits (codes {self.unexpected_exits}); log tail:")
        if not self.ok and self.log_tail:
            lines += ["    " + line for line in self.log_tail.splitlines()]
        if not self.ok or self.repeated_binds:
            lines.append("  timeline:")
            lines += [f"    {at:7.3f}s {what}" for at, what in self.timeline]
        return "\n".join(lines)


class ChaosRun:
    def __init__(
        self, config: ChaosConfig, log_dir: Path | None = None, log_level: str = "WARNING"
    ) -> None:
        self.config = config
        self.log_level = log_level
        self.plan: ChaosPlan = make_plan(config)
        self.log_dir = log_dir
        self.in_chaos = False
        self.gangs_deleted = 0
        self.bindings = 0
        self.mid_gang_kills = 0
        self.eviction_kills = 0
        self.mid_victim_kills = 0
        self.preemption_kills = 0
        #: preempt and reclaim modes: kills at evictions, victims and takers checked
        self.preempt = config.mode in ("preempt", "reclaim")
        self.reclaim = config.mode == "reclaim"
        self.queue_changes = 0
        self._present: dict[str, GangPlan] = {}
        self._bindings_since_start = 0
        self._evictions_since_start = 0
        self._kill_trigger: tuple[int, float] | None = None
        self._eviction_trigger: tuple[int, float] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._sim_restart: asyncio.Task[None] | None = None
        #: a planned watch cut found no watch open: the next ones opened are cut
        self._watch_cut_owed = False
        self._cluster: SimCluster | None = None
        self._scheduler: SchedulerProcess | None = None
        self._marks: list[tuple[float, str]] = []
        self._started_at = 0.0

    @property
    def cluster(self) -> SimCluster:
        assert self._cluster is not None
        return self._cluster

    @property
    def scheduler(self) -> SchedulerProcess:
        assert self._scheduler is not None
        return self._scheduler

    # --- the run -------------------------------------------------------------------------

    async def run(self) -> ChaosResult:
        with tempfile.TemporaryDirectory(prefix="gang-chaos-") as tmp:
            log_dir = self.log_dir or Path(tmp)
            log_path = log_dir / f"scheduler-{self.config.mode}-seed{self.config.seed}.log"
            log_path.unlink(missing_ok=True)
            full = self.config.mode == "full"
            async with SimCluster(
                self.config.nodes,
                faults=self.plan.faults,
                history_size=300 if full else 10_000,
                bookmark_interval=2.0,
                kubelet=PREEMPT_KUBELET if self.preempt else None,
            ) as cluster:
                self._cluster = cluster
                self._scheduler = SchedulerProcess(
                    cluster.kubeconfig_path,
                    env=SCHEDULER_ENV,
                    log_path=log_path,
                    args=("--port", "0", "--log-level", self.log_level),
                )
                self._started_at = time.monotonic()
                self._setup()
                cluster.store.add_listener(self._on_commit)
                try:
                    self.in_chaos = True
                    await self._start_scheduler()
                    await self._chaos()
                    settle = await self._settle()
                finally:
                    cluster.store.remove_listener(self._on_commit)
                    self.in_chaos = False
                    for task in list(self._tasks):
                        task.cancel()
                    await asyncio.gather(*self._tasks, return_exceptions=True)
                    await self.scheduler.stop()
                return self._result(settle, self.scheduler.log_tail())

    def _setup(self) -> None:
        api, ns = self.cluster.api, self.config.namespace
        api.create(api.rt_namespaces, None, {"metadata": {"name": ns}})
        for name, value in PRIORITIES.items():
            api.create(api.rt_priority, None, {"metadata": {"name": name}, "value": value})
        if self.reclaim:
            queues = api.registry.by_key(KAI_QUEUES_KEY)
            for queue in (TAKEN, TAKER):
                api.create(queues, None, kai_queue(queue))
        for gang in self.plan.gangs:
            if gang.arrive_at <= 0:
                self._create(gang)

    def _create(self, gang: GangPlan) -> None:
        api, ns = self.cluster.api, self.config.namespace
        if not gang.lone:
            api.create(api.registry.by_key(PODGROUPS_KEY), ns, podgroup_manifest(gang, ns))
        for pod in pod_manifests(gang, ns):
            api.create(api.rt_pods, ns, pod)
        self._present[gang.name] = gang
        if self.preempt and gang.arrive_at > 0:
            self._mark(
                f"{gang.name} arrives ({gang.queue or gang.priority}, {gang.size} pods x "
                f"{gang.gpu} GPU, minMember {gang.min_member})"
            )

    async def _chaos(self) -> None:
        """Arrivals and actions at their planned moments, for ``duration`` seconds (in preempt
        and reclaim modes, from the moment the gangs created first hold their quorums)."""
        loop = asyncio.get_running_loop()
        if self.preempt:
            await self._fill_bound()
        start = loop.time()
        timeline: list[tuple[float, Callable[[], None]]] = [
            (g.arrive_at, functools.partial(self._create, g))
            for g in self.plan.gangs
            if g.arrive_at > 0
        ]
        timeline += [(a.at, functools.partial(self._act, a)) for a in self.plan.actions]
        timeline.sort(key=lambda item: item[0])
        for at, do in timeline:
            while loop.time() - start < at:
                await self._supervise()
                await asyncio.sleep(min(SUPERVISE_INTERVAL, max(0.0, at - (loop.time() - start))))
            do()
        while loop.time() - start < self.config.duration:
            await self._supervise()
            await asyncio.sleep(SUPERVISE_INTERVAL)
        self.in_chaos = False

    async def _fill_bound(self) -> None:
        """Wait (at most ``settle`` seconds) until every gang created at the start holds its
        quorum: the later gangs are planned to find the cluster full, and on a slow machine the
        scheduler may not have placed the first ones by their planned moment; the timeline then
        starts late rather than run a plan whose premise never held (no victim to take)."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        first = [g for g in self.plan.gangs if g.arrive_at <= 0]
        while any(self._bound(g.name) < g.min_member for g in first if g.name in self._present):
            if loop.time() - began > self.config.settle:
                self._mark("the first gangs are not all bound: the arrivals begin anyway")
                return
            await self._supervise()
            await asyncio.sleep(SUPERVISE_INTERVAL)
        self._mark(f"the first {len(first)} gangs hold their quorums: the arrivals begin")

    def _cut_watches(self) -> None:
        """Cut the open watches; with none open (the scheduler or the server restarting), cut
        the next ones opened, at the next check (``_supervise``), so the fault is not lost."""
        self._watch_cut_owed = not self.cluster.drop_watches()

    def _act(self, action: Action) -> None:
        cluster = self.cluster
        if action.kind == KILL:
            self._kill(action.downtime)
        elif action.kind == RESTART_SIM:
            if self._sim_restart is None or self._sim_restart.done():
                self._mark(f"apiserver restart, down {action.downtime:g}s")
                self._sim_restart = self._spawn(cluster.restart_server(action.downtime))
        elif action.kind == CUT_WATCHES:
            self._cut_watches()
        elif action.kind == EXPIRE_HISTORY:
            cluster.expire_history()
        elif action.kind == DELETE_GANG:
            self._delete_gang(action.pick)
        elif action.kind in (QUEUE_SKEW, QUEUE_RESTORE, QUEUE_ADD, QUEUE_REMOVE):
            self._change_queues(action.kind)

    def _change_queues(self, kind: str) -> None:
        """Reclaim mode: the queues change under the scheduler."""
        api = self.cluster.api
        queues = api.registry.by_key(KAI_QUEUES_KEY)
        try:
            if kind in (QUEUE_SKEW, QUEUE_RESTORE):
                weight = 3 if kind == QUEUE_SKEW else 1
                body = {"spec": {"resources": {"gpu": {"overQuotaWeight": weight}}}}
                api.patch(queues, None, TAKEN, MERGE_PATCH, body)
                self._mark(f"queue {TAKEN}: over-quota weight {weight}")
            elif kind == QUEUE_ADD:
                api.create(queues, None, kai_queue(IDLE))
                self._mark(f"queue {IDLE} created")
            else:
                api.delete(queues, None, IDLE, DeleteOptions(0))
                self._mark(f"queue {IDLE} deleted")
            self.queue_changes += 1
        except ApiError as err:  # the apiserver may be down: the change is skipped, said so
            self._mark(f"queue change {kind} not made: {err}")

    def _delete_gang(self, pick: float) -> None:
        """A user deletes a job: mostly one that runs (wholly bound), sometimes any."""
        names = sorted(self._present)
        complete = [n for n in names if self._bound(n) >= self._present[n].min_member]
        candidates = complete if complete and pick < 0.8 else names
        if not candidates:
            return
        gang = self._present.pop(candidates[int(pick * len(candidates)) % len(candidates)])
        api, ns = self.cluster.api, self.config.namespace
        for pod in pod_manifests(gang, ns):
            with contextlib.suppress(ApiError):
                api.delete(api.rt_pods, ns, pod["metadata"]["name"], DeleteOptions(0))
        if not gang.lone:
            with contextlib.suppress(ApiError):
                api.delete(api.registry.by_key(PODGROUPS_KEY), ns, gang.name, DeleteOptions(0))
        self.gangs_deleted += 1

    def _bound(self, gang_name: str) -> int:
        gang = self._present.get(gang_name)
        if gang is None:
            return 0
        store, key = self.cluster.store, self.cluster.api.rt_pods.storage_key
        count = 0
        for i in range(gang.size):
            pod = store.get(key, self.config.namespace, f"{gang.name}-{i:02d}")
            if pod is not None and pod["spec"].get("nodeName"):
                count += 1
        return count

    # --- the scheduler process -----------------------------------------------------------

    async def _start_scheduler(self) -> None:
        scheduler = self.scheduler
        await scheduler.start()
        self._mark(f"scheduler started (pid {scheduler.pid})")
        self._bindings_since_start = 0
        self._evictions_since_start = 0
        index = scheduler.starts - 1
        triggers = self.plan.kill_at_binding
        self._kill_trigger = triggers[index % len(triggers)] if self.in_chaos else None
        at_eviction = self.plan.kill_at_eviction
        self._eviction_trigger = (
            at_eviction[index % len(at_eviction)] if self.in_chaos and at_eviction else None
        )

    def _kill(self, downtime: float) -> bool:
        """SIGKILL the scheduler (during the chaos only), restart it after ``downtime``."""
        pid = self.scheduler.pid
        during = self.preempt and self._preemption_under_way()
        if self.in_chaos and self.scheduler.kill():
            self._mark(f"SIGKILL scheduler (pid {pid}), down {downtime:g}s")
            self._kill_trigger = self._eviction_trigger = None
            if during:
                self.preemption_kills += 1
            self._spawn(self._restart_after(downtime))
            return True
        return False

    async def _restart_after(self, downtime: float) -> None:
        await self.scheduler.wait()
        await asyncio.sleep(downtime)
        if not self.scheduler.running:
            await self._start_scheduler()

    async def _supervise(self) -> None:
        """Restart a scheduler that exited on its own (recorded), as Kubernetes would; cut
        the watches a planned cut found none of."""
        if self.scheduler.exited_unexpectedly():
            await self._start_scheduler()
        if self._watch_cut_owed and self.in_chaos:
            self._cut_watches()

    def _on_commit(self, storage_key: str, event: StoredEvent) -> None:
        """Count bindings (and, in preempt mode, evictions) as the store commits them; kill
        the scheduler at its planned one."""
        if storage_key != self.cluster.api.rt_pods.storage_key or event.type != MODIFIED:
            return
        if event.prev is None:
            return
        if self.preempt and self._is_eviction(event.prev, event.obj):
            self._on_eviction(event.obj)
            return
        if (event.prev.get("spec") or {}).get("nodeName"):
            return
        if not (event.obj.get("spec") or {}).get("nodeName"):
            return
        self.bindings += 1
        self._bindings_since_start += 1
        if self.preempt:
            self._note_quorum(event.obj)
        trigger = self._kill_trigger
        if trigger is None or not self.in_chaos or self._bindings_since_start < trigger[0]:
            return
        group = (event.obj["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)
        gang = self._present.get(group or "")
        if gang is not None and self._bound(gang.name) < gang.size:
            self.mid_gang_kills += 1
        self._kill(trigger[1])

    # --- preempt mode: evictions as they commit --------------------------------------------

    def _is_eviction(self, prev: Obj, obj: Obj) -> bool:
        """A bound pod of the chaos namespace first gets a deletionTimestamp: in preempt mode
        nothing but an eviction deletes pods gracefully (no "user" deletes a gang there), and
        the Eviction API sets the DisruptionTarget condition just before."""
        meta = obj["metadata"]
        return (
            meta.get("namespace") == self.config.namespace
            and bool(meta.get("deletionTimestamp"))
            and not prev["metadata"].get("deletionTimestamp")
            and bool((obj.get("spec") or {}).get("nodeName"))
        )

    def _on_eviction(self, pod: Obj) -> None:
        """Kill the scheduler at its planned eviction: the eviction is committed and its answer
        not yet sent, so the scheduler dies not knowing whether it went through."""
        self._evictions_since_start += 1
        trigger = self._eviction_trigger
        if trigger is None or not self.in_chaos or self._evictions_since_start < trigger[0]:
            return
        meta = pod["metadata"]
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL) or ""
        waiting = self._marked_not_evicted(group) if group else 0
        self._mark(
            f"eviction #{self._evictions_since_start} since the start: {meta['name']}"
            + (f" ({waiting} marked member(s) of {group} not yet evicted)" if group else "")
        )
        if self._kill(trigger[1]):
            self.eviction_kills += 1
            if waiting:
                self.mid_victim_kills += 1

    def _chaos_pods(self) -> list[Obj]:
        store, key = self.cluster.store, self.cluster.api.rt_pods.storage_key
        return list(store.items(key, self.config.namespace))

    def _marked_not_evicted(self, group: str) -> int:
        """Members of ``group`` the scheduler marked as victims and nobody has evicted yet."""
        count = 0
        for pod in self._chaos_pods():
            meta = pod["metadata"]
            if (meta.get("labels") or {}).get(POD_GROUP_LABEL) != group:
                continue
            if not meta.get("deletionTimestamp") and _preemption_marked(pod):
                count += 1
        return count

    def _preemption_under_way(self) -> bool:
        """A high-priority gang below its quorum has members nominated (a preemption for it
        began and it is not bound yet)."""
        nominated: set[str] = set()
        for pod in self._chaos_pods():
            if (pod.get("status") or {}).get("nominatedNodeName") and not (
                pod.get("spec") or {}
            ).get("nodeName"):
                nominated.add((pod["metadata"].get("labels") or {}).get(POD_GROUP_LABEL, ""))
        return any(
            name in nominated and self._takes(gang) and self._bound(name) < gang.min_member
            for name, gang in self._present.items()
        )

    def _takes(self, gang: GangPlan) -> bool:
        """A gang that must take capacity from others: a preemptor, or a reclaimer."""
        return gang.queue == TAKER if self.reclaim else gang.priority == HIGH

    def _note_quorum(self, pod: Obj) -> None:
        group = (pod["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)
        gang = self._present.get(group or "")
        if gang is not None and self._takes(gang) and self._bound(gang.name) == gang.min_member:
            self._mark(f"{gang.name} has its quorum of {gang.min_member} bound")

    def _mark(self, what: str) -> None:
        self._marks.append((time.monotonic(), what))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- settling and the verdict --------------------------------------------------------

    async def _settle(self) -> float:
        """Faults off; wait until the invariants hold and nothing is left to do (or time out)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        self.plan.faults.calm()
        if self._sim_restart is not None:
            await self._sim_restart
        await self.cluster.start_server()
        pending = list(self._tasks)
        await asyncio.gather(*pending, return_exceptions=True)
        if not self.scheduler.running:
            self.scheduler.exited_unexpectedly()
            await self._start_scheduler()
        clean_since: float | None = None
        while loop.time() - start < self.config.settle:
            await self._supervise()
            if self._settled():
                clean_since = clean_since if clean_since is not None else loop.time()
                if loop.time() - clean_since >= 1.5:
                    break
            else:
                clean_since = None
            await asyncio.sleep(0.25)
        return loop.time() - start

    def _settled(self) -> bool:
        """The invariants hold; in preempt mode also every servable preemptor is bound and no
        evicted pod is still terminating (a judge that sees only free capacity would call a
        preemption in progress settled)."""
        if not self.verdict().clean:
            return False
        if not self.preempt:
            return True
        if any(p["metadata"].get("deletionTimestamp") for p in self._chaos_pods()):
            return False
        return not self.unserved()

    def verdict(self) -> Verdict:
        store, api = self.cluster.store, self.cluster.api
        return judge(
            store.items(api.rt_pods.storage_key),
            store.items(api.rt_nodes.storage_key),
            store.items(api.registry.by_key(PODGROUPS_KEY).storage_key),
        )

    def unserved(self) -> list[str]:
        store, api = self.cluster.store, self.cluster.api
        if self.reclaim:
            return unserved_reclaimers(
                store.items(api.rt_pods.storage_key),
                store.items(api.rt_nodes.storage_key),
                store.items(api.registry.by_key(PODGROUPS_KEY).storage_key),
                self.config.namespace,
                self._taken_share(),
            )
        return unserved_preemptors(
            store.items(api.rt_pods.storage_key),
            store.items(api.rt_nodes.storage_key),
            store.items(api.registry.by_key(PODGROUPS_KEY).storage_key),
            self.config.namespace,
        )

    def _preemption_figures(self, verdict: Verdict) -> dict[str, Any]:
        """What the audit and the API say about the run's preemptions (preempt mode)."""
        ns = self.config.namespace
        posts = [r for r in self.cluster.audit.evictions if r.pod[0] == ns]
        victims = {r.pod[1].rsplit("-", 1)[0] for r in posts if r.evicted}
        partial = [
            text
            for text in verdict.partial_gangs
            if any(text.startswith(f"{ns}/{victim} (") for victim in victims)
        ]
        high = [g for g in self.plan.gangs if self._takes(g) and g.name in self._present]
        return {
            "evictions": sum(1 for r in posts if r.evicted),
            "eviction_posts": len(posts),
            "victim_gangs": len(victims),
            "victim_gangs_partial": partial,
            "preemptors": len(high),
            "preemptors_bound": sum(1 for g in high if self._bound(g.name) >= g.min_member),
            "unserved_preemptors": self.unserved(),
            "eviction_kills": self.eviction_kills,
            "mid_victim_kills": self.mid_victim_kills,
            "preemption_kills": self.preemption_kills,
        }

    def _taken_share(self) -> int:
        """Reclaim mode: the fair share in GPUs of the queue reclaimed from — half the GPUs, or
        all it had if that was less (equal weights; the other asks for its half)."""
        total, _ = cluster_gpus(self.config.nodes)
        start = sum(g.size * g.gpu for g in self.plan.gangs if g.queue == TAKEN)
        return min(start, total // 2)

    def _below_share(self) -> list[str]:
        """Reclaim mode: the queue reclaimed from must end holding at least its fair share."""
        share = self._taken_share()
        held = sum(self._bound(g.name) * g.gpu for g in self.plan.gangs if g.queue == TAKEN)
        if held >= share:
            return []
        return [f"queue {TAKEN} holds {held} GPUs, below its fair share of {share}"]

    def _result(self, settle: float, log_tail: str) -> ChaosResult:
        audit, scheduler = self.cluster.audit, self.scheduler
        marks = self._marks + [
            (c.at, f"409 binding {c.pod[1]} to {c.target}: already on {c.bound_to}")
            for c in audit.conflicts
        ]
        if self.preempt:
            marks += [
                (r.at, f"eviction POST {r.pod[1]}: {r.status}")
                for r in audit.evictions
                if r.pod[0] == self.config.namespace
            ]
        timeline = [(at - self._started_at, what) for at, what in sorted(marks)]
        verdict = self.verdict()
        return ChaosResult(
            config=self.config,
            plan=self.plan.describe(),
            faults=dataclasses.replace(self.plan.faults.counts),
            verdict=verdict,
            kills=scheduler.kills,
            mid_gang_kills=self.mid_gang_kills,
            scheduler_starts=scheduler.starts,
            unexpected_exits=list(scheduler.unexpected_exits),
            gangs_deleted=self.gangs_deleted,
            bindings=self.bindings,
            double_binds=audit.double_binds,
            repeated_binds=audit.repeated_binds,
            pods_bound_twice=sum(1 for n in audit.bindings_accepted.values() if n > 1),
            settle_seconds=settle,
            log_tail=log_tail,
            timeline=timeline,
            queue_below_share=self._below_share() if self.reclaim else [],
            queue_changes=self.queue_changes,
            **(self._preemption_figures(verdict) if self.preempt else {}),
        )


def _preemption_marked(pod: Obj) -> bool:
    """The scheduler's victim mark: DisruptionTarget True, reason PreemptionByScheduler."""
    return any(
        c.get("type") == DISRUPTION_TARGET
        and c.get("status") == "True"
        and c.get("reason") == PREEMPTION_REASON
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _schedulable(node: Obj) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    return not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or [])


def _take(room: Mapping[str, dict[str, int]], shape: Mapping[str, int], count: int) -> bool:
    """Place ``count`` pods shaped ``shape`` first-fit on ``room`` (node → free resources);
    take their resources and say True if all of them fit, else leave ``room`` as it was."""
    taken: list[str] = []
    for node, free in room.items():
        while len(taken) < count and all(free.get(r, 0) >= n for r, n in shape.items() if n > 0):
            for r, n in shape.items():
                free[r] = free.get(r, 0) - n
            taken.append(node)
    if len(taken) == count:
        return True
    for node in taken:
        for r, n in shape.items():
            room[node][r] += n
    return False


def unserved_preemptors(
    pods: Iterable[Obj],
    nodes: Iterable[Obj],
    podgroups: Iterable[Obj],
    namespace: str,
    scheduler_name: str = "gang-scheduler",
) -> list[str]:
    """``chaos-high`` gangs of ``namespace`` short of their quorum that would fit if every
    ``chaos-low`` pod were evicted: preemption should have served them.

    Resource arithmetic, like the judge's fit check (members shaped like the first pending one,
    packed onto schedulable, untainted nodes), but counting low-priority pods' requests as free.
    The gangs are packed one after another into the same room, so two preemptors that each fit
    alone but not together count once: the check asks that what could be served is.
    """
    nodes = list(nodes)
    raws = list(pods)
    low = {
        (p["metadata"].get("namespace", ""), p["metadata"]["name"])
        for p in raws
        if (p.get("spec") or {}).get("priorityClassName") == LOW
    }
    high = {
        (p["metadata"].get("namespace", ""), p["metadata"]["name"])
        for p in raws
        if (p.get("spec") or {}).get("priorityClassName") == HIGH
    }
    parsed = parse_pods(raws)
    free = free_capacity(nodes, [p for p in parsed if p.key not in low])
    room = {
        n["metadata"]["name"]: free.get(n["metadata"]["name"], {}) for n in nodes if _schedulable(n)
    }
    min_members = _min_members(podgroups, namespace)
    gangs: dict[str, tuple[list[PodInfo], list[PodInfo]]] = {}  # name → (bound, pending)
    for pod in parsed:
        if (
            pod.key not in high
            or pod.namespace != namespace
            or pod.scheduler_name != scheduler_name
        ):
            continue
        bound, pending = gangs.setdefault(pod.group or f"pod/{pod.name}", ([], []))
        if pod.assigned:
            bound.append(pod)
        elif not pod.deleting and not pod.terminal:
            pending.append(pod)
    unserved = []
    for name, (bound, pending) in sorted(gangs.items()):
        quorum = 1 if name.startswith("pod/") else min_members.get(name)
        if quorum is None or not pending:
            continue  # no PodGroup: never expected to be scheduled
        need = quorum - len(bound)
        if need <= 0 or need > len(pending):
            continue
        if _take(room, pending[0].requests, need):
            unserved.append(
                f"{namespace}/{name} ({need} of its quorum of {quorum} would fit once the "
                f"{LOW} pods were evicted)"
            )
    return unserved


def unserved_reclaimers(
    pods: Iterable[Obj],
    nodes: Iterable[Obj],
    podgroups: Iterable[Obj],
    namespace: str,
    share: int,
) -> list[str]:
    """``team-b`` gangs of ``namespace`` short of their quorum that reclaim could serve: their
    missing GPUs fit in what is free plus what ``team-a`` can give without going below ``share``
    GPUs (its fair share), in the units reclaim takes — whole gangs, or members above minMember
    (1-GPU pods: only the totals matter). Each gang is judged alone: a plan whose gangs cannot
    give exactly what is missing rightly leaves the last reclaimer waiting, while a scheduler
    that never reclaimed (or stopped short) is caught."""
    raws = [p for p in pods if p["metadata"].get("namespace", "") == namespace]
    parsed = [p for p in parse_pods(raws) if not p.deleting and not p.terminal]
    free = sum(max(0, room.get(GPU, 0)) for room in free_capacity(nodes, parsed).values())
    min_members = _min_members(podgroups, namespace)
    queue: dict[str, str | None] = {}
    bound: dict[str, int] = {}
    for pod in parsed:
        queue[pod.group] = pod.labels.get(KAI_QUEUE_LABEL)
        if pod.assigned:
            bound[pod.group] = bound.get(pod.group, 0) + pod.requests.get(GPU, 0)
    held = sum(n for group, n in bound.items() if queue.get(group) == TAKEN)
    reachable = {0}  # what team-a can give, from its gangs' units
    for group, n in bound.items():
        if queue.get(group) == TAKEN:
            extras = max(0, n - min_members.get(group, n))
            reachable = {r + step for r in reachable for step in {*range(extras + 1), n}}
    unserved = []
    for group in sorted(g for g, q in queue.items() if q == TAKER):
        missing = min_members.get(group, 1) - bound.get(group, 0)
        if missing <= 0:
            continue
        give = [r for r in sorted(reachable) if free + r >= missing and held - r >= share]
        if give:
            unserved.append(
                f"{namespace}/{group} ({missing} GPUs missing: {free} free, and {TAKEN} could "
                f"give {give[0]} staying at or above its fair share of {share})"
            )
    return unserved


def _min_members(podgroups: Iterable[Obj], namespace: str) -> dict[str, int]:
    """Each PodGroup of ``namespace``: its minMember (1 when unset)."""
    return {
        g["metadata"]["name"]: int((g.get("spec") or {}).get("minMember") or 1)
        for g in podgroups
        if g["metadata"].get("namespace", "") == namespace
    }


async def run_chaos(
    config: ChaosConfig, log_dir: Path | None = None, log_level: str = "WARNING"
) -> ChaosResult:
    return await ChaosRun(config, log_dir, log_level).run()


def summary(results: list[ChaosResult]) -> str:
    """One paragraph over many runs: what was injected in total and what broke."""
    mode = {r.config.mode for r in results}
    kinds = {
        "crash": "crash-restart",
        "full": "chaos",
        "preempt": "preemption chaos",
        "reclaim": "reclaim chaos",
    }
    kind = kinds[next(iter(mode))] if len(mode) == 1 else "mixed"
    total = FaultCounts()
    for r in results:
        for name in FaultCounts.__dataclass_fields__:
            setattr(total, name, getattr(total, name) + getattr(r.faults, name))
    failed = [r.config.seed for r in results if not r.ok]
    return (
        f"{len(results)} seeded {kind} runs: {len(results) - len(failed)} OK"
        + (f", FAILED seeds {failed}" if failed else "")
        + f"; {sum(len(r.verdict.partial_gangs) for r in results)} partial gangs, "
        f"{sum(len(r.verdict.overcommitted_nodes) for r in results)} over-committed nodes, "
        f"{sum(r.double_binds for r in results)} double binds, "
        f"{sum(r.pods_bound_twice for r in results)} pods bound twice, "
        f"{sum(len(r.verdict.fitting_unbound) for r in results)} fitting gangs left unbound, "
        f"{sum(len(r.unexpected_exits) for r in results)} unexpected scheduler exits. "
        f"Findings: {sum(r.repeated_binds for r in results)} repeated binding POSTs (409, same "
        f"node), {sum(len(r.verdict.stranded_members) for r in results)} gangs with a fitting "
        "member beyond the quorum left pending.\n"
        f"Injected: {sum(r.kills for r in results)} scheduler SIGKILLs "
        f"({sum(r.mid_gang_kills for r in results)} mid-gang), {total.restarts} apiserver "
        f"restarts, {total.watches_cut} watches cut, {total.history_expiries} history expiries, "
        f"{total.throttled} 429s, {total.server_errors} 500s, {total.events_dropped} dropped "
        f"watch events; {sum(r.bindings for r in results)} bindings, "
        f"{sum(r.gangs_deleted for r in results)} gangs deleted."
        + (_preemption_summary(results) if "preempt" in mode else "")
        + (_preemption_summary(results, "reclaim") if "reclaim" in mode else "")
    )


def _preemption_summary(results: list[ChaosResult], mode: str = "preempt") -> str:
    runs = [r for r in results if r.config.mode == mode]
    if mode == "reclaim":
        return (
            f"\nReclaim: {sum(r.evictions for r in runs)} evictions of "
            f"{sum(r.victim_gangs for r in runs)} victim gangs, "
            f"{sum(len(r.victim_gangs_partial) for r in runs)} left partial; "
            f"{sum(r.preemptors_bound for r in runs)}/{sum(r.preemptors for r in runs)} "
            f"reclaiming gangs bound, {sum(len(r.queue_below_share) for r in runs)} queues left "
            f"below their fair share; {sum(r.eviction_kills for r in runs)} SIGKILLs at an "
            f"eviction ({sum(r.mid_victim_kills for r in runs)} mid-victim-gang), "
            f"{sum(r.queue_changes for r in runs)} queue changes mid-run."
        )
    return (
        f"\nPreemption: {sum(r.evictions for r in runs)} evictions of "
        f"{sum(r.victim_gangs for r in runs)} victim gangs, "
        f"{sum(len(r.victim_gangs_partial) for r in runs)} victim gangs left partial; "
        f"{sum(r.preemptors_bound for r in runs)}/{sum(r.preemptors for r in runs)} preemptor "
        f"gangs bound, {sum(len(r.unserved_preemptors) for r in runs)} unserved preemptors; "
        f"{sum(r.eviction_kills for r in runs)} SIGKILLs at an eviction "
        f"({sum(r.mid_victim_kills for r in runs)} mid-victim-gang), "
        f"{sum(r.preemption_kills for r in runs)} while a preemptor was nominated and not yet "
        "bound."
    )


def run_many(
    config: ChaosConfig,
    runs: int,
    log_dir: Path | None = None,
    quiet: bool = False,
    log_level: str = "WARNING",
) -> list[ChaosResult]:
    """``runs`` runs with seeds ``config.seed``, ``config.seed + 1``, ... (one at a time)."""
    # a client SIGKILLed mid-request makes aiohttp log a traceback: expected here, not news
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    results = []
    for i in range(runs):
        seeded = dataclasses.replace(config, seed=config.seed + i)
        result = asyncio.run(run_chaos(seeded, log_dir, log_level))
        results.append(result)
        if not quiet or not result.ok:
            print(result.report(), flush=True, file=sys.stdout)
    return results
