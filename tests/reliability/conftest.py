"""Reliability fixtures: objects made and read inside the simulator, so faults hit only the scheduler.

The scheduler under test talks HTTP to a ``SimCluster`` (in-process or as ``gang run``); the
test itself creates and inspects objects through the simulator's API object directly, so an
injected 429, a cut connection or a server restart never trips the test's own setup or checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gang.bench.chaosplan import GangPlan, pod_manifests, podgroup_manifest
from gang.bench.invariants import Verdict, judge
from gang.sim.api import SimApi
from gang.sim.cluster import SimCluster

NS = "default"
PODGROUPS = "scheduling.x-k8s.io/v1alpha1/podgroups"
ZONE = "topology.kubernetes.io/zone"


def create_gang(
    cluster: SimCluster,
    name: str,
    size: int,
    *,
    gpu: int = 1,
    cpu: str = "1",
    min_member: int | None = None,
    priority: str | None = None,
) -> list[str]:
    """A PodGroup (none for a single pod) and its members, created in the store; their names."""
    gang = GangPlan(name, size, min_member or size, gpu, cpu, priority, 0.0)
    api = cluster.api
    if not gang.lone:
        api.create(api.registry.by_key(PODGROUPS), NS, podgroup_manifest(gang, NS))
    names = []
    for pod in pod_manifests(gang, NS):
        names.append(api.create(api.rt_pods, NS, pod)["metadata"]["name"])
    return names


def bind_foreign(cluster: SimCluster, name: str, node: str, gpu: int) -> None:
    """A pod of another scheduler, bound to ``node`` (it takes capacity gang must respect)."""
    api: SimApi = cluster.api
    pod = pod_manifests(GangPlan(name, 1, 1, gpu, "100m", None, 0.0), NS)[0]
    pod["metadata"]["name"] = name
    pod["spec"] = {**pod["spec"], "schedulerName": "default-scheduler"}
    api.create(api.rt_pods, NS, pod)
    api.bind(NS, name, {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}})


def bound(cluster: SimCluster) -> dict[str, str]:
    """Pod name → node, for every bound pod."""
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in cluster.store.items(cluster.api.rt_pods.storage_key)
        if p["spec"].get("nodeName")
    }


def zones(cluster: SimCluster) -> dict[str, str]:
    """Node name → its zone label."""
    return {
        n["metadata"]["name"]: n["metadata"]["labels"][ZONE]
        for n in cluster.store.items(cluster.api.rt_nodes.storage_key)
    }


def verdict(cluster: SimCluster) -> Verdict:
    store, api = cluster.store, cluster.api
    return judge(
        store.items(api.rt_pods.storage_key),
        store.items(api.rt_nodes.storage_key),
        store.items(api.registry.by_key(PODGROUPS).storage_key),
    )


async def until(condition: Callable[[], Any], within: float, what: str = "") -> None:
    """Poll a synchronous ``condition`` until it is truthy; fail with ``what`` at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not within {within}s: {what or condition}")
        await asyncio.sleep(0.02)
