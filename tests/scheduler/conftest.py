"""Scheduler fixtures: the real GangScheduler against a SimCluster, over HTTP, via kubeconfig."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from gang.app.scheduler import GangScheduler
from gang.bench.invariants import free_capacity, overcommitted
from gang.kube.client import make_api_client
from gang.models.settings import SchedulerConfig
from gang.sim.cluster import SimCluster
from gang.state.podinfo import parse_pod

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"


@asynccontextmanager
async def running_scheduler(
    cluster: SimCluster, ready_within: float = 10.0, **config: Any
) -> AsyncIterator[GangScheduler]:
    """Start the real scheduler against ``cluster`` (kubeconfig, HTTP) and stop it after;
    it must have synced every informer within ``ready_within`` seconds."""
    api_client = await make_api_client(str(cluster.kubeconfig_path))
    scheduler = GangScheduler(api_client, SchedulerConfig(**config), instance="test")
    task = asyncio.create_task(scheduler.run())
    try:
        await asyncio.wait_for(scheduler.ready.wait(), ready_within)
        yield scheduler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await api_client.close()


def gang_pod(
    name: str,
    group: str | None,
    *,
    gpu: int = 0,
    cpu: str = "1",
    memory: str = "1Gi",
    priority_class: str | None = None,
    scheduler: str = "gang-scheduler",
    labels: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A pod manifest; ``extra`` goes into its spec."""
    labels = {**(labels or {}), **({"scheduling.x-k8s.io/pod-group": group} if group else {})}
    limits = {"cpu": cpu, "memory": memory}
    if gpu:
        limits["nvidia.com/gpu"] = str(gpu)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "trainer:1", "resources": {"limits": limits}}],
        **extra,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def podgroup(name: str, min_member: Any, timeout: Any = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"minMember": min_member, **spec}
    if timeout is not None:
        body["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": body,
    }


class Api:
    """Thin async helpers over kubernetes-asyncio for test setup and inspection."""

    def __init__(self, client: Any) -> None:
        from kubernetes_asyncio import client as k8s

        self.core: Any = k8s.CoreV1Api(client)
        self.custom: Any = k8s.CustomObjectsApi(client)

    async def create_podgroup(self, body: dict[str, Any], ns: str = "default") -> None:
        await self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)

    async def bind(self, name: str, node: str, ns: str = "default") -> None:
        """Bind a pod directly, as another scheduler (or a dead instance of ours) would have."""
        resp = await self.core.create_namespaced_pod_binding(
            name,
            ns,
            {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
            _preload_content=False,
        )
        assert resp.status == 201, await resp.text()

    async def get_podgroup(self, name: str, ns: str = "default") -> dict[str, Any]:
        result: dict[str, Any] = await self.custom.get_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, name
        )
        return result

    async def create_pods(self, pods: list[dict[str, Any]], ns: str = "default") -> None:
        await asyncio.gather(*(self.core.create_namespaced_pod(ns, p) for p in pods))

    async def raw_pods(self, ns: str | None = None) -> list[dict[str, Any]]:
        resp = await (
            self.core.list_namespaced_pod(ns, _preload_content=False)
            if ns
            else self.core.list_pod_for_all_namespaces(_preload_content=False)
        )
        items: list[dict[str, Any]] = (await resp.json())["items"]
        return items

    async def raw_nodes(self) -> list[dict[str, Any]]:
        resp = await self.core.list_node(_preload_content=False)
        items: list[dict[str, Any]] = (await resp.json())["items"]
        return items

    async def bound(self, ns: str | None = None) -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in await self.raw_pods(ns)
            if p["spec"].get("nodeName")
        }

    async def events(self, ns: str = "default") -> list[dict[str, Any]]:
        resp = await self.core.list_namespaced_event(ns, _preload_content=False)
        items: list[dict[str, Any]] = (await resp.json())["items"]
        return items

    async def assert_not_overcommitted(self) -> None:
        """Sum the requests of every non-terminal bound pod per node against allocatable."""
        nodes = await self.raw_nodes()
        pods = [parse_pod(raw) for raw in await self.raw_pods()]  # every pod must parse
        names = {n["metadata"]["name"] for n in nodes}
        for pod in pods:
            if pod.assigned and not pod.terminal:
                assert pod.node_name in names, f"pod bound to unknown node {pod.node_name}"
        free = free_capacity(nodes, pods)
        short = {
            name: {res: -left for res, left in free[name].items() if left < 0}
            for name in overcommitted(free)
        }
        assert not short, f"over-committed nodes, short by: {short}"


@dataclass
class Env:
    cluster: SimCluster
    scheduler: GangScheduler
    api: Api


@asynccontextmanager
async def gang_env(
    nodes: str, cluster_options: dict[str, Any] | None = None, **config: Any
) -> AsyncIterator[Env]:
    """A simulated cluster with ``nodes``, the scheduler running on it, and an API helper."""
    async with (
        SimCluster(nodes, **(cluster_options or {})) as cluster,
        running_scheduler(cluster, **config) as scheduler,
        cluster.api_client() as client,
    ):
        yield Env(cluster, scheduler, Api(client))


async def eventually(
    check: Callable[[], Awaitable[bool]], within: float = 10.0, every: float = 0.05
) -> None:
    """Poll ``check`` until it returns True; fail with a clear message at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        if await check():
            return
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {within}s: {check.__name__}")
        await asyncio.sleep(every)
