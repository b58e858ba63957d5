"""Tests for gang.scheduling.placement: all-or-nothing placement of a gang on one snapshot.

Snapshots come from a real :class:`ClusterCache` filled with small raw nodes, as in the
scheduler; the pods' request vectors are registered before the snapshot is taken, as the cycle
does.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from gang.models.settings import ScoreWeights
from gang.scheduling.framework import NodeFilterInput, rejected_by
from gang.scheduling.placement import Placement, Placer, Unplaceable
from gang.scheduling.predicates import (
    REASON_HOST_PORTS,
    REASON_NODE_SELECTOR,
    REASON_UNSCHEDULABLE,
    first_failure,
    summarize,
)
from gang.state.cache import ClusterCache, Snapshot
from gang.state.podinfo import PodInfo
from tests.unit.test_cache import GPU, ZONE, make_info, make_node
from tests.unit.test_placement_twins import UNTIMED
from tests.unit.test_podinfo import make_pod

Key = tuple[str, str]

#: only the resource scores, so tests about them are not blurred by the others
MOST = ScoreWeights(most_allocated=1, least_allocated=0, balanced_allocation=0, gang_packing=0)
LEAST = ScoreWeights(most_allocated=0, least_allocated=1, balanced_allocation=0, gang_packing=0)
#: least-allocated (which alone would spread a gang) plus gang packing
PACK = ScoreWeights(most_allocated=0, least_allocated=1, balanced_allocation=0, gang_packing=2)
NO_PACK = LEAST

TAINT_ML = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}


def cluster(*nodes: dict[str, Any]) -> ClusterCache:
    cache = ClusterCache()
    for node in nodes:
        cache.upsert_node(node)
    return cache


def snapshot(cache: ClusterCache, pods: Sequence[PodInfo]) -> Snapshot:
    """Register the pods' resource columns, then snapshot (the cycle's order)."""
    for pod in pods:
        cache.index.vector(pod.requests)
    return cache.snapshot()


def place(
    cache: ClusterCache,
    pods: Sequence[PodInfo],
    need: int | None = None,
    *,
    weights: ScoreWeights | None = None,
    anchors: Sequence[str] = (),
) -> Placement | Unplaceable:
    placer = Placer(cache.index, weights or ScoreWeights(), ZONE)
    return placer.place(snapshot(cache, pods), pods, len(pods) if need is None else need, anchors)


def placed(result: Placement | Unplaceable) -> dict[Key, str]:
    assert isinstance(result, Placement), result
    return result.assignments


def unplaceable(result: Placement | Unplaceable) -> Unplaceable:
    assert isinstance(result, Unplaceable), result
    return result


def gang(n: int, prefix: str = "w", **requests: Any) -> list[PodInfo]:
    return [make_info(f"{prefix}{i}", **requests) for i in range(n)]


def key(name: str) -> Key:
    return ("default", name)


# --------------------------------------------------------------------------------------------
# All or nothing


def test_whole_gang_fits() -> None:
    cache = cluster(*(make_node(f"n{i}", extra={GPU: 1}) for i in range(3)))
    result = placed(place(cache, gang(3, gpu=1)))
    assert sorted(result.values()) == ["n0", "n1", "n2"]
    assert set(result) == {key("w0"), key("w1"), key("w2")}


def test_all_or_nothing_reports_how_many_fitted_in_kube_scheduler_words() -> None:
    cache = cluster(make_node("n0", extra={GPU: 1}), make_node("n1", extra={GPU: 1}))
    failure = unplaceable(place(cache, gang(3, gpu=1), need=3))
    assert failure.placed == 2
    assert failure.needed == 3
    assert failure.message == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def test_failure_message_counts_every_short_resource_per_node() -> None:
    cache = cluster(
        make_node("small", cpu="1", memory="1Gi"),
        make_node("no-gpu", cpu="16"),
        make_node("full", cpu="16", pods=1, extra={GPU: 4}),
    )
    cache.upsert_pod(make_info("other", node="full", scheduler="default-scheduler"))
    failure = unplaceable(place(cache, [make_info("p", cpu="2", memory="2Gi", gpu="1")]))
    assert (failure.placed, failure.needed) == (0, 1)
    assert failure.message == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
        "1 Too many pods, 2 Insufficient nvidia.com/gpu."
    )


def test_a_resource_no_node_has_is_insufficient_everywhere() -> None:
    cache = cluster(make_node("n0"), make_node("n1"))
    failure = unplaceable(place(cache, [make_info("p", **{"example.com/fpga": "1"})]))
    assert failure.message == "0/2 nodes are available: 2 Insufficient example.com/fpga."


#: per node: cpu, memory GiB, pod slots, GPUs, tainted, cordoned, a bound pod holding port 80
failing_nodes = st.lists(
    st.tuples(
        st.integers(0, 4),
        st.integers(0, 4),
        st.integers(1, 3),
        st.integers(0, 2),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=24,
)


def per_node_histogram(
    placer: Placer, snap: Snapshot, pod: PodInfo
) -> tuple[Counter[str], set[str]]:
    """kube-scheduler's FitError histogram the slow, obvious way: node by node, the static
    filters' reason, else the first rejecting Filter plugin's reasons; and the nodes rejected."""
    static = placer.static(snap, pod.constraints)
    view = NodeFilterInput(
        snap, snap.free, pod, placer.index.requests_vector(pod.requests), placer.index, {}
    )
    masks = [plugin.filter_nodes(view) for plugin in placer.node_filters]
    found: Counter[str] = Counter()
    rejected = set()
    for row in np.flatnonzero(snap.valid):
        static_reason = static.reasons[row]
        if static_reason is not None:
            found[static_reason] += 1
            rejected.add(snap.names[row])
            continue
        for plugin, mask in zip(placer.node_filters, masks, strict=True):
            if not mask[row]:
                found.update(plugin.reasons(view, int(row)) or [rejected_by(plugin)])
                rejected.add(snap.names[row])
                break
    return found, rejected


@settings(max_examples=120, deadline=None)
@given(failing_nodes, st.integers(1, 4), st.integers(0, 4), st.integers(0, 2), st.booleans())
def test_the_failure_histogram_counted_by_plugin_is_the_one_counted_node_by_node(
    nodes: list[tuple[int, int, int, int, bool, bool, bool]],
    cpu: int,
    memory: int,
    gpu: int,
    port: bool,
) -> None:
    """Each Filter plugin counts the nodes it rejects first in one step; the histogram (and so
    the FailedScheduling message) must be the node-by-node one, whatever mix of static
    rejections, short resources, full pod slots and taken ports the cluster has."""
    cache = cluster(
        *(
            make_node(
                f"n{i}",
                cpu=c,
                memory=f"{m}Gi",
                pods=slots,
                extra={GPU: g},
                taints=[TAINT_ML] if tainted else None,
                unschedulable=cordoned,
            )
            for i, (c, m, slots, g, tainted, cordoned, _) in enumerate(nodes)
        )
    )
    for i, (*_, holds_port) in enumerate(nodes):
        if holds_port:
            cache.upsert_pod(make_info(f"b{i}", node=f"n{i}", host_port=80, scheduler="x"))
    requests = {"cpu": str(cpu), "memory": f"{memory}Gi"} | ({"gpu": str(gpu)} if gpu else {})
    pod = make_info("p", host_port=80 if port else None, **requests)
    # untimed: a stalled machine must not turn a plugin's time budget into a failed case
    placer = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)
    snap = snapshot(cache, [pod])
    expected, rejected = per_node_histogram(placer, snap, pod)
    result = placer.place(snap, [pod], 1, ())
    if isinstance(result, Placement):
        assert result.assignments[pod.key] not in rejected
        return
    event(f"reasons: {len(result.reasons)}")
    assert result.reasons == dict(expected)
    assert result.message == summarize(len(nodes), expected)


def test_extras_are_placed_only_if_they_fit() -> None:
    cache = cluster(make_node("n0", extra={GPU: 1}), make_node("n1", extra={GPU: 1}))
    pods = gang(4, gpu=1)
    result = placed(place(cache, pods, need=2))
    assert len(result) == 2
    assert sorted(result.values()) == ["n0", "n1"]
    # equal members are taken by name: the first two are the needed ones
    assert set(result) == {key("w0"), key("w1")}
    outcome = place(
        cluster(make_node("n0", extra={GPU: 1}), make_node("n1", extra={GPU: 1})), pods, 2
    )
    assert isinstance(outcome, Placement)
    assert set(outcome.unplaced) == {key("w2"), key("w3")}  # each with kube-scheduler's reason
    assert all("0/2 nodes are available" in why for why in outcome.unplaced.values())

    roomy = cluster(*(make_node(f"n{i}", extra={GPU: 1}) for i in range(4)))
    assert len(placed(place(roomy, pods, need=2))) == 4
    full = place(roomy, pods, need=2)
    assert isinstance(full, Placement) and full.unplaced == {}


def test_need_zero_places_whatever_fits() -> None:
    cache = cluster(make_node("n0", cpu="1"))
    assert placed(place(cache, gang(2, cpu="1"), need=0)) == {key("w0"): "n0"}
    assert placed(place(cluster(make_node("n0", cpu="1")), gang(1, cpu="2"), need=0)) == {}


def test_bigger_members_are_needed_first() -> None:
    cache = cluster(make_node("n0", cpu="4"))
    pods = [make_info("a-small", cpu="1"), make_info("b-big", cpu="3"), make_info("c-mid", cpu="2")]
    result = placed(place(cache, pods, need=1))
    assert result[key("b-big")] == "n0"  # the needed one is the biggest
    assert key("c-mid") not in result  # 2 cpu does not fit beside it


def test_every_extra_that_fits_is_placed() -> None:
    cache = cluster(make_node("n0", cpu="4"))
    pods = [make_info("a-small", cpu="1"), make_info("b-big", cpu="3"), make_info("c-mid", cpu="2")]
    result = placed(place(cache, pods, need=1))
    assert result == {key("b-big"): "n0", key("a-small"): "n0"}


def test_required_members_are_placed_first_and_the_rest_fill_up_to_need() -> None:
    """Bigger first would need b-big and c-mid (5 cpu) and fail on 4; with a-small required,
    a-small and b-big are the two placed, and c-mid is left unplaced with a reason."""
    pods = [make_info("a-small", cpu="1"), make_info("b-big", cpu="3"), make_info("c-mid", cpu="2")]
    unplaceable(place(cluster(make_node("n0", cpu="4")), pods[1:], need=2))
    cache = cluster(make_node("n0", cpu="4"))
    placer = Placer(cache.index, ScoreWeights(), ZONE)
    result = placer.place(snapshot(cache, pods), pods, 2, required=pods[:1])
    assert isinstance(result, Placement), result
    assert result.assignments == {key("a-small"): "n0", key("b-big"): "n0"}
    assert set(result.unplaced) == {key("c-mid")}


def test_required_members_that_do_not_fit_fail_the_whole_placement() -> None:
    cache = cluster(make_node("n0", cpu="4"))
    pods = [make_info("a", cpu="3"), make_info("b", cpu="3"), make_info("c", cpu="1")]
    placer = Placer(cache.index, ScoreWeights(), ZONE)
    failure = unplaceable(placer.place(snapshot(cache, pods), pods, 2, required=pods[:2]))
    assert (failure.placed, failure.needed) == (1, 2)


def test_free_is_consumed_between_members() -> None:
    """Two members never count the same last GPU."""
    cache = cluster(make_node("n0", extra={GPU: 2}), make_node("n1", extra={GPU: 1}))
    pods = gang(3, gpu=1)
    snap = snapshot(cache, pods)
    gpu = cache.index.column(GPU)
    placer = Placer(cache.index, MOST, ZONE)
    result = placed(placer.place(snap, pods, 3))
    assert sorted(result.values()) == ["n0", "n0", "n1"]
    assert snap.free[cache.nodes["n0"].row, gpu] == 0
    assert snap.free[cache.nodes["n1"].row, gpu] == 0
    assert free_gpus(cache) == {"n0": 2, "n1": 1}  # the cache itself is untouched
    cache.check()


def free_gpus(cache: ClusterCache) -> dict[str, int]:
    return {name: cache.free_of(name).get(GPU, 0) for name in cache.nodes}


def test_capacity_already_used_by_others_is_respected() -> None:
    cache = cluster(make_node("n0", cpu="4"), make_node("n1", cpu="4"))
    cache.upsert_pod(make_info("theirs", node="n0", scheduler="default-scheduler", cpu="3"))
    cache.assume(make_info("reserved", cpu="3"), "n1")
    assert placed(place(cache, gang(2, cpu="1"), weights=MOST)) == {
        key("w0"): "n0",
        key("w1"): "n1",
    }
    failure = unplaceable(place(cache, gang(3, cpu="1"), weights=MOST))
    assert failure.placed == 2
    assert failure.message == "0/2 nodes are available: 2 Insufficient cpu."


# --------------------------------------------------------------------------------------------
# Scores


def test_most_allocated_bin_packs_and_least_allocated_spreads() -> None:
    def busy_cluster() -> ClusterCache:
        cache = cluster(make_node("busy", cpu="8"), make_node("idle", cpu="8"))
        cache.upsert_pod(make_info("theirs", node="busy", scheduler="default-scheduler", cpu="6"))
        return cache

    pod = [make_info("p", cpu="1")]
    assert placed(place(busy_cluster(), pod, weights=MOST)) == {key("p"): "busy"}
    assert placed(place(busy_cluster(), pod, weights=LEAST)) == {key("p"): "idle"}


def test_bin_packing_fills_one_node_while_spreading_alternates() -> None:
    nodes = (make_node("n0", cpu="4"), make_node("n1", cpu="4"))
    pods = gang(4, cpu="1")
    packed = placed(place(cluster(*nodes), pods, weights=MOST))
    spread = placed(place(cluster(*nodes), pods, weights=LEAST))
    assert sorted(packed.values()) == ["n0"] * 4
    assert sorted(spread.values()) == ["n0", "n0", "n1", "n1"]


def test_balanced_allocation_prefers_even_use() -> None:
    cache = cluster(
        make_node("cpu-heavy", cpu="4", memory="4Gi"), make_node("even", cpu="4", memory="4Gi")
    )
    cache.upsert_pod(make_info("theirs", node="cpu-heavy", scheduler="default-scheduler", cpu="3"))
    cache.upsert_pod(
        make_info("other", node="even", scheduler="default-scheduler", cpu="2", memory="2Gi")
    )
    weights = ScoreWeights(
        most_allocated=0, least_allocated=0, balanced_allocation=1, gang_packing=0
    )
    assert placed(place(cache, [make_info("p", cpu="500m", memory="1Gi")], weights=weights)) == {
        key("p"): "even"
    }


# --------------------------------------------------------------------------------------------
# Gang packing into topology domains


def zoned_cluster(a_cpu: int = 8, b_cpu: int = 8) -> ClusterCache:
    """Zone a: a0, a1; zone b: b0, b1; nodes within a zone alike."""
    return cluster(
        make_node("a0", cpu=a_cpu, zone="a"),
        make_node("a1", cpu=a_cpu, zone="a"),
        make_node("b0", cpu=b_cpu, zone="b"),
        make_node("b1", cpu=b_cpu, zone="b"),
    )


def test_packing_keeps_a_gang_inside_one_zone() -> None:
    pods = gang(4, cpu="2")
    spread = placed(place(zoned_cluster(), pods, weights=NO_PACK))
    assert len(set(spread.values())) == 4  # least-allocated alone uses every node
    packed = placed(place(zoned_cluster(), pods, weights=PACK))
    assert len(packed) == 4
    assert packed_zone(packed) in ("a", "b")


def packed_zone(assignments: dict[Key, str]) -> str:
    zones = {node[0] for node in assignments.values()}
    assert len(zones) == 1, assignments
    return zones.pop()


def test_packing_picks_the_tightest_zone_that_fits() -> None:
    # zone a could hold 8 such members, zone b exactly the 4 needed
    pods = gang(4, cpu="2")
    assert packed_zone(placed(place(zoned_cluster(a_cpu=8, b_cpu=4), pods, weights=PACK))) == "b"
    assert packed_zone(placed(place(zoned_cluster(a_cpu=4, b_cpu=8), pods, weights=PACK))) == "a"


def test_packing_prefers_the_zone_of_the_anchors() -> None:
    pods = gang(3, cpu="2")
    # zone a is the tighter fit, but a member already runs in zone b
    cache = zoned_cluster(a_cpu=4, b_cpu=8)
    assert packed_zone(placed(place(cache, pods, weights=PACK))) == "a"
    cache = zoned_cluster(a_cpu=4, b_cpu=8)
    assert packed_zone(placed(place(cache, pods, weights=PACK, anchors=["b1"]))) == "b"
    # an anchor alone makes even a single member a gang to pack
    cache = zoned_cluster(a_cpu=4, b_cpu=8)
    assert packed_zone(placed(place(cache, pods[:1], weights=PACK, anchors=["b0"]))) == "b"


def test_a_zone_trial_that_fails_part_way_gives_back_what_it_took() -> None:
    """Zone a is the tighter fit by count (one node, room for both members), but the members
    share a host port, so its trial places one member and then fails. Trials consume the
    snapshot's free matrix in place: the member it placed must be given back, so only what
    the gang took in zone b is gone from it, and the next pods see zone a as it was."""
    cache = cluster(
        make_node("a0", cpu="4", zone="a"),
        make_node("b0", cpu="4", zone="b"),
        make_node("b1", cpu="4", zone="b"),
    )
    pods = [make_info(f"m{i}", cpu="2", host_port=8080) for i in range(2)]
    snap = snapshot(cache, pods)
    before = snap.free.copy()
    result = placed(Placer(cache.index, PACK, ZONE).place(snap, pods, 2))
    assert sorted(result.values()) == ["b0", "b1"]
    taken = np.zeros_like(before)
    for pod in pods:
        taken[cache.nodes[result[pod.key]].row] += cache.index.requests_vector(pod.requests)
    assert (snap.free == before - taken).all()


def test_an_anchor_zone_that_cannot_hold_the_gang_is_not_forced() -> None:
    pods = gang(4, cpu="2")
    cache = zoned_cluster(a_cpu=2, b_cpu=4)  # a holds 2 members, b holds 4
    assert packed_zone(placed(place(cache, pods, weights=PACK, anchors=["a0"]))) == "b"


def test_spreads_across_zones_when_no_single_zone_fits() -> None:
    cache = zoned_cluster(a_cpu=2, b_cpu=2)  # each zone holds two members
    result = placed(place(cache, gang(4, cpu="2"), weights=PACK))
    assert sorted(result.values()) == ["a0", "a1", "b0", "b1"]


def test_spreading_still_fills_the_gangs_zone_first() -> None:
    # each zone holds 4 members: 6 must spread, and the zone the gang starts in fills first
    cache = cluster(
        make_node("a0", cpu="4", zone="a"),
        make_node("a1", cpu="4", zone="a"),
        make_node("b0", cpu="4", zone="b"),
        make_node("b1", cpu="4", zone="b"),
    )
    result = placed(place(cache, gang(6, cpu="2"), weights=PACK))
    assert len(result) == 6
    counts = {z: sum(1 for n in result.values() if n[0] == z) for z in "ab"}
    assert counts == {"a": 4, "b": 2}  # the first zone used is filled before the next


def test_a_gang_with_quorum_places_a_late_extra_member() -> None:
    cache = zoned_cluster()
    late = [make_info("late", cpu="1")]
    result = placed(place(cache, late, need=0, weights=PACK, anchors=["b0", "b1"]))
    assert result[key("late")] in ("b0", "b1")  # in the zone its gang already uses


def test_nodes_without_the_topology_label_still_take_members() -> None:
    cache = cluster(make_node("plain0", cpu="2"), make_node("plain1", cpu="2"))
    result = placed(place(cache, gang(2, cpu="2"), weights=PACK))
    assert sorted(result.values()) == ["plain0", "plain1"]


# --------------------------------------------------------------------------------------------
# Static filters


def filter_cluster() -> ClusterCache:
    return cluster(
        make_node("tainted", labels={"disk": "ssd"}, taints=[TAINT_ML]),
        make_node("cordoned", labels={"disk": "ssd"}, unschedulable=True),
        make_node("hdd", labels={"disk": "hdd"}),
        make_node("good", cpu="1", labels={"disk": "ssd"}),
    )


def test_static_filters_exclude_nodes_and_give_their_reasons() -> None:
    pods = [make_pod(f"w{i}").container(cpu="1").node_selector(disk="ssd").info() for i in range(2)]
    failure = unplaceable(place(filter_cluster(), pods))
    assert failure.placed == 1
    assert failure.message == (
        "0/4 nodes are available: 1 Insufficient cpu, "
        f"1 {REASON_NODE_SELECTOR}, "
        "1 node(s) had untolerated taint {dedicated: ml}, "
        f"1 {REASON_UNSCHEDULABLE}."
    )
    assert placed(place(filter_cluster(), pods[:1])) == {key("w0"): "good"}


def test_tolerations_open_tainted_and_cordoned_nodes() -> None:
    tolerant = (
        make_pod("w")
        .container(cpu="1")
        .node_selector(disk="ssd")
        .toleration(key="dedicated", operator="Equal", value="ml", effect="NoSchedule")
    )
    pods = [tolerant.meta(name=f"w{i}").info() for i in range(2)]
    assert sorted(placed(place(filter_cluster(), pods, weights=MOST)).values()) == [
        "good",
        "tainted",
    ]
    cordon_ok = make_pod("c").container(cpu="1").toleration(operator="Exists").info()
    cache = cluster(make_node("cordoned", unschedulable=True, taints=[TAINT_ML]))
    assert placed(place(cache, [cordon_ok])) == {key("c"): "cordoned"}


def test_required_node_affinity() -> None:
    pod = (
        make_pod("p")
        .container(cpu="1")
        .required_term([{"key": "disk", "operator": "In", "values": ["hdd", "nvme"]}])
        .info()
    )
    assert placed(place(filter_cluster(), [pod])) == {key("p"): "hdd"}
    cache = cluster(make_node("n", labels={"disk": "ssd"}))
    failure = unplaceable(place(cache, [pod]))
    assert failure.message == f"0/1 nodes are available: 1 {REASON_NODE_SELECTOR}."


# --------------------------------------------------------------------------------------------
# Host ports


def port_pod(name: str, port: int = 8080, **fields: Any) -> PodInfo:
    return make_pod(name).container(cpu="100m").host_port(port, **fields).info()


def test_a_host_port_in_use_on_a_node_excludes_it() -> None:
    cache = cluster(make_node("n0"), make_node("n1"))
    cache.upsert_pod(make_info("web", node="n0", scheduler="default-scheduler", host_port=8080))
    assert placed(place(cache, [port_pod("p")], weights=MOST)) == {key("p"): "n1"}

    cache.upsert_pod(make_info("web2", node="n1", scheduler="default-scheduler", host_port=8080))
    failure = unplaceable(place(cache, [port_pod("p")]))
    assert failure.message == f"0/2 nodes are available: 2 {REASON_HOST_PORTS}."
    # another port or another protocol does not conflict
    assert key("q") in placed(place(cache, [port_pod("q", 8081)]))
    assert key("u") in placed(place(cache, [port_pod("u", protocol="UDP")]))


def test_specific_host_ips_conflict_only_with_the_same_ip_or_the_wildcard() -> None:
    cache = cluster(make_node("n0"))
    pod = make_pod("a").container(cpu="100m").host_port(8080, hostIP="10.0.0.1")
    cache.upsert_pod(pod.spec(nodeName="n0").info())
    assert placed(place(cache, [port_pod("b", hostIP="10.0.0.2")])) == {key("b"): "n0"}
    assert isinstance(place(cache, [port_pod("c", hostIP="10.0.0.1")]), Unplaceable)
    assert isinstance(place(cache, [port_pod("d")]), Unplaceable)  # the wildcard


def test_needed_members_never_share_a_host_port_on_one_node() -> None:
    cache = cluster(make_node("n0"), make_node("n1"))
    pods = [port_pod(f"w{i}") for i in range(3)]
    result = placed(place(cluster(make_node("n0"), make_node("n1")), pods[:2], weights=MOST))
    assert sorted(result.values()) == ["n0", "n1"]
    failure = unplaceable(place(cache, pods, weights=MOST))
    assert failure.placed == 2
    assert failure.message == f"0/2 nodes are available: 2 {REASON_HOST_PORTS}."


def test_extra_members_never_share_a_host_port_on_one_node() -> None:
    cache = cluster(make_node("n0"), make_node("n1"))
    pods = [port_pod(f"w{i}") for i in range(3)]
    result = placed(place(cache, pods, need=1, weights=MOST))
    nodes = list(result.values())
    assert len(nodes) == len(set(nodes)), result  # at most one 8080 per node
    assert len(result) == 2


# --------------------------------------------------------------------------------------------
# Determinism


def varied_cluster() -> ClusterCache:
    cache = cluster(
        *(make_node(f"n{i}", cpu=4 + i % 3, zone="ab"[i % 2], extra={GPU: i % 3}) for i in range(8))
    )
    cache.upsert_pod(make_info("theirs", node="n3", scheduler="default-scheduler", cpu="3"))
    return cache


def varied_gang() -> list[PodInfo]:
    return [
        make_info(f"m{i}", cpu=f"{500 + 250 * (i % 4)}m", memory="1Gi", gpu=i % 2) for i in range(7)
    ]


@pytest.mark.parametrize(
    "weights",
    [ScoreWeights(), MOST, LEAST, PACK],
    ids=["default", "most", "least", "pack"],
)
def test_same_inputs_give_the_same_placement(weights: ScoreWeights) -> None:
    pods = varied_gang()
    first = place(varied_cluster(), pods, need=5, weights=weights)
    assert isinstance(first, Placement)
    for seed in range(3):
        shuffled = list(pods)
        random.Random(seed).shuffle(shuffled)
        assert place(varied_cluster(), shuffled, need=5, weights=weights) == first
    # the same placer on a fresh snapshot of the same cache, twice
    cache = varied_cluster()
    placer = Placer(cache.index, weights, ZONE)
    again = [placer.place(snapshot(cache, pods), pods, 5) for _ in range(2)]
    assert again == [first, first]


def test_same_inputs_give_the_same_failure() -> None:
    pods = gang(30, cpu="2", gpu=1)
    failure = unplaceable(place(varied_cluster(), pods, weights=PACK))
    assert failure.message.startswith("0/8 nodes are available: ")
    assert 0 < failure.placed < 30
    for seed in range(3):
        shuffled = list(pods)
        random.Random(seed).shuffle(shuffled)
        assert place(varied_cluster(), shuffled, weights=PACK) == failure


# --------------------------------------------------------------------------------------------
# Property: never over-commit; exactly all-or-nothing

node_st = st.fixed_dictionaries(
    {
        "cpu": st.integers(0, 8),
        "gpu": st.integers(0, 3),
        "zone": st.sampled_from(["a", "b", None]),
        "tainted": st.booleans(),
        "cordoned": st.integers(0, 4).map(lambda n: n == 0),
        "load": st.integers(0, 4),
    }
)
pod_st = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from(["0", "500m", "1", "2", "3"]),
        "gpu": st.integers(0, 2),
        "tolerates": st.booleans(),
    }
)
weights_st = st.builds(
    ScoreWeights,
    least_allocated=st.integers(0, 2),
    most_allocated=st.integers(0, 2),
    balanced_allocation=st.integers(0, 2),
    gang_packing=st.integers(0, 2),
)


def build_property_case(
    node_specs: list[dict[str, Any]], pod_specs: list[dict[str, Any]]
) -> tuple[ClusterCache, list[PodInfo]]:
    cache = ClusterCache()
    for i, spec in enumerate(node_specs):
        cache.upsert_node(
            make_node(
                f"n{i}",
                cpu=spec["cpu"],
                zone=spec["zone"],
                extra={GPU: spec["gpu"]},
                taints=[TAINT_ML] if spec["tainted"] else None,
                unschedulable=spec["cordoned"],
            )
        )
        load = min(spec["load"], spec["cpu"])
        if load:
            other = make_info(f"other{i}", node=f"n{i}", scheduler="default-scheduler", cpu=load)
            cache.upsert_pod(other)
    pods = []
    for i, spec in enumerate(pod_specs):
        builder = make_pod(f"m{i}").container(cpu=spec["cpu"], gpu=spec["gpu"])
        if spec["tolerates"]:
            builder.toleration(key="dedicated", operator="Exists")
        pods.append(builder.info())
    return cache, pods


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    node_specs=st.lists(node_st, min_size=1, max_size=5),
    pod_specs=st.lists(pod_st, min_size=1, max_size=6),
    data=st.data(),
    weights=weights_st,
)
def test_placement_never_overcommits_and_is_all_or_nothing(
    node_specs: list[dict[str, Any]],
    pod_specs: list[dict[str, Any]],
    data: st.DataObject,
    weights: ScoreWeights,
) -> None:
    cache, pods = build_property_case(node_specs, pod_specs)
    need = data.draw(st.integers(0, len(pods)), label="need")
    names = sorted(cache.nodes)
    anchors = data.draw(st.lists(st.sampled_from(names), max_size=2), label="anchors")
    snap = snapshot(cache, pods)
    before = snap.free.copy()
    requested_before = cache.requested.copy()

    result = Placer(cache.index, weights, ZONE).place(snap, pods, need, anchors)

    # the cache is never touched; placing is deterministic
    assert np.array_equal(cache.requested, requested_before)
    cache.check()
    again = Placer(cache.index, weights, ZONE).place(snapshot(cache, pods), pods, need, anchors)
    assert again == result

    event(type(result).__name__)
    if isinstance(result, Unplaceable):
        assert result.needed == need
        assert 0 <= result.placed < need
        assert result.message.startswith(f"0/{len(names)} nodes are available:")
        return

    assignments = result.assignments
    assert len(assignments) >= need
    by_key = {p.key: p for p in pods}
    assert set(assignments) <= set(by_key)
    used = np.zeros_like(before)
    for pod_key, node in assignments.items():
        assert node in cache.nodes
        row = cache.nodes[node].row
        facts = snap.facts[row]
        assert facts is not None
        assert first_failure(by_key[pod_key].constraints, facts) is None
        used[row] += cache.index.fit(cache.index.vector(by_key[pod_key].requests))
    touched = used.any(axis=1)
    assert (used[touched] <= before[touched]).all(), "a node is over-committed"
    assert np.array_equal(snap.free, before - used), "free was not consumed exactly"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    node_specs=st.lists(node_st, min_size=1, max_size=6),
    template=pod_st,
    size=st.integers(1, 12),
    data=st.data(),
    weights=weights_st,
)
def test_incremental_rescoring_equals_the_full_pass(
    node_specs: list[dict[str, Any]],
    template: dict[str, Any],
    size: int,
    data: st.DataObject,
    weights: ScoreWeights,
) -> None:
    """Members of one template re-judge only the node the previous one took; the result must be
    exactly what a full Filter + Score pass for every member gives."""
    cache, pods = build_property_case(node_specs, [template] * size)
    need = data.draw(st.integers(0, size), label="need")
    fast = Placer(cache.index, weights, ZONE)
    slow = Placer(cache.index, weights, ZONE)
    slow._incremental = False
    assert fast._incremental
    assert fast.place(snapshot(cache, pods), pods, need) == slow.place(
        snapshot(cache, pods), pods, need
    )


def test_a_gang_spanning_domains_counts_each_domain_a_member_opens() -> None:
    """Five one-GPU members, zone b holding four GPUs (1 + 3) and zone a one: no zone takes the
    gang, so it is placed over both, and GangPacking should keep it in as few as it can. Once
    the first member opens zone b, the other zone-b node scores higher for the rest; a reused
    pass scored before that (hypothesis found it) sent the second member to zone a while zone b
    still had room, unlike a full pass per member."""
    specs = [
        {"cpu": 0, "gpu": gpu, "zone": zone, "tainted": False, "cordoned": False, "load": 0}
        for gpu, zone in ((1, "b"), (1, "a"), (3, "b"))
    ]
    cache, pods = build_property_case(specs, [{"cpu": "0", "gpu": 1, "tolerates": False}] * 5)
    weights = ScoreWeights(least_allocated=0, most_allocated=0, balanced_allocation=0)
    fast = Placer(cache.index, weights, ZONE)
    slow = Placer(cache.index, weights, ZONE)
    slow._incremental = False
    result = fast.place(snapshot(cache, pods), pods, 5)
    assert result == slow.place(snapshot(cache, pods), pods, 5)
    assert isinstance(result, Placement)
    order = [result.assignments[pod.key] for pod in pods]
    assert order == ["n0", "n2", "n2", "n2", "n1"]  # zone b filled before zone a is opened
