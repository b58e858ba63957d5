"""Preempt- and reclaim-mode chaos without processes: their plans and ``unserved_preemptors``.

The seeded run itself (``test_chaos.py``) proves the scheduler; these pin down the instruments
it is measured with, so a failing run is never the driver's own arithmetic: the workload must
really force preemption (a full cluster, preemptors that can all be served) and the check must
flag exactly the preemptors that would fit without the low-priority pods.
"""

from __future__ import annotations

from typing import Any

import pytest

from gang.bench.chaos import unserved_preemptors, unserved_reclaimers
from gang.bench.chaosplan import (
    DEFAULT_NODES,
    HIGH,
    LOW,
    PREEMPT_FILL,
    PREEMPT_HIGH_SHARE,
    RECLAIM_FILL,
    TAKEN,
    TAKER,
    ChaosConfig,
    GangPlan,
    cluster_gpus,
    make_plan,
    pod_manifests,
    podgroup_manifest,
)
from gang.models.queueapis import KAI_QUEUE_LABEL
from gang.sim.nodespec import node_objects, parse_pools

NS = "chaos"
Obj = dict[str, Any]


def test_the_other_modes_keep_their_defaults() -> None:
    for mode in ("full", "crash"):
        config = ChaosConfig(mode=mode)
        assert config.nodes == "12:gpu=8,cpu=32,memory=128Gi,zones=3" and config.gangs == 24
        assert make_plan(config).kill_at_eviction == []
    assert ChaosConfig(mode="crash", nodes="2:gpu=8", gangs=3).gangs == 3
    with pytest.raises(ValueError, match="mode"):
        ChaosConfig(mode="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(1, 21))
def test_the_preempt_workload_fills_the_cluster_then_asks_for_what_it_can_serve(
    seed: int,
) -> None:
    config = ChaosConfig(seed=seed, mode="preempt", duration=12)
    assert config.nodes == DEFAULT_NODES["preempt"]
    plan = make_plan(config)
    assert plan.describe() == make_plan(config).describe()  # replayable
    total, per_node = cluster_gpus(config.nodes)
    low = [g for g in plan.gangs if g.priority == LOW]
    high = [g for g in plan.gangs if g.priority == HIGH]
    assert sum(g.size * g.gpu for g in low) == int(PREEMPT_FILL * total)
    assert all(g.arrive_at == 0 and g.gpu <= per_node for g in low)
    assert [g.gpu for g in low] == sorted((g.gpu for g in low), reverse=True)
    assert len(high) == config.gangs
    assert sum(g.size * g.gpu for g in high) <= PREEMPT_HIGH_SHARE * total
    # every preemptor needs more than the fill leaves free: it must preempt
    assert all(g.min_member * g.gpu > total - int(PREEMPT_FILL * total) for g in high)
    assert all(0 < g.arrive_at < config.duration for g in high)
    assert all(g.grace_seconds > 0 for g in plan.gangs)
    assert any(trigger is not None for trigger in plan.kill_at_eviction)


def test_a_cluster_without_gpus_is_refused() -> None:
    with pytest.raises(ValueError, match="GPU"):
        make_plan(ChaosConfig(mode="preempt", nodes="4:cpu=32"))


def _cluster(spec: str = "2:gpu=8") -> list[Obj]:
    return node_objects(parse_pools(spec))


def _gang(name: str, size: int, gpu: int, priority: str, on: list[str]) -> tuple[list[Obj], Obj]:
    """A gang's pods (the first ``len(on)`` bound to those nodes) and its PodGroup."""
    gang = GangPlan(name, size, size, gpu, "1", priority, 0.0)
    pods = pod_manifests(gang, NS)
    for pod, node in zip(pods, on, strict=False):
        pod["spec"]["nodeName"] = node
    return pods, podgroup_manifest(gang, NS)


def test_a_preemptor_that_fits_once_low_pods_are_gone_is_unserved() -> None:
    nodes = _cluster()
    low, low_group = _gang("low000", 4, 4, LOW, ["node-00000", "node-00000", "node-00001"])
    high, high_group = _gang("high000", 2, 8, HIGH, [])
    found = unserved_preemptors(low + high, nodes, [low_group, high_group], NS)
    assert found == [
        "chaos/high000 (2 of its quorum of 2 would fit once the chaos-low pods were evicted)"
    ]


def test_high_priority_pods_are_not_counted_as_free() -> None:
    nodes = _cluster()
    other, other_group = _gang("high001", 1, 8, HIGH, ["node-00000"])
    low, low_group = _gang("low000", 2, 4, LOW, ["node-00001", "node-00001"])
    high, high_group = _gang("high000", 2, 8, HIGH, [])
    groups = [other_group, low_group, high_group]
    assert unserved_preemptors(other + low + high, nodes, groups, NS) == []


def test_preemptors_that_fit_only_one_at_a_time_count_once() -> None:
    nodes = _cluster()
    first, first_group = _gang("high000", 2, 8, HIGH, [])
    second, second_group = _gang("high001", 2, 8, HIGH, [])
    found = unserved_preemptors(first + second, nodes, [first_group, second_group], NS)
    assert [text.split()[0] for text in found] == ["chaos/high000"]


def test_bound_preemptors_and_gangs_without_a_podgroup_are_not_unserved() -> None:
    nodes = _cluster()
    bound, bound_group = _gang("high000", 2, 4, HIGH, ["node-00000", "node-00000"])
    orphan, _ = _gang("high001", 2, 4, HIGH, [])
    assert unserved_preemptors(bound + orphan, nodes, [bound_group], NS) == []


@pytest.mark.parametrize("seed", range(1, 11))
def test_the_reclaim_workload_fills_one_queue_then_brings_back_the_other_for_its_half(
    seed: int,
) -> None:
    """One queue holds 7/8 of the GPUs in 1-GPU pods, all gangs have one priority (only reclaim
    can serve the returning queue), and the returning queue asks for exactly its fair share."""
    config = ChaosConfig(seed=seed, mode="reclaim", duration=12)
    plan = make_plan(config)
    total, _ = cluster_gpus(config.nodes)
    taken = [g for g in plan.gangs if g.queue == TAKEN]
    taker = [g for g in plan.gangs if g.queue == TAKER]
    assert sum(g.size * g.gpu for g in taken) == int(RECLAIM_FILL * total)
    assert all(g.arrive_at == 0 and g.gpu == 1 for g in taken)
    assert sum(g.size * g.gpu for g in taker) == total // 2 and len(taker) == config.gangs
    assert all(g.arrive_at > 0 for g in taker)
    assert {g.priority for g in plan.gangs} == {None}
    kinds = sorted(a.kind for a in plan.actions if a.kind.startswith("queue"))
    assert kinds == ["queue-add", "queue-remove", "queue-restore", "queue-skew"]
    assert plan.kill_at_eviction, "kills aimed at evictions"
    gang = taken[0]
    pod = pod_manifests(gang, NS)[0]
    group = podgroup_manifest(gang, NS)
    assert pod["metadata"]["labels"][KAI_QUEUE_LABEL] == TAKEN
    assert group["metadata"]["labels"][KAI_QUEUE_LABEL] == TAKEN


def _queued(
    name: str, size: int, queue: str, nodes: list[str], min_member: int | None = None
) -> tuple[list[Obj], Obj]:
    """A gang of 1-GPU pods in ``queue``, the first ``len(nodes)`` bound there."""
    gang = GangPlan(name, size, min_member or size, 1, "1", None, 0.0, queue=queue)
    pods = pod_manifests(gang, NS)
    for pod, node in zip(pods, nodes, strict=False):
        pod["spec"]["nodeName"] = node
    return pods, podgroup_manifest(gang, NS)


def _filled_by_a(sizes: list[int], elastic: int = 0) -> tuple[list[Obj], list[Obj]]:
    """team-a's gangs of ``sizes`` packed onto 8-GPU nodes (the first ``elastic`` of them with
    one member above minMember); returns pods and groups."""
    pods: list[Obj] = []
    groups: list[Obj] = []
    slot = 0
    for i, size in enumerate(sizes):
        on = [f"node-{(slot + k) // 8:05d}" for k in range(size)]
        slot += size
        gang_pods, group = _queued(f"a{i:03d}", size, TAKEN, on, size - 1 if i < elastic else None)
        pods += gang_pods
        groups.append(group)
    return pods, groups


def test_a_reclaimer_that_team_a_could_serve_within_its_share_is_unserved() -> None:
    nodes = _cluster("5:gpu=8")  # 40 GPUs, all team-a's: 8 above its share of 32
    a_pods, a_groups = _filled_by_a([4] * 10)
    b_pods, b_group = _queued("b000", 8, TAKER, [])
    found = unserved_reclaimers(a_pods + b_pods, nodes, [*a_groups, b_group], NS, 32)
    assert found == [
        "chaos/b000 (8 GPUs missing: 0 free, and team-a could give 8 staying at or above its "
        "fair share of 32)"
    ]


def test_a_reclaimer_that_only_crossing_the_floor_could_serve_is_not_unserved() -> None:
    """team-a holds 33 of 40 (its share 32) in whole gangs of 4 and one of 5, 7 GPUs free: the
    reclaimer's 8th GPU would take a whole gang and team-a below its share. With one member
    above minMember somewhere, it could be served, and is then unserved."""
    nodes = _cluster("5:gpu=8")
    b_pods, b_group = _queued("b000", 8, TAKER, [])
    for elastic, expected in ((0, 0), (1, 1)):
        a_pods, a_groups = _filled_by_a([5] + [4] * 7, elastic=elastic)
        found = unserved_reclaimers(a_pods + b_pods, nodes, [*a_groups, b_group], NS, 32)
        assert len(found) == expected, found
