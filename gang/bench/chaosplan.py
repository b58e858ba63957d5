"""What a chaos run will do, decided up front from its seed: the workload and the fault schedule.

A chaos run that fails must be replayable, so every choice — gang sizes, priorities, arrival
times, which gang a "user" deletes, when the apiserver restarts, when the scheduler is killed and
how long it stays down — is drawn here from one ``random.Random(seed)`` before anything runs.
Timing between processes is never exactly the same twice, but the same seed gives the same
plan, and the plan is printed with the result.

Two modes: ``full`` turns on every fault knob of the simulator as well as scheduler kills;
``crash`` only kills and restarts the scheduler (with up to 20 ms of jitter on requests and a
20 ms slower binding path, so kills fall between a gang's first and last binding).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from gang.models.podgroup import POD_GROUP_GROUP, POD_GROUP_LABEL, POD_GROUP_VERSION
from gang.sim.faults import Faults

Mode = Literal["full", "crash"]
#: fault actions at planned moments (``kill`` is the scheduler; the others are the apiserver's)
KILL, RESTART_SIM, CUT_WATCHES, EXPIRE_HISTORY, DELETE_GANG = (
    "kill",
    "restart-sim",
    "cut-watches",
    "expire-history",
    "delete-gang",
)
PRIORITIES = {"chaos-high": 1000, "chaos-low": 10}


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    seed: int = 1
    #: seconds of faults; then every knob goes off and the run settles
    duration: float = 25.0
    mode: Mode = "full"
    #: at most this many seconds for the scheduler to converge once the faults stop
    settle: float = 30.0
    nodes: str = "12:gpu=8,cpu=32,memory=128Gi,zones=3"
    gangs: int = 24
    namespace: str = "chaos"


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

    def describe(self) -> str:
        kinds: dict[str, int] = {}
        for action in self.actions:
            kinds[action.kind] = kinds.get(action.kind, 0) + 1
        planned = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        pods = sum(g.size for g in self.gangs)
        return f"{len(self.gangs)} gangs ({pods} pods); planned: {planned}"


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


def make_plan(config: ChaosConfig) -> ChaosPlan:
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
        "terminationGracePeriodSeconds": 0,
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
