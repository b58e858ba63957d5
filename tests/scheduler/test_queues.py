"""Queues, quota and fair share: the real scheduler, over HTTP, on a cluster shared by teams.

Each scenario is driven through each queue API users already have — Volcano Queues, KAI Queues
and ElasticQuotas (``gang.bench.queueload`` writes the objects a team on that API would) — and
measured as the GPUs each queue holds over time, sampled through the API:

1. two queues weighted 1:3, both backlogged with 8 x 1-GPU gangs on 128 GPUs, the oldest gang
   finishing at a steady pace: the split over the second half is 32/96 within 8 GPUs (an
   ElasticQuota has no weight: its ``min`` of 32/96 says the same);
2. quotas 32/32/64 with the 64 idle: its share is lent, and the GPUs stay >= 95 % used;
3. a limit of 24 on an idle 128-GPU cluster is never exceeded, and the gang beyond it is told why;
4. a two-level tree (P1 with children weighted 1/1/3, P2 with one child, P1:P2 1:1) on 300 GPUs
   all in demand converges to 30/30/90/150 (Volcano and KAI: ElasticQuotas have no parents).

The run is compressed in time: a gang finishes every quarter second instead of every second, so
the 96 finishes of a 24 s test are as many as a 96 s run at one per second would have; the
split is a function of the order of events, not of the clock.
"""

from __future__ import annotations

import pytest

from gang.bench.queueload import APIS, ELASTIC_QUOTA, KAI, VOLCANO, QueueDef, QueueLoad
from tests.scheduler.conftest import eventually, gang_env

pytestmark = pytest.mark.asyncio

CLUSTER_128 = "16:gpu=8,cpu=64,memory=512Gi"


def _weighted(api: str, name: str, weight: int, **kw: object) -> QueueDef:
    """A queue with over-quota weight ``weight`` — for an ElasticQuota, which has no weights,
    a ``min`` in the same proportion of the 128 GPUs."""
    if api == ELASTIC_QUOTA:
        return QueueDef(name, quota=32 * weight, **kw)  # type: ignore[arg-type]
    return QueueDef(name, weight=weight, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", APIS)
async def test_weighted_queues_split_a_backlogged_cluster_1_to_3(api: str) -> None:
    async with gang_env(CLUSTER_128) as env, env.cluster.api_client() as client:
        queues = [_weighted(api, "team-a", 1, backlog=3), _weighted(api, "team-b", 3, backlog=3)]
        load = QueueLoad(client, api, queues, finish_every=0.25)
        await load.setup()
        shares = await load.run(24)
        split = shares.average(12)
        assert load.finished >= 60, f"too few gangs finished to measure ({load.finished})"
        assert abs(split["team-a"] - 32) <= 8, split
        assert abs(split["team-b"] - 96) <= 8, split
        await env.api.assert_not_overcommitted()


@pytest.mark.parametrize("api", APIS)
async def test_an_idle_queue_lends_its_quota_and_the_gpus_stay_used(api: str) -> None:
    async with gang_env(CLUSTER_128) as env, env.cluster.api_client() as client:
        queues = [
            QueueDef("team-a", quota=32, backlog=3),
            QueueDef("team-b", quota=32, backlog=3),
            QueueDef("team-c", quota=64, backlog=0),  # idle
        ]
        load = QueueLoad(client, api, queues, finish_every=0.25)
        await load.setup()
        shares = await load.run(12)
        split = shares.average(4)
        used = sum(split.values()) / 128
        assert used >= 0.95, f"GPU use {used:.1%} while demand existed: {split}"
        assert split["team-c"] == 0
        # the idle quota is lent to both busy queues alike (each: 32 of its own + half of 64)
        assert abs(split["team-a"] - 64) <= 8 and abs(split["team-b"] - 64) <= 8, split


@pytest.mark.parametrize("api", APIS)
async def test_a_limit_is_never_exceeded_on_an_idle_cluster(api: str) -> None:
    async with gang_env(CLUSTER_128) as env, env.cluster.api_client() as client:
        queues = [QueueDef("capped", limit=24, backlog=4)]
        load = QueueLoad(client, api, queues, finish_every=0.5)
        await load.setup()
        shares = await load.run(6)
        assert shares.peak("capped") == 24, shares.samples[-1]
        assert all(held["capped"] <= 24 for _, held in shares.samples)

        async def told() -> bool:
            return any(
                e["reason"] == "FailedScheduling" and "capped at its limit" in e["message"]
                for e in await env.api.events("capped")
            )

        await eventually(told)


@pytest.mark.parametrize("api", [VOLCANO, KAI])
async def test_a_two_level_tree_converges_to_its_fair_split(api: str) -> None:
    async with gang_env("75:gpu=4,cpu=64,memory=512Gi") as env, env.cluster.api_client() as client:
        # "all in demand": each leaf keeps more gangs waiting than its fair share holds (a
        # queue's fair share is capped by what it asks for, so a thin backlog would cap it)
        queues = [
            QueueDef("p1", weight=1, backlog=0),
            QueueDef("p2", weight=1, backlog=0),
            QueueDef("a1", weight=1, parent="p1", backlog=20),
            QueueDef("a2", weight=1, parent="p1", backlog=20),
            QueueDef("a3", weight=3, parent="p1", backlog=50),
            QueueDef("b1", weight=1, parent="p2", backlog=80),
        ]
        load = QueueLoad(client, api, queues, members=2, finish_every=0.1)
        await load.setup()
        shares = await load.run(16)
        split = shares.average(8)
        expected = {"a1": 30, "a2": 30, "a3": 90, "b1": 150}
        for queue, gpus in expected.items():
            assert abs(split[queue] - gpus) <= 8, split
