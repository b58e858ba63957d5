"""The mixed-stream workload: small gangs arriving and finishing all the time, big gangs now and
then — the load under which a big gang starves.

A scheduler that takes gangs in queue order but skips one that does not fit lets every GPU a
finishing pod frees go to the small gangs queued behind a big one, so on a loaded cluster the
big gang waits until the stream dries up. Reservations (hold the soonest-free nodes for the
queue's head) and backfill (let others use held capacity only if they end before the
reservation starts) are meant to fix that without idling the cluster. Measuring it takes what
the all-at-once workload (``gang.bench.workload``) lacks: arrivals *and* finishes over time, run
times the scheduler can read, and a steady overload.

Every pod carries its truth and its declaration: ``gang.sim/run-seconds`` tells the
simulator's kubelet when to finish it, ``gang.scheduling/expected-run-seconds`` tells the
scheduler how long it should run (equal by default, optionally pessimistic-noisy; optionally an
``activeDeadlineSeconds`` too). All gangs share one priority, so only queue order and
reservations decide. The plan is a pure function of the config: the same seed gives the same
gangs at the same times, so reservations on and off run the same workload.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gang.bench.workload import GangSpec, member_pods, podgroup
from gang.sim.kubelet import RUN_SECONDS
from gang.sim.nodespec import GPU_RESOURCE, NodeSpecError, parse_pools
from gang.state.podinfo import EXPECTED_RUN_ANNOTATION

Kind = Literal["big", "small"]


class MixedStreamConfig(BaseModel):
    """The whole description of a mixed-stream run (``gang bench --workload mixed-stream``)."""

    model_config = ConfigDict(extra="forbid")

    #: node pools, the simulator's short spec (see gang/sim/nodespec.py)
    nodes: str = "32:gpu=8,cpu=64,memory=512Gi"
    seed: int = 1
    #: seconds during which gangs arrive; after it none does
    duration: float = Field(default=90.0, gt=0)
    #: GPU-seconds the whole workload (small and big gangs) asks for per second, as a share of
    #: the cluster's GPUs: above 1 the queue never empties while gangs arrive
    load: float = Field(default=1.2, gt=0)
    #: small gangs: members (one size drawn uniformly per gang), GPUs per member, and run times
    #: from a lognormal (median, sigma) clipped to [min, max]: mostly short, some long
    small_min_members: int = Field(default=1, ge=1)
    small_max_members: int = Field(default=8, ge=1)
    small_gpus: int = Field(default=1, ge=1)
    small_run_median: float = Field(default=8.0, gt=0)
    small_run_sigma: float = Field(default=0.8, ge=0)
    small_run_min: float = Field(default=2.0, gt=0)
    small_run_max: float = Field(default=40.0, gt=0)
    #: when the small stream starts (after the first big gang, which then finds the cluster empty)
    small_start: float = Field(default=1.0, ge=0)
    #: big gangs: members x GPUs (the default: 16 whole nodes, half the default cluster), the
    #: first at ``big_start``, then every ``big_interval`` seconds; run times uniform in
    #: [big_run_min, big_run_max]
    big_members: int = Field(default=16, ge=1)
    big_gpus: int = Field(default=8, ge=1)
    big_start: float = Field(default=0.0, ge=0)
    big_interval: float = Field(default=30.0, gt=0)
    big_run_min: float = Field(default=15.0, gt=0)
    big_run_max: float = Field(default=25.0, gt=0)
    #: CPU cores and memory (GiB) requested per GPU, so every member requests three resources
    cpu_per_gpu: float = Field(default=4.0, ge=0)
    memory_per_gpu_gib: float = Field(default=32.0, ge=0)
    #: declared run time = true run time x uniform(1, 1 + noise): declarations err long
    declared_noise: float = Field(default=0.0, ge=0)
    #: if set, every pod gets ``activeDeadlineSeconds = ceil(declared x factor)``
    deadline_factor: float | None = Field(default=None, gt=0)
    #: the simulated kubelet's delay from a binding to Running
    start_delay: float = Field(default=0.1, ge=0)
    #: reservations on (the scheduler's default) or off
    reservations: bool = True
    #: the scheduler's own settings overrides (GANG_SCHEDULER__* equivalents)
    scheduler: dict[str, Any] = Field(default_factory=dict)
    #: give up after this many seconds (unbound big gangs are reported with their wait so far)
    timeout_seconds: float = Field(default=300.0, gt=0)
    #: a big gang is "on target" if bound within max(factor x min wait, min wait + allowance)
    target_factor: float = Field(default=1.2, ge=1)
    latency_allowance: float = Field(default=1.0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> MixedStreamConfig:
        if self.small_max_members < self.small_min_members:
            raise ValueError("small_max_members must not be smaller than small_min_members")
        if self.small_run_max < self.small_run_min:
            raise ValueError("small_run_max must not be smaller than small_run_min")
        if self.big_run_max < self.big_run_min:
            raise ValueError("big_run_max must not be smaller than big_run_min")
        if "reservations" in self.scheduler:
            raise ValueError("set reservations (or --reservations), not scheduler.reservations")
        try:
            gpus = total_gpus(self.nodes)
        except NodeSpecError as err:
            raise ValueError(f"nodes: {err}") from None
        if gpus <= 0:
            raise ValueError("the cluster has no GPUs")
        if self.big_members * self.big_gpus > gpus:
            raise ValueError(f"a big gang needs more GPUs than the cluster's {gpus}")
        if small_gang_rate(self) <= 0:
            raise ValueError(
                f"the big gangs alone ask for {big_load(self):.2f} of the GPUs, at least the "
                f"load ({self.load}): raise load or big_interval"
            )
        return self


@dataclass(frozen=True, slots=True)
class StreamGang:
    """One planned gang: created ``at`` seconds after the start, ``size`` members of ``gpus``
    GPUs each, running ``run_seconds`` and declaring ``declared_seconds``."""

    name: str
    kind: Kind
    at: float
    size: int
    gpus: int
    run_seconds: float
    declared_seconds: float

    @property
    def big(self) -> bool:
        return self.kind == "big"


def total_gpus(nodes: str) -> int:
    return sum(pool.count * pool.gpu for pool in parse_pools(nodes))


def _small_mean_run(config: MixedStreamConfig) -> float:
    """The mean of the clipped lognormal, by quadrature (deterministic, no sampling)."""
    mu, points = math.log(config.small_run_median), 2000
    normal = NormalDist()
    total = 0.0
    for i in range(points):
        draw = math.exp(mu + config.small_run_sigma * normal.inv_cdf((i + 0.5) / points))
        total += min(config.small_run_max, max(config.small_run_min, draw))
    return total / points


def big_load(config: MixedStreamConfig) -> float:
    """The big gangs' share of the GPUs (GPU-seconds per second over the cluster's GPUs)."""
    mean_run = (config.big_run_min + config.big_run_max) / 2
    per_second = config.big_members * config.big_gpus * mean_run / config.big_interval
    return per_second / total_gpus(config.nodes)


def small_gang_rate(config: MixedStreamConfig) -> float:
    """Small gangs per second that bring the offered load to ``config.load``."""
    mean_members = (config.small_min_members + config.small_max_members) / 2
    per_gang = mean_members * config.small_gpus * _small_mean_run(config)
    return (config.load - big_load(config)) * total_gpus(config.nodes) / per_gang


def plan(config: MixedStreamConfig) -> list[StreamGang]:
    """The gangs in creation order. Names carry the order (``g00012-big``): a queue sorted by
    age, then name, sees them in exactly this order even within one creation second."""
    rng = random.Random(config.seed)
    drafts: list[tuple[float, Kind, int, int, float]] = []
    at = config.big_start
    while at < config.duration:
        run = rng.uniform(config.big_run_min, config.big_run_max)
        drafts.append((at, "big", config.big_members, config.big_gpus, run))
        at += config.big_interval
    rate = small_gang_rate(config)
    mu = math.log(config.small_run_median)
    at = config.small_start
    while True:
        at += rng.expovariate(rate)
        if at >= config.duration:
            break
        size = rng.randint(config.small_min_members, config.small_max_members)
        run = min(
            config.small_run_max,
            max(config.small_run_min, rng.lognormvariate(mu, config.small_run_sigma)),
        )
        drafts.append((at, "small", size, config.small_gpus, run))
    drafts.sort(key=lambda d: (d[0], d[1] != "big"))  # a big gang first at the same instant
    gangs: list[StreamGang] = []
    for index, (at, kind, size, gpus, run) in enumerate(drafts):
        declared = (
            run * rng.uniform(1.0, 1.0 + config.declared_noise) if config.declared_noise else run
        )
        gangs.append(
            StreamGang(
                f"g{index:05d}-{kind}",
                kind,
                round(at, 3),
                size,
                gpus,
                round(run, 1),
                round(declared, 1),
            )
        )
    return gangs


def pods(gang: StreamGang, config: MixedStreamConfig) -> list[dict[str, Any]]:
    """The gang's member pods, requesting GPUs, CPU and memory as limits (requests follow)."""
    limits = {
        GPU_RESOURCE: str(gang.gpus),
        "cpu": f"{round(config.cpu_per_gpu * gang.gpus * 1000)}m",
        "memory": f"{round(config.memory_per_gpu_gib * gang.gpus * 1024)}Mi",
    }
    spec: dict[str, Any] = {
        "schedulerName": "gang-scheduler",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "pause:3", "resources": {"limits": limits}}],
    }
    if config.deadline_factor is not None:
        spec["activeDeadlineSeconds"] = max(
            1, math.ceil(gang.declared_seconds * config.deadline_factor)
        )
    annotations = {
        RUN_SECONDS: f"{gang.run_seconds:g}",
        EXPECTED_RUN_ANNOTATION: f"{gang.declared_seconds:g}",
    }
    return member_pods(gang.name, gang.size, spec, annotations)


def stream_podgroup(gang: StreamGang) -> dict[str, Any]:
    """The gang's PodGroup (minMember = size), as the all-at-once workload writes it."""
    return podgroup(GangSpec(gang.name, gang.size, None))
