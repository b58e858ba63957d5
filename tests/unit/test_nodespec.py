"""The bulk node spec: parsing pool strings, the node objects they produce, and node admission."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from gang.sim.api import NOT_READY_TAINT
from gang.sim.cluster import SimCluster
from gang.sim.nodespec import (
    GPU_RESOURCE,
    REGION_LABEL,
    ZONE_LABEL,
    NodePool,
    NodeSpecError,
    Taint,
    node_objects,
    parse_pool,
    parse_pools,
)
from tests.conftest import Raw

NOT_READY = NOT_READY_TAINT["key"]

# --- parse_pool -----------------------------------------------------------------------------


def test_gpu_and_zones_example() -> None:
    pool = parse_pool("100:gpu=8,zones=4")
    assert pool == NodePool(count=100, gpu=8, zones=4)
    assert (pool.cpu, pool.memory, pool.pods, pool.ephemeral_storage) == (
        "32",
        "128Gi",
        "110",
        "100Gi",
    )
    assert pool.prefix == "node" and pool.labels == {} and pool.taints == []
    assert pool.extended == {} and pool.unschedulable is False


def test_count_alone() -> None:
    assert parse_pool("3") == NodePool(count=3)
    assert parse_pool("  3  ") == NodePool(count=3)


def test_quantities() -> None:
    pool = parse_pool("2:cpu=64,memory=512Gi,pods=250,ephemeral-storage=1Ti")
    assert (pool.cpu, pool.memory, pool.pods, pool.ephemeral_storage) == (
        "64",
        "512Gi",
        "250",
        "1Ti",
    )
    assert parse_pool("1:cpu=500m").cpu == "500m"
    assert pool.allocatable() == {
        "cpu": "64",
        "memory": "512Gi",
        "pods": "250",
        "ephemeral-storage": "1Ti",
    }


def test_extended_resources_labels_taints_unschedulable_prefix() -> None:
    pool = parse_pool(
        "5: res:example.com/fpga=2, label:pool=a, label:tier=gold, "
        "taint:dedicated=ml:NoSchedule, taint:k:NoExecute, unschedulable, prefix=ml, gpu=4"
    )
    assert pool.count == 5
    assert pool.extended == {"example.com/fpga": "2"}
    assert pool.labels == {"pool": "a", "tier": "gold"}
    assert pool.taints == [
        Taint(key="dedicated", value="ml", effect="NoSchedule"),
        Taint(key="k", value="", effect="NoExecute"),
    ]
    assert pool.unschedulable is True
    assert pool.prefix == "ml"
    assert pool.allocatable() == {
        "cpu": "32",
        "memory": "128Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
        GPU_RESOURCE: "4",
        "example.com/fpga": "2",
    }


def test_prefer_no_schedule_taint_and_label_values_with_colons() -> None:
    pool = parse_pool("1:taint:a/b=c:PreferNoSchedule,label:url=x:y")
    assert pool.taints == [Taint(key="a/b", value="c", effect="PreferNoSchedule")]
    assert pool.labels == {"url": "x:y"}


@pytest.mark.parametrize(
    "spec",
    [
        "",  # nothing at all
        ":gpu=8",  # no count before the options
        "gpu=8",  # options only
        "many:gpu=8",  # a count that is not a number
        "1.5",  # nor an integer
    ],
)
def test_missing_or_bad_count(spec: str) -> None:
    with pytest.raises(NodeSpecError, match="must start with a node count"):
        parse_pool(spec)


@pytest.mark.parametrize("spec", ["0", "-1", "100001"])
def test_count_out_of_range(spec: str) -> None:
    with pytest.raises(NodeSpecError, match="count"):
        parse_pool(spec)


@pytest.mark.parametrize(
    "spec",
    [
        "1:cpu=lots",
        "1:memory=12XB",
        "1:pods=",
        "1:ephemeral-storage=1.2.3",
        "1:cpu=-1",
        "1:res:example.com/fpga=two",
        "1:res:example.com/fpga=-2",
    ],
)
def test_bad_quantity(spec: str) -> None:
    with pytest.raises(NodeSpecError, match=r"node pool '1:"):
        parse_pool(spec)


@pytest.mark.parametrize("spec", ["1:taint:k=v:Sometimes", "1:taint:k:noschedule"])
def test_bad_taint_effect(spec: str) -> None:
    with pytest.raises(NodeSpecError, match="taint effect must be one of"):
        parse_pool(spec)


@pytest.mark.parametrize("spec", ["1:taint:k=v", "1:taint:NoSchedule", "1:taint::NoSchedule"])
def test_taint_without_key_or_effect(spec: str) -> None:
    with pytest.raises(NodeSpecError, match=r"must be KEY\[=VALUE\]:EFFECT"):
        parse_pool(spec)


@pytest.mark.parametrize("spec", ["1:gpu", "1:zones", "1:cpu=1,memory"])
def test_option_without_equals(spec: str) -> None:
    with pytest.raises(NodeSpecError, match="must be key=value"):
        parse_pool(spec)


@pytest.mark.parametrize("spec", ["1:label:novalue", "1:res:=2", "1:label:=x"])
def test_label_or_resource_without_key_value(spec: str) -> None:
    with pytest.raises(NodeSpecError, match="must be KEY=VALUE"):
        parse_pool(spec)


@pytest.mark.parametrize("spec", ["1:colour=red", "1:gpu=eight", "1:gpu=-1", "1:zones=0"])
def test_unknown_option_or_bad_number(spec: str) -> None:
    with pytest.raises(NodeSpecError):
        parse_pool(spec)


def test_node_spec_error_is_a_value_error() -> None:
    assert issubclass(NodeSpecError, ValueError)


# --- parse_pools ----------------------------------------------------------------------------


def test_several_pools() -> None:
    pools = parse_pools("100:gpu=8,zones=4;10:cpu=64,memory=512Gi,prefix=cpu")
    assert [(p.count, p.prefix, p.gpu, p.cpu) for p in pools] == [
        (100, "node", 8, "32"),
        (10, "cpu", 0, "64"),
    ]


def test_empty_parts_are_ignored() -> None:
    assert parse_pools("") == []
    assert parse_pools(" ; ") == []
    assert [p.count for p in parse_pools("2;;3;")] == [2, 3]


def test_duplicate_prefixes_are_made_unique() -> None:
    pools = parse_pools("2;3:prefix=cpu;1")
    assert [p.prefix for p in pools] == ["node0", "cpu", "node2"]
    assert [p.count for p in pools] == [2, 3, 1]
    names = [n["metadata"]["name"] for n in node_objects(pools)]
    assert len(names) == len(set(names)) == 6


def test_made_unique_prefixes_do_not_collide_with_given_ones() -> None:
    pools = parse_pools("1:prefix=node1;1;1")
    prefixes = [p.prefix for p in pools]
    assert prefixes[0] == "node1"  # a prefix given once is kept
    assert len(set(prefixes)) == 3
    names = [n["metadata"]["name"] for n in node_objects(pools)]
    assert len(set(names)) == 3


def test_distinct_prefixes_are_kept() -> None:
    assert [p.prefix for p in parse_pools("1:prefix=a;1:prefix=b;1")] == ["a", "b", "node"]


def test_an_error_in_any_pool_fails_the_whole_spec() -> None:
    with pytest.raises(NodeSpecError, match="cpu=lots"):
        parse_pools("1;2:cpu=lots")


# --- node_objects ---------------------------------------------------------------------------


def test_node_objects_shape() -> None:
    nodes = node_objects(parse_pools("6:gpu=8,zones=4,label:pool=a"))
    assert [n["metadata"]["name"] for n in nodes] == [f"node-0000{i}" for i in range(6)]
    zones = [n["metadata"]["labels"][ZONE_LABEL] for n in nodes]
    assert zones == ["zone-0", "zone-1", "zone-2", "zone-3", "zone-0", "zone-1"]
    for node in nodes:
        name = node["metadata"]["name"]
        assert (node["apiVersion"], node["kind"]) == ("v1", "Node")
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == name
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["kubernetes.io/arch"] == "amd64"
        assert labels[REGION_LABEL] == "region-0"
        assert labels["pool"] == "a"
        assert node["spec"] == {}
        status = node["status"]
        expected = {
            "cpu": "32",
            "memory": "128Gi",
            "pods": "110",
            "ephemeral-storage": "100Gi",
            "nvidia.com/gpu": "8",
        }
        assert status["allocatable"] == expected
        assert status["capacity"] == expected
        ready = [c for c in status["conditions"] if c["type"] == "Ready"]
        assert len(ready) == 1 and ready[0]["status"] == "True"
        info = status["nodeInfo"]
        assert set(info) == {
            "machineID",
            "systemUUID",
            "bootID",
            "kernelVersion",
            "osImage",
            "containerRuntimeVersion",
            "kubeletVersion",
            "kubeProxyVersion",
            "operatingSystem",
            "architecture",
        }
        for field, value in info.items():
            assert isinstance(value, str), field
            assert value or field == "kubeProxyVersion", field
        assert info["kubeProxyVersion"] == ""  # deprecated and empty on current kubelets
        assert (info["operatingSystem"], info["architecture"]) == ("linux", "amd64")
        hostnames = [a["address"] for a in status["addresses"] if a["type"] == "Hostname"]
        assert hostnames == [name]


def test_node_objects_without_gpu_have_no_gpu_resource() -> None:
    [node] = node_objects(parse_pools("1"))
    assert GPU_RESOURCE not in node["status"]["allocatable"]
    assert node["metadata"]["labels"][ZONE_LABEL] == "zone-0"


def test_node_objects_across_pools_have_unique_names_and_addresses() -> None:
    nodes = node_objects(parse_pools("3;2:prefix=cpu;2"))
    names = [n["metadata"]["name"] for n in nodes]
    assert names == [
        "node0-00000",
        "node0-00001",
        "node0-00002",
        "cpu-00000",
        "cpu-00001",
        "node2-00000",
        "node2-00001",
    ]
    ips = [
        a["address"] for n in nodes for a in n["status"]["addresses"] if a["type"] == "InternalIP"
    ]
    assert len(ips) == len(set(ips)) == 7
    machine_ids = {n["status"]["nodeInfo"]["machineID"] for n in nodes}
    assert len(machine_ids) == 7


def test_node_objects_taints_and_unschedulable() -> None:
    [node] = node_objects(
        parse_pools("1:taint:dedicated=ml:NoSchedule,taint:k:NoExecute,unschedulable")
    )
    assert node["spec"] == {
        "taints": [
            {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
            {"key": "k", "value": "", "effect": "NoExecute"},
        ],
        "unschedulable": True,
    }


def test_node_objects_do_not_share_mutable_state() -> None:
    a, b = node_objects(parse_pools("2:res:example.com/fpga=1"))
    a["status"]["allocatable"]["cpu"] = "1"
    a["metadata"]["labels"]["x"] = "y"
    assert b["status"]["allocatable"]["cpu"] == "32"
    assert "x" not in b["metadata"]["labels"]
    assert a["status"]["capacity"]["cpu"] == "32"


# --- node admission and the node controller stand-in -----------------------------------------


def _taint_keys(node: dict[str, Any]) -> list[str]:
    return [t["key"] for t in (node.get("spec") or {}).get("taints") or []]


async def test_add_nodes_lose_the_not_ready_taint_right_after_creation() -> None:
    async with SimCluster("1") as cluster, aiohttp.ClientSession() as session:
        raw = Raw(session, cluster.url)
        status, listed, _ = await raw.get("/api/v1/nodes")
        assert status == 200
        since = listed["metadata"]["resourceVersion"]
        assert [_taint_keys(n) for n in listed["items"]] == [[]]
        assert "taints" not in listed["items"][0]["spec"]

        names = cluster.add_nodes("2:prefix=ml,taint:dedicated=ml:NoSchedule")
        assert names == ["ml-00000", "ml-00001"]
        await asyncio.sleep(0)  # the controller acts on the next loop iteration

        events = await raw.watch_lines(
            f"/api/v1/nodes?watch=1&resourceVersion={since}", max_events=4, seconds=1
        )
        seen = [
            (e["type"], e["object"]["metadata"]["name"], _taint_keys(e["object"])) for e in events
        ]
        # admission adds the not-ready taint; the node controller removes it once Ready
        assert seen == [
            ("ADDED", "ml-00000", ["dedicated", NOT_READY]),
            ("ADDED", "ml-00001", ["dedicated", NOT_READY]),
            ("MODIFIED", "ml-00000", ["dedicated"]),
            ("MODIFIED", "ml-00001", ["dedicated"]),
        ]
        for name in names:
            _, node, _ = await raw.get(f"/api/v1/nodes/{name}")
            assert node["spec"]["taints"] == [
                {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
            ]


def _http_node(name: str, ready: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": {"cpu": "4"}, "capacity": {"cpu": "4"}}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


async def test_http_nodes_keep_the_taint_unless_ready() -> None:
    async with SimCluster() as cluster, aiohttp.ClientSession() as session:
        raw = Raw(session, cluster.url)
        for name, ready in (("bare", None), ("sick", "False"), ("unknown", "Unknown")):
            status, created, _ = await raw.post("/api/v1/nodes", _http_node(name, ready))
            assert status == 201
            assert created["spec"]["taints"] == [{"key": NOT_READY, "effect": "NoSchedule"}]
        status, created, _ = await raw.post("/api/v1/nodes", _http_node("fine", "True"))
        assert status == 201
        assert _taint_keys(created) == [NOT_READY]  # as admitted; the controller comes next

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 3
        while _taint_keys((await raw.get("/api/v1/nodes/fine"))[1]):
            assert loop.time() < deadline, "the node controller never untainted the Ready node"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        for name in ("bare", "sick", "unknown"):
            _, node, _ = await raw.get(f"/api/v1/nodes/{name}")
            assert _taint_keys(node) == [NOT_READY], name


async def test_node_controller_off_keeps_the_taint() -> None:
    async with SimCluster("1", node_controller=False) as cluster:
        await asyncio.sleep(0.05)
        node = cluster.api.get(cluster.api.rt_nodes, None, "node-00000")
        assert _taint_keys(node) == [NOT_READY]
