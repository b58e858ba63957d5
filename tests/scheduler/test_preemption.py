"""Gang-aware preemption over HTTP: whole victim gangs, the cheapest set, budgets honoured.

Every test runs the real scheduler against the simulator with its kubelet stand-in (pods run,
and evicted pods terminate after their grace), so victims really go through the Eviction API,
PodDisruptionBudgets are checked by the API, and the preemptor binds only once they are gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kubernetes_asyncio import client as k8s

from gang.sim.cluster import SimCluster
from gang.sim.kubelet import KubeletConfig
from gang.sim.store import StoredEvent
from tests.scheduler.conftest import (
    Api,
    Env,
    eventually,
    gang_env,
    gang_pod,
    podgroup,
    running_scheduler,
)

LOW, HIGH = "low", "high"


@asynccontextmanager
async def cluster(
    nodes: str, termination: float = 0.2, **config: Any
) -> AsyncIterator[tuple[Env, Any]]:
    """A cluster with the kubelet stand-in, the scheduler, and priority classes low/high."""
    kubelet = KubeletConfig(start_delay=0.05, termination_delay=termination)
    async with (
        gang_env(nodes, cluster_options={"kubelet": kubelet}, **config) as env,
        env.cluster.api_client() as client,
    ):
        scheduling = k8s.SchedulingV1Api(client)
        for name, value, policy in (
            (LOW, 10, None),
            (HIGH, 1000, None),
            ("high-never", 1000, "Never"),
        ):
            body: dict[str, Any] = {"metadata": {"name": name}, "value": value}
            if policy:
                body["preemptionPolicy"] = policy
            await scheduling.create_priority_class(body)
        yield env, client


async def run_gang(
    env: Env,
    name: str,
    size: int,
    priority: str,
    *,
    min_member: int | None = None,
    gpu: int = 1,
    wait: bool = True,
    labels: dict[str, str] | None = None,
) -> list[str]:
    """Create a PodGroup and its pods; with ``wait``, until all of them are bound."""
    await env.api.create_podgroup(podgroup(name, min_member or size, timeout=30))
    pods = [f"{name}-{i:02d}" for i in range(size)]
    await env.api.create_pods(
        [
            gang_pod(p, name, gpu=gpu, cpu="100m", priority_class=priority, labels=labels)
            for p in pods
        ]
    )
    if wait:

        async def all_bound() -> bool:
            bound = await env.api.bound()
            return all(p in bound for p in pods)

        await eventually(all_bound, within=15)
    return pods


async def running(env: Env) -> dict[str, str]:
    """Bound pods not being deleted: name → node."""
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in await env.api.raw_pods()
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def count(bound: dict[str, str], pods: list[str]) -> int:
    return sum(1 for p in pods if p in bound)


async def wait_bound(env: Env, pods: list[str], within: float = 20) -> None:
    async def all_bound() -> bool:
        bound = await running(env)
        return all(p in bound for p in pods)

    await eventually(all_bound, within=within)


async def settle(env: Env) -> None:
    """Until nothing is in flight or terminating."""

    async def quiet() -> bool:
        pods = await env.api.raw_pods()
        return (
            not env.scheduler.evictor.in_flight
            and not env.scheduler.binder.in_flight
            and not any(p["metadata"].get("deletionTimestamp") for p in pods)
        )

    await eventually(quiet, within=15)


def evicted(env: Env) -> set[str]:
    return {r.pod[1] for r in env.cluster.audit.evictions if r.evicted}


async def test_the_headline_scenario_evicts_exactly_one_low_gang_whole() -> None:
    """8 nodes x 8 GPUs full of four low gangs of 16; a high gang of 16 binds and exactly one
    low gang is evicted, whole (kube-scheduler with Coscheduling breaks three)."""
    async with cluster("8:gpu=8,cpu=64,memory=512Gi") as (env, _):
        lows = {f"low-{g}": await run_gang(env, f"low-{g}", 16, LOW) for g in range(4)}
        high = await run_gang(env, "high", 16, HIGH, wait=False)
        await wait_bound(env, high)
        await settle(env)
        bound = await running(env)
        counts = {g: count(bound, pods) for g, pods in lows.items()}
        assert sorted(counts.values()) == [0, 16, 16, 16], counts
        victim = next(g for g, n in counts.items() if n == 0)
        assert evicted(env) == set(lows[victim])
        assert env.scheduler.cycle.preemptions == 1
        assert env.scheduler.cycle.preempted_pods == 16
        await env.api.assert_not_overcommitted()
        events = await env.api.events()
        preempting = [e for e in events if e["reason"] == "Preempting"]
        assert preempting and victim in preempting[0]["message"]
        assert preempting[0]["involvedObject"]["name"] == "high"
        preempted = [e for e in events if e["reason"] == "Preempted"]
        assert {e["involvedObject"]["name"] for e in preempted} >= set(lows[victim])
        assert any("default/high" in e["message"] for e in preempted)
        group = await env.api.get_podgroup(victim)
        conditions = {c["type"]: c for c in group["status"]["conditions"]}
        assert conditions["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
        assert "default/high" in conditions["DisruptionTarget"]["message"]


async def test_victims_are_marked_and_the_preemptor_nominated_while_they_terminate() -> None:
    """Every victim carries kube-scheduler's DisruptionTarget condition before its eviction
    (the API then rewrites it to EvictionByEvictionAPI); the preemptor's pods carry
    status.nominatedNodeName; an equal-priority gang arriving meanwhile does not take the room."""
    async with cluster("2:gpu=8,cpu=64,memory=512Gi", termination=1.5) as (env, _):
        a = await run_gang(env, "a", 8, LOW)
        b = await run_gang(env, "b", 8, LOW)
        marked_first: set[str] = set()
        evicted_unmarked: set[str] = set()

        def watch(storage: str, event: StoredEvent) -> None:
            if event.obj.get("kind") not in (None, "Pod") or "containers" not in (
                event.obj.get("spec") or {}
            ):
                return
            meta = event.obj.get("metadata") or {}
            name = meta.get("name", "")
            conditions = (event.obj.get("status") or {}).get("conditions") or []
            if any(
                c.get("type") == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler"
                for c in conditions
            ):
                marked_first.add(name)
            if meta.get("deletionTimestamp") and name not in marked_first:
                evicted_unmarked.add(name)

        env.cluster.store.add_listener(watch)
        high = await run_gang(env, "high", 8, HIGH, wait=False)

        async def nominated() -> bool:
            pods = {p["metadata"]["name"]: p for p in await env.api.raw_pods()}
            return all(pods[n]["status"].get("nominatedNodeName") for n in high)

        await eventually(nominated, within=5)
        late = await run_gang(env, "late", 8, LOW, wait=False)
        await wait_bound(env, high)
        await settle(env)
        bound = await running(env)
        assert count(bound, late) == 0, "an equal-priority gang took the nominated capacity"
        assert sorted([count(bound, a), count(bound, b)]) == [0, 8]
        victims = evicted(env)
        assert len(victims) == 8 and victims <= marked_first
        assert not evicted_unmarked & victims
        await env.api.assert_not_overcommitted()


async def test_the_cheapest_set_one_small_gang_rather_than_a_big_one() -> None:
    """Two 16-pod gangs and an 8-pod gang fill 40 GPUs; a high gang of 8 evicts only the 8-pod
    gang, although it is the oldest (fewest pods evicted comes before lost work)."""
    async with cluster("5:gpu=8,cpu=64,memory=512Gi") as (env, _):
        small = await run_gang(env, "small", 8, LOW)
        big_a = await run_gang(env, "big-a", 16, LOW)
        big_b = await run_gang(env, "big-b", 16, LOW)
        high = await run_gang(env, "high", 8, HIGH, wait=False)
        await wait_bound(env, high)
        await settle(env)
        bound = await running(env)
        assert count(bound, small) == 0
        assert count(bound, big_a) == 16 and count(bound, big_b) == 16
        assert evicted(env) == set(small)


async def test_an_elastic_victim_loses_only_members_above_min_member() -> None:
    """A gang running 12 with minMember 4 gives up 8 members; a 12-pod gang (minMember 12)
    is left alone although it is newer."""
    async with cluster("3:gpu=8,cpu=64,memory=512Gi") as (env, _):
        elastic = await run_gang(env, "elastic", 12, LOW, min_member=4)
        rigid = await run_gang(env, "rigid", 12, LOW)
        high = await run_gang(env, "high", 8, HIGH, wait=False)
        await wait_bound(env, high)
        await settle(env)
        bound = await running(env)
        assert count(bound, rigid) == 12
        assert count(bound, elastic) == 4
        assert len(evicted(env)) == 8 and evicted(env) <= set(elastic)
        group = await env.api.get_podgroup("elastic")
        assert group["spec"]["minMember"] == 4


async def test_a_gang_under_a_disruption_budget_is_passed_over() -> None:
    """Without the budget the newer gang would go (least work lost); its budget allows no
    disruption, so the older gang goes instead."""
    async with cluster("2:gpu=8,cpu=64,memory=512Gi") as (env, client):
        older = await run_gang(env, "older", 8, LOW)
        newer = await run_gang(env, "newer", 8, LOW, labels={"job": "newer"})
        await protect(env, client, "newer", 8)
        high = await run_gang(env, "high", 8, HIGH, wait=False)
        await wait_bound(env, high)
        await settle(env)
        bound = await running(env)
        assert count(bound, newer) == 8 and count(bound, older) == 0
        assert not [e for e in await env.api.events() if e["reason"] == "PreemptedPastBudget"]


async def test_past_a_budget_only_when_no_set_keeps_every_budget_and_said_so() -> None:
    async with cluster("1:gpu=8,cpu=64,memory=512Gi") as (env, client):
        only = await run_gang(env, "only", 8, LOW, labels={"job": "only"})
        await protect(env, client, "only", 8)
        high = await run_gang(env, "high", 8, HIGH, wait=False)
        await wait_bound(env, high)
        await settle(env)
        assert count(await running(env), only) == 0
        warnings = [e for e in await env.api.events() if e["reason"] == "PreemptedPastBudget"]
        assert {e["involvedObject"]["name"] for e in warnings} == set(only)
        assert all("PodDisruptionBudget" in e["message"] for e in warnings)


async def protect(env: Env, client: Any, job: str, min_available: int) -> None:
    """A PodDisruptionBudget over the job's pods; waits until its status allows nothing."""
    policy = k8s.PolicyV1Api(client)
    await policy.create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": job},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"job": job}}},
        },
    )

    async def processed() -> bool:
        resp = await policy.read_namespaced_pod_disruption_budget(
            job, "default", _preload_content=False
        )
        status = (await resp.json()).get("status") or {}
        return (
            status.get("currentHealthy") == min_available and status.get("disruptionsAllowed") == 0
        )

    await eventually(processed, within=10)
    budgets = env.scheduler.cache.budgets.budgets

    async def seen() -> bool:
        return job in budgets.get("default", {}) and budgets["default"][job].allowed == 0

    await eventually(seen, within=5)


async def test_preemption_policy_never_and_equal_priority_never_preempt() -> None:
    async with cluster("1:gpu=8,cpu=64,memory=512Gi") as (env, _):
        low = await run_gang(env, "low", 8, LOW)
        never = await run_gang(env, "never", 8, "high-never", wait=False)
        equal = await run_gang(env, "equal", 8, LOW, wait=False)

        async def failures() -> dict[str, str]:
            """A FailedScheduling message per gang (an identical one is not repeated for a
            member created after the first)."""
            return {
                e["involvedObject"]["name"].rsplit("-", 1)[0]: e["message"]
                for e in await env.api.events()
                if e["reason"] == "FailedScheduling"
            }

        async def both_reported() -> bool:
            return {"never", "equal"} <= set(await failures())

        await eventually(both_reported, within=10)
        failed = await failures()
        assert "preemption: not eligible due to preemptionPolicy=Never" in failed["never"]
        assert "preemption" not in failed["equal"]  # nobody lower to preempt: as it was
        await asyncio.sleep(0.5)
        bound = await running(env)
        assert count(bound, low) == 8
        assert count(bound, never) == 0 and count(bound, equal) == 0
        assert not env.cluster.audit.evictions
        assert env.scheduler.cycle.preemptions == 0


async def test_a_stream_of_high_gangs_causes_no_cascade_and_no_overcommit() -> None:
    """Five high gangs at once on a cluster full of four low ones: four bind, each evicting
    exactly one low gang; the fifth waits (nothing lower is left), and nothing over-commits."""
    async with cluster("4:gpu=8,cpu=64,memory=512Gi", termination=0.5) as (env, _):
        lows = [await run_gang(env, f"low-{g}", 8, LOW) for g in range(4)]
        highs = [await run_gang(env, f"high-{g}", 8, HIGH, wait=False) for g in range(5)]

        async def four_bound() -> bool:
            bound = await running(env)
            return sum(count(bound, h) == 8 for h in highs) == 4

        await eventually(four_bound, within=30)
        await settle(env)
        await asyncio.sleep(0.5)
        bound = await running(env)
        assert all(count(bound, low) == 0 for low in lows)
        assert sorted(count(bound, h) for h in highs) == [0, 8, 8, 8, 8]
        assert len(evicted(env)) == 32, "each low gang evicted exactly once"
        assert env.scheduler.cycle.preemptions == 4
        await env.api.assert_not_overcommitted()


async def test_a_nomination_expires_when_victims_do_not_go() -> None:
    async with cluster(
        "1:gpu=8,cpu=64,memory=512Gi", termination=6.0, nomination_timeout_seconds=0.5
    ) as (env, _):
        await run_gang(env, "low", 8, LOW)
        high = await run_gang(env, "high", 8, HIGH, wait=False)

        async def expired() -> bool:
            return any(e["reason"] == "NominationExpired" for e in await env.api.events())

        await eventually(expired, within=5)
        assert env.scheduler.cycle.preemptions == 1  # victims still terminating: no second one
        assert not env.scheduler.state.nominating
        await wait_bound(env, high, within=15)
        assert env.scheduler.cycle.preemptions == 1


async def test_a_restarted_scheduler_finishes_or_withdraws_marked_preemptions() -> None:
    """The marks are the intent: after a crash, a victim gang marked whole is evicted whole, an
    elastic one loses only its marked members, and a gang whose marking was cut short (it would
    drop below minMember) keeps every member, its marks withdrawn."""
    kubelet = KubeletConfig(start_delay=0.05, termination_delay=0.1)
    async with (
        SimCluster("2:gpu=8,cpu=64,memory=512Gi", kubelet=kubelet) as sim,
        sim.api_client() as client,
    ):
        api = Api(client)
        layout = {"whole": (4, 4, 4), "elastic": (6, 2, 3), "cut": (4, 4, 2)}
        for name, (size, quorum, marked) in layout.items():
            await api.create_podgroup(podgroup(name, quorum))
            pods = [f"{name}-{i}" for i in range(size)]
            await api.create_pods([gang_pod(p, name, gpu=1, cpu="100m") for p in pods])
            for i, pod in enumerate(pods):
                await api.bind(pod, f"node-0000{i % 2}")
                if i < marked:
                    condition = {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": "gang-scheduler: preempting to accommodate a higher "
                        "priority gang default/high (priority 1000)",
                    }
                    await api.core.patch_namespaced_pod_status(
                        pod, "default", {"status": {"conditions": [condition]}}
                    )
        async with running_scheduler(sim) as scheduler:

            async def resolved() -> bool:
                left = {
                    p["metadata"]["name"]
                    for p in await api.raw_pods()
                    if not p["metadata"].get("deletionTimestamp")
                }
                return not scheduler.evictor.in_flight and left == {
                    "elastic-3",
                    "elastic-4",
                    "elastic-5",
                    *(f"cut-{i}" for i in range(4)),
                }

            await eventually(resolved, within=10)
            cut = {p["metadata"]["name"]: p for p in await api.raw_pods()}
            for i in range(2):
                target = next(
                    c
                    for c in cut[f"cut-{i}"]["status"]["conditions"]
                    if c["type"] == "DisruptionTarget"
                )
                assert target["status"] == "False"
                assert target["reason"] == "PreemptionCancelled"


async def _kai_queues(client: Any, *names: str, quota: int = 8) -> None:
    custom = k8s.CustomObjectsApi(client)
    for name in names:
        body = {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"resources": {"gpu": {"quota": quota}}},
        }
        await custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", body)


def _in(queue: str) -> dict[str, str]:
    return {"kai.scheduler/queue": queue}


async def test_priority_preemption_stays_inside_a_queue_at_its_fair_share() -> None:
    """Two teams with a quota of 8 GPUs each fill 16: team a's high gang preempts its own low
    gang, never team b's (b holds no more than its fair share: taking from it is reclaim) —
    though b's gang, of 4 pods, is the cheaper victim by pod count."""
    async with cluster("2:gpu=8,cpu=64,memory=512Gi") as (env, client):
        await _kai_queues(client, "team-a", "team-b")
        a_low = await run_gang(env, "a-low", 8, LOW, labels=_in("team-a"))
        b_low = await run_gang(env, "b-low", 4, LOW, gpu=2, labels=_in("team-b"))
        high = await run_gang(env, "a-high", 8, HIGH, wait=False, labels=_in("team-a"))
        await wait_bound(env, high)
        await settle(env)
        bound = await running(env)
        assert count(bound, b_low) == 4 and count(bound, a_low) == 0
        assert evicted(env) == set(a_low)


async def test_priority_preemption_takes_from_a_queue_above_its_fair_share() -> None:
    """Team b borrowed all 16 GPUs while team a was idle; team a's high gang may take from b,
    which is above its fair share once a asks for its quota."""
    async with cluster("2:gpu=8,cpu=64,memory=512Gi") as (env, client):
        await _kai_queues(client, "team-a", "team-b")
        b_1 = await run_gang(env, "b-1", 8, LOW, labels=_in("team-b"))
        b_2 = await run_gang(env, "b-2", 8, LOW, labels=_in("team-b"))
        high = await run_gang(env, "a-high", 8, HIGH, wait=False, labels=_in("team-a"))
        await wait_bound(env, high)
        await settle(env)
        bound = await running(env)
        assert sorted([count(bound, b_1), count(bound, b_2)]) == [0, 8]
        await env.api.assert_not_overcommitted()


async def test_a_volcano_gang_preempts_for_the_placement_its_task_minimums_make() -> None:
    """A low pod holds 8 of a 10-GPU node. The high Volcano group needs 3 members, its master
    among them: the master (2 GPUs) and two workers (4 each) fill the node once the low pod
    is gone; three workers (12) never would. Preemption plans the placement the cycle makes,
    each task's required members first, so it evicts the low pod and the group binds."""
    async with cluster("1:gpu=10,cpu=32,memory=128Gi") as (env, client):
        low = await run_gang(env, "low", 1, LOW, gpu=8)
        await k8s.CustomObjectsApi(client).create_namespaced_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "default",
            "podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "f"},
                "spec": {"minMember": 3, "minTaskMember": {"master": 1}},
            },
        )

        def member(name: str, gpu: int, task: str) -> dict[str, Any]:
            pod = gang_pod(name, None, gpu=gpu, cpu="100m", priority_class=HIGH)
            pod["metadata"]["annotations"] = {
                "scheduling.k8s.io/group-name": "f",
                "volcano.sh/task-spec": task,
            }
            return pod

        workers = [f"f-w{i}" for i in range(3)]
        await env.api.create_pods(
            [member("f-m", 2, "master"), *(member(n, 4, "worker") for n in workers)]
        )

        async def three_running() -> bool:
            bound = await running(env)
            return "f-m" in bound and count(bound, workers) == 2

        await eventually(three_running, within=20)
        assert evicted(env) == set(low)
        await env.api.assert_not_overcommitted()
