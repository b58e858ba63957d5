"""A placer that carries its work from one gang to the next answers as a fresh one would.

The placer keeps, per template, the slot counts behind the packing domains' capacities and the
last gang's Filter/Score pass in each domain, and redoes only the rows whose free capacity moved
(:class:`gang.scheduling.placement._Carried`, ``_Slots``). That is an optimisation and nothing
else: on any sequence of gangs, with pods assumed, forgotten and bound by others in between and
nodes relabelled or cordoned, one long-lived placer must choose exactly what a placer built
afresh for every gang chooses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gang.models.settings import ScoreWeights
from gang.scheduling.placement import Placement, Placer, Unplaceable
from gang.state.cache import ClusterCache, Snapshot
from gang.state.podinfo import PodInfo
from gang.state.resources import FEW_ROWS
from tests.unit.test_cache import make_info, make_node
from tests.unit.test_placement_twins import UNTIMED

ZONE = "topology.kubernetes.io/zone"
#: the templates gangs are made of: GPUs, and cpu in millicores, per member
TEMPLATES = [(1, 500), (2, 1000), (0, 4000)]

template = st.sampled_from([0, 0, 0, 1, 2])  # mostly one: a job's replicas follow each other
gangs = st.tuples(st.just("gang"), template, st.integers(2, 6))
steps = st.lists(
    st.one_of(
        gangs,
        gangs,
        gangs,
        st.tuples(st.just("gang-unreserved"), template, st.integers(2, 4)),
        st.tuples(st.just("gang-lent"), template, st.integers(2, 4)),
        st.tuples(st.just("forget"), st.integers(0, 10_000), st.just(0)),
        st.tuples(st.just("bound-elsewhere"), st.integers(0, 10_000), st.integers(1, 3)),
        st.tuples(st.just("finished-elsewhere"), st.integers(0, 10_000), st.just(0)),
        st.tuples(st.just("relabel"), st.integers(0, 10_000), st.integers(0, 2)),
        st.tuples(st.just("cordon"), st.integers(0, 10_000), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)
nodes = st.lists(st.tuples(st.integers(0, 2), st.integers(2, 8)), min_size=1, max_size=12)


def _node(i: int, zone: int, gpus: int, **fields: Any) -> dict[str, Any]:
    return make_node(f"n{i}", cpu="16", zone=f"z{zone}", extra={"nvidia.com/gpu": gpus}, **fields)


def _members(serial: int, template: int, size: int) -> list[PodInfo]:
    gpus, millicores = TEMPLATES[template]
    requests: dict[str, Any] = {"cpu": f"{millicores}m"}
    if gpus:
        requests["gpu"] = gpus
    return [make_info(f"g{serial}-{m}", uid=f"u{serial}-{m}", **requests) for m in range(size)]


def _lent(cache: ClusterCache, serial: int) -> Snapshot:
    """A snapshot with a GPU lent on one node, changed in place as the cycle lends a
    lower-priority gang's nominated capacity: no longer the cache's free capacity."""
    snap = cache.snapshot()
    assert snap.origin is not None
    snap.origin.intact = False
    rows = np.flatnonzero(snap.valid)
    snap.free[rows[serial % len(rows)], cache.index.column("nvidia.com/gpu")] += 1
    return snap


def _answer(result: Placement | Unplaceable) -> object:
    if isinstance(result, Placement):
        return ("placed", result.assignments, result.unplaced)
    return ("unplaceable", result.message, result.placed, result.member)


@settings(max_examples=200, deadline=None)
@given(nodes, steps, st.booleans())
def test_a_long_lived_placer_chooses_what_a_fresh_one_chooses(
    shape: list[tuple[int, int]], plan: list[tuple[str, int, int]], spread: bool
) -> None:
    cache = ClusterCache()
    for i, (zone, gpus) in enumerate(shape):
        cache.upsert_node(_node(i, zone, gpus))
    weights = ScoreWeights(most_allocated=0, least_allocated=1) if spread else ScoreWeights()
    kept = Placer(cache.index, weights, ZONE, budgets=UNTIMED)
    assumed: list[PodInfo] = []
    others: list[PodInfo] = []
    for serial, (step, a, b) in enumerate(plan):
        names = sorted(cache.nodes)
        if step in ("gang", "gang-unreserved", "gang-lent"):
            pods = _members(serial, a, b)
            for pod in pods:
                cache.index.vector(pod.requests)
            fresh = Placer(cache.index, weights, ZONE, budgets=UNTIMED)
            lent = step == "gang-lent"
            got = kept.place(_lent(cache, serial) if lent else cache.snapshot(), pods, len(pods))
            want = fresh.place(_lent(cache, serial) if lent else cache.snapshot(), pods, len(pods))
            assert _answer(got) == _answer(want)
            if isinstance(got, Placement) and step == "gang":
                for pod in pods:
                    cache.assume(pod, got.assignments[pod.key])
                    assumed.append(pod)
        elif step == "forget" and assumed:
            cache.forget(assumed.pop(a % len(assumed)).key)
        elif step == "bound-elsewhere" and names:
            other = make_info(f"o{serial}", uid=f"o{serial}", node=names[a % len(names)], gpu=b)
            cache.upsert_pod(other)
            others.append(other)
        elif step == "finished-elsewhere" and others:
            cache.remove_pod(others.pop(a % len(others)).key)
        elif step == "relabel" and names:
            i = int(names[a % len(names)][1:])
            cache.upsert_node(_node(i, b, shape[i][1]))
        elif step == "cordon" and names:
            i = int(names[a % len(names)][1:])
            cache.upsert_node(_node(i, shape[i][0], shape[i][1], unschedulable=True))
    cache.check()


def test_the_carried_pass_is_used_and_redoes_only_the_rows_that_moved() -> None:
    """Four zones of identical nodes: every gang after the first, in a zone it already used,
    re-judges the rows its predecessor took instead of filtering and scoring the zone again
    (counted by the single-row scores it computes)."""
    cache = ClusterCache()
    for i in range(64):
        cache.upsert_node(_node(i, i % 4, 8))
    placer = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)
    row_scores: list[int] = []
    score = placer._score

    def counting(*args: Any, **kwargs: Any) -> Any:
        result = score(*args, **kwargs)
        row_scores.append(len(args[2]))
        return result

    placer._score = counting  # type: ignore[method-assign]
    for serial in range(6):
        pods = _members(serial, 0, 8)
        for pod in pods:
            cache.index.vector(pod.requests)
        result = placer.place(cache.snapshot(), pods, 8)
        assert isinstance(result, Placement)
        assert len(set(result.assignments.values())) == 1  # packed onto one node
        for pod in pods:
            cache.assume(pod, result.assignments[pod.key])
    # the first gang scores the 16 nodes of its zone once; every later one scores single rows
    assert row_scores[0] == 16
    assert all(n == 1 for n in row_scores[1:])
    assert len(row_scores) < 6 * 8


def test_slot_counts_follow_capacity_that_comes_back() -> None:
    """A node freed after the counts were kept holds members again in the next count."""
    cache = ClusterCache()
    for i in range(4):
        cache.upsert_node(_node(i, 0, 8))
    placer = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)
    first = _members(0, 0, 8)
    for pod in first:
        cache.index.vector(pod.requests)
    result = placer.place(cache.snapshot(), first, 8)
    assert isinstance(result, Placement)
    for pod in first:
        cache.assume(pod, result.assignments[pod.key])
    probe = _members(1, 0, 1)[0]
    vec = cache.index.fit(cache.index.vector(probe.requests))
    snap = cache.snapshot()
    kept = placer._slots_kept(snap, probe, vec, 1)
    assert sorted(kept.per_node[snap.valid].tolist()) == [0, 8, 8, 8]
    assert kept.capacity == [24]  # the zone's sum, kept with the rows
    for pod in first:
        cache.forget(pod.key)
    snap = cache.snapshot()
    kept = placer._slots_kept(snap, probe, vec, 1)
    assert kept.per_node[snap.valid].tolist() == [8, 8, 8, 8]
    assert kept.capacity == [32]


def test_a_node_that_did_not_fit_the_carried_pass_is_judged_again_once_freed() -> None:
    """The carried pass never saw a full node as a candidate. Freed, that node is the emptiest,
    and spreading must put the next gang there, as a fresh placer would."""
    cache = ClusterCache()
    for i in range(2):
        cache.upsert_node(_node(i, 0, 8))
    other = make_info("other", uid="other", node="n0", gpu=8)
    cache.upsert_pod(other)
    placer = Placer(
        cache.index, ScoreWeights(most_allocated=0, least_allocated=1), ZONE, budgets=UNTIMED
    )
    first, second = _members(0, 0, 2), _members(1, 0, 2)
    for pod in [*first, *second]:
        cache.index.vector(pod.requests)
    result = placer.place(cache.snapshot(), first, 2)
    assert isinstance(result, Placement)
    assert set(result.assignments.values()) == {"n1"}
    for pod in first:
        cache.assume(pod, "n1")
    assert placer._carried  # the first gang's pass is kept
    cache.remove_pod(other.key)
    result = placer.place(cache.snapshot(), second, 2)
    assert isinstance(result, Placement)
    assert set(result.assignments.values()) == {"n0"}


def test_slot_counts_kept_over_few_or_many_moved_rows_equal_a_fresh_count() -> None:
    """The kept count redoes the rows that moved: a few in Python integers, many (more than
    ``FEW_ROWS``) with numpy; either way, tainted rows count 0 and it equals a fresh count."""
    cache = ClusterCache()
    taint = [{"key": "maintenance", "effect": "NoSchedule"}]
    for i in range(40):
        cache.upsert_node(_node(i, i % 2, 8, taints=taint if i % 8 == 0 else None))
    probe = _members(0, 0, 1)[0]
    vec = cache.index.fit(cache.index.vector(probe.requests))
    placer = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)
    placer._slots_kept(cache.snapshot(), probe, vec, 1)  # kept from here on
    serial = 1
    for moved in (3, FEW_ROWS + 9):
        for i in range(moved):  # members bound by others, one per row (a tainted row among)
            pod = _members(serial, 1 if i % 3 else 0, 1)[0]
            serial += 1
            cache.assume(pod, f"n{i}")
        snap = cache.snapshot()
        kept = placer._slots_kept(snap, probe, vec, 1)
        fresh = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)
        expected = fresh._slots_kept(snap, probe, vec, 1)
        assert kept.per_node.tolist() == expected.per_node.tolist()
        assert kept.capacity == expected.capacity
        assert kept.per_node[0] == 0 and kept.per_node[8] == 0  # tainted


def test_consecutive_gangs_on_the_cache_s_own_snapshots_compare_no_matrices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cache's journal names the rows that moved between two gangs' snapshots: neither
    the slot counts nor the carried pass compares the free matrix with a kept copy, and the
    choices are still a fresh placer's."""
    import gang.scheduling.placement as placement

    compared: list[int] = []
    real = placement.rows_differing

    def counting(before: Any, after: Any) -> Any:
        compared.append(len(before))
        return real(before, after)

    monkeypatch.setattr(placement, "rows_differing", counting)
    cache = ClusterCache()
    for i in range(32):
        cache.upsert_node(_node(i, i % 4, 8))
    placer = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)
    for serial in range(6):
        pods = _members(serial, 0, 8)
        for pod in pods:
            cache.index.vector(pod.requests)
        result = placer.place(cache.snapshot(), pods, 8)
        fresh = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)
        assert _answer(result) == _answer(fresh.place(cache.snapshot(), pods, 8))
        assert isinstance(result, Placement)
        for pod in pods:
            cache.assume(pod, result.assignments[pod.key])
    assert compared == []
    placer.place(_lent(cache, 0), _members(9, 0, 2), 2)  # not the cache's: compared
    assert compared
