"""The mixed-stream benchmark's figures on hand-made timelines whose answers are known.

Each timeline is small enough to check on paper: which node is busy when, and when a gang
would first have fitted on the pods ahead of it.
"""

from __future__ import annotations

import pytest

from gang.bench.streamstats import (
    GPU,
    GangRun,
    PodSpan,
    Targets,
    analyse,
    earliest_fit,
    fits,
    member_slots,
    merge,
    overcommitted_during,
    percentile,
    utilisation,
)

TWO_NODES = {"n1": {GPU: 8, "cpu": 64_000}, "n2": {GPU: 8, "cpu": 64_000}}
WHOLE = {GPU: 8, "cpu": 1000}


def span(node: str, gpus: int, bound: float, finished: float | None, cpu: int = 500) -> PodSpan:
    return PodSpan(node, {GPU: gpus, "cpu": cpu}, bound, finished)


# --- slot arithmetic ---------------------------------------------------------------------------


def test_member_slots_take_the_scarcest_resource() -> None:
    assert member_slots({GPU: 8, "cpu": 3000}, {GPU: 1, "cpu": 1000}) == 3
    assert member_slots({GPU: 8}, {GPU: 3}) == 2
    assert member_slots({GPU: -1}, {GPU: 1}) == 0  # an over-committed node has no slot
    assert member_slots({"cpu": 10}, {GPU: 1}) == 0  # a resource the node lacks
    assert fits([{GPU: 4}, {GPU: 4}], {GPU: 4}, 2)
    assert not fits([{GPU: 4}, {GPU: 3}], {GPU: 4}, 2)  # 7 GPUs free, but not 2 x 4 on nodes


# --- the theoretical minimum -------------------------------------------------------------------


def test_an_empty_cluster_fits_at_once() -> None:
    assert earliest_fit(TWO_NODES, [], WHOLE, 2, since=3.0) == 3.0


def test_capacity_freed_by_a_pod_ahead_counts() -> None:
    ahead = [span("n1", 8, bound=0.0, finished=10.0)]
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 2, since=2.0) == 10.0
    # one whole node was free all along: a one-member gang needs no wait
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 1, since=2.0) == 2.0


def test_a_pod_finished_before_the_arrival_is_gone_and_one_bound_later_counts() -> None:
    ahead = [
        span("n1", 8, bound=0.0, finished=1.0),  # gone before the gang arrives
        span("n2", 4, bound=5.0, finished=9.0),  # ahead, bound later: n2 is its first, until 9
    ]
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 2, since=2.0) == 9.0
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 1, since=2.0) == 2.0
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 2, since=6.0) == 9.0


def test_changes_at_one_instant_are_applied_together() -> None:
    """X leaves n1 at 4 just as Y takes n1 (until 6): at 4 there is still no room."""
    ahead = [span("n1", 8, 0.0, 4.0), span("n1", 8, 4.0, 6.0), span("n2", 8, 0.0, None)]
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 1, since=1.0) == 6.0


def test_every_requested_resource_counts() -> None:
    """GPUs are free on n1 but its CPU (then its memory) is not: the gang waits for those pods."""
    nodes = {"n1": {GPU: 8, "cpu": 8000, "memory": 64}}
    cpu_heavy = PodSpan("n1", {GPU: 1, "cpu": 7000, "memory": 1}, 0.0, 12.0)
    memory_heavy = PodSpan("n1", {GPU: 1, "cpu": 100, "memory": 61}, 0.0, 15.0)
    member = {GPU: 2, "cpu": 2000, "memory": 2}
    assert earliest_fit(nodes, [cpu_heavy], member, 2, since=1.0) == 12.0
    assert earliest_fit(nodes, [cpu_heavy, memory_heavy], member, 2, since=1.0) == 15.0
    assert earliest_fit(nodes, [memory_heavy], {GPU: 2}, 3, since=1.0) == 1.0


def test_no_room_before_until_is_none() -> None:
    ahead = [span("n1", 8, 0.0, None), span("n2", 8, 0.0, 50.0)]
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 1, since=0.0, until=20.0) is None
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 1, since=0.0) == 50.0
    assert earliest_fit(TWO_NODES, ahead, WHOLE, 3, since=0.0) is None  # never: 2 nodes only


def test_pods_on_other_nodes_are_ignored() -> None:
    assert earliest_fit(TWO_NODES, [span("elsewhere", 8, 0.0, None)], WHOLE, 2, 0.0) == 0.0


def gang(
    name: str,
    created: float,
    pods: tuple[PodSpan, ...],
    *,
    big: bool = False,
    size: int | None = None,
    request: dict[str, int] | None = None,
    bound: float | None = None,
) -> GangRun:
    last = max((p.bound for p in pods), default=None)
    return GangRun(
        name,
        big,
        created,
        size if size is not None else len(pods),
        request or {GPU: 8, "cpu": 500},
        bound if bound is not None or not pods else last,
        pods,
    )


def test_only_gangs_created_before_count_for_the_minimum() -> None:
    """A (ahead of G) holds n1 until 10; B (created after G) took n2 at 2.5 and kept it until
    20, which is why G waited until 20. G's minimum is 10 - 1 = 9: B is ignored."""
    a = gang("a", 0.0, (span("n1", 8, 0.1, 10.0),))
    g = gang(
        "g",
        1.0,
        (span("n1", 8, 20.0, 30.0), span("n2", 8, 20.0, 30.0)),
        big=True,
    )
    b = gang("b", 2.0, (span("n2", 8, 2.5, 20.0),))
    figures = analyse([a, g, b], TWO_NODES, end=30.0)
    [big] = figures.big_gangs
    assert big.name == "g" and big.bound
    assert big.wait == pytest.approx(19.0)
    assert big.min_wait == pytest.approx(9.0)
    assert big.ratio == pytest.approx(19.0 / 9.0)
    assert not big.within_target
    assert figures.big_min_wait_max == pytest.approx(9.0)
    assert figures.big_within_target == 0
    assert figures.small_created == 2 and figures.small_bound == 2
    # the small gangs' waits: 0.1 and 0.5
    assert figures.small_wait_p50 == pytest.approx(0.3)


def test_the_minimum_serves_gangs_ahead_first_and_says_they_waited() -> None:
    """E (ahead of G, both nodes) waits for A until 10, then runs until 20; G (one node) cannot
    have either node before E is done with it: G's minimum is 20 - 2 = 18, and G waited 18."""
    a = gang("a", 0.0, (span("n1", 8, 0.0, 10.0),))
    e = gang("e", 1.0, (span("n1", 8, 10.0, 20.0), span("n2", 8, 10.0, 20.0)), big=True)
    g = gang("g", 2.0, (span("n1", 8, 20.0, 25.0),), big=True)
    figures = analyse([a, e, g], TWO_NODES, end=25.0)
    first, second = figures.big_gangs
    assert first.min_wait == pytest.approx(9.0) and first.ahead_waiting == 0
    assert second.min_wait == pytest.approx(18.0) and second.ahead_waiting == 0
    assert second.wait == pytest.approx(18.0) and second.within_target


def test_targets_and_the_ratio_floor() -> None:
    """No minimum wait: no ratio, and on target only within the latency allowance."""
    quick = gang("quick", 0.0, (span("n1", 8, 0.4, 5.0), span("n2", 8, 0.4, 5.0)), big=True)
    slow = gang("slow", 10.0, (span("n1", 8, 12.5, 20.0), span("n2", 8, 12.5, 20.0)), big=True)
    figures = analyse([quick, slow], TWO_NODES, end=20.0)
    first, second = figures.big_gangs
    assert first.min_wait == 0.0 and first.ratio is None and first.within_target
    assert second.min_wait == 0.0 and second.ratio is None and not second.within_target
    assert figures.big_ratio_p50 is None and figures.big_ratio_max is None
    assert figures.big_wait_max == pytest.approx(2.5)
    loose = analyse([quick, slow], TWO_NODES, end=20.0, targets=Targets(allowance=3.0))
    assert loose.big_within_target == 2


def test_an_unbound_big_gang_reports_its_wait_so_far() -> None:
    blocker = gang("a", 0.0, (span("n1", 8, 0.0, None), span("n2", 8, 0.0, 40.0)))
    stuck = gang("g", 5.0, (), big=True, size=2, request=WHOLE)
    figures = analyse([blocker, stuck], TWO_NODES, end=30.0)
    [big] = figures.big_gangs
    assert not big.bound and big.wait == pytest.approx(25.0)
    assert big.min_wait is None and big.ratio is None and not big.within_target
    assert figures.big_bound == 0 and figures.big_created == 1
    # n1 and n2 fully used while it waited
    assert figures.utilisation_while_waiting == pytest.approx(1.0)


# --- utilisation -------------------------------------------------------------------------------


def test_merge_joins_overlapping_windows() -> None:
    assert merge([(5.0, 15.0), (0.0, 10.0), (20.0, 25.0), (25.0, 26.0), (3.0, 3.0)]) == [
        (0.0, 15.0),
        (20.0, 26.0),
    ]
    assert merge([]) == []


def test_utilisation_over_overlapping_windows() -> None:
    """Union [0, 15]: 15 s of 8 GPUs. A holds 4 GPUs throughout (60 GPU-s); B holds 2 from 12,
    unfinished (6 GPU-s); C finished before the windows (nothing). 66 / 120."""
    spans = [span("n1", 4, 0.0, 20.0), span("n2", 2, 12.0, None), span("n2", 8, -5.0, -1.0)]
    windows = [(0.0, 10.0), (5.0, 15.0)]
    assert utilisation(spans, windows, capacity=8, end=30.0) == pytest.approx(66 / 120)


def test_utilisation_over_disjoint_windows_and_degenerate_cases() -> None:
    spans = [span("n1", 8, 0.0, 10.0)]
    # windows [0, 2] and [8, 12]: 4 s busy of 6 s, all 8 GPUs
    assert utilisation(spans, [(0.0, 2.0), (8.0, 12.0)], 8, end=12.0) == pytest.approx(4 / 6)
    assert utilisation(spans, [], 8, end=12.0) == 0.0
    assert utilisation(spans, [(3.0, 3.0)], 8, end=12.0) == 0.0
    assert utilisation(spans, [(0.0, 1.0)], 0, end=12.0) == 0.0
    assert utilisation([span("n1", 0, 0.0, None)], [(0.0, 1.0)], 8, end=1.0) == 0.0


# --- over-commit ------------------------------------------------------------------------------


def test_overcommit_counts_only_unfinished_pods() -> None:
    handover = [span("n1", 8, 0.0, 5.0), span("n1", 8, 5.0, None)]  # at 5: released, then taken
    assert overcommitted_during(TWO_NODES, handover) == []
    double = [span("n1", 8, 0.0, 5.0), span("n1", 1, 4.0, None), span("n2", 8, 0.0, None)]
    assert overcommitted_during(TWO_NODES, double) == ["n1"]
    cpu = [span("n2", 1, 0.0, None, cpu=40_000), span("n2", 1, 1.0, None, cpu=30_000)]
    assert overcommitted_during(TWO_NODES, cpu) == ["n2"]


# --- percentiles -------------------------------------------------------------------------------


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([7.0], 0.95) == 7.0
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 0.5) == 3.0
    assert percentile(values, 0.95) == pytest.approx(4.8)
    assert percentile(values, 1.0) == 5.0
    assert percentile([1.0, 2.0], 0.5) == pytest.approx(1.5)
