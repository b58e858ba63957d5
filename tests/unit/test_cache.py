"""Tests for gang.state.cache: per-node capacity accounting and the ASSUMED/BOUND pod states."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from gang.state.cache import ClusterCache, PodState
from gang.state.labels import parse_selector
from gang.state.podinfo import PodInfo
from gang.state.resources import BASE_RESOURCES, ResourceIndex
from tests.unit.test_podinfo import make_pod

GIB = 1024**3
ZONE = "topology.kubernetes.io/zone"
GPU = "nvidia.com/gpu"

# --------------------------------------------------------------------------------------------
# Builders


def make_node(
    name: str,
    *,
    cpu: str | int = "8",
    memory: str = "32Gi",
    pods: str | int = "110",
    zone: str | None = None,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: Mapping[str, str | int] | None = None,
    use_capacity: bool = False,
) -> dict[str, Any]:
    """A raw Node as the apiserver serialises it; ``extra`` adds allocatable resources."""
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if zone is not None:
        all_labels[ZONE] = zone
    resources: dict[str, str | int] = {"cpu": cpu, "memory": memory, "pods": pods}
    resources.update(extra or {})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {"capacity" if use_capacity else "allocatable": resources},
    }


def make_info(
    name: str,
    *,
    node: str = "",
    uid: str | None = None,
    phase: str = "Pending",
    scheduler: str = "gang-scheduler",
    host_port: int | None = None,
    **requests: Any,
) -> PodInfo:
    """A parsed pod with one container requesting ``requests`` (``gpu=`` is nvidia.com/gpu)."""
    builder = make_pod(name).container(**requests).status(phase=phase)
    builder.spec(schedulerName=scheduler)
    if node:
        builder.spec(nodeName=node)
    if uid is not None:
        builder.meta(uid=uid)
    if host_port is not None:
        builder.host_port(host_port)
    return builder.info()


def row_of(cache: ClusterCache, name: str) -> int:
    return cache.nodes[name].row


def requested(cache: ClusterCache, node: str) -> dict[str, int]:
    """The node's requested row by resource name, zeros left out."""
    return cache.index.describe(cache.requested[row_of(cache, node)])


def free(cache: ClusterCache, node: str) -> dict[str, int]:
    return cache.free_of(node)


# --------------------------------------------------------------------------------------------
# Nodes


def test_new_node_gets_a_row_with_its_allocatable_in_scheduler_units() -> None:
    cache = ClusterCache()
    assert cache.upsert_node(make_node("n1", cpu="7500m", memory="16Gi", pods=110))
    cache.check()
    row = row_of(cache, "n1")
    assert cache.valid[row]
    assert cache.names[row] == "n1"
    facts = cache.facts[row]
    assert facts is not None and facts.name == "n1"
    assert cache.version == 1
    assert free(cache, "n1") == {"cpu": 7500, "memory": 16 * GIB, "pods": 110}
    assert requested(cache, "n1") == {}


def test_capacity_is_used_when_allocatable_is_missing() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1", cpu="2", use_capacity=True))
    assert free(cache, "n1")["cpu"] == 2000


def test_malformed_or_negative_node_quantities_count_as_absent() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1", cpu="lots", extra={GPU: "-2", "example.com/fpga": "3"}))
    cache.check()
    assert free(cache, "n1") == {"memory": 32 * GIB, "pods": 110, "example.com/fpga": 3}


def test_a_node_without_a_name_is_ignored() -> None:
    cache = ClusterCache()
    raw = make_node("x")
    raw["metadata"]["name"] = ""
    assert not cache.upsert_node(raw)
    assert not cache.upsert_node({"status": {}})
    assert cache.nodes == {}
    assert cache.version == 0
    assert not cache.valid.any()


def test_identical_update_changes_nothing() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1", zone="a"))
    version = cache.version
    assert not cache.upsert_node(make_node("n1", zone="a"))
    assert cache.version == version
    assert len(cache.nodes) == 1


def test_allocatable_change_is_reported_but_keeps_the_version() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1", cpu="4"))
    cache.upsert_pod(make_info("p", node="n1", cpu="1"))
    row, version = row_of(cache, "n1"), cache.version

    assert cache.upsert_node(make_node("n1", cpu="16"))
    cache.check()
    assert cache.version == version  # static filters do not depend on capacity
    assert row_of(cache, "n1") == row
    assert free(cache, "n1")["cpu"] == 15000
    assert requested(cache, "n1") == {"cpu": 1000, "pods": 1}


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(make_node("n1", zone="b"), id="label"),
        pytest.param(make_node("n1", zone="a", unschedulable=True), id="unschedulable"),
        pytest.param(
            make_node("n1", zone="a", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
            id="taint",
        ),
    ],
)
def test_facts_change_bumps_the_version_once(changed: dict[str, Any]) -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1", zone="a"))
    row, version = row_of(cache, "n1"), cache.version
    assert cache.upsert_node(changed)
    assert cache.version == version + 1
    assert row_of(cache, "n1") == row
    facts = cache.facts[row]
    assert facts is not None
    assert cache.nodes["n1"].facts == facts
    assert not cache.upsert_node(changed)  # the same again: no change, no bump
    assert cache.version == version + 1


def test_removed_node_frees_its_row_for_the_next_node() -> None:
    cache = ClusterCache()
    for name in ("n1", "n2", "n3"):
        cache.upsert_node(make_node(name))
    cache.upsert_pod(make_info("p", node="n2", cpu="1"))
    row, version = row_of(cache, "n2"), cache.version

    assert cache.remove_node("n2")
    cache.check()
    assert cache.version == version + 1
    assert not cache.valid[row]
    assert cache.names[row] == ""
    assert cache.facts[row] is None
    assert not cache.allocatable[row].any()
    assert not cache.requested[row].any()
    assert not cache.remove_node("n2")
    assert cache.version == version + 1

    cache.upsert_node(make_node("n4", cpu="2"))
    cache.check()
    assert row_of(cache, "n4") == row  # reused, and starts empty
    assert free(cache, "n4") == {"cpu": 2000, "memory": 32 * GIB, "pods": 110}
    assert cache.version == version + 2


def test_more_nodes_than_capacity_grow_the_matrices() -> None:
    cache = ClusterCache(capacity=2)
    for i in range(5):
        cache.upsert_node(make_node(f"n{i}", cpu=i + 1))
        cache.upsert_pod(make_info(f"p{i}", node=f"n{i}", cpu="500m"))
        cache.check()
    rows = {row_of(cache, f"n{i}") for i in range(5)}
    assert len(rows) == 5
    assert cache.allocatable.shape[0] >= 5
    assert cache.requested.shape == cache.allocatable.shape
    assert len(cache.names) == len(cache.facts) == len(cache.valid) == cache.allocatable.shape[0]
    assert int(cache.valid.sum()) == 5
    for i in range(5):
        assert free(cache, f"n{i}")["cpu"] == (i + 1) * 1000 - 500


def test_snapshots_cover_the_rows_nodes_were_given_not_the_room_to_grow() -> None:
    """Grown to 128 rows for 70 nodes, a snapshot has 70 rows, its topology domains too; a
    removed node's row stays (invalid) and is the next one handed out."""
    cache = ClusterCache(capacity=64)
    for i in range(70):
        cache.upsert_node(make_node(f"n{i}", zone=f"z{i % 2}"))
    assert cache.allocatable.shape[0] == 128
    snap = cache.snapshot()
    assert snap.free.shape[0] == snap.allocatable.shape[0] == len(snap.names) == 70
    assert len(snap.valid) == len(snap.facts) == 70 and snap.valid.all()
    zones = snap.domains(ZONE).per_node(np.array([True, False]), False)
    assert len(zones) == 70 and int(zones.sum()) == 35

    gone = row_of(cache, "n5")
    cache.remove_node("n5")
    snap = cache.snapshot()
    assert len(snap.names) == 70 and not snap.valid[gone] and snap.names[gone] == ""
    cache.upsert_node(make_node("late"))
    assert row_of(cache, "late") == gone
    snap = cache.snapshot()
    assert len(snap.names) == 70 and snap.names[gone] == "late" and snap.valid.all()
    cache.check()


def test_a_cluster_without_nodes_has_a_one_row_snapshot() -> None:
    """Nothing to place on, but a row to reduce over (an all-invalid one)."""
    snap = ClusterCache().snapshot()
    assert snap.free.shape[0] == 1 and not snap.valid.any()


# --------------------------------------------------------------------------------------------
# Pods reported by the informer


def test_pods_bound_by_anyone_count() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    ours = cache.upsert_pod(make_info("ours", node="n1", cpu="1", memory="1Gi"))
    theirs = cache.upsert_pod(
        make_info("theirs", node="n1", scheduler="default-scheduler", cpu="2", gpu="1")
    )
    cache.check()
    assert ours is not None and ours.state is PodState.BOUND
    assert theirs is not None and theirs.state is PodState.BOUND
    assert requested(cache, "n1") == {"cpu": 3000, "memory": GIB, GPU: 1, "pods": 2}
    assert {r.key for r in cache.pods_on("n1")} == {("default", "ours"), ("default", "theirs")}


def test_unassigned_pods_are_not_counted() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    assert cache.upsert_pod(make_info("p", cpu="1")) is None
    assert cache.pods == {}
    assert requested(cache, "n1") == {}


def test_repeated_identical_update_does_not_double_count() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    info = make_info("p", node="n1", cpu="1")
    first = cache.upsert_pod(info)
    second = cache.upsert_pod(info)
    cache.check()
    assert first is second
    assert requested(cache, "n1") == {"cpu": 1000, "pods": 1}


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_pods_release_their_share(phase: str) -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.upsert_pod(make_info("p", node="n1", phase="Running", cpu="3"))
    cache.upsert_pod(make_info("q", node="n1", phase="Running", cpu="1"))
    assert cache.upsert_pod(make_info("p", node="n1", phase=phase, cpu="3")) is None
    cache.check()
    assert cache.state_of(("default", "p")) is None
    assert requested(cache, "n1") == {"cpu": 1000, "pods": 1}
    # a terminal pod seen for the first time is never counted
    assert cache.upsert_pod(make_info("r", node="n1", phase=phase, cpu="2")) is None
    assert requested(cache, "n1") == {"cpu": 1000, "pods": 1}


def test_deleted_pods_release_their_share() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.upsert_pod(make_info("p", node="n1", cpu="2"))
    removed = cache.remove_pod(("default", "p"))
    cache.check()
    assert removed is not None and removed.key == ("default", "p")
    assert requested(cache, "n1") == {}
    assert list(cache.pods_on("n1")) == []
    assert cache.remove_pod(("default", "p")) is None


def test_a_terminating_pod_holds_its_share_until_it_is_deleted() -> None:
    """Like kube-scheduler: a pod with a deletionTimestamp still runs on its node."""
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    builder = make_pod("p").container(cpu="2").spec(nodeName="n1")
    terminating = builder.meta(deletionTimestamp="2026-01-01T00:00:00Z").info()
    assert terminating.deleting
    cache.upsert_pod(terminating)
    assert requested(cache, "n1") == {"cpu": 2000, "pods": 1}
    cache.remove_pod(("default", "p"))
    assert requested(cache, "n1") == {}


def test_resized_bound_pod_replaces_its_share() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.upsert_pod(make_info("p", node="n1", cpu="1"))
    cache.upsert_pod(make_info("p", node="n1", cpu="3", memory="1Gi"))
    cache.check()
    assert requested(cache, "n1") == {"cpu": 3000, "memory": GIB, "pods": 1}


# --------------------------------------------------------------------------------------------
# Our reservations: assume / bind / forget


def test_assume_counts_at_once_and_binding_on_the_same_node_does_not_double_count() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    pending = make_info("p", cpu="2", gpu="1")
    record = cache.assume(pending, "n1")
    cache.check()
    assert record.state is PodState.ASSUMED
    assert cache.state_of(pending.key) is PodState.ASSUMED
    assert requested(cache, "n1") == {"cpu": 2000, GPU: 1, "pods": 1}

    # an informer update before the bind lands (still unassigned) keeps the reservation
    assert cache.upsert_pod(pending) is record
    assert cache.state_of(pending.key) is PodState.ASSUMED
    assert requested(cache, "n1") == {"cpu": 2000, GPU: 1, "pods": 1}

    bound = cache.upsert_pod(make_info("p", node="n1", cpu="2", gpu="1"))
    cache.check()
    assert bound is record
    assert cache.state_of(pending.key) is PodState.BOUND
    assert requested(cache, "n1") == {"cpu": 2000, GPU: 1, "pods": 1}


def test_bound_on_another_node_moves_the_share() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.upsert_node(make_node("n2"))
    cache.assume(make_info("p", cpu="2"), "n1")
    record = cache.upsert_pod(make_info("p", node="n2", cpu="2"))
    cache.check()
    assert record is not None and record.node == "n2" and record.state is PodState.BOUND
    assert requested(cache, "n1") == {}
    assert requested(cache, "n2") == {"cpu": 2000, "pods": 1}
    assert list(cache.pods_on("n1")) == []


def test_forget_undoes_only_an_assumption() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.assume(make_info("a", cpu="1"), "n1")
    cache.assume(make_info("b", cpu="2"), "n1")
    cache.upsert_pod(make_info("b", node="n1", cpu="2"))  # b is bound now: a fact

    assert cache.forget(("default", "a"))
    cache.check()
    assert cache.state_of(("default", "a")) is None
    assert not cache.forget(("default", "a"))  # twice: nothing left to undo
    assert not cache.forget(("default", "b"))
    assert not cache.forget(("default", "never-seen"))
    cache.check()
    assert cache.state_of(("default", "b")) is PodState.BOUND
    assert requested(cache, "n1") == {"cpu": 2000, "pods": 1}


def test_assume_refuses_a_pod_the_cache_already_holds() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.assume(make_info("a", cpu="1"), "n1")
    cache.upsert_pod(make_info("b", node="n1", cpu="1"))
    with pytest.raises(ValueError, match="Assumed on n1"):
        cache.assume(make_info("a", cpu="1"), "n1")
    with pytest.raises(ValueError, match="Bound on n1"):
        cache.assume(make_info("b", cpu="1"), "n1")
    cache.check()
    assert requested(cache, "n1") == {"cpu": 2000, "pods": 2}


def test_assume_all_counts_as_assuming_each_and_moves_each_gang_once() -> None:
    """A gang's placement assumed at once: the same nodes' use and holdings as one pod at a
    time, told to the hook once per gang, with the sum (one member asks for a resource no
    earlier one did: the sum widens)."""
    members = [
        replace(make_info("a", cpu="1"), group="g"),
        replace(make_info("b", cpu="2", gpu=1), group="g"),
        replace(make_info("c", cpu="1"), group="h"),
    ]
    placed = [(members[0], "n1"), (members[1], "n2"), (members[2], "n1")]
    told: dict[ClusterCache, list[tuple[tuple[str, str, str], dict[str, int]]]] = {}
    caches = []
    for _ in range(2):
        cache = ClusterCache()
        for name in ("n1", "n2"):
            cache.upsert_node(make_node(name, extra={"nvidia.com/gpu": 8}))
        calls = told[cache] = []
        cache.on_hold = lambda holder, vec, calls=calls, cache=cache: calls.append(
            (holder, cache.index.describe(vec))
        )
        caches.append(cache)
    one_by_one, at_once = caches
    for info, node in placed:
        one_by_one.assume(info, node)
    at_once.assume_all(placed)
    for node in ("n1", "n2"):
        assert requested(at_once, node) == requested(one_by_one, node)
    assert {h: at_once.index.describe(v) for h, v in at_once.held_by.items()} == {
        ("default", "g", ""): {"cpu": 3000, "nvidia.com/gpu": 1, "pods": 2},
        ("default", "h", ""): {"cpu": 1000, "pods": 1},
    }
    assert {h: one_by_one.index.describe(v) for h, v in one_by_one.held_by.items()} == {
        h: at_once.index.describe(v) for h, v in at_once.held_by.items()
    }
    assert told[at_once] == [
        (("default", "g", ""), {"cpu": 3000, "nvidia.com/gpu": 1, "pods": 2}),
        (("default", "h", ""), {"cpu": 1000, "pods": 1}),
    ]
    assert len(told[one_by_one]) == 3
    at_once.check()


def test_assume_all_assumes_nothing_if_one_pod_is_already_counted() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.assume(make_info("b", cpu="1"), "n1")
    with pytest.raises(ValueError, match="Assumed on n1"):
        cache.assume_all([(make_info("a", cpu="1"), "n1"), (make_info("b", cpu="1"), "n1")])
    with pytest.raises(ValueError, match="placed twice"):
        cache.assume_all([(make_info("c", cpu="1"), "n1"), (make_info("c", cpu="1"), "n1")])
    assert cache.state_of(("default", "a")) is None
    assert cache.state_of(("default", "c")) is None
    assert requested(cache, "n1") == {"cpu": 1000, "pods": 1}
    cache.check()


def test_assumed_pod_deleted_or_finished_releases() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.assume(make_info("a", cpu="1"), "n1")
    cache.assume(make_info("b", cpu="1"), "n1")
    cache.remove_pod(("default", "a"))
    assert cache.upsert_pod(make_info("b", phase="Failed", cpu="1")) is None
    cache.check()
    assert cache.pods == {}
    assert requested(cache, "n1") == {}


def test_same_name_with_a_new_uid_replaces_the_old_pod() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.upsert_node(make_node("n2"))
    cache.upsert_pod(make_info("p", uid="old", node="n1", cpu="4"))

    # the pod was deleted and recreated under the same name; its first event is unassigned
    assert cache.upsert_pod(make_info("p", uid="new", cpu="1")) is None
    cache.check()
    assert requested(cache, "n1") == {}

    record = cache.upsert_pod(make_info("p", uid="new", node="n2", cpu="1"))
    cache.check()
    assert record is not None and record.uid == "new"
    assert requested(cache, "n1") == {}
    assert requested(cache, "n2") == {"cpu": 1000, "pods": 1}


def test_same_name_new_uid_replaces_an_assumption_even_on_the_same_node() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.assume(make_info("p", uid="old", cpu="1"), "n1")
    record = cache.upsert_pod(make_info("p", uid="new", node="n1", cpu="1"))
    cache.check()
    assert record is not None and record.uid == "new" and record.state is PodState.BOUND
    assert requested(cache, "n1") == {"cpu": 1000, "pods": 1}


def test_an_unassigned_pod_with_a_new_uid_drops_the_old_assumption() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.assume(make_info("p", uid="old", cpu="1"), "n1")
    assert cache.upsert_pod(make_info("p", uid="new", cpu="1")) is None
    cache.check()
    assert cache.state_of(("default", "p")) is None
    assert requested(cache, "n1") == {}


# --------------------------------------------------------------------------------------------
# Pods on nodes the cache does not know (yet)


def test_pod_on_an_unknown_node_is_counted_when_the_node_appears() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.upsert_pod(make_info("early", node="late", cpu="2"))
    cache.assume(make_info("assumed", cpu="1"), "late")
    cache.check()
    assert requested(cache, "n1") == {}
    assert not cache.requested.any()

    cache.upsert_node(make_node("late", cpu="8"))
    cache.check()
    assert requested(cache, "late") == {"cpu": 3000, "pods": 2}
    assert free(cache, "late")["cpu"] == 5000


def test_pods_on_a_removed_node_count_again_if_it_returns() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.upsert_node(make_node("n2"))
    cache.upsert_pod(make_info("p", node="n1", cpu="2"))
    cache.remove_node("n1")
    cache.check()
    # released meanwhile: the pod's removal while its node is gone must not touch other rows
    cache.upsert_pod(make_info("q", node="n1", cpu="1"))
    cache.remove_pod(("default", "q"))
    cache.check()
    assert requested(cache, "n2") == {}

    cache.upsert_node(make_node("n1"))
    cache.check()
    assert requested(cache, "n1") == {"cpu": 2000, "pods": 1}


# --------------------------------------------------------------------------------------------
# Resource columns


def test_a_new_extended_resource_widens_the_matrices() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("cpu-only"))
    cache.upsert_pod(make_info("before", node="cpu-only", cpu="1"))
    width = len(BASE_RESOURCES)
    assert cache.allocatable.shape[1] == cache.requested.shape[1] == width

    cache.upsert_node(make_node("gpu", extra={GPU: "8"}))
    cache.check()
    assert cache.allocatable.shape[1] == cache.requested.shape[1] == width + 1
    assert cache.index.names[width] == GPU
    assert free(cache, "gpu")[GPU] == 8
    assert GPU not in free(cache, "cpu-only")
    # a pod's vector made before the column existed still accounts correctly
    assert requested(cache, "cpu-only") == {"cpu": 1000, "pods": 1}

    # a pod asking for a resource no node has widens too, and leaves that node short
    cache.upsert_pod(make_info("fpga", node="gpu", **{"example.com/fpga": "2"}))
    cache.check()
    assert cache.requested.shape[1] == width + 2
    assert free(cache, "gpu")["example.com/fpga"] == -2

    snap = cache.snapshot()
    # every column; the rows nodes were given (not the room the matrices keep to grow into)
    assert snap.free.shape == snap.allocatable.shape == (2, cache.allocatable.shape[1])


def test_assumed_extended_resource_before_any_node_has_it() -> None:
    cache = ClusterCache(ResourceIndex())
    cache.upsert_node(make_node("n1"))
    cache.assume(make_info("p", gpu="2"), "n1")
    cache.check()
    cache.upsert_node(make_node("n1", extra={GPU: "4"}))
    cache.check()
    assert free(cache, "n1")[GPU] == 2


# --------------------------------------------------------------------------------------------
# Snapshots and host ports


def test_snapshot_is_a_private_copy() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1", cpu="4"))
    cache.upsert_pod(make_info("p", node="n1", cpu="1"))
    snap = cache.snapshot()
    row = row_of(cache, "n1")
    cpu = cache.index.column("cpu")
    assert snap.free[row, cpu] == 3000
    assert snap.version == cache.version
    assert snap.names[row] == "n1"
    snap.free[row, cpu] = 0
    assert free(cache, "n1")["cpu"] == 3000
    cache.upsert_pod(make_info("q", node="n1", cpu="1"))
    assert snap.free[row, cpu] == 0  # the snapshot does not follow the cache either
    # what only node events change is shared, read-only, by snapshots of the same nodes
    with pytest.raises(ValueError, match="read-only"):
        snap.valid[row] = False
    with pytest.raises(ValueError, match="read-only"):
        snap.allocatable[row, cpu] = 0
    again = cache.snapshot()
    assert again.allocatable is snap.allocatable and again.valid is snap.valid
    assert again.free is not snap.free and again.free[row, cpu] == 2000
    # a node change gives later snapshots new copies, and leaves the earlier one as it was
    cache.upsert_node(make_node("n1", cpu="8"))
    cache.upsert_node(make_node("n2", cpu="2"))
    later = cache.snapshot()
    assert later.allocatable is not snap.allocatable
    assert later.allocatable[row, cpu] == 8000 and snap.allocatable[row, cpu] == 4000
    assert "n2" in later.names and "n2" not in snap.names
    assert cache.valid[row]


def test_host_ports_are_tracked_per_node_and_released() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.assume(make_info("a", cpu="1", host_port=8080), "n1")
    cache.upsert_pod(make_info("b", node="n1", cpu="1", host_port=8080))
    used = cache.snapshot().used_ports
    assert used == {"n1": {("0.0.0.0", "TCP", 8080): 2}}

    cache.forget(("default", "a"))
    assert cache.snapshot().used_ports == {"n1": {("0.0.0.0", "TCP", 8080): 1}}
    cache.remove_pod(("default", "b"))
    assert cache.snapshot().used_ports == {}


def test_the_label_keys_placed_pods_terms_read_are_counted_per_distinct_term() -> None:
    """``term_label_keys``: the label keys some placed pod's affinity term selects by (what the
    twin test compares members on), counted once per distinct term, gone with its last pod."""

    def stating(name: str, *requirements: dict[str, Any]) -> PodInfo:
        term = {"labelSelector": {"matchExpressions": list(requirements)}, "topologyKey": "h"}
        anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        return make_pod(name).container(cpu="1").spec(nodeName="n1", affinity=anti).info()

    index = ClusterCache().pods_by_label
    app = {"key": "app", "operator": "In", "values": ["a"]}
    rank = {"key": "rank", "operator": "Exists"}
    index.add(stating("a", app), "n1")
    index.add(stating("b", app), "n1")  # the same term: counted once
    index.add(stating("c", app, rank), "n1")
    assert index.term_label_keys == {"app": 2, "rank": 1}
    index.remove(("default", "c"))
    assert index.term_label_keys == {"app": 1}
    index.remove(("default", "a"))
    assert index.term_label_keys == {"app": 1}  # b still states it
    index.remove(("default", "b"))
    assert not index.term_label_keys


def test_a_selector_starts_from_its_requirement_the_fewest_placed_pods_meet() -> None:
    """A per-replica Service's selector reads a label every pod of the operator carries
    (``group-name``) beside the job's name: the lookup visits the job's pods, not all of them,
    whichever requirement comes first."""
    cache = ClusterCache()
    cache.upsert_node(make_node("n0", cpu="64"))
    for job in range(20):
        for i in range(4):
            info = make_info(f"j{job}-{i}", node="n0")
            labels = {"group-name": "kubeflow.org", "job-name": f"j{job}", "index": str(i)}
            cache.upsert_pod(replace(info, labels=labels))
    index = cache.pods_by_label
    selector = parse_selector(
        {"matchLabels": {"group-name": "kubeflow.org", "job-name": "j3", "index": "1"}}, "test"
    )
    assert [pod.key[1] for pod in index.selected(selector)] == ["j3-1"]
    assert sum(len(group) for group in index._narrowest(selector)) == 4  # j3's pods, of 80
    missing = parse_selector({"matchLabels": {"group-name": "kubeflow.org", "job-name": "x"}}, "t")
    assert sum(len(group) for group in index._narrowest(missing)) == 0
    two_jobs = parse_selector(
        {
            "matchLabels": {"group-name": "kubeflow.org"},
            "matchExpressions": [{"key": "job-name", "operator": "In", "values": ["j4", "j3"]}],
        },
        "test",
    )
    assert sorted(pod.key[1] for pod in index.selected(two_jobs)) == [
        f"j{job}-{i}" for job in (3, 4) for i in range(4)
    ]


def test_check_detects_drift() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n1"))
    cache.upsert_pod(make_info("p", node="n1", cpu="1"))
    cache.check()
    cache.requested[row_of(cache, "n1"), cache.index.column("cpu")] += 1
    with pytest.raises(AssertionError, match="drifted"):
        cache.check()


# --------------------------------------------------------------------------------------------
# Random operation sequences against an independent model

NODE_NAMES = ("n0", "n1", "n2", "n3")
POD_NAMES = ("p0", "p1", "p2", "p3", "p4")
FPGA = "example.com/fpga"

node_names = st.sampled_from(NODE_NAMES)
pod_names = st.sampled_from(POD_NAMES)
uids = st.sampled_from(("u0", "u1"))
pod_nodes = st.sampled_from(("", *NODE_NAMES, "ghost"))
phases = st.sampled_from(("Pending", "Running", "Running", "Succeeded", "Failed"))
requests_st = st.fixed_dictionaries(
    {"cpu": st.sampled_from(("0", "100m", "1", "2500m"))},
    optional={
        "memory": st.sampled_from(("1Mi", "1Gi")),
        "gpu": st.integers(1, 2),
        FPGA: st.integers(1, 3),
    },
)


class _Model:
    """What the cache should hold, computed without numpy rows or the cache's own code."""

    def __init__(self) -> None:
        self.nodes: set[str] = set()
        # key -> (uid, node, requests, state)
        self.pods: dict[tuple[str, str], tuple[str, str, Mapping[str, int], PodState]] = {}

    def expected(self, node: str) -> dict[str, int]:
        total: dict[str, int] = {}
        for _, on, requests, _ in self.pods.values():
            if on == node:
                for name, amount in requests.items():
                    total[name] = total.get(name, 0) + amount
        return {k: v for k, v in total.items() if v}


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cache = ClusterCache(capacity=2)
        self.model = _Model()

    @rule(
        name=node_names,
        cpu=st.integers(0, 16),
        gpu=st.none() | st.integers(0, 4),
        zone=st.sampled_from(("a", "b")),
    )
    def upsert_node(self, name: str, cpu: int, gpu: int | None, zone: str) -> None:
        extra = {} if gpu is None else {GPU: gpu}
        self.cache.upsert_node(make_node(name, cpu=cpu, zone=zone, extra=extra))
        self.model.nodes.add(name)

    @rule(name=node_names)
    def remove_node(self, name: str) -> None:
        assert self.cache.remove_node(name) == (name in self.model.nodes)
        self.model.nodes.discard(name)

    @rule(
        name=pod_names,
        uid=uids,
        node=pod_nodes,
        phase=phases,
        requests=requests_st,
        app=st.sampled_from(("a", "b", None)),
    )
    def upsert_pod(
        self, name: str, uid: str, node: str, phase: str, requests: dict[str, Any], app: str | None
    ) -> None:
        info = make_info(name, uid=uid, node=node, phase=phase, **requests)
        if app is not None:  # labels come and go with updates: the index must follow
            info = replace(info, labels={"app": app, "group": "g"})
        record = self.cache.upsert_pod(info)
        model = self.model.pods
        old = model.get(info.key)
        if old is not None and old[0] != uid:
            del model[info.key]
            old = None
        if info.terminal or not node:
            if old is not None and (info.terminal or old[3] is PodState.BOUND):
                del model[info.key]
        else:
            model[info.key] = (uid, node, dict(info.requests), PodState.BOUND)
        if info.key in model:
            assert record is not None and record.node == model[info.key][1]
        else:
            assert record is None

    @rule(name=pod_names)
    def remove_pod(self, name: str) -> None:
        key = ("default", name)
        removed = self.cache.remove_pod(key)
        assert (removed is not None) == (key in self.model.pods)
        self.model.pods.pop(key, None)

    @rule(name=pod_names, uid=uids, node=st.sampled_from((*NODE_NAMES, "ghost")), req=requests_st)
    def assume(self, name: str, uid: str, node: str, req: dict[str, Any]) -> None:
        info = make_info(name, uid=uid, **req)
        if info.key in self.model.pods:
            with pytest.raises(ValueError):
                self.cache.assume(info, node)
            return
        self.cache.assume(info, node)
        self.model.pods[info.key] = (uid, node, dict(info.requests), PodState.ASSUMED)

    @rule(name=pod_names)
    def forget(self, name: str) -> None:
        key = ("default", name)
        old = self.model.pods.get(key)
        undone = old is not None and old[3] is PodState.ASSUMED
        assert self.cache.forget(key) == undone
        if undone:
            del self.model.pods[key]

    @rule(
        selector=st.sampled_from(
            (
                {"matchLabels": {"app": "a"}},
                {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]},
                # a label every labelled pod carries beside one that narrows (or matches none)
                {"matchLabels": {"group": "g", "app": "b"}},
                {"matchLabels": {"group": "g", "app": "c"}},
                {
                    "matchLabels": {"group": "g"},
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}],
                },
                {
                    "matchLabels": {"group": "g"},
                    "matchExpressions": [{"key": "app", "operator": "Exists"}],
                },
            )
        )
    )
    def select(self, selector: dict[str, Any]) -> None:
        """The label index is built on the first question, then kept in step: either way a
        selector finds exactly the placed pods it matches."""
        parsed = parse_selector(selector, "test")
        index = self.cache.pods_by_label
        found = {pod.key for pod in index.selected(parsed)}
        assert found == {k for k, pod in index.pods.items() if parsed.matches(pod.labels)}
        assert index.labels_indexed

    @invariant()
    def consistent(self) -> None:
        cache, model = self.cache, self.model
        cache.check()
        assert set(cache.nodes) == model.nodes
        assert int(cache.valid.sum()) == len(model.nodes)
        assert (
            cache.requested.shape == cache.allocatable.shape == (len(cache.names), len(cache.index))
        )
        for name in model.nodes:
            assert requested(cache, name) == model.expected(name), name
        for row in np.flatnonzero(~cache.valid):
            assert not cache.requested[row].any()
        # the affinity index holds exactly the assumed and bound pods, on their nodes
        index = cache.pods_by_label
        assert set(index.pods) == set(cache.pods)
        for key, pod in index.pods.items():
            assert pod.node == cache.pods[key].node
            for pair in pod.labels.items():
                assert not index.labels_indexed or index.by_label[pair][key] is pod
        labelled = sum(len(p.labels) for p in index.pods.values()) if index.labels_indexed else 0
        assert sum(len(holders) for holders in index.by_label.values()) == labelled
        assert sum(len(holders) for holders in index.by_key.values()) == labelled
        assert {k: r.state for k, r in cache.pods.items()} == {
            k: v[3] for k, v in model.pods.items()
        }
        for key in cache.pods:
            assert cache.state_of(key) is model.pods[key][3]


TestCacheMachine = CacheMachine.TestCase
TestCacheMachine.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
