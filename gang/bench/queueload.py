"""A multi-queue workload: teams' queues kept backlogged, gangs finishing oldest first, and each
queue's share of the GPUs sampled over time.

Why a driver of its own: fair share is a property of a cluster *over time* — who gets the GPUs
that free up — so it is measured as a time-average of what each queue holds while gangs come and
go, not as a single placement. The driver talks to the cluster only through the Kubernetes API
(as a team's jobs would): it creates the queue objects of one queue API (Volcano Queues, KAI
Queues or ElasticQuotas, :func:`queue_objects`), keeps every busy queue backlogged with gangs of
``members`` one-GPU pods, deletes the oldest running gang every ``finish_every`` seconds, and
samples the GPUs bound in each queue. The scheduler tests drive it against the simulator, and
``gang bench --workload queues`` against any cluster.

Each queue's gangs live in a namespace named after the queue (an ElasticQuota is per namespace;
for the other APIs it keeps the counting simple).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gang.models.podgroup import POD_GROUP_GROUP, POD_GROUP_LABEL, POD_GROUP_VERSION
from gang.models.queueapis import GPU, KAI_QUEUE_LABEL

VOLCANO, KAI, ELASTIC_QUOTA = "volcano", "kai", "elasticquota"
APIS = (VOLCANO, KAI, ELASTIC_QUOTA)
SCHEDULER = "gang-scheduler"


@dataclass(frozen=True, slots=True)
class QueueDef:
    """One queue of a scenario, in GPUs; None: not set."""

    name: str
    weight: int = 1
    quota: int | None = None
    limit: int | None = None
    parent: str | None = None
    #: gangs kept waiting in it (0: the queue is idle)
    backlog: int = 4
    #: instead of a backlog: this many gangs, all created ``arrive_at`` seconds into the run
    gangs: int = 0
    arrive_at: float = 0.0


def queue_objects(api: str, queues: Sequence[QueueDef]) -> list[dict[str, Any]]:
    """The queue objects a team using ``api`` would write for ``queues``."""
    out = []
    for q in queues:
        if api == VOLCANO:
            spec: dict[str, Any] = {"weight": q.weight, "reclaimable": True}
            if q.quota is not None:
                spec["deserved"] = {GPU: q.quota}
            if q.limit is not None:
                spec["capability"] = {GPU: q.limit}
            if q.parent is not None:
                spec["parent"] = q.parent
            out.append(_object("scheduling.volcano.sh/v1beta1", "Queue", q.name, spec))
        elif api == KAI:
            gpu: dict[str, Any] = {
                "quota": q.quota if q.quota is not None else 0,
                "overQuotaWeight": q.weight,
                "limit": q.limit if q.limit is not None else -1,
            }
            spec = {"resources": {"gpu": gpu}}
            if q.parent is not None:
                spec["parentQueue"] = q.parent
            out.append(_object("scheduling.run.ai/v2", "Queue", q.name, spec))
        elif api == ELASTIC_QUOTA:
            if q.parent is not None:
                raise ValueError("ElasticQuotas have no parents")
            spec = {}
            if q.quota is not None:
                spec["min"] = {GPU: q.quota}
            if q.limit is not None:
                spec["max"] = {GPU: q.limit}
            body = _object(f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}", "ElasticQuota", q.name, spec)
            body["metadata"]["namespace"] = q.name
            out.append(body)
        else:
            raise ValueError(f"unknown queue API {api!r}: one of {', '.join(APIS)}")
    return out


def _object(api_version: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


def gang_objects(
    api: str, queue: str, name: str, members: int, gpus: int = 1
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A gang of ``members`` pods of ``gpus`` GPUs in ``queue``, as a team on ``api`` writes it:
    a Volcano PodGroup naming the queue, a PodGroup labelled for the KAI queue, or a PodGroup in
    the ElasticQuota's namespace."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if api == VOLCANO:
        group = _object(
            "scheduling.volcano.sh/v1beta1",
            "PodGroup",
            name,
            {"minMember": members, "queue": queue},
        )
        annotations["scheduling.k8s.io/group-name"] = name
    else:
        group = _object(
            f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}", "PodGroup", name, {"minMember": members}
        )
        labels[POD_GROUP_LABEL] = name
        if api == KAI:
            group["metadata"]["labels"] = {KAI_QUEUE_LABEL: queue}
            labels[KAI_QUEUE_LABEL] = queue
    pods = []
    for i in range(members):
        limits = {"cpu": "100m", "memory": "128Mi", GPU: str(gpus)}
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "labels": dict(labels),
                    "annotations": dict(annotations),
                },
                "spec": {
                    "schedulerName": SCHEDULER,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {"name": "main", "image": "trainer:1", "resources": {"limits": limits}}
                    ],
                },
            }
        )
    return group, pods


@dataclass(slots=True)
class Shares:
    """Samples of the GPUs each queue held: (seconds since start, {queue: GPUs})."""

    samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)

    def average(self, start: float, end: float | None = None) -> dict[str, float]:
        """Time-averaged GPUs per queue over samples in [start, end)."""
        window = [s for t, s in self.samples if t >= start and (end is None or t < end)]
        if not window:
            return {}
        queues = {q for s in window for q in s}
        return {q: sum(s.get(q, 0) for s in window) / len(window) for q in sorted(queues)}

    def peak(self, queue: str) -> int:
        return max((s.get(queue, 0) for _, s in self.samples), default=0)


class QueueLoad:
    """Drives one scenario through a kubernetes-asyncio ``ApiClient``."""

    def __init__(
        self,
        client: Any,
        api: str,
        queues: Sequence[QueueDef],
        *,
        members: int = 8,
        finish_every: float = 1.0,
        sample_every: float = 0.25,
    ) -> None:
        from kubernetes_asyncio import client as k8s

        self.core: Any = k8s.CoreV1Api(client)
        self.custom: Any = k8s.CustomObjectsApi(client)
        self.api = api
        self.queues = list(queues)
        self.members = members
        self.finish_every = finish_every
        self.sample_every = sample_every
        self.shares = Shares()
        self.created: dict[str, int] = {q.name: 0 for q in queues}
        self.finished = 0
        #: when each gang was first seen bound (sample time, order seen)
        self._seen_bound: dict[tuple[str, str], tuple[float, int]] = {}

    async def setup(self) -> None:
        """Namespaces and queue objects (parents before children)."""
        for q in self.queues:
            with contextlib.suppress(Exception):  # it may exist already
                await self.core.create_namespace({"metadata": {"name": q.name}})
        for body in queue_objects(self.api, self.queues):
            await self.create(body)

    async def create(self, body: dict[str, Any]) -> None:
        group, _, version = body["apiVersion"].partition("/")
        plural = {"Queue": "queues", "ElasticQuota": "elasticquotas", "PodGroup": "podgroups"}
        namespace = body["metadata"].get("namespace")
        if namespace:
            await self.custom.create_namespaced_custom_object(
                group, version, namespace, plural[body["kind"]], body
            )
        else:
            await self.custom.create_cluster_custom_object(
                group, version, plural[body["kind"]], body
            )

    async def add_gang(self, queue: str) -> None:
        index = self.created[queue]
        self.created[queue] += 1
        group, pods = gang_objects(self.api, queue, f"{queue}-g{index:04d}", self.members)
        group["metadata"]["namespace"] = queue
        await self.create(group)
        await asyncio.gather(*(self.core.create_namespaced_pod(queue, p) for p in pods))

    async def _pods(self) -> list[dict[str, Any]]:
        resp = await self.core.list_pod_for_all_namespaces(_preload_content=False)
        items: list[dict[str, Any]] = (await resp.json())["items"]
        names = {q.name for q in self.queues}
        return [p for p in items if p["metadata"]["namespace"] in names]

    async def _top_up(self, pods: list[dict[str, Any]], elapsed: float = 0.0) -> None:
        """Keep ``backlog`` gangs waiting in every busy queue; a queue of a fixed number of
        ``gangs`` gets them all once its ``arrive_at`` has come."""
        waiting: dict[str, set[str]] = {q.name: set() for q in self.queues}
        for pod in pods:
            if not pod["spec"].get("nodeName"):
                waiting[pod["metadata"]["namespace"]].add(_gang_of(pod))
        for q in self.queues:
            if q.gangs:
                while elapsed >= q.arrive_at and self.created[q.name] < q.gangs:
                    await self.add_gang(q.name)
                continue
            for _ in range(q.backlog - len(waiting[q.name])):
                await self.add_gang(q.name)

    def _sample(self, pods: list[dict[str, Any]], at: float) -> None:
        held: dict[str, int] = {q.name: 0 for q in self.queues}
        for pod in pods:
            if pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
                namespace = pod["metadata"]["namespace"]
                held[namespace] += _gpus(pod)
                key = (namespace, _gang_of(pod))
                if key not in self._seen_bound:
                    self._seen_bound[key] = (at, len(self._seen_bound))
        self.shares.samples.append((at, held))

    async def _finish_oldest(self, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Delete the gang seen running first (it ran longest; the API's timestamps are whole
        seconds, so the driver's own order of seeing gangs bound decides)."""
        running = {
            (p["metadata"]["namespace"], _gang_of(p))
            for p in pods
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        }
        if not running:
            return pods
        namespace, gang = min(running, key=lambda k: self._seen_bound.get(k, (math.inf, 0)))
        members = [
            p for p in pods if p["metadata"]["namespace"] == namespace and _gang_of(p) == gang
        ]
        await asyncio.gather(
            *(
                self.core.delete_namespaced_pod(
                    p["metadata"]["name"], namespace, grace_period_seconds=0
                )
                for p in members
            )
        )
        self.finished += 1
        return [p for p in pods if (p["metadata"]["namespace"], _gang_of(p)) != (namespace, gang)]

    async def run(self, seconds: float, finish: bool = True) -> Shares:
        """Top up, finish and sample for ``seconds``; returns the samples."""
        start = time.monotonic()
        next_finish = start + self.finish_every
        while (now := time.monotonic()) - start < seconds:
            pods = await self._pods()
            self._sample(pods, now - start)
            while finish and now >= next_finish:  # catch up: one finish per interval
                pods = await self._finish_oldest(pods)
                next_finish += self.finish_every
            await self._top_up(pods, now - start)
            await asyncio.sleep(self.sample_every)
        return self.shares


def _gang_of(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return str(labels.get(POD_GROUP_LABEL) or annotations.get("scheduling.k8s.io/group-name") or "")


def _gpus(pod: dict[str, Any]) -> int:
    total = 0
    for container in pod["spec"].get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        total += int(limits.get(GPU, 0))
    return total
