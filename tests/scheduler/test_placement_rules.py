"""Placement rules between pods, for whole gangs, against the simulator over HTTP.

The issue's scenarios: a gang with one member per node, a gang spread evenly over zones, pod
affinity that follows a gang, anti-affinity between two gangs (both directions), and a gang that
cannot meet its rule — nothing reserved, the rule named."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from gang.app.explain import find_gang
from tests.scheduler.conftest import Env, eventually, gang_env, gang_pod, podgroup
from tests.unit.test_placement_twins import asked_inter_pod_affinity

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def term(labels: dict[str, str], key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def anti(labels: dict[str, str], key: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(labels, key)]}
    }


def affinity(labels: dict[str, str], key: str) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(labels, key)]}}


async def create_gang(
    env: Env, name: str, size: int, labels: dict[str, str], **spec: Any
) -> list[str]:
    await env.api.create_podgroup(podgroup(name, size, timeout=30))
    names = [f"{name}-{i}" for i in range(size)]
    await env.api.create_pods(
        [gang_pod(p, name, gpu=1, cpu="100m", memory="128Mi", labels=labels, **spec) for p in names]
    )
    return names


async def bound_all(env: Env, names: list[str], within: float = 15) -> dict[str, str]:
    async def all_bound() -> bool:
        return set(names) <= set(await env.api.bound())

    await eventually(all_bound, within=within)
    bound = await env.api.bound()
    return {n: bound[n] for n in names}


async def zones_of(env: Env) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in await env.api.raw_nodes()}


async def test_one_member_per_node_inside_a_gang() -> None:
    """Required anti-affinity on hostname against the gang's own label: 8 distinct nodes, where
    bin-packing alone would put all 8 on one 8-GPU node."""
    async with gang_env("12:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        labels = {"app": "mpi-1"}
        names = await create_gang(env, "mpi-1", 8, labels, affinity=anti(labels, HOSTNAME))
        placed = await bound_all(env, names)
        assert len(set(placed.values())) == 8
        await env.api.assert_not_overcommitted()


async def test_one_per_node_holds_between_gangs_too() -> None:
    """A second gang with the same rule and label avoids the first gang's nodes: 6 + 6 on 12."""
    async with gang_env("12:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        labels = {"app": "ranks"}
        first = await create_gang(env, "ranks-a", 6, labels, affinity=anti(labels, HOSTNAME))
        await bound_all(env, first)
        second = await create_gang(env, "ranks-b", 6, labels, affinity=anti(labels, HOSTNAME))
        placed = await bound_all(env, first + second)
        assert len(set(placed.values())) == 12


async def test_a_gang_that_cannot_keep_its_rule_reserves_nothing_and_says_which() -> None:
    """8 members, one per node, on 6 nodes: nothing bound or reserved; the Event names the rule."""
    async with gang_env("6:gpu=8,cpu=64,memory=512Gi,zones=3") as env:
        labels = {"app": "too-wide"}
        names = await create_gang(env, "too-wide", 8, labels, affinity=anti(labels, HOSTNAME))

        async def told() -> bool:
            return any(
                e["reason"] == "FailedScheduling"
                and "node(s) didn't match pod anti-affinity rules" in e["message"]
                for e in await env.api.events()
            )

        await eventually(told)
        assert not set(names) & set(await env.api.bound())
        assert not any(g.reserved for g in env.scheduler.state.gangs.values())
        # the same cluster still serves a gang whose rule it can keep
        ok = await create_gang(
            env, "fits", 6, {"app": "fits"}, affinity=anti({"app": "fits"}, HOSTNAME)
        )
        assert len(set((await bound_all(env, ok)).values())) == 6


async def test_zone_spread_max_skew_one_lands_two_per_zone() -> None:
    async with gang_env("8:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        labels = {"app": "spread"}
        spread = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": labels},
            }
        ]
        names = await create_gang(env, "spread", 8, labels, topologySpreadConstraints=spread)
        placed = await bound_all(env, names)
        zones = await zones_of(env)
        assert sorted(Counter(zones[n] for n in placed.values()).values()) == [2, 2, 2, 2]


async def test_zone_spread_counts_pods_already_bound() -> None:
    """A zone already holding 2 matching pods gets none of a 6-member gang's first placements:
    the gang fills the other zones to 2 each (maxSkew 1 against the bound pods)."""
    async with gang_env("8:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        labels = {"app": "fill"}
        spread = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": labels},
            }
        ]
        zones = await zones_of(env)
        zone0 = sorted(n for n, z in zones.items() if z == "zone-0")
        await env.api.create_pods(
            [gang_pod(f"old-{i}", None, labels=labels, scheduler="other") for i in range(2)]
        )
        for i in range(2):
            await env.api.bind(f"old-{i}", zone0[i])
        names = await create_gang(env, "fill", 6, labels, topologySpreadConstraints=spread)
        placed = await bound_all(env, names)
        per_zone = Counter(zones[n] for n in placed.values())
        assert per_zone == {"zone-1": 2, "zone-2": 2, "zone-3": 2}


async def test_pod_affinity_follows_a_gang_into_its_zone() -> None:
    """A launcher with required affinity to the workers' zone lands in that zone."""
    async with gang_env("8:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        workers = await create_gang(env, "train", 4, {"job": "train", "role": "worker"})
        placed = await bound_all(env, workers)
        zones = await zones_of(env)
        (worker_zone,) = {zones[n] for n in placed.values()}  # gang packing: one zone
        launcher = gang_pod(
            "launcher",
            None,
            labels={"job": "train", "role": "launcher"},
            affinity=affinity({"job": "train", "role": "worker"}, ZONE),
        )
        await env.api.create_pods([launcher])
        assert zones[(await bound_all(env, ["launcher"]))["launcher"]] == worker_zone


async def test_a_gang_whose_affinity_matches_itself_starts_its_own_group() -> None:
    """No pod matches yet, but the members match their own term: the first may start the group,
    and every later member follows it into the same zone (spread is 0 without the rule)."""
    async with gang_env("8:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        labels = {"app": "together"}
        rule = {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(labels, ZONE)]}
        }
        names = await create_gang(env, "together", 6, labels, affinity=rule)
        placed = await bound_all(env, names)
        zones = await zones_of(env)
        assert len({zones[n] for n in placed.values()}) == 1


async def test_anti_affinity_between_two_gangs_both_directions() -> None:
    """Gang B states anti-affinity to gang A's zone; gang C states none, but gang A's own
    anti-affinity to C's label keeps C out of A's zone (the existing pods' rule, symmetry)."""
    async with gang_env("12:gpu=8,cpu=64,memory=512Gi,zones=3") as env:
        zones = await zones_of(env)
        a = await create_gang(env, "a", 3, {"team": "a"}, affinity=anti({"team": "c"}, ZONE))
        a_zones = {zones[n] for n in (await bound_all(env, a)).values()}
        b = await create_gang(env, "b", 3, {"team": "b"}, affinity=anti({"team": "a"}, ZONE))
        c = await create_gang(env, "c", 3, {"team": "c"})
        placed = await bound_all(env, a + b + c)
        assert not {zones[placed[n]] for n in b} & a_zones
        assert not {zones[placed[n]] for n in c} & a_zones
        await env.api.assert_not_overcommitted()


async def test_soft_rules_steer_without_blocking() -> None:
    """Preferred anti-affinity on hostname spreads a gang over nodes while room allows; with too
    few nodes the gang still binds (a preference never blocks). One zone: gang packing keeps a
    gang inside one zone first, and preferences choose nodes within it."""
    async with gang_env("4:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        labels = {"app": "soft"}
        rule = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": term(labels, HOSTNAME)}
                ]
            }
        }
        names = await create_gang(env, "soft", 4, labels, affinity=rule)
        assert len(set((await bound_all(env, names)).values())) == 4
        more = await create_gang(env, "soft-2", 6, labels, affinity=rule)
        await bound_all(env, more)
        await asyncio.sleep(0)
        await env.api.assert_not_overcommitted()


async def test_pods_behind_a_service_are_spread_by_kube_scheduler_s_defaults() -> None:
    """No constraint of their own, but a Service selects them: the System default constraints
    (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) spread them over nodes, where
    bin-packing alone stacks pods nobody selects on one node."""
    async with gang_env("4:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        await env.api.core.create_namespaced_service(
            "default",
            {
                "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
            },
        )

        async def service_seen() -> bool:
            return bool(env.scheduler.cache.selecting.services.get("default"))

        await eventually(service_seen)
        for i in range(4):  # one at a time: each sees the ones before it bound
            await env.api.create_pods([gang_pod(f"web-{i}", None, labels={"app": "web"})])
            await bound_all(env, [f"web-{i}"])
        for i in range(4):
            await env.api.create_pods([gang_pod(f"batch-{i}", None, labels={"app": "batch"})])
            await bound_all(env, [f"batch-{i}"])
        placed = await env.api.bound()
        assert len({placed[f"web-{i}"] for i in range(4)}) == 4
        assert len({placed[f"batch-{i}"] for i in range(4)}) == 1


@pytest.mark.parametrize("indexed", [False, True], ids=["same-labels", "replica-index"])
async def test_a_gang_of_twins_is_judged_once_as_the_api_server_admits_it(
    monkeypatch: pytest.MonkeyPatch, indexed: bool
) -> None:
    """The API server adds the not-ready/unreachable tolerations to every pod, so no two
    members arrive with the same objects; parsed, twins still share their constraints, and
    the placer asks the rule-aware plugins about the first member of the gang only. So too
    when each member carries its index, as the Kubeflow training operator labels them
    (``indexed``): nothing selects by it."""
    asked = asked_inter_pod_affinity(monkeypatch)
    async with gang_env("4:gpu=8,cpu=64,memory=512Gi") as env:
        names = [f"twins-{i}" for i in range(6)]

        def labels(i: int) -> dict[str, str]:
            index = {"training.kubeflow.org/replica-index": str(i)} if indexed else {}
            return {"app": "twins", **index}

        pods = [gang_pod(n, "twins", gpu=1, labels=labels(i)) for i, n in enumerate(names)]
        await env.api.create_pods(pods)

        async def all_known() -> bool:  # every member seen before the group: no stand-ins
            gang = find_gang(env.scheduler, "default", "twins")
            return gang is not None and len(gang.members) == 6

        await eventually(all_known)
        await env.api.create_podgroup(podgroup("twins", 6, timeout=30))
        await bound_all(env, names)
        members = [env.scheduler.state.cache.pods[("default", n)].info for n in names]
        assert all(m is not None and len(m.constraints.tolerations) == 2 for m in members)
        assert len({id(m.constraints) for m in members if m is not None}) == 1
        assert len(set(asked)) == 1, asked
