"""Reservation and backfill over HTTP: a big gang is never starved by a stream of small ones.

Every test runs the real scheduler against the simulator with its kubelet stand-in: pods start,
run for their ``gang.sim/run-seconds`` and finish, which is what frees capacity. Pods declare
their expected run time to the scheduler with ``gang.scheduling/expected-run-seconds``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from gang.scheduling.gang import GangKey
from gang.sim.cluster import SimCluster
from gang.sim.kubelet import RUN_SECONDS, KubeletConfig
from gang.state.podinfo import EXPECTED_RUN_ANNOTATION
from tests.scheduler.conftest import (
    Api,
    Env,
    eventually,
    gang_env,
    gang_pod,
    podgroup,
    running_scheduler,
)

NS = "default"


@asynccontextmanager
async def cluster(nodes: str, **config: Any) -> AsyncIterator[Env]:
    kubelet = KubeletConfig(start_delay=0.05, termination_delay=0.05)
    async with gang_env(nodes, cluster_options={"kubelet": kubelet}, **config) as env:
        yield env


def timed_pod(
    name: str,
    group: str | None,
    gpu: int,
    run: float | None,
    declared: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A pod that runs ``run`` seconds (None: until deleted) and declares ``declared`` (by
    default what it runs)."""
    pod = gang_pod(name, group, gpu=gpu, cpu="100m", memory="128Mi", **extra)
    annotations: dict[str, str] = {}
    if run is not None:
        annotations[RUN_SECONDS] = str(run)
    if declared is None:
        declared = run
    if declared is not None:
        annotations[EXPECTED_RUN_ANNOTATION] = str(declared)
    pod["metadata"]["annotations"] = annotations
    return pod


async def gang_of(
    env: Env, name: str, size: int, gpu: int, run: float | None, declared: float | None = None
) -> list[str]:
    await env.api.create_podgroup(podgroup(name, size, timeout=60))
    names = [f"{name}-{i}" for i in range(size)]
    await env.api.create_pods([timed_pod(p, name, gpu, run, declared) for p in names])
    return names


async def bound_all(env: Env, pods: list[str]) -> bool:
    bound = await env.api.bound()
    return all(p in bound for p in pods)


async def stream(env: Env, count: int, every: float, run: float, prefix: str = "s") -> None:
    """Small gangs (4 x 1 GPU) arriving every ``every`` seconds, each running ``run``."""
    for i in range(count):
        await gang_of(env, f"{prefix}{i:03d}", 4, 1, run)
        await asyncio.sleep(every)


async def fill(env: Env, ends: Sequence[float]) -> None:
    """Fill the cluster with small gangs (4 x 1 GPU), the i-th running ``ends[i]`` seconds."""
    for i, run in enumerate(ends):
        await gang_of(env, f"f{i:03d}", 4, 1, run)
    pods = [f"f{i:03d}-{j}" for i in range(len(ends)) for j in range(4)]
    await eventually(lambda: bound_all(env, pods), within=15)


def one_after_another(gangs: int, first_end: float, spacing: float) -> list[float]:
    return [first_end + i * spacing for i in range(gangs)]


def reservation_of(env: Env, name: str) -> Any:
    gang = env.scheduler.state.gangs.get(GangKey(NS, name))
    return gang.reservation if gang is not None else None


def reserved(env: Env, name: str) -> Callable[[], Awaitable[bool]]:
    """A check for ``eventually``: the gang holds a reservation."""

    async def check() -> bool:
        return reservation_of(env, name) is not None

    return check


async def prefill(env: Env, layout: list[tuple[int, float | None]]) -> list[str]:
    """Bind pod ``pre-i`` (GPUs, run seconds; None: until deleted) to the i-th node by name,
    as another scheduler would; the node names, sorted."""
    nodes = sorted(n["metadata"]["name"] for n in await env.api.raw_nodes())
    await env.api.create_pods(
        [
            timed_pod(f"pre-{i}", None, gpu, run, scheduler="default-scheduler")
            for i, (gpu, run) in enumerate(layout)
        ]
    )
    for i in range(len(layout)):
        await env.api.bind(f"pre-{i}", nodes[i])
    return nodes


async def high_priority(env: Env) -> None:
    """The PriorityClass ``high`` (1000)."""
    from kubernetes_asyncio import client as k8s

    async with env.cluster.api_client() as client:
        await k8s.SchedulingV1Api(client).create_priority_class(
            {"metadata": {"name": "high"}, "value": 1000}
        )


async def test_big_gang_binds_once_its_reserved_nodes_drain_while_a_stream_flows() -> None:
    """The issue's scenario at a quarter of the size: 8 nodes x 8 GPUs kept full by small gangs
    (4 x 1 GPU, packed two to a node in creation order: one half of each node frees every
    0.25 s from 1 s, node by node, the other halves every 0.25 s from 3 s; a new gang arrives
    every 0.25 s); a gang of 4 x 8 GPUs (half the cluster) created before the stream. It
    reserves the nodes that drain first and binds once they have, while the stream flows into
    the halves freed on the other nodes."""
    async with cluster("8:gpu=8") as env:
        await fill(env, [1.0 + 0.25 * (i // 2) + (2.0 if i % 2 else 0.0) for i in range(16)])
        big = await gang_of(env, "big", 4, 8, run=30)
        feeder = asyncio.create_task(stream(env, 48, every=0.25, run=4.0))
        try:
            await eventually(reserved(env, "big"), within=5)
            res = reservation_of(env, "big")
            assert len(res.held) == 4 and res.start > time.time() - 1
            held_nodes = set(res.held)
            await eventually(lambda: bound_all(env, big), within=15)
            bound = await env.api.bound()
            assert {bound[p] for p in big} == held_nodes  # the nodes it reserved, drained
            assert reservation_of(env, "big") is None
            # the stream kept flowing while the big gang waited, elsewhere
            streamed = [p for p in bound if p.startswith("s")]
            assert len(streamed) >= 8
            reasons = {e["reason"] for e in await env.api.events()}
            assert "Reserved" in reasons
        finally:
            feeder.cancel()
        await env.api.assert_not_overcommitted()
        book = env.scheduler.state.reservations
        assert book.made >= 1 and book.waits.observations >= 1


async def test_without_reservations_the_stream_starves_the_big_gang() -> None:
    """The same cluster with reservations off: every freed GPU goes to the next small gang."""
    async with cluster("8:gpu=8", reservations=False) as env:
        await fill(env, one_after_another(16, first_end=1.0, spacing=0.25))
        big = await gang_of(env, "big", 4, 8, run=30)
        feeder = asyncio.create_task(stream(env, 48, every=0.15, run=4.0))
        try:
            await asyncio.sleep(8)
            bound = await env.api.bound()
            assert not any(p in bound for p in big)
            assert reservation_of(env, "big") is None
        finally:
            feeder.cancel()


async def test_the_reserved_condition_says_which_nodes_and_when() -> None:
    async with cluster("4:gpu=8") as env:
        for i in range(4):  # every node busy with one 8-GPU pod finishing at a different time
            await gang_of(env, f"busy{i}", 1, 8, run=3 + 3 * i)
        await eventually(lambda: bound_all(env, [f"busy{i}-0" for i in range(4)]))
        big = await gang_of(env, "big", 2, 8, run=5)

        async def condition() -> dict[str, Any] | None:
            status = (await env.api.get_podgroup("big")).get("status") or {}
            return next((c for c in status.get("conditions", []) if c["type"] == "Reserved"), None)

        async def condition_true() -> bool:
            found = await condition()
            return found is not None and found["status"] == "True"

        await eventually(condition_true)
        found = await condition()
        assert found is not None and found["reason"] == "CapacityReserved"
        bound = await env.api.bound()
        soonest = {bound["busy0-0"], bound["busy1-0"]}
        assert set(reservation_of(env, "big").held) == soonest
        for node in soonest:
            assert node in found["message"]
        assert "expected start" in found["message"]
        report = await _debug(env)
        entry = next(r for r in report if r["name"] == "big")
        assert set(entry["reservation"]["nodes"]) == soonest
        assert 0 < entry["reservation"]["starts_in_seconds"] <= 7
        await eventually(lambda: bound_all(env, big), within=12)
        assert {bound["busy0-0"], bound["busy1-0"]} == {(await env.api.bound())[p] for p in big}

        async def condition_gone() -> bool:
            return await condition() is None

        await eventually(condition_gone)


async def test_backfill_only_for_gangs_that_end_before_the_reservation_starts() -> None:
    """n0 runs a 6-GPU pod and n1 an 8-GPU pod, both for 4 s; n2 and n3 run long pods. The big
    gang (2 x 8 GPUs) reserves n0 and n1. The 2 GPUs free on n0 go to a gang declaring 1 s
    (backfill), never to one declaring 60 s."""
    async with cluster("4:gpu=8") as env:
        api = env.api
        nodes = await prefill(env, [(6, 4.0), (8, 4.0), (8, None), (8, None)])

        async def running() -> bool:
            pods = await api.raw_pods()
            return sum(p["status"].get("phase") == "Running" for p in pods) == 4

        await eventually(running)
        big = await gang_of(env, "big", 2, 8, run=5)

        await eventually(reserved(env, "big"))
        assert set(reservation_of(env, "big").held) == set(nodes[:2])
        long = await gang_of(env, "long", 2, 1, run=60)
        short = await gang_of(env, "short", 2, 1, run=1)
        await eventually(lambda: bound_all(env, short), within=3)
        bound = await api.bound()
        assert {bound[p] for p in short} == {nodes[0]}
        assert not any(p in bound for p in long)
        backfills = reservation_of(env, "big").backfills
        assert [b.gang for b in backfills] == [f"{NS}/short"]
        assert "Backfilled" in {e["reason"] for e in await api.events()}
        await eventually(lambda: bound_all(env, big), within=10)
        bound = await api.bound()
        assert {bound[p] for p in big} == set(nodes[:2])
        assert not any(p in bound for p in long)  # still nowhere for it: n2, n3 are busy
        await api.assert_not_overcommitted()


async def test_a_gang_behind_a_reservation_plans_through_its_hold() -> None:
    """n0 runs an 8-GPU pod for 2 s, n1 one that declares nothing (expected to run at least a
    minute). Gang a (1 x 8 GPUs, 2 s) reserves n0. Gang b behind it (1 x 8 GPUs) reserves n0
    too, from when a will have run (about 4 s), not n1 in a minute: a's hold comes free, it is
    not held for ever. Both bind on n0 one after the other."""
    async with cluster("2:gpu=8") as env:
        api = env.api
        nodes = await prefill(env, [(8, 2.0), (8, None)])
        made = time.time()
        first = await gang_of(env, "a", 1, 8, run=2)
        await eventually(reserved(env, "a"))
        res_a = reservation_of(env, "a")
        second = await gang_of(env, "b", 1, 8, run=2)
        await eventually(reserved(env, "b"))
        res_b = reservation_of(env, "b")
        assert set(res_a.held) == set(res_b.held) == {nodes[0]}
        assert res_b.start >= res_a.start + 2 - 0.01
        assert res_b.start < made + 30  # not n1's minute
        await eventually(lambda: bound_all(env, first), within=10)
        await eventually(lambda: bound_all(env, second), within=10)
        bound = await api.bound()
        assert bound["a-0"] == bound["b-0"] == nodes[0]
        await api.assert_not_overcommitted()


async def test_a_gang_ahead_of_a_reservation_leaves_its_nodes_to_drain() -> None:
    """n0 runs a 2-GPU pod for 3 s, n1 a 4-GPU pod declaring nothing. The big gang (1 x 8 GPUs)
    reserves n0. An urgent gang (2 GPUs for a minute, higher priority: ahead of the big one, so
    the hold does not apply to it) would score n0 best (the default scores favour the emptier
    node here), making the big gang wait for its minute too; it goes to n1, which has room, and
    the big gang binds once n0 drains."""
    async with cluster("2:gpu=8") as env:
        api = env.api
        await high_priority(env)
        nodes = await prefill(env, [(2, 3.0), (4, None)])
        big = await gang_of(env, "big", 1, 8, run=5)

        await eventually(reserved(env, "big"))
        assert set(reservation_of(env, "big").held) == {nodes[0]}
        await api.create_podgroup(podgroup("urgent", 1, timeout=60))
        await api.create_pods([timed_pod("urgent-0", "urgent", 2, 60, priority_class="high")])
        await eventually(lambda: bound_all(env, ["urgent-0"]))
        assert (await api.bound())["urgent-0"] == nodes[1]
        await eventually(lambda: bound_all(env, big), within=10)
        assert (await api.bound())["big-0"] == nodes[0]
        await api.assert_not_overcommitted()


async def test_a_reservation_that_slipped_moves_to_nodes_freeing_sooner() -> None:
    """n0 runs a 2-GPU pod for 3 s, n1 an 8-GPU pod for 5 s. The big gang (1 x 8 GPUs) reserves
    n0, due in 3 s. An urgent gang (6 GPUs for a minute, higher priority: ahead of the big one)
    finds no room but on n0 and lands there, so n0 now frees in a minute: the reservation has
    slipped, and it moves to n1 (due in 5 s), where the big gang binds — not a minute later on
    n0. The move is said (Event) and counted; its expiry stays where it was."""
    async with cluster("2:gpu=8") as env:
        api = env.api
        await high_priority(env)
        nodes = await prefill(env, [(2, 3.0), (8, 5.0)])
        big = await gang_of(env, "big", 1, 8, run=5)

        await eventually(reserved(env, "big"))
        first = reservation_of(env, "big")
        assert set(first.held) == {nodes[0]}
        expires = first.expires
        await api.create_podgroup(podgroup("urgent", 1, timeout=60))
        await api.create_pods([timed_pod("urgent-0", "urgent", 6, 60, priority_class="high")])
        await eventually(lambda: bound_all(env, ["urgent-0"]))
        assert (await api.bound())["urgent-0"] == nodes[0]  # nowhere else for it

        async def moved() -> bool:
            res = reservation_of(env, "big")
            return res is not None and set(res.held) == {nodes[1]}

        await eventually(moved, within=5)
        res = reservation_of(env, "big")
        assert res is first and res.moves == 1 and res.expires == expires
        assert env.scheduler.state.reservations.moved == 1
        said = [e["message"] for e in await api.events() if e["reason"] == "ReservationMoved"]
        assert said and "1 of 1 node(s) changed" in said[0]
        shown = next(r for r in await _debug(env) if r["name"] == "big")["reservation"]
        assert shown["nodes"] == [nodes[1]] and shown["moves"] == 1

        async def condition_names_the_new_node() -> bool:
            status = (await api.get_podgroup("big")).get("status") or {}
            return any(
                c["type"] == "Reserved" and c["status"] == "True" and nodes[1] in c["message"]
                for c in status.get("conditions", [])
            )

        await eventually(condition_names_the_new_node)
        await eventually(lambda: bound_all(env, big), within=10)
        assert (await api.bound())["big-0"] == nodes[1]
        await api.assert_not_overcommitted()


async def test_an_impossible_gang_reserves_nothing_and_blocks_nobody() -> None:
    """An impossible 900-pod gang created first, then 40 gangs that fit: all 40 bind."""
    async with cluster("8:gpu=8") as env:
        await gang_of(env, "huge", 900, 1, run=None)
        names = [p for i in range(40) for p in await gang_of(env, f"ok{i:02d}", 1, 1, run=None)]
        await eventually(lambda: bound_all(env, names), within=10)
        assert reservation_of(env, "huge") is None
        assert len(env.scheduler.state.reservations) == 0
        bound = await env.api.bound()
        assert not any(p.startswith("huge") for p in bound)


async def test_a_reservation_expires_after_max_reservation_seconds() -> None:
    """Pods that do not finish: the reservation is dropped after max_reservation_seconds, said
    so, not renewed at once, and what it held goes to others."""
    async with cluster("2:gpu=8", max_reservation_seconds=1.5) as env:
        api = env.api
        await gang_of(env, "a", 1, 6, run=None, declared=2)  # declares 2 s, runs for ever
        await gang_of(env, "b", 1, 6, run=None, declared=2)
        await eventually(lambda: bound_all(env, ["a-0", "b-0"]))
        big = await gang_of(env, "big", 1, 8, run=None)

        await eventually(reserved(env, "big"))
        held = next(iter(reservation_of(env, "big").held))
        # 2 GPUs are free on the held node, but held: a gang declaring 60 s waits
        small = await gang_of(env, "small", 2, 1, run=None, declared=60)
        await asyncio.sleep(0.5)
        bound = await api.bound()
        assert not any(bound.get(p) == held for p in small)

        async def expired() -> bool:
            return "ReservationExpired" in {e["reason"] for e in await api.events()}

        await eventually(expired, within=5)
        assert reservation_of(env, "big") is None
        await eventually(lambda: bound_all(env, small))  # what it held is free again

        async def said_expired() -> bool:
            status = (await api.get_podgroup("big")).get("status") or {}
            return any(
                c["type"] == "Reserved"
                and c["status"] == "False"
                and c["reason"] == "ReservationExpired"
                for c in status.get("conditions", [])
            )

        await eventually(said_expired)
        await asyncio.sleep(0.5)
        assert reservation_of(env, "big") is None  # not renewed at once
        assert env.scheduler.state.reservations.expired == 1
        bound = await api.bound()
        assert not any(p in bound for p in big)


async def test_a_higher_priority_arrival_goes_first_and_a_malformed_hint_is_reported() -> None:
    async with cluster("4:gpu=8") as env:
        api = env.api
        await high_priority(env)
        # busy0 drains first but started last: preemption takes the most recently started
        # pod, so urgent's victim is on a held node whatever second the others started in
        for i in (1, 2, 3):
            await gang_of(env, f"busy{i}", 1, 8, run=2 + 2 * i)
        await eventually(lambda: bound_all(env, [f"busy{i}-0" for i in (1, 2, 3)]))
        await asyncio.sleep(1.5)  # (pods' startTime has whole seconds)
        await gang_of(env, "busy0", 1, 8, run=2)
        await eventually(lambda: bound_all(env, ["busy0-0"]))
        big = await gang_of(env, "big", 2, 8, run=None)

        await eventually(reserved(env, "big"))
        held = set(reservation_of(env, "big").held)
        assert (await api.bound())["busy0-0"] in held
        await api.create_podgroup(podgroup("urgent", 1, timeout=60))
        pod = timed_pod("urgent-0", "urgent", 8, None, priority_class="high")
        pod["metadata"]["annotations"][EXPECTED_RUN_ANNOTATION] = "soon"
        await api.create_pods([pod])
        await eventually(lambda: bound_all(env, ["urgent-0"]), within=6)
        bound = await api.bound()
        assert bound["urgent-0"] in held  # the first node to drain: held, but not against it
        warnings = [e for e in await api.events() if e["reason"] == "InvalidAnnotation"]
        assert warnings and EXPECTED_RUN_ANNOTATION in warnings[0]["message"]
        assert not any(p in bound for p in big)


async def test_reservations_are_rebuilt_in_queue_order_after_a_restart() -> None:
    """Reservations live in memory: a new scheduler process makes the big gang's again (it is
    first in the queue) before any small gang can take the draining nodes; a gang waiting for
    members it has not created yet holds room for them (placeholders) in its reservation."""
    kubelet = KubeletConfig(start_delay=0.05, termination_delay=0.05)
    async with SimCluster("4:gpu=8", kubelet=kubelet) as sim, sim.api_client() as client:
        api = Api(client)
        async with running_scheduler(sim) as scheduler:
            env = Env(sim, scheduler, api)
            for i in range(4):
                await gang_of(env, f"busy{i}", 1, 8, run=3 + 2 * i)
            await eventually(lambda: bound_all(env, [f"busy{i}-0" for i in range(4)]))
            # minMember 2, one member so far: the reservation holds room for both
            await api.create_podgroup(podgroup("big", 2, timeout=60))
            await api.create_pods([timed_pod("big-0", "big", 8, None)])

            await eventually(reserved(env, "big"))
            before = set(reservation_of(env, "big").held)
            assert len(before) == 2
        async with running_scheduler(sim) as scheduler:
            env = Env(sim, scheduler, api)
            await eventually(reserved(env, "big"))
            assert set(reservation_of(env, "big").held) == before
            await gang_of(env, "small", 1, 8, run=None)  # sorts after big: not on its nodes
            await api.create_pods([timed_pod("big-1", "big", 8, None)])
            await eventually(lambda: bound_all(env, ["big-0", "big-1"]), within=10)
            bound = await api.bound()
            assert {bound["big-0"], bound["big-1"]} == before
            assert bound.get("small-0") not in before
            await api.assert_not_overcommitted()


async def _debug(env: Env) -> list[dict[str, Any]]:
    from gang.app.server import gang_report

    return gang_report(env.scheduler)


def _pod_scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


async def test_a_lone_pods_reservation_is_named_on_its_pod_and_the_judge_sees_it() -> None:
    """A pod without a PodGroup has no ``Reserved`` condition to carry its hold: its
    ``PodScheduled: False / Unschedulable`` condition (kube-scheduler's, what autoscalers read)
    names the held node, so the invariant judge does not take the hold for free room."""
    from gang.bench.invariants import judge

    async with cluster("2:gpu=8") as env:
        nodes = await prefill(env, [(7, 3.0), (8, None)])  # node 0 drains in 3 s, node 1 never
        await env.api.create_pods([timed_pod("lone", None, 4, run=None, declared=60)])

        async def lone_reserved() -> bool:
            gang = env.scheduler.state.gangs.get(GangKey(NS, "", "lone"))
            return gang is not None and gang.reservation is not None

        await eventually(lone_reserved)

        async def note() -> dict[str, Any] | None:
            pods = {p["metadata"]["name"]: p for p in await env.api.raw_pods(NS)}
            return _pod_scheduled(pods["lone"])

        async def noted() -> bool:
            found = await note()
            return found is not None and nodes[0] in found["message"]

        await eventually(noted)
        found = await note()
        assert found is not None
        assert (found["status"], found["reason"]) == ("False", "Unschedulable")
        assert f"1 node(s) held: {nodes[0]}" in found["message"], found["message"]
        # a 1-GPU gang behind it would fit node 0's free GPU, which the hold keeps for "lone"
        small = await gang_of(env, "small", 1, 1, run=None)
        await asyncio.sleep(0.5)
        api = env.cluster.api
        store = env.cluster.store
        verdict = judge(
            store.items(api.rt_pods.storage_key),
            store.items(api.rt_nodes.storage_key),
            store.items(api.registry.by_key("scheduling.x-k8s.io/v1alpha1/podgroups").storage_key),
        )
        assert not (await env.api.bound()).keys() & set(small)
        assert verdict.fitting_unbound == [], verdict
        # bound once node 0 drained: the binding turns the condition True
        await eventually(lambda: bound_all(env, ["lone"]), within=10)
        found = await note()
        assert found is not None and found["status"] == "True"


async def test_unplaced_members_are_noted_once_not_on_every_retry() -> None:
    """Every pending member of a gang that cannot fit carries ``PodScheduled: False``; the
    note's own pod updates trigger no new cycle, so it is written once per member."""
    async with cluster("2:gpu=8", unschedulable_flush_seconds=0.5) as env:
        names = await gang_of(env, "wide", 3, 8, run=None)  # 3 whole nodes on a 2-node cluster

        async def all_noted() -> bool:
            pods = [p for p in await env.api.raw_pods(NS) if p["metadata"]["name"] in names]
            notes = [_pod_scheduled(p) for p in pods]
            return all(n is not None and n["reason"] == "Unschedulable" for n in notes)

        await eventually(all_noted)
        pods = [p for p in await env.api.raw_pods(NS) if p["metadata"]["name"] in names]
        for pod in pods:
            note = _pod_scheduled(pod)
            assert note is not None and "can never fit this cluster" in note["message"], note
        await asyncio.sleep(2.0)  # four unschedulable flushes: the gang is tried again
        assert env.scheduler.reporter.pod_notes == len(names)
