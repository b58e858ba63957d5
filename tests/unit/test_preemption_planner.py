"""The preemption planner and the budget counter as pure functions on a cache (no I/O).

The HTTP scenarios (tests/scheduler/test_preemption.py) show the whole flow; these pin the
decision's order of criteria and kube-scheduler's PodDisruptionBudget arithmetic
(``filterPodsWithPDBViolation``) case by case.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gang.models.podgroup import parse_podgroup
from gang.models.settings import ScoreWeights
from gang.scheduling.gang import Gang, GangKey
from gang.scheduling.placement import Placer
from gang.scheduling.preemption import NOT_ELIGIBLE, Plan, Planner, Request
from gang.state.cache import ClusterCache
from gang.state.disruption import DisruptionBudgets
from gang.state.podinfo import PodInfo, parse_pod

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {
                "cpu": "64",
                "memory": "256Gi",
                "nvidia.com/gpu": str(gpus),
                "pods": "110",
            }
        },
    }


def pod(
    name: str,
    group: str | None,
    priority: int,
    gpus: int = 1,
    node_name: str = "",
    started: str = "2026-01-01T00:00:00Z",
    labels: dict[str, str] | None = None,
    never: bool = False,
) -> PodInfo:
    spec: dict[str, Any] = {
        "schedulerName": "gang-scheduler",
        "priority": priority,
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": str(gpus)}}}
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    if never:
        spec["preemptionPolicy"] = "Never"
    all_labels = {**(labels or {}), **({GROUP_LABEL: group} if group else {})}
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": "default", "uid": name, "labels": all_labels},
            "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending", "startTime": started},
        }
    )


class World:
    def __init__(self, nodes: int, gpus: int = 8) -> None:
        self.cache = ClusterCache()
        for i in range(nodes):
            self.cache.upsert_node(node(f"n{i}", gpus))
        self.podgroups: dict[tuple[str, str], Any] = {}
        self.placer = Placer(self.cache.index, ScoreWeights(), "topology.kubernetes.io/zone")

    def gang(
        self,
        name: str,
        size: int,
        priority: int,
        nodes: list[str],
        min_member: int | None = None,
        started: str = "2026-01-01T00:00:00Z",
        gpus: int = 1,
        labels: dict[str, str] | None = None,
    ) -> list[PodInfo]:
        self.podgroups[("default", name)] = parse_podgroup(
            {
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"minMember": min_member or size},
            }
        )
        pods = [
            pod(f"{name}-{i}", name, priority, gpus, nodes[i % len(nodes)], started, labels)
            for i in range(size)
        ]
        for p in pods:
            self.cache.upsert_pod(p)
        return pods

    def plan(
        self, size: int, priority: int, gpus: int = 1, never: bool = False
    ) -> Plan | str | None:
        members = [pod(f"high-{i}", "high", priority, gpus, never=never) for i in range(size)]
        gang = Gang(GangKey("default", "high"), None, "gang-scheduler")
        for member in members:
            gang.members[member.key] = member
            for name, _ in member.requests.items():
                self.cache.index.column(name)
        request = Request(
            gang, members, size, [], self.cache.snapshot, self.placer, self.cache, self.podgroups
        )
        return Planner(request, 64).plan()


def victims(plan: Plan | str | None) -> dict[str, int]:
    assert isinstance(plan, Plan), plan
    return {v.group or v.pods[0].name: len(v.pods) for v in plan.victims}


def test_the_lowest_priority_level_that_suffices_even_if_it_costs_more_pods() -> None:
    world = World(2)
    world.gang("cheap-but-higher", 4, priority=50, nodes=["n0"])
    world.gang("bigger-but-lower", 8, priority=10, nodes=["n1"])
    world.gang("fill", 4, priority=50, nodes=["n0"])
    assert victims(world.plan(4, priority=100)) == {"bigger-but-lower": 8}


def test_fewest_pods_then_most_recently_started() -> None:
    world = World(3)
    world.gang("old-small", 8, 10, ["n0"], started="2026-01-01T00:00:00Z")
    world.gang("new-small", 8, 10, ["n1"], started="2026-01-02T00:00:00Z")
    world.gang("big", 8, 10, ["n2"], started="2026-01-03T00:00:00Z", gpus=1)
    plan = world.plan(8, priority=100)
    assert victims(plan) == {"big": 8}  # all equal in pods and GPUs: the newest goes
    assert isinstance(plan, Plan) and plan.victims[0].whole


def test_an_elastic_victim_gives_up_members_above_its_quorum_only() -> None:
    world = World(2)
    world.gang("elastic", 12, 10, ["n0", "n1"], min_member=4)
    world.gang("rigid", 4, 10, ["n0", "n1"])
    plan = world.plan(8, priority=100)
    assert victims(plan) == {"elastic": 8}
    assert isinstance(plan, Plan) and not plan.victims[0].whole


def test_no_victim_is_left_below_min_member_when_more_is_needed() -> None:
    world = World(2)
    world.gang("elastic", 16, 10, ["n0", "n1"], min_member=12)
    plan = world.plan(8, priority=100)  # 4 extras are not enough: the gang goes whole
    assert victims(plan) == {"elastic": 16}


def test_a_budget_keeping_set_comes_before_fewer_pods() -> None:
    world = World(2)
    world.gang("protected", 4, 10, ["n0"], labels={"app": "p"})
    world.gang("fill", 4, 10, ["n0"], started="2026-01-05T00:00:00Z")
    world.gang("open", 8, 10, ["n1"])
    world.cache.budgets.upsert(
        "PodDisruptionBudget",
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "p"}}},
            "status": {"disruptionsAllowed": 0},
        },
    )
    plan = world.plan(8, priority=100)
    assert victims(plan) == {"open": 8}
    assert isinstance(plan, Plan) and not plan.past_budget


def test_past_a_budget_when_nothing_else_fits_and_it_is_marked() -> None:
    world = World(1)
    protected = world.gang("protected", 8, 10, ["n0"], labels={"app": "p"})
    world.cache.budgets.upsert(
        "PodDisruptionBudget",
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "p"}}},
            "status": {"disruptionsAllowed": 2},
        },
    )
    plan = world.plan(8, priority=100)
    assert isinstance(plan, Plan)
    assert len(plan.past_budget) == 6  # two evictions are allowed, six overdraw it
    assert plan.past_budget <= {p.key for p in protected}


def test_never_equal_priority_and_hopeless_gangs() -> None:
    world = World(1)
    world.gang("low", 8, 10, ["n0"])
    assert world.plan(8, priority=100, never=True) == NOT_ELIGIBLE
    assert world.plan(8, priority=10) is None  # nobody lower: nothing to say
    hopeless = world.plan(16, priority=100)
    assert isinstance(hopeless, str) and "cannot help" in hopeless


def test_terminating_pods_are_waited_for_rather_than_preempting_more() -> None:
    world = World(1)
    pods = world.gang("low", 8, 10, ["n0"])
    for p in pods:
        world.cache.upsert_pod(dataclasses.replace(p, deleting=True))
    outcome = world.plan(8, priority=100)
    assert isinstance(outcome, str) and "not needed" in outcome


def test_a_gang_with_members_placed_but_not_bound_is_no_victim() -> None:
    """``placing`` has 8 members bound on n0 and 8 more reserved on n1 (in Permit, or binding):
    evicting the bound half would leave it partial once the others bind, so it is no victim
    while they are placed but not bound; once they are not, it goes whole."""
    world = World(2)
    world.gang("placing", 8, 10, ["n0"], min_member=16)
    reserved = [pod(f"placing-{i}", "placing", 10) for i in range(8, 16)]
    for p in reserved:
        world.cache.assume(p, "n1")
    assert not isinstance(world.plan(8, priority=100), Plan)
    for p in reserved:
        world.cache.forget(p.key)
    world.gang("above", 8, 200, ["n1"])  # n1 full again, with nobody the preemptor may take
    assert victims(world.plan(8, priority=100)) == {"placing": 8}


# --- kube-scheduler's filterPodsWithPDBViolation, case by case ---------------------------------


def budgets(*specs: tuple[str, dict[str, Any] | None, int, list[str]]) -> DisruptionBudgets:
    catalog = DisruptionBudgets()
    for name, selector, allowed, disrupted in specs:
        catalog.upsert(
            "PodDisruptionBudget",
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"selector": selector} if selector is not None else {},
                "status": {
                    "disruptionsAllowed": allowed,
                    "disruptedPods": {p: "2026-01-01T00:00:00Z" for p in disrupted},
                },
            },
        )
    return catalog


def test_budget_counter_follows_kube_scheduler() -> None:
    a = [pod(f"a{i}", None, 0, labels={"app": "a"}) for i in range(3)]
    catalog = budgets(("pa", {"matchLabels": {"app": "a"}}, 1, []))
    assert catalog.violations(a) == 2  # one allowed, two overdraw
    catalog = budgets(("pa", {"matchLabels": {"app": "a"}}, 1, ["a0"]))
    assert catalog.violations(a) == 1  # a0 is already granted: it does not count again
    catalog = budgets(("empty", {}, 0, []))
    assert catalog.violations(a) == 0  # an empty selector selects nothing for the scheduler
    catalog = budgets(("none", None, 0, []))
    assert catalog.violations(a) == 0
    catalog = budgets(
        ("pa", {"matchLabels": {"app": "a"}}, 0, []), ("pb", {"matchLabels": {"app": "b"}}, 0, [])
    )
    assert catalog.violations(a) == 3
    other_namespace = DisruptionBudgets()
    other_namespace.upsert(
        "PodDisruptionBudget",
        {
            "metadata": {"name": "pa", "namespace": "elsewhere"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}},
            "status": {"disruptionsAllowed": 0},
        },
    )
    assert other_namespace.violations(a) == 0


def test_a_gang_partly_marked_by_a_cut_short_preemption_is_no_victim() -> None:
    """Two of a 3-pod gang carry another scheduler process's victim marks (its preemption was
    cut short; recovery may withdraw them): its last member must not be taken as a gang of
    its own. Found by ``gang chaos --mode reclaim`` (seed 3): the withdrawal left it 2 of 3."""
    world = World(2, gpus=4)
    marked = world.gang("half-marked", 3, 10, ["n0"], min_member=3)
    world.gang("other", 4, 10, ["n1"])
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "a preemption decided before a restart",
    }
    for info in marked[:2]:
        raw = {
            "metadata": {
                "name": info.name,
                "namespace": "default",
                "uid": info.uid,
                "labels": {GROUP_LABEL: "half-marked"},
            },
            "spec": {
                "schedulerName": "gang-scheduler",
                "priority": 10,
                "nodeName": "n0",
                "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Running", "conditions": [condition]},
        }
        world.cache.upsert_pod(parse_pod(raw))
    assert world.cache.pods[("default", "half-marked-0")].info.preemption_marked  # type: ignore[union-attr]
    # n0: its free GPU and the 2 marked ones (counted as leaving) hold 3 of the 4 pods; the
    # last member there would be the cheaper victim, were it a gang of its own
    plan = world.plan(4, priority=100)
    assert victims(plan) == {"other": 4}
