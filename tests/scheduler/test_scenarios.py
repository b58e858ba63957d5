"""Issue 3's done-when scenarios, each against the simulator over real HTTP."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from tests.scheduler.conftest import (
    Api,
    eventually,
    gang_env,
    gang_pod,
    podgroup,
    running_scheduler,
)

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def per_gang(bound: dict[str, str], pods_by_gang: dict[str, list[str]]) -> dict[str, int]:
    return {g: sum(1 for p in pods if p in bound) for g, pods in pods_by_gang.items()}


async def test_contention_exactly_fifty_of_sixty_gangs() -> None:
    """100 nodes x 8 GPU, 60 gangs x 16 pods x 1 GPU: 50 whole gangs, 10 with nothing."""
    async with gang_env("100:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        api = env.api
        gangs = {f"g{g:02d}": [f"g{g:02d}-{i:02d}" for i in range(16)] for g in range(60)}
        await asyncio.gather(*(api.create_podgroup(podgroup(g, 16, timeout=60)) for g in gangs))
        pods = [
            gang_pod(p, g, gpu=1, cpu="100m", memory="128Mi")
            for g, names in gangs.items()
            for p in names
        ]
        random.Random(7).shuffle(pods)  # members of all gangs arrive interleaved
        for start in range(0, len(pods), 120):
            await api.create_pods(pods[start : start + 120])

        async def eight_hundred_bound() -> bool:
            return len(await api.bound()) >= 800

        await eventually(eight_hundred_bound, within=30)
        await asyncio.sleep(0.5)  # nothing more may bind
        counts = per_gang(await api.bound(), gangs)
        assert sorted(Counter(counts.values()).items()) == [(0, 10), (16, 50)]
        await api.assert_not_overcommitted()
        losers = {g for g, n in counts.items() if n == 0}

        async def losers_told_why() -> bool:
            told = {
                e["involvedObject"]["name"].rsplit("-", 1)[0]
                for e in await api.events()
                if e["reason"] == "FailedScheduling"
                and "Insufficient nvidia.com/gpu" in e["message"]
            }
            return losers <= told

        await eventually(losers_told_why, within=15)


async def test_late_members_bind_together_none_before() -> None:
    async with gang_env("4:gpu=8") as env:
        api = env.api
        await api.create_podgroup(podgroup("late", 8, timeout=30))
        await api.create_pods([gang_pod(f"late-{i}", "late", gpu=1) for i in range(4)])
        for _ in range(20):  # two seconds: nothing may be bound before the quorum exists
            await asyncio.sleep(0.1)
            assert await api.bound() == {}
        status = (await api.get_podgroup("late")).get("status") or {}
        assert status.get("phase") == "Scheduling"
        await api.create_pods([gang_pod(f"late-{i}", "late", gpu=1) for i in range(4, 8)])

        async def all_eight() -> bool:
            return len(await api.bound()) == 8

        await eventually(all_eight)


async def test_timeout_releases_and_the_smaller_gang_behind_binds() -> None:
    async with gang_env("4:gpu=8", backoff_initial_seconds=5) as env:
        api = env.api
        # "big" can never reach quorum (3 of 4 members exist) but holds the whole cluster meanwhile
        await api.create_podgroup(podgroup("big", 4, timeout=2))
        await api.create_pods([gang_pod(f"big-{i}", "big", gpu=8) for i in range(3)])

        async def big_holds_everything() -> bool:
            gang = next(
                (g for g in env.scheduler.state.gangs.values() if g.key.group == "big"), None
            )
            return gang is not None and len(gang.reserved) == 3 and len(gang.placeholders) == 1

        await eventually(big_holds_everything)
        await api.create_podgroup(podgroup("small", 2, timeout=30))
        await api.create_pods([gang_pod(f"small-{i}", "small", gpu=8) for i in range(2)])
        await asyncio.sleep(1.0)
        assert await api.bound() == {}  # small waits behind big's reservations

        async def small_bound() -> bool:
            return set(await api.bound()) == {"small-0", "small-1"}

        await eventually(small_bound, within=6)
        messages = [e["message"] for e in await api.events()]
        assert any("timed out waiting for quorum" in m for m in messages)
        await api.assert_not_overcommitted()


async def test_mixed_sizes_and_priorities_never_partial() -> None:
    rng = random.Random(11)
    async with SimCluster("20:gpu=8,zones=2") as cluster, cluster.api_client() as client:
        api = Api(client)
        from kubernetes_asyncio import client as k8s

        sched = k8s.SchedulingV1Api(client)
        await sched.create_priority_class({"metadata": {"name": "high"}, "value": 1000})
        await sched.create_priority_class({"metadata": {"name": "low"}, "value": 10})
        sizes: dict[str, tuple[int, str]] = {}
        high_gpus = 0
        for g in range(24):
            size = rng.randint(1, 32)
            prio = "high" if high_gpus + size <= 120 and g % 2 == 0 else "low"
            high_gpus += size if prio == "high" else 0
            sizes[f"m{g:02d}"] = (size, prio)
        for name, (size, prio) in sizes.items():
            await api.create_podgroup(podgroup(name, size, timeout=30))
            await api.create_pods(
                [gang_pod(f"{name}-{i:02d}", name, gpu=1, priority_class=prio) for i in range(size)]
            )
        async with running_scheduler(cluster) as scheduler:

            async def settled() -> bool:
                return scheduler.queue.counts()["active"] == 0 and not scheduler.binder.in_flight

            await asyncio.sleep(0.5)
            await eventually(settled, within=20)
            await asyncio.sleep(0.5)
            bound = await api.bound()
            pods_by_gang = {g: [f"{g}-{i:02d}" for i in range(s)] for g, (s, _) in sizes.items()}
            counts = per_gang(bound, pods_by_gang)
            for g, n in counts.items():
                assert n in (0, sizes[g][0]), f"gang {g} partially bound: {n}/{sizes[g][0]}"
            for g, (_, prio) in sizes.items():
                if prio == "high":
                    assert counts[g] == sizes[g][0], f"high-priority gang {g} not bound"
            assert len(bound) <= 160
            assert any(counts[g] == 0 for g in sizes), "the workload should exceed the cluster"
            await api.assert_not_overcommitted()


async def test_pods_of_another_scheduler_reduce_capacity() -> None:
    async with gang_env("2:gpu=8") as env:
        api = env.api
        foreign = [
            gang_pod(f"other-{i}", None, gpu=3, scheduler="default-scheduler") for i in range(2)
        ]
        await api.create_pods(foreign)
        for i in range(2):  # another scheduler binds them to node-00000 (6 of its 8 GPUs)
            await api.bind(f"other-{i}", "node-00000")
        await api.create_podgroup(podgroup("pair", 2))
        await api.create_pods([gang_pod(f"pair-{i}", "pair", gpu=6) for i in range(2)])

        async def reported() -> bool:
            return any(e["reason"] == "FailedScheduling" for e in await api.events())

        await eventually(reported)
        assert set(await api.bound()) == {"other-0", "other-1"}
        failure = next(e for e in await api.events() if e["reason"] == "FailedScheduling")
        assert failure["message"] == (
            "gang default/pair needs 2 more member(s) placed together, only 1 fit; "
            "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
            "reservation: holding 2 node(s) for it until running pods there finish"
        )  # the foreign pods' nodes are held for it (reservation), so nothing new goes there
        await api.core.delete_namespaced_pod("other-0", "default", grace_period_seconds=0)
        await asyncio.sleep(0.5)
        assert not {"pair-0", "pair-1"} & set(await api.bound())  # 5 GPUs free there: still short
        await api.core.delete_namespaced_pod("other-1", "default", grace_period_seconds=0)

        async def pair_bound() -> bool:
            return {"pair-0", "pair-1"} <= set(await api.bound())

        await eventually(pair_bound)
        await api.assert_not_overcommitted()


async def test_relist_after_410_and_dropped_watches_loses_no_pod() -> None:
    faults = Faults(watch_drop_after=0.3)
    async with gang_env("8:gpu=8", {"faults": faults, "history_size": 50}) as env:
        api = env.api
        names = []
        for g in range(10):
            await api.create_podgroup(podgroup(f"w{g}", 4))
            batch = [gang_pod(f"w{g}-{i}", f"w{g}", gpu=1) for i in range(4)]
            names += [p["metadata"]["name"] for p in batch]
            await api.create_pods(batch)
            if g % 3 == 0:
                env.cluster.expire_history()  # the next watch resume gets an in-stream 410
                env.cluster.drop_watches()
            await asyncio.sleep(0.1)

        async def all_bound() -> bool:
            return set(names) <= set(await api.bound())

        await eventually(all_bound, within=15)
        assert len(await api.bound()) == 40
        assert sum(i.relists for i in env.scheduler.informers) > 3
        env.scheduler.cache.check()
        await api.assert_not_overcommitted()
