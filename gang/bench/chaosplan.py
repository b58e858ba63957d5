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
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from gang.models.podgroup import POD_GROUP_GROUP, POD_GROUP_LABEL, POD_GROUP_VERSION
from gang.sim.faults import Faults
from gang.sim.nodespec import parse_pools

Mode = Literal["full", "crash", "preempt"]
MODES: tuple[Mode, ...] = ("full", "crash", "preempt")
#: fault actions at planned moments (``kill`` is the scheduler; the others are the apiserver's)
KILL, RESTART_SIM, CUT_WATCHES, EXPIRE_HISTORY, DELETE_GANG = (
    "kill",
    "restart-sim",
    "cut-watches",
    "expire-history",
    "delete-gang",
)
PRIORITIES = {"chaos-high": 1000, "chaos-low": 10}
HIGH, LOW = "chaos-high", "chaos-low"
#: each mode's cluster when ``ChaosConfig.nodes`` is not given
DEFAULT_NODES: dict[str, str] = {
    "full": "12:gpu=8,cpu=32,memory=128Gi,zones=3",
    "crash": "12:gpu=8,cpu=32,memory=128Gi,zones=3",
    "preempt": "8:gpu=8,cpu=32,memory=128Gi",
}
#: each mode's ``ChaosConfig.gangs`` when not given (preempt: the arriving preemptor gangs;
#: the low-priority gangs that fill the cluster first are sized from its capacity)
DEFAULT_GANGS: dict[str, int] = {"full": 24, "crash": 24, "preempt": 4}
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
        if self.config.mode == "preempt":
            low = [g for g in self.gangs if g.priority == LOW]
            high = [g for g in self.gangs if g.priority == HIGH]
            elastic = sum(1 for g in low if g.min_member < g.size)
            text += (
                f": {len(low)} {LOW} filling {sum(g.size * g.gpu for g in low)} of "
                f"{cluster_gpus(self.config.nodes)[0]} GPUs ({elastic} elastic), {len(high)} "
                f"{HIGH} asking {sum(g.min_member * g.gpu for g in high)} GPUs"
            )
        return f"{text}; planned: {planned}"


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


def _preempt_plan(config: ChaosConfig) -> ChaosPlan:
    rng = random.Random(config.seed)
    gangs = _preempt_gangs(rng, config)
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


def make_plan(config: ChaosConfig) -> ChaosPlan:
    if config.mode == "preempt":
        return _preempt_plan(config)
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
            seed=config.seed,
        )
    else:
        faults = Faults(binding_latency=0.02, latency_jitter=0.02, seed=config.seed)
    return ChaosPlan(config, gangs, actions, kill_at_binding, faults)


def podgroup_manifest(gang: GangPlan, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": gang.name, "namespace": namespace},
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
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{gang.name}-{i:02d}", "namespace": namespace, "labels": labels},
            "spec": spec,
        }
        for i in range(gang.size)
    ]
