"""Reclaim against KAI Scheduler's own reclaim tables, replayed through gang's scheduling cycle.

``tests/data/kai/reclaim.yaml`` (``reclaim_test.go``, 40 cases) and
``tests/data/kai/reclaim_elastic.yaml`` (``reclaim_elastic_test.go``, 11 cases) hold KAI's
reclaim action tests as data: nodes, queues (KAI ``Queue`` objects with departments as parents),
running and pending jobs, and which tasks end evicted (``Releasing``), placed (``Pipelined``) or
untouched. Each case is turned into the objects a cluster would hold — nodes, KAI Queues, PodGroups
labelled for their queue, pods (bound or pending) — and fed through gang's own informer handlers
into the real ``ClusterState``; the real ``Cycle`` then runs for each pending gang, in the order
gang's queue gives them. Its reclaim step is the one under test: the priority preemption that
follows it in the cycle is left out here, as KAI's reclaim action runs alone in these tests.

What agrees: a ``Releasing`` task is among the reclaim's victims, a ``Running`` one is not, a
``Pipelined`` reclaimer is placed or nominated (on the expected node, where one is given), a
``Pending`` one is neither. Each case that does not agree is a strict xfail whose reason says
which deliberate difference of gang's rules (``gang.queue.reclaim``) it is, or which KAI feature
gang does not have.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gang.models.queueapis import KAI_QUEUE_LABEL
from tests.unit.reclaim_world import World, kai_podgroup

DATA = Path(__file__).resolve().parents[1] / "data" / "kai"
GPU = "nvidia.com/gpu"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: KAI's fake nodes carry their name under this label (node affinity cases select on it)
TYPE_LABEL = "kai.scheduler/type"
NOW = time.time()


def _load(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = yaml.safe_load((DATA / name).read_text())["cases"]
    for case in cases:
        case["file"] = name
    return cases


RECLAIM = _load("reclaim.yaml")
ELASTIC = _load("reclaim_elastic.yaml")

#: cases whose outcome differs from KAI's, and why (each a strict xfail)
FRACTIONAL = "fractional GPUs (a share of one device): gang schedules whole devices only"
_BELOW_SHARE = (
    "the victim queue's only gang holds more than the queue is above its fair share: taking it "
    "pushes the queue below its fair share, which gang never does (KAI checks the victim queue "
    "before taking the gang, when it is still above)"
)
_NOT_PREEMPTIBLE = (
    "KAI treats priority >= 100 as non-preemptible and never reclaims it; gang takes victims by "
    "queue share whatever their priority (a queue protects its gangs with reclaimable: false or "
    "a reclaim min runtime)"
)
_CONSOLIDATION = (
    "KAI moves a running job to another node to make room (consolidation); gang never moves a "
    "running pod, so nothing is placed"
)
DIFFERENT: dict[str, str] = {
    "reclaim_test.go TestHandleReclaim #1": (
        "the victim queue is at its fair share (20 of 20 GPUs): KAI lets a reclaimer below its "
        "quota take from any queue above its quota (down to 0 here); gang never pushes a queue "
        "below its fair share or its quota"
    ),
    "reclaim_test.go TestHandleReclaim #2": (
        "both queues are below their fair share (12 of 16, 0 of 2): they cannot evict each "
        "other in gang (KAI: the reclaimer is below its quota, the victim above its own)"
    ),
    "reclaim_test.go TestHandleReclaim #12": _BELOW_SHARE,
    "reclaim_test.go TestHandleReclaim #13": _BELOW_SHARE,
    "reclaim_test.go TestHandleReclaim #17": _NOT_PREEMPTIBLE,
    "reclaim_test.go TestHandleReclaim #20": _BELOW_SHARE,
    "reclaim_test.go TestHandleReclaim #21": _BELOW_SHARE,
    "reclaim_test.go TestHandleReclaim #23": _BELOW_SHARE,
    "reclaim_test.go TestHandleReclaim #24": _CONSOLIDATION,
    "reclaim_test.go TestHandleReclaim #25": _CONSOLIDATION,
    "reclaim_test.go TestHandleReclaim #26": _CONSOLIDATION,
    "reclaim_test.go TestHandleReclaim #27": _NOT_PREEMPTIBLE,
    "reclaim_elastic_test.go TestHandleElasticReclaim #7": (
        "gang places every member of the elastic reclaimer that the freed capacity holds (both, "
        "within its fair share); KAI pipelines only its minAvailable"
    ),
    "reclaim_elastic_test.go TestHandleElasticReclaim #8": (
        "the reclaimer already runs its minMember: gang preempts and reclaims to reach a gang's "
        "minMember, never for members above it (they wait for room like any pod)"
    ),
    "reclaim_elastic_test.go TestHandleElasticReclaim #9": (
        "the queues' parent is at its cpu limit: gang refuses the gang for that limit before "
        "reclaim is tried; KAI reclaims inside the parent"
    ),
}


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, TYPE_LABEL: name}},
        "status": {
            "allocatable": {
                "cpu": f"{spec['cpu_millis']}m",
                "memory": str(spec["memory"]),
                GPU: str(int(spec["gpus"])),
                "pods": "110",
            }
        },
    }


def _resource(quota: float, weight: float, limit: float) -> dict[str, float]:
    # a negative weight is the test utilities' "copy of the department's quota" for the implicit
    # top-level department, the only queue at its level: its weight divides nothing
    return {
        "quota": quota,
        "overQuotaWeight": max(weight, 1) if weight < 0 else weight,
        "limit": limit,
    }


def _queue(q: Mapping[str, Any]) -> dict[str, Any]:
    memory_quota = q.get("deserved_memory", -1)
    memory_limit = q.get("max_memory", -1)
    spec: dict[str, Any] = {
        "priority": q.get("priority", 100),
        "resources": {
            "gpu": _resource(q["deserved_gpus"], q["over_quota_weight"], q["max_gpus"]),
            "cpu": _resource(
                q.get("deserved_cpu_millis", -1),
                q.get("cpu_over_quota_weight", 1),
                q.get("max_cpu_millis", -1),
            ),
            "memory": _resource(
                memory_quota / 1e6 if memory_quota != -1 else -1,
                q.get("memory_over_quota_weight", 1),
                memory_limit / 1e6 if memory_limit != -1 else -1,
            ),
        },
    }
    if q.get("parent"):
        spec["parentQueue"] = q["parent"]
    offset = q.get("creation_offset_minutes", 0)
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {
            "name": q["name"],
            "uid": f"q-{q['name']}",
            "resourceVersion": "1",
            "creationTimestamp": _timestamp(NOW + 60 * offset),
        },
        "spec": spec,
    }


def _tasks(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {**task, "name": task.get("name") or f"{job['name']}-{i}"}
        for i, task in enumerate(job["tasks"])
    ]


def _job_objects(job: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    name = job["name"].replace("_", "-")
    ago = job.get("created_minutes_ago", job.get("extra", {}).get("created_minutes_ago", 0))
    created = _timestamp(NOW - 60 * ago)
    labels = {GROUP_LABEL: name, KAI_QUEUE_LABEL: job["queue"]}
    group = kai_podgroup(name, job["queue"], job["min_available"], created)
    out: list[tuple[str, dict[str, Any]]] = [("group", group)]
    for task in _tasks(job):
        requests = {
            "cpu": f"{job.get('cpu_millis_per_task', 1000)}m",
            "memory": str(job.get("memory_per_task", 1_000_000_000)),
        }
        if job["gpus_per_task"]:
            requests[GPU] = str(int(job["gpus_per_task"]))
        running = task["state"] == "Running"
        spec: dict[str, Any] = {
            "schedulerName": "gang-scheduler",
            "priority": job["priority"],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": requests}}],
        }
        if running:
            spec["nodeName"] = task["node"]
        if task.get("node_affinity"):
            term = {"key": TYPE_LABEL, "operator": "In", "values": task["node_affinity"]}
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [term]}]
                    }
                }
            }
        status: dict[str, Any] = {"phase": "Running" if running else "Pending"}
        if running:
            status["startTime"] = created
            status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        pod_name = task["name"].replace("_", "-")
        pod = {
            "metadata": {
                "name": pod_name,
                "namespace": "default",
                "uid": f"p-{pod_name}",
                "resourceVersion": "1",
                "labels": dict(labels),
                "creationTimestamp": created,
            },
            "spec": spec,
            "status": status,
        }
        out.append(("pod", pod))
    return out


def _expectations(case: Mapping[str, Any]) -> dict[str, tuple[str, str | None]]:
    """Per pod name: (status, node or None)."""
    jobs = {job["name"]: job for job in case["jobs"]}
    out: dict[str, tuple[str, str | None]] = {}
    expected = {**case.get("expected", {}), **case.get("expected_tasks", {})}
    for name, want in expected.items():
        if name in jobs:
            for task in _tasks(jobs[name]):
                out[task["name"].replace("_", "-")] = (want["status"], want.get("node"))
        else:
            out[name.replace("_", "-")] = (want["status"], want.get("node"))
    return out


def _pods_of(case: Mapping[str, Any]) -> set[str]:
    return {t["name"].replace("_", "-") for job in case["jobs"] for t in _tasks(job)}


def _mark(case: dict[str, Any]) -> Any:
    reason = DIFFERENT.get(case["source"])
    if "fractional-gpu" in case.get("features", []):
        reason = FRACTIONAL
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, id=case["source"].split()[-1] + "-" + case["file"], marks=marks)


def _decided(case: dict[str, Any]) -> World:
    """The case's cluster in gang's state, after one pass of the cycle over its waiting gangs."""
    objects = [obj for job in case["jobs"] for obj in _job_objects(job)]
    world = World(
        [_node(name, spec) for name, spec in case["nodes"].items()],
        [_queue(q) for q in case["queues"]],
        [obj for kind, obj in objects if kind == "group"],
        [obj for kind, obj in objects if kind == "pod"],
    )
    world.run()
    return world


def test_the_tables_are_whole() -> None:
    assert len(RECLAIM) == 40 and len(ELASTIC) == 11
    assert set(DIFFERENT) <= {c["source"] for c in RECLAIM + ELASTIC}


@pytest.mark.asyncio
@pytest.mark.parametrize("case", [_mark(c) for c in RECLAIM + ELASTIC])
async def test_kai_reclaim(case: dict[str, Any]) -> None:
    world = _decided(case)
    evicted, placed = world.evicted(), world.placed()
    wrong = []
    pods = _pods_of(case)
    for pod, (status, node) in sorted(_expectations(case).items()):
        if pod not in pods:
            continue  # KAI's table names a pod no job has (its matcher skips it too)
        got = (
            "Releasing"
            if pod in evicted
            else "Pipelined"
            if pod in placed
            else "Running"
            if world.cache.pods.get(("default", pod)) is not None
            and world.cache.pods[("default", pod)].node
            else "Pending"
        )
        if got != status or (status == "Pipelined" and node is not None and placed[pod] != node):
            wrong.append(f"{pod}: want {status} {node or ''}, got {got} {placed.get(pod, '')}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.asyncio
async def test_identical_inputs_give_identical_decisions() -> None:
    """Every agreeing case, decided twice from scratch: the same victims and the same nodes."""

    def decide(case: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        world = _decided(case)
        return sorted(world.evicted()), world.placed()

    decided = 0
    for case in RECLAIM + ELASTIC:
        if case["source"] in DIFFERENT or "fractional-gpu" in case.get("features", []):
            continue
        first = decide(case)
        assert decide(case) == first, case["name"]
        decided += bool(first[0])
    assert decided >= 15  # 17 of them evict: the decisions compared are real ones
