"""Benchmark workloads: a cluster shape and a stream of gangs, reproducible from a seed.

A benchmark is only comparable if the same flags give the same pods. ``BenchConfig`` is the whole
description (flags or a YAML file); ``generate`` turns it into PodGroups and pods
deterministically: gang sizes drawn uniformly from ``[min_gang, max_gang]`` until ``pods`` pods
exist, priorities drawn from ``priorities``, every member requesting ``gpus_per_pod`` GPUs (or
only cpu/memory when 0). ``rules`` gives every member placement rules against its own gang, as
MPI and training jobs write them: ``one-per-node`` (required anti-affinity on the hostname) and
``zone-spread`` (maxSkew 1 over zones, DoNotSchedule).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gang.models.podgroup import POD_GROUP_GROUP, POD_GROUP_LABEL, POD_GROUP_VERSION
from gang.models.queueapis import KAI_QUEUE_LABEL
from gang.sim.latency import parse_latency

NAMESPACE = "bench"
Rule = Literal["one-per-node", "zone-spread"]
#: the Services around the workload: none, or one per member as the v1 training operator makes
Services = Literal["none", "per-replica"]
#: the v1 training operator's pod labels (kubeflow/common's constants; it sets the deprecated
#: keys group-name, job-name, replica-type and replica-index beside them); its per-replica
#: Service selects a member by all of them
OPERATOR_NAME_LABEL: Final = "training.kubeflow.org/operator-name"
JOB_NAME_LABEL: Final = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL: Final = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL: Final = "training.kubeflow.org/replica-index"
HOSTNAME: Final = "kubernetes.io/hostname"
ZONE: Final = "topology.kubernetes.io/zone"


#: the benchmark's default node: 8 GPUs, as the default workload's 1-GPU pods expect
DEFAULT_NODE_SHAPE: Final = "gpu=8,cpu=64,memory=512Gi,zones=8"


def shaped(nodes: str) -> str:
    """A node spec with a bare count (``500``) made that many nodes of the default shape."""
    return f"{nodes.strip()}:{DEFAULT_NODE_SHAPE}" if nodes.strip().isdigit() else nodes


class BenchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: node pools, the simulator's short spec (see gang/sim/nodespec.py); a bare count is that
    #: many nodes of the default shape (a node without GPUs fits none of the GPU pods)
    nodes: str = f"5000:{DEFAULT_NODE_SHAPE}"
    #: total pods to create, in gangs of min_gang..max_gang members
    pods: int = Field(default=20_000, ge=1)
    min_gang: int = Field(default=4, ge=1)
    max_gang: int = Field(default=64, ge=1)
    gpus_per_pod: int = Field(default=1, ge=0)
    cpu_per_pod: str = "500m"
    memory_per_pod: str = "1Gi"
    #: PriorityClass values to draw from (created as bench-p<value>); empty: no priorities
    priorities: list[int] = Field(default_factory=list)
    #: "all": every pod exists before the scheduler starts (scheduler_perf style);
    #: "stream": gangs are created at ``rate`` gangs per second while it runs
    arrival: Literal["all", "stream"] = "all"
    rate: float = Field(default=50.0, gt=0)
    seed: int = 1
    #: give up waiting after this many seconds
    timeout_seconds: float = Field(default=600.0, gt=0)
    #: the scheduler's own settings overrides (GANG_SCHEDULER__* equivalents), e.g. {"qps": 5000}
    scheduler: dict[str, Any] = Field(default_factory=dict)
    #: gangs spread round-robin over this many KAI queues of equal weight (0: no queues)
    queues: int = Field(default=0, ge=0)
    #: placement rules every member states against its own gang
    rules: list[Rule] = Field(default_factory=list)
    #: "per-replica": every member carries the v1 training operator's labels and a headless
    #: Service of its own selects it by them, as that operator's TFJob, MXJob, PaddleJob and
    #: XGBoostJob controllers make one per replica (System default spreading then asks about
    #: every member, among as many Services as pods)
    services: Services = "none"
    #: after the workload is bound, a gang of this many members at a higher priority than
    #: every workload gang arrives and must preempt (0: no such phase)
    preemptor: int = Field(default=0, ge=0)
    #: GPUs per preemptor member (8: whole nodes of the default pool)
    preemptor_gpus: int = Field(default=8, ge=0)
    #: after gang's run, the same pods bound by a binder that knows the answer
    #: (gang.bench.ceiling), with this many bindings in flight per segment; empty: no ceiling
    ceiling_levels: list[int] = Field(default_factory=lambda: [64, 128, 256])
    #: the simulator's API latency model (``gang sim serve --api-latency``): "none", "real",
    #: or knobs such as "workers=16,service=17ms"; ignored against a real cluster
    api_latency: str = "none"

    @field_validator("nodes")
    @classmethod
    def _shaped(cls, value: str) -> str:
        return shaped(value)

    @field_validator("ceiling_levels")
    @classmethod
    def _levels(cls, levels: list[int]) -> list[int]:
        if any(level < 1 for level in levels):
            raise ValueError("ceiling levels are bindings in flight: positive integers")
        return levels

    @field_validator("api_latency")
    @classmethod
    def _latency(cls, spec: str) -> str:
        parse_latency(spec)  # its ValueError names the bad part, before any process starts
        return spec

    @model_validator(mode="after")
    def _sizes(self) -> BenchConfig:
        if self.max_gang < self.min_gang:
            raise ValueError("max_gang must not be smaller than min_gang")
        return self


@dataclass(frozen=True, slots=True)
class GangSpec:
    name: str
    size: int
    priority: int | None
    #: the KAI queue it is in (``BenchConfig.queues``), or None
    queue: str | None = None


def plan(config: BenchConfig) -> list[GangSpec]:
    rng = random.Random(config.seed)
    gangs: list[GangSpec] = []
    left = config.pods
    while left > 0:
        size = min(left, rng.randint(config.min_gang, config.max_gang))
        priority = rng.choice(config.priorities) if config.priorities else None
        queue = f"bench-q{len(gangs) % config.queues}" if config.queues else None
        gangs.append(GangSpec(f"g{len(gangs):05d}", size, priority, queue))
        left -= size
    return gangs


def queue_objects(config: BenchConfig) -> list[dict[str, Any]]:
    """``queues`` KAI queues of equal weight and no quota: fair share alone divides the
    cluster, and the scheduler ranks queues before every pop."""
    return [
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": f"bench-q{i}"},
            "spec": {"resources": {"gpu": {"quota": 0, "overQuotaWeight": 1, "limit": -1}}},
        }
        for i in range(config.queues)
    ]


#: the preemptor gang's name and its PriorityClass value (above every workload priority)
PREEMPTOR: Final = "preemptor"
PREEMPTOR_PRIORITY: Final = 1_000_000


def preemptor_gang(config: BenchConfig) -> tuple[GangSpec, BenchConfig]:
    """The preemptor phase's gang, and the config its pods are made from."""
    spec = GangSpec(PREEMPTOR, config.preemptor, PREEMPTOR_PRIORITY)
    return spec, config.model_copy(update={"gpus_per_pod": config.preemptor_gpus, "rules": []})


def podgroup(gang: GangSpec) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": gang.name, "namespace": NAMESPACE}
    if gang.queue:
        meta["labels"] = {KAI_QUEUE_LABEL: gang.queue}
    return {
        "apiVersion": f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {"minMember": gang.size, "scheduleTimeoutSeconds": 120},
    }


def rules_spec(gang: str, rules: list[Rule]) -> dict[str, Any]:
    """The pod spec fields stating ``rules`` against the members of ``gang``."""
    own = {"labelSelector": {"matchLabels": {POD_GROUP_LABEL: gang}}}
    spec: dict[str, Any] = {}
    if "one-per-node" in rules:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{**own, "topologyKey": HOSTNAME}]
            }
        }
    if "zone-spread" in rules:
        spec["topologySpreadConstraints"] = [
            {**own, "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
        ]
    return spec


def pods(
    gang: GangSpec,
    config: BenchConfig,
    scheduler_name: str = "gang-scheduler",
    node_selector: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The gang's member pods.

    ``node_selector`` pins them to the benchmark's own nodes: a real-cluster run passes
    ``{"gang-bench": "1"}`` (see ``gang.bench.cluster``) so no benchmark pod can land on a real
    node. A simulator run passes none — every simulated node is the benchmark's — so its figures
    do not include a node-label filter per placement.
    """
    limits = {"cpu": config.cpu_per_pod, "memory": config.memory_per_pod}
    if config.gpus_per_pod:
        limits["nvidia.com/gpu"] = str(config.gpus_per_pod)
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "pause:3", "resources": {"limits": limits}}],
    }
    if gang.priority is not None:
        spec["priorityClassName"] = f"bench-p{gang.priority}"
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    spec.update(rules_spec(gang.name, config.rules))
    members = member_pods(gang.name, gang.size, spec)
    for i, pod in enumerate(members):
        labels = pod["metadata"]["labels"]
        if gang.queue:
            labels = {**labels, KAI_QUEUE_LABEL: gang.queue}
        if config.services == "per-replica":
            labels = {**labels, **replica_labels(gang.name, i)}
        pod["metadata"]["labels"] = labels
    return members


def replica_labels(job: str, index: int) -> dict[str, str]:
    """What the v1 training operator labels a worker with: kubeflow/common's ``GenLabels``
    plus its replica's type and index, each also under its deprecated key, as it sets them."""
    return {
        OPERATOR_NAME_LABEL: "tfjob-controller",
        "group-name": "kubeflow.org",
        JOB_NAME_LABEL: job,
        "job-name": job,
        REPLICA_TYPE_LABEL: "worker",
        "replica-type": "worker",
        REPLICA_INDEX_LABEL: str(index),
        "replica-index": str(index),
    }


def services(gang: GangSpec, config: BenchConfig) -> list[dict[str, Any]]:
    """The Services around ``gang``'s members: for "per-replica", the headless Service the
    training operator makes per replica (``CreateNewService``), named and labelled as it does."""
    if config.services != "per-replica":
        return []
    out = []
    for i in range(gang.size):
        selector = replica_labels(gang.name, i)
        meta = {"name": f"{gang.name}-worker-{i}", "namespace": NAMESPACE, "labels": selector}
        spec = {"clusterIP": "None", "selector": selector}
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec})
    return out


def member_pods(
    group: str, size: int, spec: dict[str, Any], annotations: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """``size`` benchmark pods of PodGroup ``group`` sharing ``spec`` (and ``annotations``)."""
    metadata: dict[str, Any] = {
        "namespace": NAMESPACE,
        "labels": {POD_GROUP_LABEL: group, "gang-bench": "1"},
    }
    if annotations:
        metadata["annotations"] = annotations
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**metadata, "name": f"{group}-{i:03d}"},
            "spec": spec,
        }
        for i in range(size)
    ]
