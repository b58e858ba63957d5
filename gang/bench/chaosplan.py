"""What a chaos run will do, decided up front from its seed: the workload and the fault schedule.

A chaos run that fails must be replayable, so every choice — gang sizes, priorities, arrival
times, which gang a "user" deletes, when the apiserver restarts, when the scheduler is killed and
how long it stays down — is drawn here from one ``random.Random(seed)`` before anything runs.
Timing between processes is never exactly the same twice, but the same seed gives the same
plan, and the plan is printed with the result.

Three modes: ``full`` turns on every fault knob of the simulator as well as scheduler kills;
``crash`` only kills and restarts the scheduler (with up to 20 ms of jitter on requests and a
20 ms slower binding path, so kills fall between a gang's first and last binding).

``preempt`` exists because preemption opens a window the other modes never see: victims are
evicted, take a moment to terminate, and only then does the preemptor bind — a scheduler killed
in between must neither leave a victim gang half-evicted nor book the freed capacity twice. Its
workload is shaped to force that window: the cluster is first filled with ``chaos-low`` gangs
(some elastic, so only their members above ``minMember`` may go), sized from the node spec's GPU
count so they all fit, then ``chaos-high`` gangs arrive that fit only by preempting. Pods get a
termination grace, and the driver runs the simulator's kubelet stand-in so evicted pods linger.
Besides the planned kills (and, rarer than in crash mode, kills at bindings) the scheduler is
killed at its k-th eviction since each start (``kill_at_eviction``), so kills fall between a
victim gang's first and last eviction and between the evictions and the preemptor's binding.
No gang is deleted by a "user" in this mode: every disappearing pod is an eviction.

``reclaim`` does the same for reclaim: two KAI queues of equal weight, ``team-a`` filling most
of the cluster with gangs of 1-GPU pods (some elastic) while ``team-b`` is idle, then
``team-b``'s gangs arrive, together asking for exactly its fair share (half the GPUs): each must
take whole gangs (or members above minMember) back from ``team-a``, never pushing it below its
own half. All gangs have one priority, so only reclaim can serve them. Kills fall at planned
evictions as in ``preempt``, and the queues change under the scheduler mid-run: ``team-a``'s
weight is raised (``team-b``'s share shrinks: its reclaims must stop) and restored, and an idle
queue is created and deleted.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from gang.models.podgroup import POD_GROUP_GROUP, POD_GROUP_LABEL, POD_GROUP_VERSION
from gang.models.queueapis import KAI_QUEUE_LABEL
from gang.sim.faults import Faults
from gang.sim.nodespec import parse_pools

Mode = Literal["full", "crash", "preempt", "reclaim"]
MODES: tuple[Mode, ...] = ("full", "crash", "preempt", "reclaim")
#: fault actions at planned moments (``kill`` is the scheduler; the others are the apiserver's)
KILL, RESTART_SIM, CUT_WATCHES, EXPIRE_HISTORY, DELETE_GANG = (
    "kill",
    "restart-sim",
    "cut-watches",
    "expire-history",
    "delete-gang",
)
#: reclaim mode's queue changes mid-run (KAI Queues in the cluster)
QUEUE_SKEW, QUEUE_RESTORE, QUEUE_ADD, QUEUE_REMOVE = (
    "queue-skew",
    "queue-restore",
    "queue-add",
    "queue-remove",
)
PRIORITIES = {"chaos-high": 1000, "chaos-low": 10}
HIGH, LOW = "chaos-high", "chaos-low"
#: reclaim mode's queues: the one that fills the cluster, the one that comes back, an idle one
TAKEN, TAKER, IDLE = "team-a", "team-b", "team-c"
#: reclaim mode: the share of the GPUs ``team-a`` fills before ``team-b`` comes back
RECLAIM_FILL = 0.875
#: each mode's cluster when ``ChaosConfig.nodes`` is not given
DEFAULT_NODES: dict[str, str] = {
    "full": "12:gpu=8,cpu=32,memory=128Gi,zones=3",
    "crash": "12:gpu=8,cpu=32,memory=128Gi,zones=3",
    "preempt": "8:gpu=8,cpu=32,memory=128Gi",
    "reclaim": "8:gpu=8,cpu=32,memory=128Gi",
}
#: each mode's ``ChaosConfig.gangs`` when not given (preempt: the arriving preemptor gangs;
#: the low-priority gangs that fill the cluster first are sized from its capacity)
DEFAULT_GANGS: dict[str, int] = {"full": 24, "crash": 24, "preempt": 4, "reclaim": 4}
#: preempt mode: share of the cluster's GPUs the low-priority fill takes, and the share all
#: preemptors together ask for (below 1 so every one of them can be served)
PREEMPT_FILL = 0.9
PREEMPT_HIGH_SHARE = 0.75
#: preempt mode: pods' ``terminationGracePeriodSeconds`` (an evicted pod lingers this long, at
#: most the kubelet stand-in's termination delay)
PREEMPT_GRACE_SECONDS = 1


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    seed: int = 1
    #: seconds of faults; then every knob goes off and the run settles
    duration: float = 25.0
    mode: Mode = "full"
    #: at most this many seconds for the scheduler to converge once the faults stop
    settle: float = 30.0
    #: node pools (``gang.sim.nodespec``); empty: the mode's ``DEFAULT_NODES``
    nodes: str = ""
    #: gangs in the workload (preempt: the arriving high-priority ones); 0: the mode's default
    gangs: int = 0
    namespace: str = "chaos"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"chaos mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not self.nodes:
            object.__setattr__(self, "nodes", DEFAULT_NODES[self.mode])
        if self.gangs <= 0:
            object.__setattr__(self, "gangs", DEFAULT_GANGS[self.mode])


@dataclass(frozen=True, slots=True)
class GangPlan:
    name: str
    size: int
    min_member: int
    gpu: int
    cpu: str
    priority: str | None
    #: seconds after the start when the gang's PodGroup and pods are created
    arrive_at: float
    #: the pods' ``terminationGracePeriodSeconds``
    grace_seconds: int = 0
    #: the KAI queue its group and pods are labelled for (reclaim mode), or None
    queue: str | None = None

    @property
    def lone(self) -> bool:
        """A single pod without a PodGroup (a gang of one)."""
        return self.size == 1


@dataclass(frozen=True, slots=True)
class Action:
    at: float
    kind: str
    #: seconds the scheduler stays dead (KILL) or the apiserver stays down (RESTART_SIM)
    downtime: float = 0.0
    #: DELETE_GANG: a draw in [0, 1) that picks among the gangs present at that moment
    pick: float = 0.0


@dataclass(slots=True)
class ChaosPlan:
    config: ChaosConfig
    gangs: list[GangPlan]
    actions: list[Action]
    #: per scheduler start: kill it at its k-th binding, dead for so many seconds (or None)
    kill_at_binding: list[tuple[int, float] | None] = field(default_factory=list)
    faults: Faults = field(default_factory=Faults)
    #: per scheduler start: kill it at its k-th eviction, dead for so many seconds (or None);
    #: empty outside preempt mode
    kill_at_eviction: list[tuple[int, float] | None] = field(default_factory=list)

    def describe(self) -> str:
        kinds: dict[str, int] = {}
        for action in self.actions:
            kinds[action.kind] = kinds.get(action.kind, 0) + 1
        planned = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        pods = sum(g.size for g in self.gangs)
        text = f"{len(self.gangs)} gangs ({pods} pods)"
        if self.config.mode == "reclaim":
            text += self._two_sides(
                [g for g in self.gangs if g.queue == TAKEN],
                [g for g in self.gangs if g.queue == TAKER],
                f"{TAKEN} filling",
                f"{TAKER} gangs",
            )
        if self.config.mode == "preempt":
            low = [g for g in self.gangs if g.priority == LOW]
            text += self._two_sides(
                low,
                [g for g in self.gangs if g.priority == HIGH],
                f"{len(low)} {LOW} filling",
                HIGH,
            )
        return f"{text}; planned: {planned}"

    def _two_sides(
        self, filling: list[GangPlan], taking: list[GangPlan], fill_label: str, take_label: str
    ) -> str:
        """Preempt and reclaim modes: the gangs filling the cluster, and those that must take."""
        elastic = sum(1 for g in filling if g.min_member < g.size)
        return (
            f": {fill_label} {sum(g.size * g.gpu for g in filling)} of "
            f"{cluster_gpus(self.config.nodes)[0]} GPUs ({elastic} elastic), {len(taking)} "
            f"{take_label} asking {sum(g.min_member * g.gpu for g in taking)} GPUs"
        )


def _gang(rng: random.Random, index: int, arrive_at: float) -> GangPlan:
    roll = rng.random()
    if roll < 0.15:
        size = 1
    elif roll < 0.5:
        size = rng.randint(2, 4)
    elif roll < 0.8:
        size = rng.randint(5, 8)
    else:
        size = rng.randint(9, 16)
    gpu = rng.choice((0, 1, 1, 2, 4))
    while gpu and size * gpu > 48:  # at most half the default cluster's GPUs
        gpu //= 2
    cpu = rng.choice(("500m", "1", "2")) if gpu else rng.choice(("2", "4"))
    spare = size > 2 and rng.random() < 0.2  # one member beyond the quorum
    priority = rng.choice((None, "chaos-high", "chaos-low"))
    name = f"solo{index:03d}" if size == 1 else f"g{index:03d}"
    return GangPlan(name, size, size - 1 if spare else size, gpu, cpu, priority, arrive_at)


def cluster_gpus(nodes: str) -> tuple[int, int]:
    """(GPUs in all schedulable untainted pools, GPUs of the smallest such GPU node)."""
    pools = [
        p
        for p in parse_pools(nodes)
        if p.gpu > 0
        and not p.unschedulable
        and not any(t.effect in ("NoSchedule", "NoExecute") for t in p.taints)
    ]
    if not pools:
        return 0, 0
    return sum(p.count * p.gpu for p in pools), min(p.gpu for p in pools)


def _preempt_gangs(rng: random.Random, config: ChaosConfig) -> list[GangPlan]:
    """Low-priority gangs present from the start, filling ``PREEMPT_FILL`` of the GPUs, then
    ``config.gangs`` high-priority gangs arriving over the run that together ask for
    ``PREEMPT_HIGH_SHARE`` of them: each finds the cluster (nearly) full and must preempt."""
    total, per_node = cluster_gpus(config.nodes)
    if total < 4:
        raise ValueError(f"preempt mode needs GPU nodes (at least 4 GPUs), not {config.nodes!r}")
    shapes = [g for g in (1, 2, 4) if g <= per_node] or [1]
    grace = PREEMPT_GRACE_SECONDS
    fill, used = int(PREEMPT_FILL * total), 0
    low: list[tuple[int, int, int, str]] = []  # (gpu, size, min_member, cpu)
    while used < fill:
        remaining = fill - used
        gpu = rng.choice(shapes[:2] + shapes)  # mostly small pods: more, smaller victims
        while gpu > remaining:
            gpu //= 2
        size = min(rng.randint(2, 8), remaining // gpu)
        min_member = size
        if size >= 3 and rng.random() < 0.4:  # elastic: only members above the quorum may go
            min_member = rng.randint(max(1, size // 2), size - 1)
        low.append((gpu, size, min_member, rng.choice(("1", "2"))))
        used += size * gpu
    # named (so queued: same priority and age) largest pods first: GPU counts that divide one
    # another then pack without fragments whatever the node order, so the whole fill binds
    low.sort(key=lambda shape: -shape[0])
    gangs = [
        GangPlan(f"low{i:03d}", size, min_member, gpu, cpu, LOW, 0.0, grace)
        for i, (gpu, size, min_member, cpu) in enumerate(low)
    ]
    # each preemptor asks more than the fill leaves free (so it must preempt), all of them
    # together at most PREEMPT_HIGH_SHARE of the GPUs (so each can be served)
    need, budget = total - fill + 1, int(PREEMPT_HIGH_SHARE * total)
    count = min(config.gangs, budget // need)
    if count < 1:
        raise ValueError(f"preempt mode: {config.nodes!r} is too small to need preemption")
    share = budget / count
    first = max(3.0, 0.2 * config.duration)
    last = max(first, 0.7 * config.duration)
    arrivals = sorted(round(rng.uniform(first, last), 3) for _ in range(count))
    for i, arrive in enumerate(arrivals):
        cap = budget - (count - i - 1) * need  # what this one may take, leaving the others theirs
        want = min(cap, max(need, round(rng.uniform(0.8, 1.2) * share)))
        shapes = [g for g in (1, 2, 4, per_node) if g <= per_node and want // g >= 2]
        gpu = rng.choice([g for g in shapes if want // g * g >= need] or [1])
        size = want // gpu
        budget -= size * gpu
        elastic = size >= 3 and (size - 1) * gpu >= need and rng.random() < 0.25
        min_member = size - 1 if elastic else size
        cpu = rng.choice(("500m", "1"))
        gangs.append(GangPlan(f"high{i:03d}", size, min_member, gpu, cpu, HIGH, arrive, grace))
    return gangs


def _preempt_plan(
    config: ChaosConfig,
    workload: Callable[[random.Random, ChaosConfig], list[GangPlan]] | None = None,
) -> ChaosPlan:
    rng = random.Random(config.seed)
    gangs = (workload or _preempt_gangs)(rng, config)
    gangs.sort(key=lambda g: (g.arrive_at, g.name))
    actions: list[Action] = []
    at = rng.uniform(2.0, 4.0)
    while at < config.duration:
        actions.append(Action(round(at, 3), KILL, round(rng.uniform(0.0, 0.6), 3)))
        at += rng.uniform(2.0, 4.0)
    kill_at_binding: list[tuple[int, float] | None] = [
        (rng.randint(1, 12), round(rng.uniform(0.0, 0.6), 3)) if rng.random() < 0.3 else None
        for _ in range(64)
    ]
    kill_at_eviction: list[tuple[int, float] | None] = [
        (rng.randint(1, 4), round(rng.uniform(0.0, 0.6), 3)) if rng.random() < 0.85 else None
        for _ in range(64)
    ]
    faults = Faults(binding_latency=0.02, latency_jitter=0.02, seed=config.seed)
    return ChaosPlan(config, gangs, actions, kill_at_binding, faults, kill_at_eviction)


def _reclaim_gangs(rng: random.Random, config: ChaosConfig) -> list[GangPlan]:
    """``team-a``'s gangs of 1-GPU pods filling ``RECLAIM_FILL`` of the GPUs from the start, then
    ``config.gangs`` of ``team-b``'s arriving over the run, together asking for half the GPUs:
    ``team-b``'s fair share with equal weights, all of it reclaimable since ``team-a`` holds
    more than its own half and whole units of 1 GPU let it give back exactly down to it."""
    total, _ = cluster_gpus(config.nodes)
    if total < 8:
        raise ValueError(f"reclaim mode needs GPU nodes (at least 8 GPUs), not {config.nodes!r}")
    grace = PREEMPT_GRACE_SECONDS
    fill, used = int(RECLAIM_FILL * total), 0
    gangs: list[GangPlan] = []
    while used < fill:
        # gangs of 2 or 4 GPUs: whatever team-a holds above its half, whole gangs can give
        # back exactly the 8-GPU steps team-b asks in (the floor never has to be crossed)
        size = min(rng.choice((2, 4, 4)), fill - used)
        min_member = size
        if size == 4 and rng.random() < 0.4:  # elastic: members above the quorum go first
            min_member = rng.randint(2, 3)
        gangs.append(
            GangPlan(f"a{len(gangs):03d}", size, min_member, 1, "1", None, 0.0, grace, TAKEN)
        )
        used += size
    share = total // 2
    count = max(1, min(config.gangs, share // 8))
    first = max(3.0, 0.2 * config.duration)
    last = max(first, 0.6 * config.duration)
    arrivals = sorted(round(rng.uniform(first, last), 3) for _ in range(count))
    sizes = [share // count + (1 if i < share % count else 0) for i in range(count)]
    for i, (arrive, size) in enumerate(zip(arrivals, sizes, strict=True)):
        gangs.append(GangPlan(f"b{i:03d}", size, size, 1, "1", None, arrive, grace, TAKER))
    return gangs


def _reclaim_plan(config: ChaosConfig) -> ChaosPlan:
    plan = _preempt_plan(config, _reclaim_gangs)
    rng = random.Random(config.seed + 1)
    d = config.duration
    skew = round(rng.uniform(0.3, 0.45) * d, 3)
    added = round(rng.uniform(0.2, 0.4) * d, 3)
    plan.actions += [
        Action(skew, QUEUE_SKEW),
        Action(round(skew + rng.uniform(0.1, 0.2) * d, 3), QUEUE_RESTORE),
        Action(added, QUEUE_ADD),
        Action(round(added + rng.uniform(0.1, 0.3) * d, 3), QUEUE_REMOVE),
    ]
    plan.actions.sort(key=lambda a: (a.at, a.kind))
    return plan


def kai_queue(name: str, weight: float = 1) -> dict[str, Any]:
    """A KAI Queue with no quota, of ``weight`` over quota (reclaim mode)."""
    gpu = {"quota": 0, "overQuotaWeight": weight, "limit": -1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"resources": {"gpu": gpu}},
    }


def make_plan(config: ChaosConfig) -> ChaosPlan:
    if config.mode == "preempt":
        return _preempt_plan(config)
    if config.mode == "reclaim":
        return _reclaim_plan(config)
    rng = random.Random(config.seed)
    duration = config.duration
    gangs = []
    for i in range(config.gangs):
        arrive = 0.0 if rng.random() < 0.4 else round(rng.uniform(0.0, 0.7 * duration), 3)
        gangs.append(_gang(rng, i, arrive))
    gangs.sort(key=lambda g: (g.arrive_at, g.name))
    actions: list[Action] = []
    full = config.mode == "full"

    def every(kind: str, low: float, high: float, downtime: tuple[float, float]) -> None:
        at = rng.uniform(low, high)
        while at < duration:
            actions.append(Action(round(at, 3), kind, round(rng.uniform(*downtime), 3)))
            at += rng.uniform(low, high)

    if full:
        every(KILL, 2.0, 5.0, (0.0, 1.0))
    else:
        every(KILL, 1.5, 3.5, (0.0, 0.8))
    at = rng.uniform(1.0, 3.0)
    while at < duration:
        actions.append(Action(round(at, 3), DELETE_GANG, pick=rng.random()))
        at += rng.uniform(1.0, 3.0)
    if full:
        every(RESTART_SIM, 4.0, 9.0, (0.1, 1.0))
        every(CUT_WATCHES, 2.0, 5.0, (0.0, 0.0))
        every(EXPIRE_HISTORY, 3.0, 7.0, (0.0, 0.0))
    actions.sort(key=lambda a: (a.at, a.kind))
    kill_at_binding: list[tuple[int, float] | None] = [
        (rng.randint(1, 12), round(rng.uniform(0.0, 0.8), 3)) if rng.random() < 0.6 else None
        for _ in range(64)
    ]
    if full:
        faults = Faults(
            latency=0.002,
            latency_jitter=0.01,
            throttle_rate=0.05,
            retry_after_seconds=1,
            error_rate=0.05,
            watch_drop_after=round(rng.uniform(2.0, 4.0), 3),
            binding_latency=0.01,
            drop_event_rate=0.05,
            drop_first_event=True,
            seed=config.seed,
        )
    else:
        faults = Faults(binding_latency=0.02, latency_jitter=0.02, seed=config.seed)
    return ChaosPlan(config, gangs, actions, kill_at_binding, faults)


def podgroup_manifest(gang: GangPlan, namespace: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": gang.name, "namespace": namespace}
    if gang.queue:
        meta["labels"] = {KAI_QUEUE_LABEL: gang.queue}
    return {
        "apiVersion": f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {"minMember": gang.min_member, "scheduleTimeoutSeconds": 10},
    }


def pod_manifests(gang: GangPlan, namespace: str) -> list[dict[str, Any]]:
    limits = {"cpu": gang.cpu, "memory": "1Gi"}
    if gang.gpu:
        limits["nvidia.com/gpu"] = str(gang.gpu)
    spec: dict[str, Any] = {
        "schedulerName": "gang-scheduler",
        "terminationGracePeriodSeconds": gang.grace_seconds,
        "containers": [{"name": "main", "image": "trainer:1", "resources": {"limits": limits}}],
    }
    if gang.priority:
        spec["priorityClassName"] = gang.priority
    labels = {} if gang.lone else {POD_GROUP_LABEL: gang.name}
    if gang.queue:
        labels[KAI_QUEUE_LABEL] = gang.queue
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{gang.name}-{i:02d}", "namespace": namespace, "labels": labels},
            "spec": spec,
        }
        for i in range(gang.size)
    ]
