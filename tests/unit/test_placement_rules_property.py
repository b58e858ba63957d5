"""Gang-aware rules, as properties of the placer on random clusters.

Members placed earlier in the same cycle must count exactly like pods already bound: whatever
the cluster and whichever pods are there, a placed gang with one-per-node anti-affinity never
shares a node (with itself or its bound members), and a DoNotSchedule zone spread never ends
more than maxSkew apart. When the rule cannot be met, nothing is placed.

The plugins' time budgets are off here: these are properties of the answer, and a loaded CI
machine once took 820 ms for one Filter call (speed is the benchmarks' business)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gang.bench.workload import rules_spec
from gang.models.settings import ScoreWeights
from gang.scheduling.placement import Placement, Placer
from gang.state.cache import ClusterCache
from gang.state.podinfo import POD_GROUP_LABEL, PodInfo, parse_pod
from tests.unit.test_cache import make_node
from tests.unit.test_placement_twins import UNTIMED

ZONE = "topology.kubernetes.io/zone"


def member(i: int, rules: list[Any], node: str = "", gpu: int = 1) -> PodInfo:
    spec: dict[str, Any] = {
        "schedulerName": "gang-scheduler",
        **rules_spec("g", rules),
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": str(gpu)}}}
        ],
    }
    if node:
        spec["nodeName"] = node
    return parse_pod(
        {
            "metadata": {
                "name": f"m-{i}",
                "namespace": "ns",
                "uid": f"u{i}",
                "labels": {POD_GROUP_LABEL: "g"},
            },
            "spec": spec,
        }
    )


clusters = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=12
)  # (zone, GPUs) per node


def build(nodes: list[tuple[int, int]]) -> ClusterCache:
    cache = ClusterCache()
    for i, (zone, gpus) in enumerate(nodes):
        cache.upsert_node(make_node(f"n{i}", zone=f"z{zone}", extra={"nvidia.com/gpu": gpus}))
    cache.index.column("nvidia.com/gpu")
    return cache


@settings(max_examples=150, deadline=None)
@given(clusters, st.integers(1, 10), st.integers(0, 3), st.booleans())
def test_one_per_node_holds_inside_the_gang_and_against_its_bound_members(
    nodes: list[tuple[int, int]], size: int, bound: int, pack: bool
) -> None:
    cache = build(nodes)
    taken = [f"n{i}" for i in range(min(bound, len(nodes)))]
    for i, name in enumerate(taken):  # members bound before (e.g. before a restart)
        cache.upsert_pod(member(100 + i, ["one-per-node"], node=name, gpu=0))
    pods = [member(i, ["one-per-node"]) for i in range(size)]
    weights = ScoreWeights(gang_packing=2 if pack else 0)
    result = Placer(cache.index, weights, ZONE, budgets=UNTIMED).place(
        cache.snapshot(), pods, size, taken
    )
    free_nodes = len(nodes) - len(taken)
    if isinstance(result, Placement):
        chosen = list(result.assignments.values())
        assert len(set(chosen)) == size
        assert not set(chosen) & set(taken)
    else:
        assert size > free_nodes  # it fits whenever enough untaken nodes exist (1 GPU each)
        # the first failing Filter names each node: resources come before pod affinity
        assert any(
            reason in result.message
            for reason in (
                "didn't match pod anti-affinity rules",
                "didn't satisfy existing pods anti-affinity rules",
                "Insufficient nvidia.com/gpu",
            )
        )


@settings(max_examples=150, deadline=None)
@given(clusters, st.integers(1, 12), st.lists(st.integers(0, 11), max_size=4))
def test_zone_spread_ends_within_max_skew_counting_bound_pods(
    nodes: list[tuple[int, int]], size: int, bound_on: list[int]
) -> None:
    cache = build(nodes)
    for i, index in enumerate(bound_on):
        if index < len(nodes):
            cache.upsert_pod(member(100 + i, ["zone-spread"], node=f"n{index}", gpu=0))
    pods = [member(i, ["zone-spread"]) for i in range(size)]
    result = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED).place(
        cache.snapshot(), pods, size
    )
    if not isinstance(result, Placement):
        assert "didn't match pod topology spread constraints" in result.message or (
            "Insufficient nvidia.com/gpu" in result.message
        )
        return
    zone_of = {f"n{i}": f"z{zone}" for i, (zone, _) in enumerate(nodes)}
    counts = Counter({zone: 0 for zone in zone_of.values()})
    counts.update(zone_of[f"n{i}"] for i in bound_on if i < len(nodes))
    before = dict(counts)
    counts.update(zone_of[node] for node in result.assignments.values())
    # every member was placed where skew <= 1 held at that moment, and the minimum only rises:
    # the gang's own placements never widen the spread beyond what bound pods left
    assert max(counts.values()) - min(counts.values()) <= max(
        1, max(before.values()) - min(before.values())
    )
