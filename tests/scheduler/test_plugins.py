"""The plugin API end to end: third-party plugins loaded by dotted path change placement, serve
several profiles, and a misbehaving plugin fails only its own gang, named in the Event."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from gang.sim.cluster import SimCluster
from tests.scheduler.conftest import (
    Api,
    Env,
    eventually,
    gang_env,
    gang_pod,
    podgroup,
    running_scheduler,
)
from tests.scheduler.plugins_for_tests import Recorder

TEST_PLUGINS = "tests.scheduler.plugins_for_tests"


def with_test_plugins(
    nodes: str, names: Sequence[str], plugin_args: dict[str, Any] | None = None, **config: Any
) -> AbstractAsyncContextManager[Env]:
    """``gang_env`` with the test plugins ``names`` loaded and enabled, in this order, in the
    scheduler's one profile (with ``plugin_args``, if any)."""
    profile: dict[str, Any] = {
        "scheduler_name": "gang-scheduler",
        "plugins": {"enabled": [{"name": name} for name in names]},
    }
    if plugin_args:
        profile["plugin_args"] = plugin_args
    paths = [f"{TEST_PLUGINS}:{name}" for name in names]
    return gang_env(nodes, plugin_paths=paths, profiles=[profile], **config)


async def _placement_with(profile: dict[str, Any], plugin_paths: list[str]) -> str:
    """Where a 2-GPU pod lands when node-00001 already has 5 of its 8 GPUs used."""
    async with SimCluster("2:gpu=8") as cluster, cluster.api_client() as client:
        api = Api(client)
        await api.create_pods([gang_pod("busy", None, gpu=5, scheduler="default-scheduler")])
        await api.bind("busy", "node-00001")
        async with running_scheduler(cluster, plugin_paths=plugin_paths, profiles=[profile]):
            await api.create_pods([gang_pod("probe", None, gpu=2)])

            async def placed() -> bool:
                return "probe" in await api.bound()

            await eventually(placed)
            return (await api.bound())["probe"]


async def test_example_score_plugin_changes_placement() -> None:
    spread = {
        "scheduler_name": "gang-scheduler",
        "plugins": {
            "disabled": ["MostAllocated", "BalancedAllocation"],
            "enabled": [{"name": "LeastAllocated", "weight": 1}],
        },
    }
    assert await _placement_with(spread, []) == "node-00000"  # least-allocated spreads
    packing = {
        **spread,
        "plugins": {
            **spread["plugins"],
            "enabled": [
                {"name": "LeastAllocated", "weight": 1},
                {"name": "FewestFreeGPUs", "weight": 5},
            ],
        },
    }
    paths = ["examples.plugins.fewest_free_gpus:FewestFreeGPUs"]
    assert await _placement_with(packing, paths) == "node-00001"  # the GPU packer wins


async def test_example_queue_sort_plugin_orders_gangs() -> None:
    profile = {
        "scheduler_name": "gang-scheduler",
        "plugins": {"disabled": ["PrioritySort"], "enabled": [{"name": "QoSSort"}]},
    }
    async with SimCluster("1:gpu=8") as cluster, cluster.api_client() as client:
        api = Api(client)
        await api.create_podgroup(podgroup("besteffort", 1))
        best_effort = gang_pod("be-0", "besteffort", gpu=8)
        best_effort["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
        await api.create_pods([best_effort])
        await asyncio.sleep(1.1)  # a later creationTimestamp for the Guaranteed gang
        await api.create_podgroup(podgroup("guaranteed", 1))
        await api.create_pods([gang_pod("g-0", "guaranteed", gpu=8)])
        async with running_scheduler(
            cluster, plugin_paths=["examples.plugins.qos_sort:QoSSort"], profiles=[profile]
        ) as scheduler:
            assert scheduler.profiles["gang-scheduler"].queue_sort.name == "QoSSort"

            async def one_bound() -> bool:
                return len(await api.bound()) == 1

            await eventually(one_bound)
            assert set(await api.bound()) == {"g-0"}  # Guaranteed first, though created later


async def test_two_profiles_in_one_process() -> None:
    profiles = [
        {"scheduler_name": "gang-scheduler"},
        {
            "scheduler_name": "gang-spread",
            "plugins": {"disabled": ["MostAllocated"], "enabled": [{"name": "LeastAllocated"}]},
        },
    ]
    async with gang_env("2:gpu=8", profiles=profiles) as env:
        await env.api.create_pods(
            [
                gang_pod("a", None, gpu=1),
                gang_pod("b", None, gpu=1, scheduler="gang-spread"),
                gang_pod("c", None, gpu=1, scheduler="someone-else"),
            ]
        )

        async def both() -> bool:
            return {"a", "b"} <= set(await env.api.bound())

        await eventually(both)
        assert "c" not in await env.api.bound()
        assert set(env.scheduler.profiles) == {"gang-scheduler", "gang-spread"}


async def only_the_bomb_fails(env: Env, bomb: dict[str, Any], plugin: str, error: str) -> None:
    """``bomb`` (which makes ``plugin`` raise ``error``) and a well-formed pod are created: the
    failure is reported naming the plugin, the other pod binds, the bomb does not."""
    api = env.api
    await api.create_pods([bomb, gang_pod("fine", None, gpu=1)])

    async def reported() -> bool:
        return any(
            f"plugin {plugin} failed at Filter: {error}" in e["message"] for e in await api.events()
        )

    await eventually(reported)

    async def fine_bound() -> bool:
        return "fine" in await api.bound()

    await eventually(fine_bound)
    assert "bomb" not in await api.bound()
    assert env.scheduler.cycle.plugin_failures[plugin] >= 1


async def test_failing_and_slow_plugins_fail_only_their_gang() -> None:
    async with with_test_plugins(
        "2:gpu=8",
        ["Exploding", "SleepyScore"],
        {"SleepyScore": {"delay": 0.0}},
        plugin_budget_seconds=0.2,
    ) as env:
        bomb = gang_pod("bomb", None, gpu=1, labels={"explode": "yes"})
        await only_the_bomb_fails(env, bomb, "Exploding", "RuntimeError: boom")


async def test_a_static_filter_that_raises_fails_only_its_gang() -> None:
    async with with_test_plugins("2:gpu=8", ["ExplodingStatic"]) as env:
        bomb = gang_pod("bomb", None, gpu=1)
        bomb["spec"]["tolerations"] = [{"key": "explode", "operator": "Exists"}]
        await only_the_bomb_fails(env, bomb, "ExplodingStatic", "RuntimeError: static boom")


async def test_plugin_over_its_budget_is_named() -> None:
    async with with_test_plugins(
        "1:gpu=8", ["SleepyScore"], {"SleepyScore": {"delay": 0.3}}, plugin_budget_seconds=0.1
    ) as env:
        await env.api.create_pods([gang_pod("p", None, gpu=1)])

        async def reported() -> bool:
            return any(
                "plugin SleepyScore failed at Score: took" in e["message"]
                and "over its 100 ms budget" in e["message"]
                for e in await env.api.events()
            )

        await eventually(reported)
        assert await env.api.bound() == {}


async def test_hanging_bind_plugin_is_cancelled_at_its_budget() -> None:
    profile = {
        "scheduler_name": "gang-scheduler",
        "plugins": {
            "disabled": ["DefaultBinder"],
            "enabled": [{"name": "HangingBind"}, {"name": "DefaultBinder"}],
        },
    }
    async with gang_env(
        "1:gpu=8",
        plugin_paths=[f"{TEST_PLUGINS}:HangingBind"],
        profiles=[profile],
        async_plugin_budget_seconds=0.3,
    ) as env:
        await env.api.create_pods(
            [gang_pod("stuck", None, gpu=1, labels={"hang": "yes"}), gang_pod("quick", None, gpu=1)]
        )

        async def quick_bound() -> bool:
            return "quick" in await env.api.bound()

        await eventually(quick_bound)  # HangingBind skipped it, DefaultBinder bound it

        async def named() -> bool:
            return any(
                e["reason"] == "FailedBinding"
                and "HangingBind" in e["message"]
                and "0.3 s budget" in e["message"]
                for e in await env.api.events()
            )

        await eventually(named)
        assert "stuck" not in await env.api.bound()


async def test_reserve_refusal_unreserves_in_reverse_and_permit_deny_releases() -> None:
    Recorder.log.clear()
    names = ["Recorder", "SecondRecorder", "Refuser", "DenyLabelled"]
    async with with_test_plugins("2:gpu=8", names) as env:
        api = env.api
        await api.create_pods([gang_pod("refused", None, gpu=1, labels={"refuse": "yes"})])

        async def refused() -> bool:
            return any(
                "plugin Refuser refused Reserve: no licence left" in e["message"]
                for e in await api.events()
            )

        await eventually(refused)
        assert Recorder.log[:5] == [
            "reserve:Recorder",
            "reserve:SecondRecorder",
            "reserve:Refuser",
            "unreserve:SecondRecorder",
            "unreserve:Recorder",
        ]
        await api.create_pods([gang_pod("denied", None, gpu=1, labels={"deny": "yes"})])

        async def denied() -> bool:
            return any(
                "plugin DenyLabelled denied Permit: deny label set" in e["message"]
                for e in await api.events()
            )

        await eventually(denied)
        await asyncio.sleep(0.3)
        assert await api.bound() == {}
        env.scheduler.cache.check()
        assert not env.scheduler.cache.pods  # every reservation was released


async def test_a_post_filter_sees_the_cluster_as_the_cycle_began_not_the_failed_try() -> None:
    """Three 8-GPU nodes, one with 4 GPUs taken: two of three 6-GPU members fit before the
    third does not. The PostFilter is shown the 20 GPUs free, not the 8 the failed try left
    of its snapshot."""
    async with with_test_plugins("3:gpu=8", ["FreeGPUsNote"]) as env:
        await env.api.create_pods([gang_pod("busy", None, gpu=4, scheduler="default-scheduler")])
        await env.api.bind("busy", "node-00002")
        await env.api.create_podgroup(podgroup("three", 3))
        await env.api.create_pods([gang_pod(f"three-{i}", "three", gpu=6) for i in range(3)])

        async def noted() -> list[str]:
            return [e["message"] for e in await env.api.events() if "GPUs free" in e["message"]]

        async def reported() -> bool:
            return bool(await noted())

        await eventually(reported)
        messages = await noted()
        assert all("; 20 GPUs free" in message for message in messages), messages
