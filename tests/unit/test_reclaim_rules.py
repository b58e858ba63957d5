"""Reclaim's rules (``gang.queue.reclaim``) case by case, and the queue ledger they read.

The reference tables (``test_reclaimable_reference``, ``test_reclaim_reference``) check the rules
against KAI's and Kueue's answers; these pin each rule alone, with the numbers chosen so only
that rule decides, and the ledger's holdings that feed them on a deeper tree.
"""

from __future__ import annotations

import pytest

from gang.bench.queueload import KAI, QueueDef, queue_objects
from gang.queue.reclaim import QueueState, Reclaim
from tests.unit.reclaim_world import World

GPU = "nvidia.com/gpu"


def _flat(**queues: tuple[float, float]) -> dict[str, QueueState]:
    """Top-level queues: name → (GPUs held, GPU fair share)."""
    return {
        name: QueueState(name, None, {GPU: held}, {GPU: fair})
        for name, (held, fair) in queues.items()
    }


def test_a_queue_takes_back_only_up_to_its_fair_share() -> None:
    queues = _flat(a=(128, 64), b=(56, 64))
    assert Reclaim(queues, "b", {GPU: 8}).refusal() is None
    refusal = Reclaim(queues, "b", {GPU: 16}).refusal()
    assert refusal is not None and "would hold 72 GPUs of its fair share 64 GPUs" in refusal


def test_victims_come_only_from_queues_above_their_fair_share() -> None:
    rules = Reclaim(_flat(a=(128, 64), b=(0, 64), c=(60, 64)), "b", {GPU: 8})
    assert rules.may_lose("a") and not rules.may_lose("c") and not rules.may_lose("b")


def test_a_victim_queue_keeps_its_fair_share() -> None:
    rules = Reclaim(_flat(a=(72, 64), b=(0, 64)), "b", {GPU: 8})
    assert rules.allows({"a": {GPU: 8}})
    why = rules.why_not({"a": {GPU: 16}})
    assert why == "queue a would go below its fair share"


def test_a_victim_queue_keeps_its_guarantee() -> None:
    a = QueueState("a", None, {GPU: 24}, {GPU: 16}, guarantee={GPU: 20})
    rules = Reclaim({"a": a, "b": QueueState("b", None, {}, {GPU: 16})}, "b", {GPU: 8})
    assert rules.allows({"a": {GPU: 4}})
    assert rules.why_not({"a": {GPU: 8}}) == f"queue a would go below its guarantee of {GPU}"


def test_a_queue_not_reclaimable_is_never_a_victim() -> None:
    queues = _flat(a=(128, 64), b=(0, 64))
    queues["a"] = QueueState("a", None, {GPU: 128}, {GPU: 64}, reclaimable=False)
    assert not Reclaim(queues, "b", {GPU: 8}).may_lose("a")


def test_where_branches_meet_the_reclaiming_side_may_not_end_above_the_victim_side() -> None:
    """Departments d1 (the reclaimer's) and d2 share the root. d1 would end at 1.5 times its
    fair share, above d2's 1.25: taking would only move the imbalance, so it is refused; with
    d2 further above its share, it is allowed."""

    def tree(d2_held: float) -> dict[str, QueueState]:
        return {
            "d1": QueueState("d1", None, {GPU: 8}, {GPU: 6}),
            "d2": QueueState("d2", None, {GPU: d2_held}, {GPU: 8}),
            "p1": QueueState("p1", "d1", {GPU: 0}, {GPU: 3}),
            "p2": QueueState("p2", "d2", {GPU: d2_held}, {GPU: 4}),
        }

    why = Reclaim(tree(11), "p1", {GPU: 1}).why_not({"p2": {GPU: 1}})
    assert why is not None and why.startswith("queue d1 would stand above queue d2")
    assert Reclaim(tree(14), "p1", {GPU: 1}).allows({"p2": {GPU: 1}})


def test_shares_are_measured_over_the_contended_resources_the_reclaimer_asks_for() -> None:
    """cpu is plentiful (every queue's fair share of it is its demand): taking a's pods takes
    its cpu below that, which must not count as going below its fair share."""
    a = QueueState("a", None, {GPU: 8, "cpu": 8000}, {GPU: 4, "cpu": 8000})
    b = QueueState("b", None, {}, {GPU: 4, "cpu": 4000})
    taken = {"a": {GPU: 4, "cpu": 4000}}
    assert Reclaim({"a": a, "b": b}, "b", {GPU: 4, "cpu": 4000}, ["nvidia.com/gpu"]).allows(taken)
    every = Reclaim({"a": a, "b": b}, "b", {GPU: 4, "cpu": 4000})  # cpu counted too
    assert every.allows(taken)  # still: a's GPUs keep it at its share in its dominant resource
    assert every.order("a") < every.order("b")


def test_a_queue_with_a_fair_share_of_nothing_may_lose_everything() -> None:
    rules = Reclaim(_flat(a=(4, 0), b=(0, 4)), "b", {GPU: 4})
    assert rules.may_lose("a") and rules.allows({"a": {GPU: 4}})


def test_victim_queues_are_ordered_furthest_above_their_share_first() -> None:
    rules = Reclaim(_flat(a=(96, 64), c=(80, 40), b=(0, 24)), "b", {GPU: 8})
    assert sorted(["a", "c"], key=rules.order) == ["c", "a"]


# --- the ledger that feeds the rules --------------------------------------------------------


def _bound_pod(name: str, queue: str, node: str) -> dict[str, object]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": name,
            "labels": {"kai.scheduler/queue": queue},
        },
        "spec": {
            "schedulerName": "gang-scheduler",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {GPU: "2"}}}],
        },
        "status": {"phase": "Running"},
    }


@pytest.mark.asyncio
async def test_running_pods_count_once_for_their_queue_and_once_for_each_parent() -> None:
    """A three-level tree with running pods arriving before any cycle (a restart): each leaf
    holds its pods, each parent its leaves once (not its children's sums again), and the
    default queue nothing it never had."""
    node = {
        "metadata": {"name": "n0"},
        "status": {"allocatable": {GPU: "16", "cpu": "64", "pods": "110"}},
    }
    queues = queue_objects(
        KAI,
        [
            QueueDef("org"),
            QueueDef("dept", parent="org"),
            QueueDef("team-1", parent="dept"),
            QueueDef("team-2", parent="dept"),
        ],
    )
    pods = [
        _bound_pod("p1", "team-1", "n0"),
        _bound_pod("p2", "team-1", "n0"),
        _bound_pod("p3", "team-2", "n0"),
    ]
    world = World([node], queues, [], pods)
    ledger = world.state.ledger
    ledger.check()  # default holds nothing it has no gang for
    picture = ledger._picture_now()
    assert picture.held["kai/team-1"][GPU] == 4 and picture.held["kai/team-2"][GPU] == 2
    assert picture.held["kai/dept"][GPU] == 6 and picture.held["kai/org"][GPU] == 6
    assert GPU not in picture.held.get("default", {})
