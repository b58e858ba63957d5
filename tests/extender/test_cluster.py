"""The extender against a cluster: ``nodeCacheCapable`` from informer-fed accounting, and bind.

The cluster is a ``SimCluster`` reached over HTTP with a kubeconfig, as a real one would be; the
pods other schedulers bound are created and bound through its API.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kubernetes_asyncio import client as k8s

from gang.extender.judge import REASON_UNKNOWN_NODE, extender_score, max_total
from gang.extender.nodecache import NodeCache
from gang.extender.server import ExtenderConfig
from gang.kube.transport import Kube
from gang.models.settings import ScoreWeights
from gang.scheduling.placement import Placer
from gang.sim.cluster import SimCluster
from gang.state.podinfo import parse_pod
from tests.conftest import pod
from tests.extender.conftest import Client, fixture, fixture_bytes, names, serving
from tests.scheduler.conftest import eventually

NAMES_ARGS = "filter-args-nodenames.json"
GPU = "nvidia.com/gpu"


class Pods:
    """Create pods and bind them the way another scheduler would."""

    def __init__(self, api_client: Any) -> None:
        self.core = k8s.CoreV1Api(api_client)

    async def bound(
        self, name: str, node: str, gpu: int, cpu: str = "1", memory: str = "1Gi"
    ) -> None:
        manifest = pod(name, gpu=gpu, cpu=cpu, scheduler="other")
        manifest["spec"]["containers"][0]["resources"]["limits"]["memory"] = memory
        await self.core.create_namespaced_pod("default", manifest)
        await self.core.create_namespaced_pod_binding(
            name,
            "default",
            k8s.V1Binding(
                metadata=k8s.V1ObjectMeta(name=name),
                target=k8s.V1ObjectReference(kind="Node", name=node, api_version="v1"),
            ),
            _preload_content=False,
        )

    async def delete(self, name: str) -> None:
        await self.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)

    async def node_of(self, name: str) -> str | None:
        found = await self.core.read_namespaced_pod(name, "default")
        node: str | None = found.spec.node_name
        return node


@asynccontextmanager
async def node_cache_of(cluster: SimCluster) -> AsyncIterator[tuple[NodeCache, Kube, Any]]:
    async with cluster.api_client() as api_client:
        kube = Kube(api_client)
        cache = NodeCache(kube)
        task = asyncio.create_task(cache.run())
        try:
            await asyncio.wait_for(cache.wait_synced(), 10)
            yield cache, kube, api_client
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_node_cache_capable_filter_and_prioritize_count_bound_pods() -> None:
    async with (
        SimCluster("4:gpu=8,zones=2", bookmark_interval=0.2) as cluster,
        node_cache_of(cluster) as (cache, _, api_client),
        serving(node_cache=cache) as client,
    ):
        pods = Pods(api_client)
        # other schedulers' pods: node-00000 full, node-00001 has 2 GPUs left, node-00002 4
        # (and its CPU and memory used alike: balanced either way)
        await pods.bound("full", "node-00000", 8)
        await pods.bound("most", "node-00001", 6)
        await pods.bound("half", "node-00002", 4, cpu="4", memory="16Gi")

        async def counted() -> bool:
            free = cache.cache.free_of
            return (
                free("node-00002").get(GPU) == 4
                and free("node-00001").get(GPU) == 2
                and free("node-00000").get(GPU, 0) == 0
            )

        await eventually(counted)
        cache.cache.check()

        args = fixture(NAMES_ARGS)
        args["NodeNames"].append("ghost")  # a name the cache does not know
        status, body, raw = await client.post("filter", args)
        assert status == 200
        assert body["Nodes"] is None  # nodeCacheCapable: true reads NodeNames
        assert body["NodeNames"] == ["node-00002", "node-00003"]
        assert body["FailedNodes"] == {
            "node-00000": "Insufficient nvidia.com/gpu",
            "node-00001": "Insufficient nvidia.com/gpu",
            "ghost": REASON_UNKNOWN_NODE,
        }
        assert body["FailedAndUnresolvableNodes"] == {}
        assert body["Error"] == ""
        assert raw.startswith(b'{"Nodes":null,"NodeNames":["node-00002","node-00003"]')

        status, body, _ = await client.post("prioritize", args)
        assert status == 200
        scores = {entry["Host"]: entry["Score"] for entry in body}
        assert list(scores) == [*fixture(NAMES_ARGS)["NodeNames"], "ghost"]
        assert scores["node-00000"] == scores["node-00001"] == scores["ghost"] == 0
        # gang's own totals on the same cache, mapped onto 0..10: bin-packing prefers the
        # node already half used by another pod
        placer = Placer(cache.cache.index, ScoreWeights(), "topology.kubernetes.io/zone")
        evaluation = placer.evaluate(cache.cache.snapshot(), parse_pod(args["Pod"]))
        for name in ("node-00002", "node-00003"):
            total = evaluation.scores[cache.cache.nodes[name].row]
            assert scores[name] == extender_score(total, max_total(evaluation))
        assert 0 < scores["node-00003"] < scores["node-00002"] <= 10

        # a finished pod releases its share: node-00000 fits again
        await pods.delete("full")

        async def released() -> bool:
            _, answer, _ = await client.post("filter", fixture_bytes(NAMES_ARGS))
            return bool(answer["NodeNames"] == ["node-00000", "node-00002", "node-00003"])

        await eventually(released)
        # new nodes are known as soon as the informer sees them
        cluster.add_nodes("1:gpu=8,prefix=late")
        late = {**fixture(NAMES_ARGS), "NodeNames": ["late-00000"]}

        async def known() -> bool:
            _, answer, _ = await client.post("filter", late)
            return bool(answer["NodeNames"] == ["late-00000"])

        await eventually(known)


async def test_node_names_are_refused_until_the_node_cache_synced() -> None:
    async with SimCluster("2:gpu=8") as cluster, cluster.api_client() as api_client:
        cache = NodeCache(Kube(api_client))  # never started
        async with serving(node_cache=cache) as client:
            status, body, _ = await client.post("filter", fixture_bytes(NAMES_ARGS))
            assert status == 200 and "not synced" in body["Error"]
            status, body, _ = await client.post("prioritize", fixture_bytes(NAMES_ARGS))
            assert status == 503
            assert (await client.get("/readyz"))[0] == 503
            assert (await client.get("/healthz"))[0] == 200
            # full node objects need no cache: still answered from the request
            status, body, _ = await client.post("filter", fixture_bytes("filter-args-nodes.json"))
            assert status == 200 and names(body) == ["gpu-a", "gpu-e"]


async def bind_args(api_client: Any, name: str, node: str) -> dict[str, Any]:
    """The fixture's ExtenderBindingArgs for a freshly created pod (its real uid)."""
    core = k8s.CoreV1Api(api_client)
    created = await core.create_namespaced_pod("default", pod(name, gpu=4))
    return {
        **fixture("bind-args.json"),
        "PodName": name,
        "PodUID": created.metadata.uid,
        "Node": node,
    }


async def test_bind_enabled_binds_the_pod_in_the_cluster() -> None:
    async with SimCluster("4:gpu=8", bookmark_interval=0.2) as cluster, cluster.api_client() as api:
        kube = Kube(api)
        pods = Pods(api)
        config = ExtenderConfig(enable_bind=True, allow_unauthenticated_bind=True)  # loopback only
        async with serving(config, kube=kube) as client:
            args = await bind_args(api, "train-0", "node-00002")
            assert list(fixture("bind-args.json")) == list(args)
            status, body, raw = await client.post("bind", args)
            assert status == 200
            assert raw == b'{"Error":""}'  # ExtenderBindingResult, as Go writes it
            assert await pods.node_of("train-0") == "node-00002"

            # kube-scheduler retries after a timeout: the earlier bind landed, so it is done
            status, body, _ = await client.post("bind", args)
            assert status == 200 and body == {"Error": ""}

            # binding it elsewhere now fails, with the apiserver's words
            status, body, _ = await client.post("bind", {**args, "Node": "node-00003"})
            assert status == 200
            assert body["Error"].startswith("binding default/train-0 to node-00003 failed: 409")
            assert "already assigned" in body["Error"]
            assert await pods.node_of("train-0") == "node-00002"

            # a pod that does not exist
            status, body, _ = await client.post("bind", {**args, "PodName": "nope"})
            assert status == 200 and "404" in body["Error"]

            # missing fields are 400, naming them
            status, body, _ = await client.post("bind", {"PodName": "x", "PodNamespace": "default"})
            assert status == 400 and "Node: required field missing" in body["Error"]
            status, body, _ = await client.post("bind", {**args, "PodName": ""})
            assert status == 400 and "PodName" in body["Error"]

            # still serving: a second pod binds
            second = await bind_args(api, "train-1", "node-00001")
            status, body, _ = await client.post("bind", second)
            assert status == 200 and body == {"Error": ""}
            assert await pods.node_of("train-1") == "node-00001"


async def test_bind_disabled_leaves_the_pod_alone() -> None:
    async with SimCluster("2:gpu=8") as cluster, cluster.api_client() as api:
        pods = Pods(api)
        async with serving(kube=Kube(api)) as client:
            args = await bind_args(api, "train-0", "node-00001")
            status, body, _ = await client.post("bind", args)
            assert status == 404 and "disabled" in body["Error"]
            assert await pods.node_of("train-0") is None


async def test_clients_of_a_running_extender_share_one_node_cache() -> None:
    """Many concurrent NodeNames requests against a live cache all see the same accounting."""
    async with (
        SimCluster("4:gpu=8,zones=2", bookmark_interval=0.2) as cluster,
        node_cache_of(cluster) as (cache, _, api_client),
        serving(node_cache=cache) as client,
    ):
        await Pods(api_client).bound("full", "node-00003", 8)

        async def counted() -> bool:
            return cache.cache.free_of("node-00003").get(GPU, 0) == 0

        await eventually(counted)

        async def one(c: Client) -> list[str]:
            _, body, _ = await c.post("filter", fixture_bytes(NAMES_ARGS))
            return names(body)

        results = await asyncio.gather(*(one(client) for _ in range(16)))
        assert all(r == ["node-00000", "node-00001", "node-00002"] for r in results)
