"""The invariant checker (``gang.bench.invariants``) itself: it must see each kind of violation."""

from __future__ import annotations

from typing import Any

from gang.bench.invariants import judge

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def node(name: str, gpu: int = 8, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {
            "allocatable": {
                "cpu": "32",
                "memory": "64Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpu),
            }
        },
    }


def pod(name: str, group: str | None, gpu: int, node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "gang-scheduler",
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpu)}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    labels = {GROUP_LABEL: group} if group else {}
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": spec}


def group(name: str, min_member: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"minMember": min_member}}


def test_a_whole_gang_and_a_gang_that_does_not_fit_are_clean() -> None:
    pods = [pod(f"a-{i}", "a", 4, f"n{i}") for i in range(2)]
    pods += [pod(f"b-{i}", "b", 8) for i in range(2)]  # needs 16 GPUs, 8 are free
    verdict = judge(pods, [node("n0"), node("n1"), node("n2")], [group("a", 2), group("b", 2)])
    assert verdict.clean, verdict
    assert (verdict.gangs, verdict.gangs_complete, verdict.pods, verdict.pods_bound) == (2, 1, 4, 2)


def test_partial_gang_overcommit_and_a_fitting_gang_left_unbound_are_found() -> None:
    pods = [pod("a-0", "a", 4, "n0"), pod("a-1", "a", 4)]  # 1 of 2 bound
    pods += [pod("x", None, 8, "n1"), pod("y", None, 4, "n1")]  # 12 GPUs on an 8-GPU node
    pods += [pod("c-0", "c", 1), pod("c-1", "c", 1)]  # would fit on n2
    verdict = judge(pods, [node("n0"), node("n1"), node("n2")], [group("a", 2), group("c", 2)])
    assert verdict.partial_gangs == ["ns/a (1/2 bound)"]
    assert verdict.overcommitted_nodes == ["n1"]
    assert set(verdict.fitting_unbound) == {"ns/a (1 more would fit)", "ns/c (2 more would fit)"}
    assert not verdict.clean


def test_a_member_beyond_a_bound_quorum_is_reported_but_breaks_no_invariant() -> None:
    pods = [pod("s-0", "s", 2, "n0"), pod("s-1", "s", 2, "n0"), pod("s-2", "s", 2)]
    verdict = judge(pods, [node("n0")], [group("s", 2)])
    assert verdict.stranded_members == ["ns/s (a member beyond its quorum would fit)"]
    assert verdict.clean and verdict.gangs_complete == 1


def test_cordoned_and_tainted_nodes_offer_no_room_and_groups_without_podgroup_wait() -> None:
    nodes = [
        node("n0", unschedulable=True),
        node("n1", taints=[{"key": "k", "effect": "NoSchedule"}]),
    ]
    pods = [pod("solo", None, 1), pod("orphan-0", "orphan", 1)]
    verdict = judge(pods, nodes, [])
    assert verdict.clean, verdict


def reserved(name: str, min_member: int, message: str) -> dict[str, Any]:
    body = group(name, min_member)
    body["status"] = {"conditions": [{"type": "Reserved", "status": "True", "message": message}]}
    return body


def test_room_held_for_a_reservation_is_not_room_for_the_gangs_behind_it() -> None:
    pods = [pod(f"big-{i}", "big", 8) for i in range(2)]
    pods += [pod("busy", None, 8, "n1"), pod("c-0", "c", 1)]  # c fits n0 only: held for big
    groups = [reserved("big", 2, "2 node(s) held: n0, n1; expected start ..."), group("c", 1)]
    verdict = judge(pods, [node("n0"), node("n1")], groups)
    assert verdict.clean, verdict
    groups[0] = reserved("big", 2, "2 node(s) held: n1, n2; expected start ...")
    busy2 = [*pods, pod("busy2", None, 8, "n2")]
    verdict = judge(busy2, [node("n0"), node("n1"), node("n2")], groups)
    assert verdict.fitting_unbound == ["ns/c (1 more would fit)"]  # n0 is not held
    groups[0] = reserved("big", 2, "30 node(s) held: n1, ... (and 29 more); expected start ...")
    assert judge(pods, [node("n0"), node("n1")], groups).clean  # not all named: all held
