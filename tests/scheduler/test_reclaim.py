"""Reclaim: a queue below its fair share takes capacity back, whole gangs at a time, over HTTP.

The real scheduler on the simulator, through each queue API users already have:

1. queue A (weight 1) fills 16 x 8 GPUs with 8 x 1-GPU gangs; queue B (weight 1) arrives with 8
   such gangs: B holds exactly 64 GPUs within 10 s, exactly 8 of A's gangs were evicted whole;
2. a reclaimer needing 8 GPUs takes one 8-GPU gang, not pieces of several;
3. a queue within its guarantee is never a victim;
4. at the fair split, 1,000 cycles evict nothing;
5. two queues both below their fair share cannot evict each other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections import Counter
from typing import Any

import pytest

from gang.app.explain import explain, find_gang
from gang.app.metrics import make_registry
from gang.bench.queueload import APIS, KAI, QueueDef, QueueLoad, gang_objects, queue_objects
from gang.bench.queuerun import scenario
from gang.models.groupapis import POD_GROUP_GROUP, POD_GROUP_VERSION
from gang.sim.kubelet import KubeletConfig
from tests.scheduler.conftest import Env, eventually, gang_env

pytestmark = pytest.mark.asyncio

CLUSTER_128 = "16:gpu=8,cpu=64,memory=512Gi"
GPU = "nvidia.com/gpu"
SAID = re.compile(
    r"reclaimed by gang team-b/\S+ \(priority 0\): queue team-b below its fair share "
    r"\d+ GPUs \(has \d+ GPUs\); team-a holds \d+ GPUs of its fair share \d+ GPUs"
)


def _gpus(pod: dict[str, Any]) -> int:
    return sum(
        int(c.get("resources", {}).get("limits", {}).get(GPU, 0)) for c in pod["spec"]["containers"]
    )


def _group(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"]).rsplit("-", 1)[0]


async def _live(env: Env) -> list[dict[str, Any]]:
    return [p for p in await env.api.raw_pods(None) if not p["metadata"].get("deletionTimestamp")]


async def _held(env: Env) -> Counter[str]:
    """GPUs bound per namespace (one queue per namespace here), terminating pods excluded."""
    held: Counter[str] = Counter()
    for pod in await _live(env):
        if pod["spec"].get("nodeName"):
            held[pod["metadata"]["namespace"]] += _gpus(pod)
    return held


async def _bound_per_gang(env: Env, namespace: str) -> Counter[str]:
    bound: Counter[str] = Counter()
    for pod in await _live(env):
        if pod["metadata"]["namespace"] == namespace and pod["spec"].get("nodeName"):
            bound[_group(pod)] += 1
    return bound


async def _reclaim_events(env: Env, namespace: str) -> list[dict[str, Any]]:
    return [e for e in await env.api.events(namespace) if e["reason"] == "Reclaimed"]


async def _add(load: QueueLoad, queue: str, count: int, members: int = 8, gpus: int = 1) -> None:
    for i in range(count):
        name = f"{queue}-g{load.created[queue]:04d}"
        load.created[queue] += 1
        group, pods = gang_objects(load.api, queue, name, members, gpus)
        group["metadata"]["namespace"] = queue
        await load.create(group)
        await asyncio.gather(*(load.core.create_namespaced_pod(queue, p) for p in pods))
        del i


async def _filled(env: Env, namespace: str, gpus: int, within: float = 15) -> None:
    async def full() -> bool:
        return (await _held(env))[namespace] == gpus

    await eventually(full, within=within)


@pytest.mark.parametrize("api", APIS)
async def test_a_returning_queue_takes_back_its_fair_share_in_whole_gangs(api: str) -> None:
    async with gang_env(CLUSTER_128) as env, env.cluster.api_client() as client:
        load = _two_teams(client, api)
        await load.setup()
        await _add(load, "team-a", 16)
        await _filled(env, "team-a", 128)
        await _add(load, "team-b", 8)

        async def b_has_its_share() -> bool:
            return (await _held(env))["team-b"] == 64

        await eventually(b_has_its_share, within=10)
        await asyncio.sleep(1)  # and it stays there: nothing more is evicted
        held = await _held(env)
        assert held["team-b"] == 64 and held["team-a"] == 64, held
        a = await _bound_per_gang(env, "team-a")
        assert sorted(a.values()) == [8] * 8, f"A's gangs left: {a}"  # 8 whole, none partial
        evicted = {f"team-a-g{i:04d}" for i in range(16)} - set(a)
        assert len(evicted) == 8
        events: list[dict[str, Any]] = []

        async def said_on_every_victim() -> bool:
            events[:] = [
                e
                for e in await _reclaim_events(env, "team-a")
                if e["involvedObject"]["kind"] != "Pod"
            ]
            return {e["involvedObject"]["name"] for e in events} == evicted

        await eventually(said_on_every_victim)  # Events are posted behind the bindings
        for event in events:  # the shares as each decision saw them (B's gangs keep arriving)
            assert SAID.search(event["message"]), event["message"]
        await env.api.assert_not_overcommitted()
        env.scheduler.state.ledger.check()
        assert sum(env.scheduler.cycle.reclaimed_gangs.values()) == 8
        # the victims' groups say so, and so do explain and the metrics
        victim = sorted(evicted)[0]

        async def condition_written() -> bool:
            group = await _podgroup(load, victim)
            conditions = group.get("status", {}).get("conditions", [])
            return any(
                c["type"] == "DisruptionTarget" and c["reason"] == "Reclaimed" for c in conditions
            )

        await eventually(condition_written)
        # its operator makes the pods again: the gang waits (A is at its share) and says why
        _, pods = gang_objects(api, "team-a", victim, 8)
        for pod in pods:
            await load.core.create_namespaced_pod("team-a", pod)

        async def back() -> bool:
            return find_gang(env.scheduler, "team-a", victim) is not None

        await eventually(back)
        gang = find_gang(env.scheduler, "team-a", victim)
        assert gang is not None
        answer = explain(env.scheduler, gang)
        assert answer["disrupted"]["kind"] == "reclaimed", answer
        assert "queue team-b below its fair share" in answer["disrupted"]["by"]

        async def reclaimers_told() -> bool:  # each reclaiming gang's group says what it took
            said = [e for e in await env.api.events("team-b") if e["reason"] == "Reclaiming"]
            return len(said) == 8 and all("team-a holds" in e["message"] for e in said)

        await eventually(reclaimers_told)
        metrics = _metrics(env)
        assert metrics[("gang_reclaimed_gangs_total", f"{api}/team-a")] == 8
        assert metrics[("gang_reclaimed_pods_total", f"{api}/team-a")] == 64
        assert metrics[("gang_reclaims_total", "")] == 8


async def _podgroup(load: QueueLoad, name: str) -> dict[str, Any]:
    if load.api == "volcano":
        where = ("scheduling.volcano.sh", "v1beta1", "team-a", "podgroups", name)
    else:
        where = (POD_GROUP_GROUP, POD_GROUP_VERSION, "team-a", "podgroups", name)
    group: dict[str, Any] = await load.custom.get_namespaced_custom_object(*where)
    return group


def _metrics(env: Env) -> dict[tuple[str, str], float]:
    registry = make_registry(lambda: env.scheduler, lambda: True)
    out: dict[tuple[str, str], float] = {}
    for family in registry.collect():
        for sample in family.samples:
            out[(sample.name, sample.labels.get("queue", ""))] = sample.value
    return out


def _kai(name: str, quota: int = 0, weight: int = 1, **spec: Any) -> dict[str, Any]:
    """A KAI Queue as a team writes it (``queue_objects``), with any more ``spec`` fields."""
    (body,) = queue_objects(KAI, [QueueDef(name, weight=weight, quota=quota)])
    body["spec"].update(spec)
    return body


def _two_teams(client: Any, api: str) -> QueueLoad:
    """team-a and team-b of equal weight, no quota, no backlog (the tests add gangs)."""
    return QueueLoad(client, api, [QueueDef("team-a", backlog=0), QueueDef("team-b", backlog=0)])


def _volcano(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


async def _queues(load: QueueLoad, *bodies: dict[str, Any]) -> None:
    for q in load.queues:
        await load.core.create_namespace({"metadata": {"name": q.name}})
    for body in bodies:
        await load.create(body)


async def test_a_reclaimer_takes_one_whole_gang_not_pieces_of_several() -> None:
    """A fills 32 GPUs with 4 gangs of 8 x 1 GPU, spread over the nodes; B needs 8: exactly
    one of A's gangs goes, whole, the other three keep all 8 members."""
    async with gang_env("4:gpu=8,cpu=64,memory=512Gi") as env, env.cluster.api_client() as c:
        load = _two_teams(c, KAI)
        await load.setup()
        await _add(load, "team-a", 4)
        await _filled(env, "team-a", 32)
        await _add(load, "team-b", 1)
        await _filled(env, "team-b", 8)
        await asyncio.sleep(0.5)
        a = await _bound_per_gang(env, "team-a")
        assert sorted(a.values()) == [8, 8, 8], a
        assert env.scheduler.cycle.reclaimed_gangs == {"kai/team-a": 1}
        assert env.scheduler.cycle.reclaimed_pods == {"kai/team-a": 8}


@pytest.mark.parametrize("api", ["volcano", KAI])
async def test_a_queue_within_its_guarantee_is_never_a_victim(api: str) -> None:
    """A (guarantee 16) holds its 16; C (no quota) holds 16, started before A's gangs (so A's
    are the cheaper victims by lost work); B (weight 3) arrives: C loses a gang, A none."""
    queues = [QueueDef(n, backlog=0) for n in ("team-a", "team-b", "team-c")]
    if api == KAI:
        bodies = [_kai("team-a", quota=16), _kai("team-b", weight=3), _kai("team-c")]
    else:
        guarantee = {"resource": {GPU: 16}}
        bodies = [
            _volcano("team-a", deserved={GPU: 16}, guarantee=guarantee, weight=1),
            _volcano("team-b", weight=3),
            _volcano("team-c", weight=1),
        ]
    async with gang_env("4:gpu=8,cpu=64,memory=512Gi") as env, env.cluster.api_client() as c:
        load = QueueLoad(c, api, queues)
        await _queues(load, *bodies)
        await _add(load, "team-c", 2)
        await _filled(env, "team-c", 16)
        await _add(load, "team-a", 2)
        await _filled(env, "team-a", 16)
        await _add(load, "team-b", 2)  # fair share: A 16, B 12, C 4
        await _filled(env, "team-b", 8)
        await asyncio.sleep(1)
        held = await _held(env)
        assert held == {"team-a": 16, "team-b": 8, "team-c": 8}, held
        assert not await _reclaim_events(env, "team-a")
        assert list(env.scheduler.cycle.reclaimed_gangs) == [f"{api}/team-c"]


async def test_at_the_fair_split_a_thousand_cycles_evict_nothing() -> None:
    """A and B hold 64 GPUs each, their fair split, each with two more gangs waiting: 1,000
    cycles of every waiting gang decide no eviction (neither can add a gang within its share)."""
    async with gang_env(CLUSTER_128) as env, env.cluster.api_client() as client:
        load = _two_teams(client, KAI)
        await load.setup()
        await _add(load, "team-a", 8)
        await _add(load, "team-b", 8)
        await _filled(env, "team-a", 64)
        await _filled(env, "team-b", 64)
        await _add(load, "team-a", 2)
        await _add(load, "team-b", 2)
        cycle, state = env.scheduler.cycle, env.scheduler.state

        async def all_waiting() -> bool:
            return sum(1 for g in state.gangs.values() if g.pending()) == 4

        await eventually(all_waiting)
        waiting = [g for g in state.gangs.values() if g.pending()]
        assert {g.membership.queue for g in waiting} == {"kai/team-a", "kai/team-b"}
        for _ in range(250):
            for gang in waiting:
                cycle.schedule(gang)
        assert cycle.preemptions == 0 and cycle.reclaims == 0
        assert all(g.preempting is None for g in waiting)
        await asyncio.sleep(0.5)
        assert await _held(env) == {"team-a": 64, "team-b": 64}
        message = waiting[0].last_failure or ""
        assert (
            "reclaim: not for this gang: its queue would hold 72 GPUs of its fair share 64 GPUs: "
            "a queue takes back only up to its fair share" in message
        ), message


@pytest.mark.parametrize("api", APIS)
async def test_two_queues_below_their_fair_share_cannot_evict_each_other(api: str) -> None:
    """Quotas of 12 GPUs each on a 16-GPU cluster (promised more than it has): A and B hold 8
    each, both below their share; A's waiting 4-GPU gang takes nothing from B."""
    queues = [QueueDef("team-a", quota=12, backlog=0), QueueDef("team-b", quota=12, backlog=0)]
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi") as env, env.cluster.api_client() as c:
        load = QueueLoad(c, api, queues)
        await load.setup()
        await _add(load, "team-a", 2, members=4)
        await _add(load, "team-b", 2, members=4)
        await _filled(env, "team-a", 8)
        await _filled(env, "team-b", 8)
        await _add(load, "team-a", 1, members=4)

        async def judged() -> bool:
            gang = next((g for g in env.scheduler.state.gangs.values() if g.pending()), None)
            return gang is not None and gang.last_failure is not None

        await eventually(judged)
        await asyncio.sleep(1)
        assert await _held(env) == {"team-a": 8, "team-b": 8}
        assert env.scheduler.cycle.reclaims == 0 and env.scheduler.cycle.preemptions == 0


async def test_a_gang_inside_its_queues_min_runtime_is_spared_until_it_is_over() -> None:
    """A's KAI queue says reclaimMinRuntime 1h: B's gang waits, A's gangs run on. The queue is
    changed to 1s while B waits: B reclaims at once."""
    queues = [QueueDef("team-a", backlog=0), QueueDef("team-b", backlog=0)]
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi") as env, env.cluster.api_client() as c:
        load = QueueLoad(c, KAI, queues)
        await _queues(load, _kai("team-a", reclaimMinRuntime="1h"), _kai("team-b"))
        await _add(load, "team-a", 2)
        await _filled(env, "team-a", 16)
        await _add(load, "team-b", 1)

        async def judged() -> bool:
            gang = next((g for g in env.scheduler.state.gangs.values() if g.pending()), None)
            return gang is not None and gang.last_failure is not None

        await eventually(judged)
        await asyncio.sleep(0.5)
        assert (await _held(env))["team-b"] == 0
        assert env.scheduler.cycle.reclaims == 0
        await load.custom.patch_cluster_custom_object(
            "scheduling.run.ai",
            "v2",
            "queues",
            "team-a",
            {"spec": {"reclaimMinRuntime": "1s"}},
            _content_type="application/merge-patch+json",
        )
        await _filled(env, "team-b", 8)
        assert (await _held(env))["team-a"] == 8


async def test_the_reclaim_bench_scenario_drives_the_same_return() -> None:
    """``gang bench --workload queues --scenario reclaim``'s workload (in-process, B arriving
    after one second instead of five): A's 16 gangs at once, B's 8 once it arrives, nothing
    finishing; B ends holding its 64 GPUs and the driver made exactly those gangs."""
    plan = scenario("reclaim", KAI)
    queues = [dataclasses.replace(q, arrive_at=min(q.arrive_at, 1.0)) for q in plan.queues]
    async with gang_env(plan.nodes) as env, env.cluster.api_client() as client:
        load = QueueLoad(client, KAI, queues, members=plan.members)
        await load.setup()
        shares = await load.run(4.0, finish=plan.finish)
        assert load.created == {"team-a": 16, "team-b": 8}
        assert shares.samples[-1][1] == plan.expected
        assert shares.peak("team-a") == 128


async def test_explain_says_the_reclaimer_waits_for_its_victims() -> None:
    """A's pods take two seconds to terminate (kubelet stand-in, grace 2 s): meanwhile B's gang
    is nominated, and ``gang explain`` says whom its reclaim evicts and why."""
    kubelet = {"kubelet": KubeletConfig(start_delay=0.0, termination_delay=2.0)}
    async with (
        gang_env("2:gpu=8,cpu=64,memory=512Gi", cluster_options=kubelet) as env,
        env.cluster.api_client() as client,
    ):
        load = _two_teams(client, KAI)
        await load.setup()
        for i in range(2):
            group, pods = gang_objects(KAI, "team-a", f"team-a-g{i:04d}", 8)
            group["metadata"]["namespace"] = "team-a"
            await load.create(group)
            for pod in pods:
                pod["spec"]["terminationGracePeriodSeconds"] = 2
                await load.core.create_namespaced_pod("team-a", pod)
        await _filled(env, "team-a", 16)
        await _add(load, "team-b", 1)
        answer: dict[str, Any] = {}

        async def waiting() -> bool:
            gang = find_gang(env.scheduler, "team-b", "team-b-g0000")
            if gang is None or gang.preempting is None:
                return False
            answer.update(explain(env.scheduler, gang))
            return True

        await eventually(waiting)
        assert answer["state"] == "waiting-for-victims", answer
        assert answer["preemption"]["kind"] == "reclaim"
        assert (
            "queue team-b below its fair share 8 GPUs (has 0 GPUs)"
            in answer["preemption"]["evicting"]
        )
        await _filled(env, "team-b", 8)


async def test_a_reclaim_waits_out_the_min_runtime_and_then_takes() -> None:
    """A's KAI queue says reclaimMinRuntime 3s and nothing else changes: B's gang waits, then
    reclaims once A's gangs have run 3 s (the scheduler tries it again then by itself)."""
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi") as env, env.cluster.api_client() as c:
        load = _two_teams(c, KAI)
        await _queues(load, _kai("team-a", reclaimMinRuntime="3s"), _kai("team-b"))
        await _add(load, "team-a", 2)
        await _filled(env, "team-a", 16)
        started = asyncio.get_running_loop().time()
        await _add(load, "team-b", 1)
        await asyncio.sleep(1.0)
        assert (await _held(env))["team-b"] == 0  # spared: A's gangs are younger than 3 s
        await _filled(env, "team-b", 8)
        assert asyncio.get_running_loop().time() - started >= 1.5
        assert env.scheduler.cycle.reclaims == 1


async def test_a_reclaimer_that_came_while_its_victims_were_binding_takes_them_once_bound() -> None:
    """A gang whose members are in Permit or binding is never a victim (it would be left
    partial). B's gang arrives while both of A's gangs are binding, so its one cycle finds
    nothing to reclaim and it is parked. Once an A gang is wholly bound, that completion must
    send B round again: nothing else changes (no capacity moves), and B waits a minute
    otherwise, for the flush of parked gangs."""
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi") as env, env.cluster.api_client() as c:
        load = _two_teams(c, KAI)
        await load.setup()
        env.cluster.faults.binding_latency = 1.5
        await _add(load, "team-a", 2)
        state = env.scheduler.state

        async def a_binding() -> bool:
            gangs = [g for k, g in state.gangs.items() if k.namespace == "team-a"]
            return len(gangs) == 2 and all(len(g.binding) == 8 for g in gangs)

        await eventually(a_binding)
        failed = env.scheduler.stats.attempts.get("unschedulable", 0)
        await _add(load, "team-b", 1)

        async def b_parked() -> bool:
            return env.scheduler.stats.attempts.get("unschedulable", 0) > failed

        await eventually(b_parked)
        assert (await _held(env))["team-a"] < 16, "A bound before B was tried: no race"
        env.cluster.faults.binding_latency = 0.0
        await _filled(env, "team-b", 8, within=8)
        a = await _bound_per_gang(env, "team-a")
        assert sorted(a.values()) == [8], a  # one of A's gangs went, whole
