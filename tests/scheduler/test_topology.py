"""Topology-aware placement over HTTP: gangs inside one rack or block, as their APIs ask.

The real scheduler on the simulator, 64 nodes in 4 blocks x 4 racks x 4 hosts (one 1-CPU
member per host), the topology declared as users declare it (Kueue's or KAI's ``Topology``
object, or gang's settings), the asks written as users write them (Kueue's pod-template
annotations, KAI's annotations):

- required rack, gang of 4 → one rack; gang of 5 → pending, saying why, nothing bound;
- racks with 2 and 3 free → gangs of 2 and 3 each take the tightest rack;
- preferred rack, gang of 12 → one block, 3 whole racks; gang of 20 → 16 + 4 in exactly 2 blocks;
- required block + preferred rack (KAI) → one block, as few racks as possible;
- 4 slices of 4, each inside one rack, all inside one block, ranks 0-3 in one rack (Kueue slices);
- preemption evicts the pods of one whole rack for a gang that requires a rack;
- a reservation holds the rack whose pods end first, and the gang binds there;
- a lost member comes back inside its gang's rack, or waits — never outside it;
- bad asks (an unknown level, required finer than preferred, two APIs disagreeing) are said in
  an Event, nothing of them is bound, and other gangs are served meanwhile.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s

from gang.app.explain import explain, find_gang, render
from gang.models.topologyapis import (
    KAI_PREFERRED,
    KAI_REQUIRED,
    KAI_TOPOLOGY_NAME,
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    KUEUE_SLICE_REQUIRED,
    KUEUE_SLICE_SIZE,
)
from gang.sim.kubelet import RUN_SECONDS, KubeletConfig
from gang.sim.nodespec import BLOCK_LABEL, RACK_LABEL
from gang.state.podinfo import EXPECTED_RUN_ANNOTATION
from tests.scheduler.conftest import Env, eventually, gang_env, gang_pod, podgroup

pytestmark = pytest.mark.asyncio

NS = "default"
HOSTNAME = "kubernetes.io/hostname"
NODES = "64:cpu=1,memory=8Gi,blocks=4,racks=4,prefix=host"
LEVELS = [BLOCK_LABEL, RACK_LABEL, HOSTNAME]
INDEX = "batch.kubernetes.io/job-completion-index"


def topology_object(api: str, name: str = "cluster") -> dict[str, Any]:
    group = {"kueue": "kueue.x-k8s.io/v1beta2", "kai": "kai.scheduler/v1alpha1"}[api]
    return {
        "apiVersion": group,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in LEVELS]},
    }


@asynccontextmanager
async def topology_env(api: str = "kueue", **config: Any) -> AsyncIterator[Env]:
    """The 64-node cluster with the topology declared as ``api`` declares it."""
    settings = [{"name": "cluster", "levels": LEVELS}] if api == "settings" else []
    async with gang_env(NODES, topologies=settings, **config) as env:
        if api != "settings":
            group, version = topology_object(api)["apiVersion"].split("/")
            await env.api.custom.create_cluster_custom_object(
                group, version, "topologies", topology_object(api)
            )
        yield env


async def create_gang(
    env: Env,
    name: str,
    members: int,
    annotations: dict[str, str],
    min_member: int | None = None,
    priority: str | None = None,
    index: Callable[[int], int] | None = None,
) -> None:
    """A PodGroup and its pods; ``index``: pod i's completion index, as an indexed Job's."""
    await env.api.create_podgroup(podgroup(name, min_member or members))
    pods = []
    for i in range(members):
        labels = {INDEX: str(index(i))} if index is not None else None
        pod = gang_pod(
            f"{name}-{i}", name, cpu="1", memory="1Gi", priority_class=priority, labels=labels
        )
        pod["metadata"]["annotations"] = dict(annotations)
        pods.append(pod)
    await env.api.create_pods(pods, NS)


async def fill(env: Env, hosts: list[str]) -> None:
    """Foreign pods bound straight to ``hosts`` (another scheduler's), one host each."""
    pods = [gang_pod(f"filler-{h}", None, cpu="1", memory="1Gi", scheduler="other") for h in hosts]
    await env.api.create_pods(pods, NS)
    for pod, host in zip(pods, hosts, strict=True):
        await env.api.bind(pod["metadata"]["name"], host, NS)


async def domains(env: Env, prefix: str) -> Counter[tuple[str, str]]:
    """Members of the gang ``prefix`` bound per (block, rack)."""
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in await env.api.raw_nodes()}
    bound = await env.api.bound(NS)
    return Counter(
        (labels[node][BLOCK_LABEL], labels[node][RACK_LABEL])
        for pod, node in bound.items()
        if pod.startswith(prefix + "-")
    )


async def bound_count(env: Env, prefix: str) -> int:
    return sum((await domains(env, prefix)).values())


async def failures(env: Env, group: str) -> list[str]:
    """The gang's FailedScheduling messages (Events on its pods)."""
    return [
        e["message"]
        for e in await env.api.events(NS)
        if e["reason"] == "FailedScheduling"
        and e["involvedObject"]["name"].rsplit("-", 1)[0] == group
    ]


async def wait_bound(env: Env, prefix: str, count: int) -> None:
    async def all_bound() -> bool:
        return await bound_count(env, prefix) == count

    all_bound.__name__ = f"{prefix}: {count} bound"
    await eventually(all_bound, within=15)


async def wait_failure(env: Env, group: str, words: str) -> str:
    said: list[str] = []

    async def failed() -> bool:
        said[:] = [m for m in await failures(env, group) if words in m]
        return bool(said)

    failed.__name__ = f"{group}: FailedScheduling saying {words!r}"
    await eventually(failed, within=15)
    return said[0]


def kueue(required: str = "", preferred: str = "", **slices: str) -> dict[str, str]:
    out = {}
    if required:
        out[KUEUE_REQUIRED] = required
    if preferred:
        out[KUEUE_PREFERRED] = preferred
    if slices:
        out[KUEUE_SLICE_REQUIRED] = slices["level"]
        out[KUEUE_SLICE_SIZE] = slices["size"]
    return out


async def test_required_rack_holds_a_gang_of_4_and_refuses_5_saying_why() -> None:
    async with topology_env("kueue") as env:
        await create_gang(env, "four", 4, kueue(required=RACK_LABEL))
        await wait_bound(env, "four", 4)
        assert len(await domains(env, "four")) == 1
        await create_gang(env, "five", 5, kueue(required=RACK_LABEL))
        said = await wait_failure(env, "five", "required rack: the best rack fits 4 of 5 members")
        assert "even with every node empty" in said  # no rack has 5 hosts: never, not "not now"
        assert await bound_count(env, "five") == 0

        async def condition_says() -> bool:
            status = (await env.api.get_podgroup("five")).get("status") or {}
            return any(
                c["type"] == "Scheduled" and "required rack" in c["message"]
                for c in status.get("conditions") or []
            )

        await eventually(condition_says)
        gang = find_gang(env.scheduler, NS, "five")
        assert gang is not None
        report = explain(env.scheduler, gang)
        assert "required rack: the best rack fits 4 of 5 members" in report["why"]
        assert report["topology"]["asks"] == "required rack"
        assert "topology kueue/cluster: required rack" in render(report)
        await env.api.assert_not_overcommitted()


async def test_gangs_take_the_tightest_rack() -> None:
    async with topology_env("kai") as env:
        # rack b1/r2 has 2 hosts free, rack b2/r1 has 3; every other rack 4
        await fill(env, ["host-00024", "host-00025", "host-00036"])
        ask = {KAI_TOPOLOGY_NAME: "cluster", KAI_REQUIRED: RACK_LABEL}
        await create_gang(env, "pair", 2, ask)
        await wait_bound(env, "pair", 2)
        await create_gang(env, "trio", 3, ask)
        await wait_bound(env, "trio", 3)
        assert await domains(env, "pair") == {("b1", "r2"): 2}
        assert await domains(env, "trio") == {("b2", "r1"): 3}


async def test_preferred_rack_climbs_to_one_block_then_to_two() -> None:
    async with topology_env("settings") as env:
        await create_gang(env, "twelve", 12, kueue(preferred=RACK_LABEL))
        await wait_bound(env, "twelve", 12)
        placed = await domains(env, "twelve")
        assert sorted(placed.values()) == [4, 4, 4]  # 3 whole racks
        assert len({block for block, _ in placed}) == 1  # of one block
        await create_gang(env, "twenty", 20, kueue(preferred=RACK_LABEL))
        await wait_bound(env, "twenty", 20)
        per_block = Counter[str]()
        for (block, _), n in (await domains(env, "twenty")).items():
            per_block[block] += n
        # a block holds 16: the gang takes one whole and the tightest other that holds 4 (the
        # block "twelve" left one rack of)
        assert sorted(per_block.values()) == [4, 16]
        assert per_block[next(iter(placed))[0]] == 4


async def test_required_block_and_preferred_rack() -> None:
    async with topology_env("kai") as env:
        await fill(env, ["host-00000"])  # block b0 now holds 15
        ask = {KAI_REQUIRED: BLOCK_LABEL, KAI_PREFERRED: RACK_LABEL}
        await create_gang(env, "six", 6, ask)
        await wait_bound(env, "six", 6)
        placed = await domains(env, "six")
        assert len({block for block, _ in placed}) == 1
        assert len(placed) == 2  # as few racks as possible
        assert next(iter(placed))[0] == "b0"  # the tightest block that holds it


async def test_slices_of_four_each_inside_a_rack_all_inside_one_block() -> None:
    async with topology_env("kueue") as env:
        await fill(env, ["host-00001"])  # b0's first rack holds 3: no slice fits there
        ask = kueue(required=BLOCK_LABEL, level=RACK_LABEL, size="4")
        # an indexed Job's pods: ranks 0-3 make one slice, 4-7 the next... (names say otherwise)
        await create_gang(env, "sliced", 16, ask, index=lambda i: (i * 5) % 16)
        await wait_bound(env, "sliced", 16)
        placed = await domains(env, "sliced")
        assert sorted(placed.values()) == [4, 4, 4, 4]
        assert len({block for block, _ in placed}) == 1
        assert "b0" not in {block for block, _ in placed}
        labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in await env.api.raw_nodes()}
        rack_of = {
            int(p["metadata"]["labels"][INDEX]): labels[p["spec"]["nodeName"]][RACK_LABEL]
            for p in await env.api.raw_pods(NS)
            if p["metadata"]["name"].startswith("sliced-")
        }
        for first in range(0, 16, 4):  # each slice's ranks together in one rack
            assert len({rack_of[rank] for rank in range(first, first + 4)}) == 1


async def test_a_lost_member_comes_back_inside_its_rack_or_waits() -> None:
    async with topology_env("kueue") as env:
        await create_gang(env, "crew", 4, kueue(required=RACK_LABEL))
        await wait_bound(env, "crew", 4)
        ((home, _),) = (await domains(env, "crew")).items()
        bound = await env.api.bound(NS)
        lost_host = bound["crew-3"]
        await env.api.core.delete_namespaced_pod("crew-3", NS, grace_period_seconds=0)
        # its operator makes it again: the host it left is free, so it returns to the rack
        pod = gang_pod("crew-3b", "crew", cpu="1", memory="1Gi")
        pod["metadata"]["annotations"] = kueue(required=RACK_LABEL)
        await env.api.create_pods([pod], NS)
        await wait_bound(env, "crew", 4)
        assert (await domains(env, "crew")) == {home: 4}
        # lost again, and its host taken: it waits, though 60 other hosts are free
        lost_host = (await env.api.bound(NS))["crew-3b"]
        await env.api.core.delete_namespaced_pod("crew-3b", NS, grace_period_seconds=0)
        await fill(env, [lost_host])
        pod = gang_pod("crew-3c", "crew", cpu="1", memory="1Gi")
        pod["metadata"]["annotations"] = kueue(required=RACK_LABEL)
        await env.api.create_pods([pod], NS)
        await wait_failure(env, "crew", "required rack")
        assert "crew-3c" not in await env.api.bound(NS)
        assert (await domains(env, "crew")) == {home: 3}


async def test_bad_asks_are_said_and_others_are_served() -> None:
    async with topology_env("kueue") as env:
        await create_gang(env, "unknown", 2, kueue(required="topology.example.com/row"))
        await create_gang(
            env, "inverted", 2, {KAI_REQUIRED: RACK_LABEL, KAI_PREFERRED: BLOCK_LABEL}
        )
        await create_gang(env, "torn", 2, {**kueue(required=RACK_LABEL), KAI_REQUIRED: BLOCK_LABEL})
        await create_gang(env, "fine", 4, kueue(required=RACK_LABEL))
        await wait_bound(env, "fine", 4)
        said = await wait_failure(env, "unknown", "no topology has the required level")
        assert "topology.example.com/row" in said
        await wait_failure(env, "inverted", "is finer than the preferred level")
        await wait_failure(env, "torn", "disagree")
        for name in ("unknown", "inverted", "torn"):
            assert await bound_count(env, name) == 0


async def test_preemption_frees_one_whole_rack() -> None:
    """Every host runs a low-priority pod; the four cheapest stand in four different racks. A
    high-priority gang that requires one rack evicts the four pods of one rack — not the four
    cheapest, whose room would be no rack."""
    kubelet = KubeletConfig(start_delay=0.05, termination_delay=0.2)
    async with topology_env("kueue", cluster_options={"kubelet": kubelet}) as env:
        async with env.cluster.api_client() as client:
            scheduling = k8s.SchedulingV1Api(client)
            for name, value in (("cheapest", 5), ("low", 10), ("high", 1000)):
                await scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
        cheapest = {f"host-{i:05d}" for i in (0, 4, 8, 12)}  # the first host of b0's racks
        hosts = [f"host-{i:05d}" for i in range(64)]
        pods = [
            gang_pod(
                f"run-{h}",
                None,
                cpu="1",
                memory="1Gi",
                priority_class="cheapest" if h in cheapest else "low",
                scheduler="other",
            )
            for h in hosts
        ]
        await env.api.create_pods(pods, NS)
        for host in hosts:  # pinned, as another scheduler placed them
            await env.api.bind(f"run-{host}", host, NS)
        await create_gang(env, "urgent", 4, kueue(required=RACK_LABEL), priority="high")
        await wait_bound(env, "urgent", 4)
        placed = await domains(env, "urgent")
        assert len(placed) == 1
        ((rack, _),) = placed.items()
        live = {p["metadata"]["name"] for p in await env.api.raw_pods(NS)}
        evicted = {f"run-{h}" for h in hosts} - live
        assert len(evicted) == 4
        labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in await env.api.raw_nodes()}
        assert {
            (
                labels[p.removeprefix("run-")][BLOCK_LABEL],
                labels[p.removeprefix("run-")][RACK_LABEL],
            )
            for p in evicted
        } == {rack}
        await env.api.assert_not_overcommitted()


# --- Volcano: HyperNodes and networkTopology -----------------------------------------------------


def hypernodes() -> list[dict[str, Any]]:
    """The 64 nodes as Volcano describes them: 16 tier-1 racks (nodes by name pattern), 4 tier-2
    blocks (racks by name)."""

    def hypernode(name: str, tier: int, tier_name: str, members: list[Any]) -> dict[str, Any]:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": tier_name, "members": members},
        }

    out = []
    for block in range(4):
        racks = []
        for rack in range(4):
            first = block * 16 + rack * 4
            pattern = "^host-000(" + "|".join(f"{i:02d}" for i in range(first, first + 4)) + ")$"
            name = f"b{block}-r{rack}"
            racks.append({"type": "HyperNode", "selector": {"exactMatch": {"name": name}}})
            node = {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}
            out.append(hypernode(name, 1, "rack", [node]))
        out.append(hypernode(f"b{block}", 2, "block", racks))
    return out


async def create_volcano_gang(env: Env, name: str, members: int, topology: dict[str, Any]) -> None:
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": members, "networkTopology": topology},
    }
    await env.api.custom.create_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", NS, "podgroups", body
    )
    pods = []
    for i in range(members):
        pod = gang_pod(f"{name}-{i}", None, cpu="1", memory="1Gi")
        pod["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": name}
        pods.append(pod)
    await env.api.create_pods(pods, NS)


async def test_volcano_network_topology_over_hypernodes() -> None:
    async with gang_env(NODES) as env:
        for body in hypernodes():
            await env.api.custom.create_cluster_custom_object(
                "topology.volcano.sh", "v1alpha1", "hypernodes", body
            )
        await fill(env, ["host-00000"])  # rack b0-r0 holds 3, block b0 15
        # hard, highest tier 1: inside one rack, the tightest
        await create_volcano_gang(env, "rack3", 3, {"mode": "hard", "highestTierAllowed": 1})
        await wait_bound(env, "rack3", 3)
        assert await domains(env, "rack3") == {("b0", "r0"): 3}
        # hard up to the tier named "block": one block, as few racks as possible
        await create_volcano_gang(env, "block6", 6, {"mode": "hard", "highestTierName": "block"})
        await wait_bound(env, "block6", 6)
        placed = await domains(env, "block6")
        assert len({b for b, _ in placed}) == 1 and len(placed) == 2
        # hard, tier 1, more than a rack: never placed, and the message names the tier
        await create_volcano_gang(env, "rack5", 5, {"mode": "hard", "highestTierAllowed": 1})
        await wait_failure(
            env, "rack5", "required HyperNode tier 1: the best HyperNode tier 1 fits 4"
        )
        assert await bound_count(env, "rack5") == 0
        # soft: the lowest tier that holds it, else spread (20 > a block's 16)
        await create_volcano_gang(env, "soft20", 20, {"mode": "soft"})
        await wait_bound(env, "soft20", 20)
        assert len({b for b, _ in await domains(env, "soft20")}) == 2
        # a tier name no HyperNode has: said, nothing placed
        await create_volcano_gang(env, "spine", 2, {"mode": "hard", "highestTierName": "spine"})
        await wait_failure(env, "spine", "no HyperNode tier is named spine (named: block, rack)")
        await env.api.assert_not_overcommitted()


async def test_volcano_sub_groups_each_inside_a_rack_all_inside_one_block() -> None:
    """``subGroupPolicy``: the pods of each replica (label ``replica``) in one tier-1 HyperNode,
    the group in one tier-2 HyperNode; names and replicas interleave on purpose."""
    async with gang_env(NODES) as env:
        for body in hypernodes():
            await env.api.custom.create_cluster_custom_object(
                "topology.volcano.sh", "v1alpha1", "hypernodes", body
            )
        await fill(env, ["host-00001"])  # b0's first rack holds 3: no sub-group fits there
        policy = {
            "name": "replicas",
            "subGroupSize": 4,
            "matchLabelKeys": ["replica"],
            "networkTopology": {"mode": "hard", "highestTierName": "rack"},
        }
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "replicas"},
            "spec": {
                "minMember": 16,
                "networkTopology": {"mode": "hard", "highestTierName": "block"},
                "subGroupPolicy": [policy],
            },
        }
        await env.api.custom.create_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", NS, "podgroups", body
        )
        pods = []
        for i in range(16):
            pod = gang_pod(
                f"replicas-{i}", None, cpu="1", memory="1Gi", labels={"replica": str(i % 4)}
            )
            pod["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "replicas"}
            pods.append(pod)
        await env.api.create_pods(pods, NS)
        await wait_bound(env, "replicas", 16)
        placed = await domains(env, "replicas")
        assert sorted(placed.values()) == [4, 4, 4, 4]
        assert len({block for block, _ in placed}) == 1 and "b0" not in {b for b, _ in placed}
        labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in await env.api.raw_nodes()}
        racks: dict[str, set[str]] = {}
        for pod in await env.api.raw_pods(NS):
            if pod["metadata"]["name"].startswith("replicas-"):
                rack = labels[pod["spec"]["nodeName"]][RACK_LABEL]
                racks.setdefault(pod["metadata"]["labels"]["replica"], set()).add(rack)
        assert all(len(r) == 1 for r in racks.values()) and len(racks) == 4


async def test_a_launcher_and_its_workers_share_one_rack() -> None:
    """A launcher that takes a whole host and 12 workers that fit 4 to a host: 13 members in a
    rack of 4 hosts, counted by the launcher where it fits and the workers beside it (counted
    by the launcher's shape alone, no rack would hold 13)."""
    async with topology_env("kueue") as env:
        await env.api.create_podgroup(podgroup("mpi", 13))
        ask = kueue(required=RACK_LABEL)
        pods = [gang_pod("mpi-launcher", "mpi", cpu="1", memory="1Gi")]
        pods += [gang_pod(f"mpi-worker-{i}", "mpi", cpu="250m", memory="512Mi") for i in range(12)]
        for pod in pods:
            pod["metadata"]["annotations"] = ask
        await env.api.create_pods(pods, NS)
        await wait_bound(env, "mpi", 13)
        assert len(await domains(env, "mpi")) == 1
        bound = await env.api.bound(NS)
        launcher_host = bound["mpi-launcher"]
        assert not any(n == launcher_host for p, n in bound.items() if p.startswith("mpi-worker"))


async def test_a_launcher_created_after_its_workers_were_reserved_replans_the_gang() -> None:
    """The workers come first and are reserved (spread over a rack, a share of every host);
    the launcher, which needs a whole host, then fits nowhere beside them. The gang gives up
    its reservations and is placed again as a whole, instead of holding the rack until its
    Permit timeout."""
    async with topology_env("kueue") as env:
        await env.api.create_podgroup(podgroup("late", 13, timeout=600))
        ask = kueue(required=RACK_LABEL)
        workers = [
            gang_pod(f"late-worker-{i}", "late", cpu="250m", memory="512Mi") for i in range(12)
        ]
        for pod in workers:
            pod["metadata"]["annotations"] = ask
        await env.api.create_pods(workers, NS)

        async def workers_reserved() -> bool:
            gang = find_gang(env.scheduler, NS, "late")
            return gang is not None and len(gang.reserved) == 12

        await eventually(workers_reserved)
        gang = find_gang(env.scheduler, NS, "late")
        assert gang is not None
        hosts = set(gang.reserved.values())
        assert len(hosts) == 4, hosts  # the workers share out the rack's four hosts
        launcher = gang_pod("late-launcher", "late", cpu="1", memory="1Gi")
        launcher["metadata"]["annotations"] = ask
        await env.api.create_pods([launcher], NS)
        await wait_bound(env, "late", 13)
        assert len(await domains(env, "late")) == 1
        bound = await env.api.bound(NS)
        assert sum(1 for n in bound.values() if n == bound["late-launcher"]) == 1


async def test_a_reservation_holds_the_rack_that_frees_first() -> None:
    """Every host busy; the pods of rack b2/r1 are declared to end first. A gang requiring a
    rack reserves that rack's four hosts (not the four hosts anywhere that free first), and
    binds there when they free."""
    kubelet = KubeletConfig(start_delay=0.05, termination_delay=0.05)
    async with topology_env("kueue", cluster_options={"kubelet": kubelet}) as env:
        soon = {f"host-{i:05d}" for i in range(36, 40)}  # rack b2/r1
        early = {f"host-{i:05d}" for i in (0, 20, 44, 60)}  # the first to end, in 4 racks
        hosts = [f"host-{i:05d}" for i in range(64)]
        pods = []
        for host in hosts:
            pod = gang_pod(f"run-{host}", None, cpu="1", memory="1Gi", scheduler="other")
            declared = 2.0 if host in early else 4.0 if host in soon else 600.0
            runs = 600.0 if host in early else declared  # the early ones overstay
            pod["metadata"]["annotations"] = {
                RUN_SECONDS: str(runs),
                EXPECTED_RUN_ANNOTATION: str(declared),
            }
            pods.append(pod)
        await env.api.create_pods(pods, NS)
        for host in hosts:
            await env.api.bind(f"run-{host}", host, NS)
        await create_gang(env, "waits", 4, kueue(required=RACK_LABEL))
        gang = None

        async def reserved() -> bool:
            nonlocal gang
            gang = find_gang(env.scheduler, NS, "waits")
            return gang is not None and gang.reservation is not None

        await eventually(reserved)
        assert gang is not None and gang.reservation is not None
        assert set(gang.reservation.nodes) == soon
        await wait_bound(env, "waits", 4)
        assert await domains(env, "waits") == {("b2", "r1"): 4}
