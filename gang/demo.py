"""``gang demo``: the scheduler placing gangs on an embedded simulated cluster, in one command.

It starts the Kubernetes API simulator (16 GPU nodes in two zones, with the kubelet stand-in so
pods start and finish), runs the real scheduler against it over HTTP exactly as against a real
cluster, submits a few typical workloads through kubernetes-asyncio — a data-parallel training
gang, an MPI job (launcher + workers), a gang whose members arrive late, a gang too big for the
cluster, a lone notebook pod — and narrates what happens, then prints the PodGroups' status.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from gang.app.scheduler import GangScheduler
from gang.kube.client import make_api_client
from gang.models.podgroup import (
    POD_GROUP_GROUP,
    POD_GROUP_LABEL,
    POD_GROUP_PLURAL,
    POD_GROUP_VERSION,
)
from gang.models.settings import SchedulerConfig
from gang.sim.cluster import SimCluster
from gang.sim.kubelet import RUN_SECONDS, KubeletConfig

NS = "demo"


def _pod(
    name: str, group: str | None, gpus: int, cpu: str = "4", run: float = 6.0
) -> dict[str, Any]:
    limits = {"cpu": cpu, "memory": "16Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {
            "name": name,
            "labels": {POD_GROUP_LABEL: group} if group else {},
            "annotations": {RUN_SECONDS: str(run)},
        },
        "spec": {
            "schedulerName": "gang-scheduler",
            "containers": [
                {"name": "main", "image": "trainer:1.0", "resources": {"limits": limits}}
            ],
        },
    }


def _group(name: str, min_member: int, timeout: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout},
    }


async def _narrate(core: Any, zones: dict[str, str], start: float, stop: asyncio.Event) -> None:
    """Print each binding and each pod finishing, as a watch on pods sees them."""
    loop = asyncio.get_running_loop()
    seen: dict[str, str] = {}
    resp = await core.list_namespaced_pod(NS, _preload_content=False)
    rv = (await resp.json())["metadata"]["resourceVersion"]
    while not stop.is_set():
        resp = await core.list_namespaced_pod(
            NS,
            watch=True,
            resource_version=rv,
            timeout_seconds=1,
            allow_watch_bookmarks=True,
            _preload_content=False,
        )
        async for line in resp.content:
            import orjson

            event = orjson.loads(line)
            obj = event["object"]
            rv = obj["metadata"]["resourceVersion"]
            if event["type"] == "BOOKMARK":
                continue
            name, node = obj["metadata"]["name"], obj["spec"].get("nodeName")
            phase = obj.get("status", {}).get("phase")
            state = f"{node}/{phase}" if node else ""
            if state == seen.get(name) or not node:
                continue
            seen[name] = state
            stamp = f"{loop.time() - start:5.1f}s"
            if phase == "Pending":
                print(f"  {stamp}  bound    {name:<16} → {node} ({zones[node]})")
            elif phase in ("Succeeded", "Failed"):
                print(f"  {stamp}  {phase.lower():<8} {name}")
        resp.release()


async def run_demo(nodes: str) -> int:
    from kubernetes_asyncio import client

    kubelet = KubeletConfig(start_delay=0.3, termination_delay=0.1)
    async with SimCluster(nodes, kubelet=kubelet) as cluster, cluster.api_client() as api_client:
        core: Any = client.CoreV1Api(api_client)
        custom: Any = client.CustomObjectsApi(api_client)
        node_list = await core.list_node(_preload_content=False)
        raw_nodes = (await node_list.json())["items"]
        zones = {
            n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
            for n in raw_nodes
        }
        gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in raw_nodes)
        print(
            f"simulated cluster at {cluster.url}: {len(raw_nodes)} nodes, {gpus} GPUs, "
            f"{len(set(zones.values()))} zones (kubeconfig: {cluster.kubeconfig_path})"
        )

        scheduler_client = await make_api_client(str(cluster.kubeconfig_path))
        scheduler = GangScheduler(
            scheduler_client, SchedulerConfig(default_schedule_timeout_seconds=5)
        )
        task = asyncio.create_task(scheduler.run())
        await scheduler.ready.wait()
        print("gang scheduler running (talking to the cluster over HTTP, like to a real one)\n")

        await core.create_namespace({"metadata": {"name": NS}})
        loop = asyncio.get_running_loop()
        start = loop.time()
        stop = asyncio.Event()
        narrator = asyncio.create_task(_narrate(core, zones, start, stop))

        async def submit(
            name: str, min_member: int, pods: list[dict[str, Any]], wait_seconds: int = 30
        ) -> None:
            await custom.create_namespaced_custom_object(
                POD_GROUP_GROUP,
                POD_GROUP_VERSION,
                NS,
                POD_GROUP_PLURAL,
                _group(name, min_member, wait_seconds),
            )
            await asyncio.gather(*(core.create_namespaced_pod(NS, p) for p in pods))

        print("submitting: 'llm' (8 workers x 8 GPUs), 'mpi' (launcher + 4 workers x 4 GPUs),")
        print(
            "            'late' (4 of 8 members now), 'huge' (20 x 8 GPUs, more than the cluster),"
        )
        print("            and a lone 'notebook' pod\n")
        await submit("llm", 8, [_pod(f"llm-{i}", "llm", 8) for i in range(8)])
        await submit(
            "mpi",
            5,
            [_pod("mpi-launcher", "mpi", 0, cpu="2")]
            + [_pod(f"mpi-worker-{i}", "mpi", 4) for i in range(4)],
        )
        await submit("late", 8, [_pod(f"late-{i}", "late", 2) for i in range(4)])
        await submit("huge", 20, [_pod(f"huge-{i}", "huge", 8) for i in range(20)], wait_seconds=4)
        await core.create_namespaced_pod(NS, _pod("notebook", None, 1))
        await asyncio.sleep(2.0)
        print(
            f"  {loop.time() - start:5.1f}s  ... 'late' holds room for its 8 members; 4 more arrive now"
        )
        await asyncio.gather(
            *(core.create_namespaced_pod(NS, _pod(f"late-{i}", "late", 2)) for i in range(4, 8))
        )
        await asyncio.sleep(7.0)
        stop.set()
        await narrator

        print("\nPodGroups (kubectl get pg -n demo):")
        groups = await custom.list_namespaced_custom_object(
            POD_GROUP_GROUP, POD_GROUP_VERSION, NS, POD_GROUP_PLURAL
        )
        print(f"  {'NAME':<6} {'PHASE':<10} {'MINMEMBER':>9} {'SCHEDULED':>9} {'SUCCEEDED':>9}")
        for pg in groups["items"]:
            st = pg.get("status") or {}
            print(
                f"  {pg['metadata']['name']:<6} {st.get('phase', ''):<10} {pg['spec']['minMember']:>9} "
                f"{st.get('scheduled', 0):>9} {st.get('succeeded', 0):>9}"
            )
        for pg in groups["items"]:
            # a gang that cannot run on the cluster as it is says so in a condition (its phase
            # has no word for it)
            for cond in (pg.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "Unschedulable" and cond.get("status") == "True":
                    name = pg["metadata"]["name"]
                    print(
                        f"\nPodGroup '{name}' (kubectl describe pg {name}): Unschedulable, "
                        f"reason {cond.get('reason')}:\n  {cond.get('message')}"
                    )
        stats = scheduler.stats
        if stats.time_to_full_gang.observations:
            print(
                f"\ngangs completed: {stats.gangs_completed}; time to full gang: "
                f"max {stats.time_to_full_gang.largest * 1000:.0f} ms"
            )
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await scheduler_client.close()
    return 0
