"""Done-when 1: a gang that fits is bound completely; a lone pod without a label is bound."""

from __future__ import annotations

from tests.scheduler.conftest import eventually, gang_env, gang_pod, podgroup


async def test_gang_of_eight_and_lone_pod_are_bound() -> None:
    async with gang_env("4:gpu=8,zones=2") as env:
        api = env.api
        await api.create_podgroup(podgroup("train", 8))
        await api.create_pods([gang_pod(f"train-{i}", "train", gpu=2) for i in range(8)])
        await api.create_pods([gang_pod("notebook", None, gpu=1)])

        async def all_bound() -> bool:
            return len(await api.bound()) == 9

        await eventually(all_bound)
        bound = await api.bound()
        assert set(bound) == {f"train-{i}" for i in range(8)} | {"notebook"}
        await api.assert_not_overcommitted()
        # gang packing: 8 x 2 GPUs fit in one zone (2 nodes x 8 GPUs), so all go to one zone
        nodes = {n["metadata"]["name"]: n for n in await api.raw_nodes()}
        zones = {
            nodes[bound[f"train-{i}"]]["metadata"]["labels"]["topology.kubernetes.io/zone"]
            for i in range(8)
        }
        assert len(zones) == 1

        async def status_scheduled() -> bool:
            status = (await api.get_podgroup("train")).get("status") or {}
            return status.get("phase") == "Scheduled" and status.get("scheduled") == 8

        await eventually(status_scheduled)
        scheduled = [e for e in await api.events() if e["reason"] == "Scheduled"]
        assert len(scheduled) == 9
        assert env.scheduler.stats.gangs_completed >= 1


async def test_pods_of_other_schedulers_are_left_alone() -> None:
    async with gang_env("2:gpu=8") as env:
        await env.api.create_pods(
            [gang_pod("theirs", None, scheduler="default-scheduler"), gang_pod("ours", None)]
        )

        async def ours_bound() -> bool:
            return "ours" in await env.api.bound()

        await eventually(ours_bound)
        assert "theirs" not in await env.api.bound()
