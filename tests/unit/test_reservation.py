"""Reservation as pure functions: run-time estimates, the node choice, and the book's bounds.

The HTTP scenarios (tests/scheduler/test_reservation.py) show the whole flow with pods really
finishing; these pin the arithmetic case by case.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from gang.models.settings import ScoreWeights
from gang.scheduling.gang import Gang, GangKey, Reservation
from gang.scheduling.placement import Placer
from gang.scheduling.reservation import (
    NEVER_FITS,
    UNDECLARED_FLOOR_SECONDS,
    NoReservation,
    ReservationBook,
    ReservationPlanner,
    ReservePlan,
    apply_holds,
    declared_run,
    expected_end,
    held_share,
    ready_time,
    refreshed_start,
    slip_margin,
    slipped,
)
from gang.scheduling.trials import Trials, usable
from gang.state.cache import ClusterCache
from gang.state.podinfo import EXPECTED_RUN_ANNOTATION, PodInfo, parse_pod

NOW = 1_800_000_000.0  # epoch seconds
START = "2027-01-15T08:00:00Z"  # == NOW


def pod(
    name: str,
    gpus: int = 1,
    node: str = "",
    run: float | None = None,
    deadline: int | None = None,
    started: str = START,
    phase: str | None = None,
    group: str = "",
) -> PodInfo:
    spec: dict[str, Any] = {
        "schedulerName": "gang-scheduler",
        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if node:
        spec["nodeName"] = node
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name}
    if run is not None:
        meta["annotations"] = {EXPECTED_RUN_ANNOTATION: str(run)}
    if group:
        meta["labels"] = {"scheduling.x-k8s.io/pod-group": group}
    status = {"phase": phase or ("Running" if node else "Pending"), "startTime": started}
    return parse_pod({"metadata": meta, "spec": spec, "status": status})


def test_start_is_now() -> None:
    assert pod("p", node="n", run=1).start_time == NOW


# --- estimates -----------------------------------------------------------------------------------


def test_declared_run_time_counts_from_the_start() -> None:
    assert expected_end(pod("p", node="n", run=100), NOW + 30) == NOW + 100


def test_active_deadline_is_a_declaration_and_the_smaller_wins() -> None:
    assert pod("p", deadline=50).declared_run == 50
    assert pod("p", run=80, deadline=50).declared_run == 50
    assert pod("p", run=20, deadline=50).declared_run == 20


def test_an_overdue_pod_is_expected_now() -> None:
    assert expected_end(pod("p", node="n", run=10), NOW + 30) == NOW + 30


def test_an_undeclared_pod_runs_as_long_again_at_least_the_floor() -> None:
    assert expected_end(pod("p", node="n"), NOW + 300) == NOW + 600
    assert expected_end(pod("p", node="n"), NOW + 5) == NOW + 5 + UNDECLARED_FLOOR_SECONDS


def test_a_pod_not_started_yet_starts_now_and_a_deleting_one_goes_now() -> None:
    waiting = pod("p", node="n", run=10, phase="Pending")
    assert expected_end(waiting, NOW + 100) == NOW + 110
    going = dataclasses.replace(pod("p", node="n", run=1000), deleting=True)
    assert expected_end(going, NOW + 1) == NOW + 1


def test_a_gang_declares_a_run_time_only_if_every_member_does() -> None:
    assert declared_run([pod("a", run=5), pod("b", run=9)]) == 9
    assert declared_run([pod("a", run=5), pod("b")]) is None


@pytest.mark.parametrize("text", ["soon", "-3", "0", "nan", "inf"])
def test_a_malformed_annotation_is_ignored_with_a_reason(text: str) -> None:
    raw = {
        "metadata": {"name": "p", "namespace": "d", "annotations": {EXPECTED_RUN_ANNOTATION: text}},
        "spec": {"containers": []},
    }
    info = parse_pod(raw)
    assert info.declared_run is None
    assert (
        EXPECTED_RUN_ANNOTATION in info.declared_run_error and "ignored" in info.declared_run_error
    )


def test_ready_time_takes_pods_in_order_until_the_need_fits() -> None:
    room, need = np.array([2]), np.array([8])
    pods = [(NOW + 5, np.array([3])), (NOW + 9, np.array([3])), (NOW + 20, np.array([1]))]
    assert ready_time(room, need, pods, NOW) == (NOW + 9, 2)
    assert ready_time(np.array([8]), need, pods, NOW) == (NOW, 0)
    assert ready_time(np.array([0]), need, pods, NOW) is None


# --- the planner -----------------------------------------------------------------------------


class World:
    def __init__(self, nodes: int, gpus: int = 8) -> None:
        self.cache = ClusterCache()
        for i in range(nodes):
            self.cache.upsert_node(
                {
                    "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
                    "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "pods": "110"}},
                }
            )
        self.placer = Placer(self.cache.index, ScoreWeights(), "topology.kubernetes.io/zone")

    def run(self, name: str, node: str, gpus: int, run: float | None) -> None:
        self.cache.upsert_pod(pod(name, gpus, node, run))

    def plan(self, size: int, gpus: int, now: float = NOW) -> ReservePlan | NoReservation:
        members = [pod(f"big-{i}", gpus, group="big") for i in range(size)]
        gang = Gang(GangKey("default", "big"), None, "gang-scheduler")
        for member in members:
            gang.members[member.key] = member
            self.cache.index.vector(member.requests)
        trials = Trials(self.cache.snapshot(), members, size, [], self.placer, self.cache.index)
        return ReservationPlanner(trials, self.cache, gang.members, now).plan()


def test_the_nodes_that_free_soonest_are_held() -> None:
    world = World(4)
    for i, run in enumerate([40, 10, 30, 20]):
        world.run(f"p{i}", f"n{i}", 8, run)
    plan = world.plan(2, 8)
    assert isinstance(plan, ReservePlan)
    assert set(plan.held) == {"n1", "n3"}
    assert plan.start == NOW + 20 and plan.waiting_for == 2
    gpu = world.cache.index.column("nvidia.com/gpu")
    assert all(int(v[gpu]) == 8 for v in plan.held.values())


def test_fewest_pods_are_waited_for_on_a_node() -> None:
    """n0: 2 free GPUs, a 4-GPU pod ending at +10 and a 2-GPU pod at +50: a 6-GPU member
    waits for the first only."""
    world = World(1)
    world.run("a", "n0", 4, 10)
    world.run("b", "n0", 2, 50)
    plan = world.plan(1, 6)
    assert isinstance(plan, ReservePlan)
    assert plan.start == NOW + 10 and plan.waiting_for == 1


def test_a_gang_larger_than_the_cluster_gets_no_reservation() -> None:
    world = World(2)
    plan = world.plan(3, 8)
    assert plan == NoReservation(NEVER_FITS, never=True)


def test_capacity_assumed_for_others_is_not_waited_for() -> None:
    world = World(2)
    world.run("p0", "n0", 8, 10)
    world.cache.assume(pod("waiting", 8, group="other"), "n1")  # another gang's Permit wait
    plan = world.plan(2, 8)
    assert isinstance(plan, NoReservation) and not plan.never
    assert "held by other gangs" in plan.why


def test_holds_of_reservations_ahead_are_planned_around() -> None:
    world = World(3)
    for i, run in enumerate([10, 20, 30]):
        world.run(f"p{i}", f"n{i}", 8, run)
    first = world.plan(1, 8)
    assert isinstance(first, ReservePlan) and set(first.held) == {"n0"}
    ahead = Reservation(GangKey("default", "a"), (0,), first.held, first.start, NOW, NOW + 60, 1)
    snap = apply_holds(world.cache.snapshot(), [ahead], world.cache)
    gpu = world.cache.index.column("nvidia.com/gpu")
    assert snap.free[world.cache.row_of("n0"), gpu] == 0
    members = [pod("b-0", 8, group="b")]
    trials = Trials(snap, members, 1, [], world.placer, world.cache.index)
    second = ReservationPlanner(trials, world.cache, {}, NOW).plan()
    assert isinstance(second, ReservePlan) and set(second.held) == {"n1"}


def plan_behind(world: World, ahead: list[Reservation], gpus: int = 8) -> Any:
    """A one-member gang's plan behind the reservations ``ahead`` (their holds applied)."""
    snap = apply_holds(world.cache.snapshot(), ahead, world.cache)
    members = [pod("b-0", gpus, group="b")]
    trials = Trials(snap, members, 1, [], world.placer, world.cache.index)
    return ReservationPlanner(trials, world.cache, {}, NOW, ahead).plan()


def test_a_hold_ahead_comes_free_once_its_gang_has_run() -> None:
    """n0's pod ends at +10 and a reservation ahead holds n0 from then for a 5 s run; n1's
    pod ends at +100. Behind it, a gang is planned onto n0 from +15 — not onto n1 at +100,
    as if the hold ahead never ended."""
    world = World(2)
    world.run("p0", "n0", 8, 10)
    world.run("p1", "n1", 8, 100)
    first = world.plan(1, 8)
    assert isinstance(first, ReservePlan) and set(first.held) == {"n0"}
    ahead = Reservation(
        GangKey("default", "a"), (0,), first.held, first.start, NOW, NOW + 60, 1, run=5.0
    )
    second = plan_behind(world, [ahead])
    assert isinstance(second, ReservePlan) and set(second.held) == {"n0"}
    assert second.start == NOW + 15 and second.waiting_for == 2  # the pod, then the hold


def test_a_gang_behind_holds_on_every_node_is_still_planned() -> None:
    """A one-node cluster held ahead: the gang behind waits for the hold, not refused as if
    the node were held for ever. An undeclared gang ahead frees its hold after the floor."""
    world = World(1)
    world.run("p0", "n0", 8, 10)
    first = world.plan(1, 8)
    assert isinstance(first, ReservePlan)
    ahead = Reservation(GangKey("default", "a"), (0,), first.held, first.start, NOW, NOW + 60, 1)
    second = plan_behind(world, [ahead])
    assert isinstance(second, ReservePlan)
    assert second.start == NOW + 10 + UNDECLARED_FLOOR_SECONDS


def test_a_refreshed_start_waits_for_the_holds_ahead_on_its_nodes() -> None:
    """n0: 2 GPUs free, a 6-GPU pod ending at +4; a reservation ahead holds all 8 GPUs for a
    5 s run. A 2-GPU reservation behind it there starts when that hold ends (+9), not now:
    refreshed without the hold, it looked due at once and refused backfill that would have
    ended in time."""
    world = World(1)
    world.run("p0", "n0", 6, 4)
    gpu = world.cache.index.column("nvidia.com/gpu")
    whole = np.zeros(gpu + 1, dtype=np.int64)
    whole[gpu] = 8
    ahead = Reservation(
        GangKey("default", "a"), (0,), {"n0": whole}, NOW + 4, NOW, NOW + 60, 1, run=5.0
    )
    behind = Reservation(
        GangKey("default", "b"), (1,), {"n0": whole // 4}, NOW, NOW, NOW + 60, 0, run=60.0
    )
    assert refreshed_start(behind, world.cache, NOW) == (NOW, 0)
    assert refreshed_start(behind, world.cache, NOW, [ahead]) == (NOW + 9, 2)


def test_a_reservations_start_is_refreshed_from_the_pods_on_its_nodes() -> None:
    world = World(1)
    world.run("p0", "n0", 8, 10)
    plan = world.plan(1, 8)
    assert isinstance(plan, ReservePlan)
    res = Reservation(GangKey("default", "big"), (0,), plan.held, plan.start, NOW, NOW + 60, 1)
    world.cache.remove_pod(("default", "p0"))
    assert refreshed_start(res, world.cache, NOW + 3) == (NOW + 3, 0)
    world.run("p1", "n0", 8, 100)  # someone else's pod appeared there after all
    assert refreshed_start(res, world.cache, NOW + 3) == (NOW + 100, 1)
    world.cache.remove_node("n0")
    assert refreshed_start(res, world.cache, NOW + 3) is None


def test_a_backfill_placed_on_a_reserved_node_delays_the_start_and_keeps_the_reservation() -> None:
    """A gang placed on held capacity since (backfill, or a gang ahead) is only *assumed*
    until the informer shows it bound; it ends its declared run from now like a bound pod.
    Leaving it out made the node look as if it could never hold the share again: the
    reservation was dropped and planned afresh elsewhere, its wait starting over."""
    world = World(1)
    world.run("p0", "n0", 4, 10)
    plan = world.plan(1, 8)
    assert isinstance(plan, ReservePlan) and plan.start == NOW + 10
    res = Reservation(GangKey("default", "big"), (0,), plan.held, plan.start, NOW, NOW + 60, 1)
    world.cache.assume(pod("backfill", 4, run=5), "n0")
    assert refreshed_start(res, world.cache, NOW) == (NOW + 10, 2)


# --- the book -------------------------------------------------------------------------------


def reservation(
    name: str, rank: int, nodes: list[str], start: float = NOW + 60, share: float = 0.1
) -> Reservation:
    held = {n: np.array([8]) for n in nodes}
    return Reservation(GangKey("default", name), (rank,), held, start, NOW, NOW + 600, 1, share)


def book_with(*reservations: Reservation, limit: int = 2, share: float = 0.5) -> ReservationBook:
    book = ReservationBook(limit, share)
    for res in reservations:
        book.add(Gang(res.gang), res)
    return book


def test_a_reservation_slips_past_its_margin_and_then_is_looked_at_once_per_interval() -> None:
    res = reservation("a", 5, ["n0"], start=NOW + 60)  # made at NOW, planned to start in 60 s
    assert res.planned == NOW + 60 and slip_margin(res) == 6.0  # a tenth of the planned wait
    res.start = NOW + 66
    assert not slipped(res, NOW + 1)  # within the margin
    res.start = NOW + 66.5
    assert slipped(res, NOW + 1)
    res.replan_after = NOW + 4
    assert not slipped(res, NOW + 3) and slipped(res, NOW + 4)
    soon = reservation("b", 6, ["n1"], start=NOW + 2)
    assert slip_margin(soon) == 1.0  # never less than a second
    soon.start = NOW + 2.5
    assert not slipped(soon, NOW + 0.5)


def test_a_move_takes_the_new_nodes_and_start_but_keeps_the_expiry() -> None:
    res = reservation("a", 5, ["n0", "n1"], start=NOW + 60)
    book = book_with(res)
    version = book.version
    plan = ReservePlan({"n2": np.array([8]), "n3": np.array([8])}, NOW + 20, 3, 4)
    book.move(res, plan, 0.25)
    assert res.nodes == ["n2", "n3"] and res.start == res.planned == NOW + 20
    assert (res.waiting_for, res.share, res.moves) == (3, 0.25, 1)
    assert (res.made, res.expires) == (NOW, NOW + 600)
    assert book.moved == 1 and book.version > version and book.held_nodes() == {"n2", "n3"}


def test_holds_apply_only_to_gangs_behind_and_backfill_is_by_declared_end() -> None:
    book = book_with(reservation("a", 5, ["n0"], start=NOW + 60))
    behind, ahead = Gang(GangKey("default", "b")), Gang(GangKey("default", "c"))
    assert book.against(ahead, (1,), None, NOW) == ([], [])
    holding, backfill = book.against(behind, (9,), None, NOW)
    assert [r.gang.group for r in holding] == ["a"] and backfill == []
    holding, backfill = book.against(behind, (9,), 60.0, NOW)
    assert holding == [] and [r.gang.group for r in backfill] == ["a"]
    holding, backfill = book.against(behind, (9,), 61.0, NOW)
    assert [r.gang.group for r in holding] == ["a"] and backfill == []


def whole(world: World, *nodes: str) -> dict[str, Any]:
    """Holds of every GPU of ``nodes``."""
    return {n: world.cache.index.vector({"nvidia.com/gpu": 8}) for n in nodes}


def held_by(world: World, name: str, rank: int, *nodes: str) -> Reservation:
    return Reservation(
        GangKey("default", name), (rank,), whole(world, *nodes), NOW + 60, NOW, NOW + 600, 1
    )


def measured(world: World) -> Any:
    return lambda holds: held_share(holds, world.cache)


def test_the_limit_and_the_share_bound_reservations_in_queue_order() -> None:
    world = World(4)  # each node is 25% of the GPUs
    measure = measured(world)
    book = book_with(held_by(world, "a", 1, "n0"), held_by(world, "b", 5, "n1"))
    # full (2 reservations): a gang behind both is refused before planning ...
    assert book.room_for((9,), measure) is not None
    # ... one between them takes the place of the one behind it
    assert book.room_for((3,), measure) is None
    yielding = book.admit(GangKey("default", "c"), (3,), whole(world, "n2"), measure)
    assert isinstance(yielding, list) and [r.gang.group for r in yielding] == ["b"]
    # never more than the share of the cluster, even alone
    too_big = whole(world, "n0", "n1", "n2")
    assert "more than the 50%" in str(book.admit(GangKey("default", "d"), (0,), too_big, measure))


def test_the_share_counts_what_reservations_ahead_hold() -> None:
    world = World(4)
    measure = measured(world)
    book = book_with(held_by(world, "a", 1, "n0", "n1"), limit=4, share=0.75)
    assert book.room_for((5,), measure) is None
    assert book.admit(GangKey("default", "b"), (5,), whole(world, "n2"), measure) == []  # 75%
    assert isinstance(
        book.admit(GangKey("default", "b"), (5,), whole(world, "n2", "n3"), measure), str
    )
    full = book_with(held_by(world, "a", 1, "n0", "n1", "n2"), share=0.75)
    assert full.room_for((5,), measure) is not None


def test_holds_stacked_on_one_node_count_once() -> None:
    """Three gangs queued for n0's 8 GPUs hold them one after another, not three times over:
    with 25% held, a fourth gang wanting n1 is admitted under a 50% share."""
    world = World(4)
    measure = measured(world)
    book = book_with(
        held_by(world, "a", 1, "n0"),
        held_by(world, "b", 2, "n0"),
        held_by(world, "c", 3, "n0"),
        limit=8,
        share=0.5,
    )
    assert measure(r.held for r in book.by_gang.values()) == 0.25
    assert book.room_for((9,), measure) is None
    assert book.admit(GangKey("default", "d"), (9,), whole(world, "n1"), measure) == []
    assert isinstance(
        book.admit(GangKey("default", "d"), (9,), whole(world, "n1", "n2"), measure), str
    )


def test_a_share_is_the_scarcest_resource_held() -> None:
    cache = ClusterCache()
    for name in ("n0", "n1"):
        cache.upsert_node(
            {
                "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": "4", "pods": "110"}},
            }
        )
    alloc = cache.allocatable[cache.row_of("n0")]
    gpu, cpu = cache.index.column("nvidia.com/gpu"), cache.index.column("cpu")
    half_gpus = np.zeros_like(alloc)
    half_gpus[gpu], half_gpus[cpu] = 4, alloc[cpu] // 8
    assert held_share([{"n0": half_gpus}], cache) == 0.5  # all of one node's GPUs: half
    cpus = np.zeros_like(alloc)
    cpus[cpu] = alloc[cpu] * 3 // 4
    assert held_share([{"n0": cpus}, {"n1": cpus}], cache) == 0.75  # cpu is scarcest
    assert held_share([{"n0": cpus}, {"n0": cpus}], cache) == 0.5  # one node: at most all of it


def test_drop_keeps_the_gang_and_the_book_in_step() -> None:
    res = reservation("a", 1, ["n0"])
    gang = Gang(res.gang)
    book = ReservationBook()
    book.add(gang, res)
    assert gang.reservation is res and len(book) == 1
    version = book.version
    assert book.drop(gang) is res
    assert gang.reservation is None and len(book) == 0 and book.version > version
    assert book.drop(gang) is None


def test_what_a_gang_held_itself_is_not_held_against_it() -> None:
    """A gang re-planning its placeholders keeps their capacity even on a held node."""
    world = World(1)
    hold = {"n0": world.cache.index.vector({"nvidia.com/gpu": 8})}
    ahead = Reservation(GangKey("default", "a"), (0,), hold, NOW, NOW, NOW + 60, 0)
    gpu = world.cache.index.column("nvidia.com/gpu")
    mine = pod("mine-0", 3)
    snap = apply_holds(world.cache.snapshot(), [ahead], world.cache, [(mine, "n0")])
    assert snap.free[0, gpu] == 3  # its own 3 GPUs, nothing of the 5 others
    assert apply_holds(world.cache.snapshot(), [ahead], world.cache).free[0, gpu] == 0


@pytest.mark.parametrize(
    ("unheld", "held", "kept", "expected"),
    [
        ([8], [8], None, [0]),  # held for another gang: nothing left
        ([8], [8], [4], [4]),  # its own dropped placeholder is exempt from the hold
        ([8], [2], [4], [6]),  # the hold takes only from what is not its own
        ([0], [8], [4], [0]),  # a dropped nomination whose victims still run frees nothing
        ([2], [8], [4], [2]),  # ... or only what has already been freed
        ([-2], [1], [4], [-2]),  # over-committed stays over-committed
    ],
)
def test_usable_never_exceeds_the_real_free(
    unheld: list[int], held: list[int], kept: list[int] | None, expected: list[int]
) -> None:
    got = usable(np.array(unheld), np.array(held), None if kept is None else np.array(kept))
    assert got.tolist() == expected
