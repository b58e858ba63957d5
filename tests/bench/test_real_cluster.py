"""``gang bench --kubeconfig``: the real-cluster path, against a separately started simulator.

No real cluster exists here, so ``gang sim serve`` stands in for one — started on its own, with
three nodes of its own (``real-0000N``) that play the cluster's real nodes, so the driver takes the
``--kubeconfig`` path exactly as it would on a cluster: it creates its kubelet-free
``gang-bench-*`` Nodes through ``nodes/status``, their Leases, its namespace and PriorityClasses,
pins its pods to its nodes, and removes all of it afterwards. The test watches the cluster while
the benchmark runs, to see what existed in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import orjson
import pytest

from gang.bench.cluster import (
    LEASE_PATH,
    NODE_SELECTOR,
    NOT_READY_TAINT,
    ApiStatusError,
    BenchCluster,
    BenchClusterError,
    bench_node_objects,
)
from gang.bench.runner import run_bench
from gang.bench.workload import NAMESPACE, BenchConfig, plan, pods
from gang.kube.client import make_api_client
from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults

REAL_NODES = "3:gpu=8,cpu=64,memory=512Gi,prefix=real"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``gang sim serve`` process standing in for a real cluster with three nodes."""
    path = tmp_path_factory.mktemp("cluster") / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gang",
            "sim",
            "serve",
            "--nodes",
            REAL_NODES,
            "--port",
            str(_free_port()),
            "--kubeconfig",
            str(path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not path.exists():
            assert proc.poll() is None, "gang sim serve exited"
            assert time.monotonic() < deadline, "gang sim serve did not start"
            time.sleep(0.05)
        yield str(path)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
async def cluster(kubeconfig: str) -> AsyncIterator[BenchCluster]:
    client = await make_api_client(kubeconfig)
    try:
        yield BenchCluster(client)
    finally:
        await client.close()


async def _names(cluster: BenchCluster, path: str) -> dict[str, str]:
    """name -> resourceVersion of everything at ``path``."""
    items = (await cluster.request("GET", path))["items"]
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items}


async def _exists(cluster: BenchCluster, path: str) -> bool:
    try:
        await cluster.request("GET", path)
    except ApiStatusError as err:
        assert err.status == 404
        return False
    return True


async def _watch(cluster: BenchCluster, path: str, seen: list[tuple[str, Any]]) -> None:
    """Append every (type, object) at ``path`` to ``seen`` until cancelled."""
    resp = await cluster.client.call_api(
        path,
        "GET",
        query_params=[("watch", "1"), ("timeoutSeconds", "120")],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    try:
        async for line in resp.content:
            event = orjson.loads(line)
            seen.append((event["type"], event["object"]))
    finally:
        resp.release()


async def test_a_real_cluster_run_uses_its_own_nodes_and_cleans_up(
    kubeconfig: str, cluster: BenchCluster
) -> None:
    # what the cluster holds before: its own nodes, a node an interrupted run left behind, and
    # a PriorityClass of the same name as one the benchmark wants that is not the benchmark's
    real_nodes = await _names(cluster, "/api/v1/nodes")
    assert sorted(real_nodes) == ["real-00000", "real-00001", "real-00002"]
    await cluster.request(
        "POST",
        "/api/v1/nodes",
        {"metadata": {"name": "gang-bench-old-00000", "labels": dict(NODE_SELECTOR)}},
    )
    await cluster.request(
        "POST", PRIORITY_CLASSES, {"metadata": {"name": "bench-p20"}, "value": 20}
    )
    seen_nodes: list[tuple[str, Any]] = []
    seen_pods: list[tuple[str, Any]] = []
    seen_leases: list[tuple[str, Any]] = []
    seen_classes: list[tuple[str, Any]] = []
    watches = [
        asyncio.create_task(_watch(cluster, path, seen))
        for path, seen in (
            ("/api/v1/nodes", seen_nodes),
            ("/api/v1/pods", seen_pods),
            ("/apis/coordination.k8s.io/v1/leases", seen_leases),
            (PRIORITY_CLASSES, seen_classes),
        )
    ]
    await asyncio.sleep(0.2)
    config = BenchConfig(
        nodes="6:gpu=8,cpu=64,memory=512Gi,zones=2",
        pods=40,
        min_gang=4,
        max_gang=8,
        priorities=[10, 20],
        timeout_seconds=60,
    )
    try:
        result = await asyncio.to_thread(run_bench, config, kubeconfig, False)
        await asyncio.sleep(0.3)  # the last events
    finally:
        for watch in watches:
            watch.cancel()
        for watch in watches:
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    # the benchmark itself
    assert result.nodes == 6
    assert result.pods_bound == 40 and result.gangs_bound == result.gangs_total
    assert result.invariants_hold and result.pods_on_other_nodes == 0
    assert "; apiserver v1.30.0+gang-sim" in result.machine

    # its nodes: kubelet-free, Ready, with the pool's capacity, untainted, in two zones
    expected = {f"gang-bench-node-{i:05d}" for i in range(6)}
    last: dict[str, Any] = {}
    for kind, node in seen_nodes:
        if node["metadata"]["name"] in expected and kind != "DELETED":
            last[node["metadata"]["name"]] = node
    assert set(last) == expected
    for node in last.values():
        status = node["status"]
        for field in ("capacity", "allocatable"):
            assert status[field]["nvidia.com/gpu"] == "8"
            assert status[field]["cpu"] == "64" and status[field]["memory"] == "512Gi"
        ready = [c for c in status["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        assert status["addresses"] == [{"type": "Hostname", "address": node["metadata"]["name"]}]
        assert node["metadata"]["labels"]["gang-bench"] == "1"
        taints = (node.get("spec") or {}).get("taints") or []
        assert NOT_READY_TAINT not in {t["key"] for t in taints}
    zones = {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in last.values()}
    assert len(zones) == 2

    # its pods: pinned to its nodes by the nodeSelector, and bound only there
    bound: dict[str, str] = {}
    for _kind, pod in seen_pods:
        assert pod["metadata"]["namespace"] == NAMESPACE
        assert pod["spec"]["nodeSelector"] == NODE_SELECTOR
        if pod["spec"].get("nodeName"):
            bound[pod["metadata"]["name"]] = pod["spec"]["nodeName"]
    assert len(bound) == 40
    assert set(bound.values()) <= expected

    # a Lease per node, owned by it
    leases = {lease["metadata"]["name"]: lease for kind, lease in seen_leases if kind != "DELETED"}
    assert set(leases) == expected
    for name, lease in leases.items():
        assert lease["metadata"]["namespace"] == "kube-node-lease"
        assert lease["spec"]["holderIdentity"] == name
        assert lease["metadata"]["ownerReferences"][0]["name"] == name

    # the PriorityClass it created came and went; the one it found it used and left alone
    created = {pc["metadata"]["name"] for kind, pc in seen_classes if kind == "ADDED"}
    assert "bench-p10" in created

    # and afterwards: nothing of the benchmark is left, nothing else was touched
    assert not await _exists(cluster, f"/api/v1/namespaces/{NAMESPACE}")
    assert await _names(cluster, "/api/v1/nodes") == real_nodes  # the leftover went too
    assert await _names(cluster, LEASE_PATH) == {}
    assert not await _exists(cluster, f"{PRIORITY_CLASSES}/bench-p10")
    assert await _exists(cluster, f"{PRIORITY_CLASSES}/bench-p20")
    await cluster.request("DELETE", f"{PRIORITY_CLASSES}/bench-p20")


async def test_a_namespace_that_is_not_the_benchmarks_is_refused_and_kept(
    kubeconfig: str, cluster: BenchCluster
) -> None:
    await cluster.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    try:
        config = BenchConfig(nodes="2:gpu=8", pods=8, min_gang=4, max_gang=4, priorities=[5])
        with pytest.raises(BenchClusterError, match="not created by gang bench"):
            await asyncio.to_thread(run_bench, config, kubeconfig, False)
        assert await _exists(cluster, f"/api/v1/namespaces/{NAMESPACE}")
        assert sorted(await _names(cluster, "/api/v1/nodes")) == [
            "real-00000",
            "real-00001",
            "real-00002",
        ]
        assert not await _exists(cluster, f"{PRIORITY_CLASSES}/bench-p5")
    finally:
        await cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")


async def test_an_earlier_runs_namespace_is_replaced(cluster: BenchCluster) -> None:
    labelled = {"metadata": {"name": NAMESPACE, "labels": dict(NODE_SELECTOR)}}
    await cluster.request("POST", "/api/v1/namespaces", labelled)
    await cluster.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        {
            "metadata": {"name": "left-over"},
            "spec": {"nodeName": "real-00000", "containers": [{"name": "c", "image": "pause:3"}]},
        },
    )
    await cluster.create_namespace(NAMESPACE)
    assert await _names(cluster, f"/api/v1/namespaces/{NAMESPACE}/pods") == {}
    await cluster.cleanup()
    assert not await _exists(cluster, f"/api/v1/namespaces/{NAMESPACE}")


async def test_nodes_heartbeat_while_the_benchmark_runs(kubeconfig: str) -> None:
    client = await make_api_client(kubeconfig)
    try:
        await _heartbeats(BenchCluster(client, renew_every=0.05))
    finally:
        await client.close()


async def test_the_nodes_beats_are_spread_over_the_period_not_sent_at_once(
    kubeconfig: str,
) -> None:
    """Kubelets renew on their own timers; a benchmark renewing every Lease at once would put a
    burst of writes into whichever measured window it met."""
    client = await make_api_client(kubeconfig)
    cluster = BenchCluster(client, renew_every=1.0)
    try:
        await cluster.create_nodes("10:gpu=4,prefix=spread")
        # every Lease renewed since its creation: a first round may have begun with only the
        # nodes created by then, the next holds them all
        await asyncio.sleep(2.5)
        leases = (await cluster.request("GET", LEASE_PATH))["items"]
        beats = sorted(
            datetime.strptime(lease["spec"]["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
            for lease in leases
            if lease["metadata"]["name"].startswith("gang-bench-spread-")
        )
        assert len(beats) == 10
        # ten beats a tenth of a second apart span most of the period (all at once: ~0)
        assert beats[-1] - beats[0] >= 0.6, beats
        assert min(b - a for a, b in itertools.pairwise(beats)) >= 0.03, beats
    finally:
        await cluster.cleanup()
        await client.close()


async def test_stopping_the_heartbeats_ends_them_even_as_a_round_of_beats_finishes(
    kubeconfig: str,
) -> None:
    """The clean-up stops the heartbeats first. A stop that met a round of Lease renewals
    finishing in the same turn of the loop was lost on Python 3.11 (``asyncio.wait_for``
    returned the round's result instead of the cancellation): the heartbeats went on, and the
    clean-up waited for them for ever, leaving the run's pods and nodes behind."""
    client = await make_api_client(kubeconfig)
    cluster = BenchCluster(client, renew_every=0.05)
    entered = asyncio.Event()
    finish: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def a_round(names: list[str]) -> None:  # a round of beats that ends when told
        entered.set()
        await finish

    cluster._renew = a_round  # type: ignore[method-assign]
    try:
        await cluster.create_nodes("1:gpu=4,prefix=stop")
        await asyncio.wait_for(entered.wait(), 5)
        heartbeat = cluster._heartbeat
        assert heartbeat is not None
        finish.set_result(None)  # the round ends in the same turn as the stop arrives
        stopping = asyncio.create_task(cluster.stop_heartbeats())
        await asyncio.wait({stopping}, timeout=5)  # (never cancels it: nothing can swallow that)
        assert stopping.done() and heartbeat.done()
        assert cluster._heartbeat is None
    finally:
        await cluster.cleanup()
        await client.close()


async def test_deleting_the_namespace_rides_out_answers_worth_another_try() -> None:
    """A collection delete of 20,000 pods on a 2-core kube-apiserver outlasted its request
    timeout (504, half done) and ended the clean-up with the pods left behind. Every step of
    the namespace's deletion is tried again on such answers (here a 500 or 429 for a third of
    the requests, seeded) until the namespace is gone."""
    faults = Faults(seed=7)
    async with SimCluster("1:gpu=8", faults=faults) as sim, sim.api_client() as client:
        cluster = BenchCluster(client)
        await cluster.create_namespace(NAMESPACE)
        for i in range(5):
            await cluster.create(
                f"/api/v1/namespaces/{NAMESPACE}/pods",
                {
                    "metadata": {"name": f"p-{i}"},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            )
        faults.error_rate, faults.throttle_rate = 0.2, 0.15
        try:
            await cluster.delete_namespace(NAMESPACE, within=60)
        finally:
            faults.error_rate = faults.throttle_rate = 0.0
        assert faults.counts.server_errors + faults.counts.throttled > 0
        assert not await _exists(cluster, f"/api/v1/namespaces/{NAMESPACE}")


async def _heartbeats(cluster: BenchCluster) -> None:
    nodes = await cluster.create_nodes("2:gpu=4,prefix=hb")
    assert [n["metadata"]["name"] for n in nodes] == ["gang-bench-hb-00000", "gang-bench-hb-00001"]
    first = await cluster.request("GET", f"{LEASE_PATH}/gang-bench-hb-00000")
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            now = await cluster.request("GET", f"{LEASE_PATH}/gang-bench-hb-00000")
            if now["spec"]["renewTime"] != first["spec"]["renewTime"]:
                break
        else:
            pytest.fail("the lease was never renewed")
        # a lease someone deleted is created again
        await cluster.request("DELETE", f"{LEASE_PATH}/gang-bench-hb-00001")
        for _ in range(100):
            await asyncio.sleep(0.05)
            if await _exists(cluster, f"{LEASE_PATH}/gang-bench-hb-00001"):
                break
        else:
            pytest.fail("the deleted lease was not created again")
    finally:
        await cluster.cleanup()
    assert sorted(await _names(cluster, "/api/v1/nodes")) == [
        "real-00000",
        "real-00001",
        "real-00002",
    ]
    assert await _names(cluster, LEASE_PATH) == {}


def test_bench_nodes_are_prefixed_labelled_and_pods_pinned_only_on_request() -> None:
    nodes = bench_node_objects("2:gpu=8,zones=2;1:cpu=8,prefix=cpu,label:role=x")
    assert [n["metadata"]["name"] for n in nodes] == [
        "gang-bench-node-00000",
        "gang-bench-node-00001",
        "gang-bench-cpu-00000",
    ]
    assert all(n["metadata"]["labels"]["gang-bench"] == "1" for n in nodes)
    assert nodes[2]["metadata"]["labels"]["role"] == "x"
    # no InternalIP a metrics scraper could take for a real machine
    assert all(
        n["status"]["addresses"] == [{"type": "Hostname", "address": n["metadata"]["name"]}]
        for n in nodes
    )
    config = BenchConfig(pods=4, min_gang=4, max_gang=4)
    gang = plan(config)[0]
    assert "nodeSelector" not in pods(gang, config)[0]["spec"]
    assert pods(gang, config, node_selector=NODE_SELECTOR)[0]["spec"]["nodeSelector"] == {
        "gang-bench": "1"
    }
