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


async def test_gangs_of_one_gpu_pods_pack_whole_nodes_leaving_whole_nodes_free() -> None:
    """With the default weights, two gangs of eight one-GPU pods (half a CPU each, the bench's
    pods on its nodes) fill one node each, so a gang of two eight-GPU pods (whole nodes) fits
    beside them. Spread one member per node, the first two gangs would leave no node whole and
    the big gang would wait for ever."""
    async with gang_env("4:gpu=8,cpu=64,memory=512Gi,zones=2") as env:
        api = env.api
        for name in ("a", "b"):
            await api.create_podgroup(podgroup(name, 8))
            await api.create_pods(
                [gang_pod(f"{name}-{i}", name, gpu=1, cpu="500m") for i in range(8)]
            )

            async def placed(name: str = name) -> bool:
                bound = await api.bound()
                return all(f"{name}-{i}" in bound for i in range(8))

            await eventually(placed)
        bound = await api.bound()
        for name in ("a", "b"):
            assert len({bound[f"{name}-{i}"] for i in range(8)}) == 1, bound
        await api.create_podgroup(podgroup("big", 2))
        await api.create_pods([gang_pod(f"big-{i}", "big", gpu=8) for i in range(2)])

        async def big_bound() -> bool:
            return {"big-0", "big-1"} <= set(await api.bound())

        await eventually(big_bound)
        await api.assert_not_overcommitted()
