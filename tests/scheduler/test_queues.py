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

The scenarios are ``gang bench --workload queues``'s (``gang.bench.queuerun``); here the run is
compressed in time: a gang finishes every fifth of a second instead of every second, so
the 80 finishes of the 16 s 1:3 test are as many as an 80 s run at one per second would have;
the split is a function of the order of events, not of the clock.

A run ends as soon as its split has settled: at every sample of a stretch in which enough gangs
finished and were replaced (20 for the 1:3 split), each queue holds exactly its fair share. The
old fixed windows are the timeouts: a run that has not settled by then is judged, as before, by
its time-average over the window (each queue within 8 GPUs of its share). The whole
convergence is shown through one API (``REFERENCE``); through the others a run settles after a
few finishes: their adapters must feed the queue tree so that the ledger's fair shares are the
scenario's and the first decisions reach the same split (past the adapters, ordering and
reclaim are the same code for every API).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from gang.bench.queueload import (
    APIS,
    ELASTIC_QUOTA,
    KAI,
    VOLCANO,
    QueueDef,
    QueueLoad,
    gang_objects,
)
from gang.bench.queuerun import scenario
from gang.models.queueapis import GPU
from tests.scheduler.conftest import Env, eventually, gang_env

pytestmark = pytest.mark.asyncio

CLUSTER_128 = "16:gpu=8,cpu=64,memory=512Gi"
MERGE = "application/merge-patch+json"
#: the API each scenario's whole convergence is shown through
REFERENCE = VOLCANO
#: finishes the other APIs' runs hold the split over
SHORT = 6

Held = Mapping[str, int]


async def _run_until_settled(
    load: QueueLoad,
    seconds: float,
    finishes: int,
    settled: Callable[[Sequence[Held]], bool],
    watch: Callable[[], None] = lambda: None,
) -> bool:
    """Drive ``load`` for at most ``seconds``; stop once the samples of the last stretch in which
    at least ``finishes`` gangs finished (and were replaced) are ``settled``. Whether it did.
    ``watch`` is called at every look while the load runs."""
    run = asyncio.create_task(load.run(seconds))
    finished: list[int] = []  # per sample: the gangs finished when it was seen
    try:
        while not run.done():
            await asyncio.sleep(0.02)
            watch()
            samples = load.shares.samples
            finished += [load.finished] * (len(samples) - len(finished))
            first = next(
                (
                    i
                    for i in range(len(finished) - 1, -1, -1)
                    if finished[-1] - finished[i] >= finishes
                ),
                None,
            )
            if first is not None and settled([held for _, held in samples[first:]]):
                return True
        return False
    finally:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run


async def _fair_split(
    name: str,
    api: str,
    seconds: float,
    finish_every: float,
    finishes: int,
    start: float | None = None,
    also: Callable[[Mapping[str, float]], bool] = lambda held: True,
) -> tuple[QueueLoad, bool]:
    """Run scenario ``name`` through ``api`` until every queue holds exactly its fair share
    (and ``also`` holds) at every sample of a stretch of ``finishes`` finishes (``SHORT`` for
    an API but the reference). Unsettled after ``seconds``: the time-average from ``start``
    (default: the second half) must be within 8 GPUs of it. The ledger's fair shares must be
    the scenario's while the load runs (at the moment it settled, else at some moment), and
    nothing over-committed. Returns the load and whether it settled."""
    plan = scenario(name, api)
    async with gang_env(plan.nodes) as env, env.cluster.api_client() as client:
        load = QueueLoad(client, api, plan.queues, members=plan.members, finish_every=finish_every)
        await load.setup()

        def near(held: Mapping[str, float], within: int = 8) -> bool:
            expected = plan.expected.items()
            return also(held) and all(abs(held[q] - n) <= within for q, n in expected)

        # the queue objects are read into the scenario's division (fair share: the pure function
        # of the tree, capacity and demand), looked at while the load runs: once it stops, the
        # finished gangs are not replaced, demand falls and the division with it
        divisions: list[dict[str, float | None]] = []

        def watch() -> None:
            fair = {v.name: v.fair.get(GPU, 0.0) for v in env.scheduler.state.ledger.views()}
            divisions.append({q: fair.get(q) for q in plan.expected})

        def exact(window: Sequence[Held]) -> bool:
            return divisions[-1] == plan.expected and all(near(held, within=0) for held in window)

        need = finishes if api == REFERENCE else SHORT
        settled = await _run_until_settled(load, seconds, need, exact, watch)
        if not settled:
            split = load.shares.average(seconds / 2 if start is None else start)
            assert near(split), (split, load.finished)
            assert plan.expected in divisions, divisions[-5:]
        await env.api.assert_not_overcommitted()
        env.scheduler.state.cache.check()
        env.scheduler.state.ledger.check()  # the running totals are what the gangs hold
        return load, settled


@pytest.mark.parametrize("api", APIS)
async def test_weighted_queues_split_a_backlogged_cluster_1_to_3(api: str) -> None:
    load, settled = await _fair_split("weighted", api, seconds=16, finish_every=0.2, finishes=20)
    assert settled or load.finished >= 50, f"too few gangs finished to measure ({load.finished})"


@pytest.mark.parametrize("api", APIS)
async def test_an_idle_queue_lends_its_quota_and_the_gpus_stay_used(api: str) -> None:
    # the idle quota is lent to both busy queues alike (each: 32 of its own + half of 64)
    def used(held: Mapping[str, float]) -> bool:
        return sum(held.values()) >= 0.95 * 128 and held["team-c"] == 0

    await _fair_split("lend", api, seconds=12, finish_every=0.25, finishes=16, start=4, also=used)


@pytest.mark.parametrize("api", APIS)
async def test_a_limit_is_never_exceeded_on_an_idle_cluster(api: str) -> None:
    plan = scenario("limit", api)
    async with gang_env(plan.nodes) as env, env.cluster.api_client() as client:
        load = QueueLoad(client, api, plan.queues, finish_every=0.5)
        await load.setup()
        # at its limit while gangs finish and the next take their place
        need = 6 if api == REFERENCE else SHORT // 2
        await _run_until_settled(load, 6, need, lambda w: max(h["capped"] for h in w) == 24)
        shares = load.shares
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
    # "all in demand": each leaf keeps more gangs waiting than its fair share holds (a queue's
    # fair share is capped by what it asks for, so a thin backlog would cap it)
    await _fair_split("tree", api, seconds=16, finish_every=0.1, finishes=40)


# --- bad input: reported on the queue, its gangs wait with the reason, others are served -------


async def _create(load: QueueLoad, *bodies: dict[str, Any]) -> None:
    for body in bodies:
        await load.create(body)


def _gang(api: str, queue: str, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    group, pods = gang_objects(api, queue, name, 2)
    for obj in (group, *pods):
        obj["metadata"]["namespace"] = namespace
    return [group, *pods]


async def _submit(env: Env, load: QueueLoad, objects: list[dict[str, Any]]) -> None:
    group, *pods = objects
    await load.create(group)
    await env.api.create_pods(pods, ns=group["metadata"]["namespace"])


async def _invalid_queue_events(env: Env, namespace: str = "default") -> dict[str, str]:
    return {
        e["involvedObject"]["name"]: e["message"]
        for e in await env.api.events(namespace)
        if e["reason"] == "InvalidQueue"
    }


async def _waiting_reasons(env: Env, namespace: str = "default") -> dict[str, str]:
    """Per gang (a repeated message goes to one of its pods): a FailedScheduling message."""
    return {
        e["involvedObject"]["name"].rsplit("-", 1)[0]: e["message"]
        for e in await env.api.events(namespace)
        if e["reason"] == "FailedScheduling"
    }


def _kai(name: str, gpu: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"gpu": gpu}}
    if parent:
        spec["parentQueue"] = parent
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _volcano(name: str, **spec: Any) -> dict[str, Any]:
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
    return {**body, "metadata": {"name": name}, "spec": spec}


async def test_bad_kai_queues_are_reported_and_the_others_served() -> None:
    async with gang_env(CLUSTER_128) as env, env.cluster.api_client() as client:
        load = QueueLoad(client, KAI, [])
        await _create(
            load,
            _kai("good", {"quota": 8}),
            _kai("negative", {"quota": -5}),
            _kai("orphan", {"quota": 8}, parent="nowhere"),
            _kai("loop-a", {"quota": 8}, parent="loop-b"),
            _kai("loop-b", {"quota": 8}, parent="loop-a"),
            _kai("over", {"quota": 16, "limit": 8}),
            # KAI lets children ask quotas beyond their parent's (they share what it gets)
            _kai("parent", {"quota": 8}),
            _kai("kid-1", {"quota": 6}, parent="parent"),
            _kai("kid-2", {"quota": 6}, parent="parent"),
        )
        expected = {
            "negative": "spec.resources.gpu.quota: must be -1 (unlimited) or not negative, got -5",
            "orphan": "parent queue nowhere does not exist",
            "loop-a": "its parents form a cycle: loop-a → loop-b → loop-a",
            "loop-b": "its parents form a cycle: loop-b → loop-a → loop-b",
            "over": "spec.resources.quota.nvidia.com/gpu (16 GPUs) is above "
            "spec.resources.limit.nvidia.com/gpu (8 GPUs)",
        }
        gangs = {q: _gang(KAI, q, f"in-{q}") for q in [*expected, "good", "kid-1", "missing"]}
        for objects in gangs.values():
            await _submit(env, load, objects)

        async def reported() -> bool:
            return await _invalid_queue_events(env) == expected

        await eventually(reported, within=15)

        served = {"in-good-0", "in-good-1", "in-kid-1-0", "in-kid-1-1"}

        async def good_bound() -> bool:
            return served <= set(await env.api.bound())

        await eventually(good_bound)

        async def told() -> bool:
            waiting = await _waiting_reasons(env)
            return {f"in-{q}" for q in [*expected, "missing"]} <= set(waiting)

        await eventually(told)
        waiting = await _waiting_reasons(env)
        for queue, problem in expected.items():
            assert f"queue {queue} is invalid: {problem}" in waiting[f"in-{queue}"]
        assert "queue missing (scheduling.run.ai Queue) does not exist" in waiting["in-missing"]
        assert set(await env.api.bound()) == served
        # KAI's status has conditions: the queue says it too
        queue = await load.custom.get_cluster_custom_object(
            "scheduling.run.ai", "v2", "queues", "orphan"
        )
        (valid,) = [c for c in queue["status"]["conditions"] if c["type"] == "Valid"]
        assert valid["status"] == "False" and valid["message"] == expected["orphan"]


async def test_bad_volcano_queues_closed_queues_and_two_names_make_gangs_wait() -> None:
    async with gang_env(CLUSTER_128) as env, env.cluster.api_client() as client:
        load = QueueLoad(client, VOLCANO, [])
        await _create(
            load,
            _volcano("good", weight=1),
            _volcano("negative", deserved={"nvidia.com/gpu": "-1"}),
            _volcano("tight", deserved={"nvidia.com/gpu": 16}, capability={"nvidia.com/gpu": 8}),
            _volcano("closed", weight=1),
            _volcano("parent", guarantee={"resource": {"nvidia.com/gpu": 8}}),
            _volcano("kid-1", guarantee={"resource": {"nvidia.com/gpu": 6}}, parent="parent"),
            _volcano("kid-2", guarantee={"resource": {"nvidia.com/gpu": 6}}, parent="parent"),
            _kai("elsewhere", {"quota": 8}),
        )
        await load.custom.patch_cluster_custom_object_status(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            "closed",
            {"status": {"state": "Closed"}},
            _content_type=MERGE,
        )
        expected = {
            "negative": "spec.deserved.nvidia.com/gpu: must not be negative, got '-1'",
            "tight": "spec.deserved.nvidia.com/gpu (16 GPUs) is above "
            "spec.capability.nvidia.com/gpu (8 GPUs)",
            "parent": "its child queues guarantee 12 GPUs, more than its own guarantee of 8 GPUs",
            "kid-1": "parent queue parent is invalid",
            "kid-2": "parent queue parent is invalid",
        }

        async def reported() -> bool:
            return await _invalid_queue_events(env) == expected

        await eventually(reported, within=15)
        for queue in [*expected, "good", "closed"]:
            await _submit(env, load, _gang(VOLCANO, queue, f"in-{queue}"))
        both = _gang(VOLCANO, "good", "both")
        for pod in both[1:]:
            pod["metadata"]["labels"]["kai.scheduler/queue"] = "elsewhere"
        await _submit(env, load, both)

        async def good_bound() -> bool:
            return {"in-good-0", "in-good-1"} <= set(await env.api.bound())

        await eventually(good_bound)

        async def told() -> bool:
            waiting = await _waiting_reasons(env)
            return {f"in-{q}" for q in expected} | {"in-closed", "both"} <= set(waiting)

        await eventually(told)
        waiting = await _waiting_reasons(env)
        for queue, problem in expected.items():
            assert f"queue {queue} is invalid: {problem}" in waiting[f"in-{queue}"]
        assert "queue closed is closed" in waiting["in-closed"]
        assert (
            "it names two queues: its Volcano PodGroup's spec.queue names good, "
            "label kai.scheduler/queue names elsewhere" in waiting["both"]
        )
        assert set(await env.api.bound()) == {"in-good-0", "in-good-1"}


async def test_bad_elastic_quotas_are_reported_in_their_namespace() -> None:
    async with gang_env(CLUSTER_128) as env, env.cluster.api_client() as client:
        queues = [QueueDef("good", quota=8), QueueDef("negative"), QueueDef("tight")]
        load = QueueLoad(client, ELASTIC_QUOTA, queues)
        await load.setup()  # namespaces and the good quota; the bad ones below
        for name, spec in {
            "negative": {"min": {"nvidia.com/gpu": "-2"}},
            "tight": {"min": {"nvidia.com/gpu": 16}, "max": {"nvidia.com/gpu": 8}},
        }.items():
            await load.custom.patch_namespaced_custom_object(
                "scheduling.x-k8s.io",
                "v1alpha1",
                name,
                "elasticquotas",
                name,
                {"spec": spec},
                _content_type=MERGE,
            )
        expected = {
            "negative": "spec.min.nvidia.com/gpu: must not be negative, got '-2'",
            "tight": "spec.min.nvidia.com/gpu (16 GPUs) is above spec.max.nvidia.com/gpu (8 GPUs)",
        }
        for name, problem in expected.items():

            async def reported(name: str = name, problem: str = problem) -> bool:
                return (await _invalid_queue_events(env, name)).get(name) == problem

            await eventually(reported, within=15)
        for name in ("good", *expected):
            await _submit(env, load, _gang(ELASTIC_QUOTA, name, f"in-{name}", namespace=name))

        async def good_bound() -> bool:
            return {"in-good-0", "in-good-1"} <= set(await env.api.bound("good"))

        await eventually(good_bound)
        for name, problem in expected.items():

            async def told(name: str = name) -> bool:
                return f"in-{name}" in await _waiting_reasons(env, name)

            await eventually(told)
            waiting = await _waiting_reasons(env, name)
            assert f"queue {name} is invalid: {problem}" in waiting[f"in-{name}"]
            assert not await env.api.bound(name)
