"""The tracker's side of a Permit-wait disruption, without a cluster: what it drops, what it keeps,
what it tells the cycle (``on_disruption``), and that node updates that cannot matter cost nothing.
"""

from __future__ import annotations

from typing import Any

from gang.models.podgroup import PodGroupInfo
from gang.queue.gangqueue import GangQueue
from gang.scheduling.framework import StaticFilterPlugin
from gang.scheduling.gang import Gang, GangKey
from gang.scheduling.plugins import default_filters
from gang.scheduling.tracker import ClusterState
from gang.state.cache import ClusterCache, PodState
from gang.state.nodefacts import NodeFacts
from gang.state.podinfo import Constraints

NS = "ns"
KEY = GangKey(NS, "g")


class _Quiet:
    def pod_event(self, *args: Any) -> None: ...
    def podgroup_event(self, *args: Any) -> None: ...
    def gang_changed(self, gang: Gang) -> None: ...

    def group_changed(self, group: PodGroupInfo) -> None: ...


def _node(name: str, unschedulable: bool = False, taints: list[Any] | None = None) -> Any:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
    }


def _pod(name: str, group: str = "g", tolerations: list[Any] | None = None) -> Any:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {"scheduling.x-k8s.io/pod-group": group},
        },
        "spec": {
            "schedulerName": "gang-scheduler",
            "tolerations": tolerations or [],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


def _podgroup(min_member: Any, name: str = "g") -> Any:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {"minMember": min_member},
    }


class _World:
    """A ClusterState on nodes n1, n2, n3 with gang ``g`` (minMember 3) in its Permit wait:
    p0 reserved on n1, p1 on n2, a placeholder on n1."""

    def __init__(self, tolerations: list[Any] | None = None) -> None:
        self.disruptions: list[tuple[str, bool]] = []
        self.state = ClusterState(
            "gang-scheduler", ClusterCache(), GangQueue(), _Quiet(), self._disrupted
        )
        for name in ("n1", "n2", "n3"):
            self.state.nodes.upsert(_node(name))
        self.state.groups["coscheduling"].upsert(_podgroup(3))
        for name in ("p0", "p1"):
            self.state.pods.upsert(_pod(name, tolerations=tolerations))
        self.gang = self.state.gangs[KEY]
        for name, node in (("p0", "n1"), ("p1", "n2")):
            info = self.gang.members[(NS, name)]
            self.state.cache.assume(info, node)
            self.gang.reserved[info.key] = node
        shape = self.gang.placeholder(self.gang.members[(NS, "p0")], 0)
        self.state.cache.assume(shape, "n1")
        self.gang.placeholders[shape.key] = (shape, "n1")
        self.placeholder = shape.key

    def _disrupted(self, gang: Gang, why: str) -> None:
        self.disruptions.append((why, gang.member_left))
        gang.member_left = False  # what Cycle.disrupted does first

    def assumed(self) -> set[tuple[str, str]]:
        return {k for k, r in self.state.cache.pods.items() if r.state is PodState.ASSUMED}


async def test_cordon_unreserves_what_the_node_holds_and_nothing_else() -> None:
    w = _World()
    w.state.nodes.upsert(_node("n1", unschedulable=True))
    assert w.gang.reserved == {(NS, "p1"): "n2"}
    assert w.gang.placeholders == {}
    assert w.assumed() == {(NS, "p1")}  # the cache gave n1's room back
    assert w.disruptions == [
        (
            "node n1 holding 2 reservation(s) became unfit for them (node(s) were unschedulable)",
            False,
        )
    ]
    assert w.state.queue.where(KEY) == "active"  # queued to re-plan p0 and the placeholder
    w.state.cache.check()


async def test_untolerated_no_schedule_taint_unreserves_with_filters_reason() -> None:
    w = _World()
    taint = {"key": "maintenance", "value": "now", "effect": "NoSchedule"}
    w.state.nodes.upsert(_node("n2", taints=[taint]))
    assert w.gang.reserved == {(NS, "p0"): "n1"} and w.placeholder in w.gang.placeholders
    assert w.disruptions == [
        (
            "node n2 holding 1 reservation(s) became unfit for them "
            "(node(s) had untolerated taint {maintenance: now})",
            False,
        )
    ]


async def test_tolerated_and_prefer_no_schedule_taints_keep_the_reservations() -> None:
    w = _World(tolerations=[{"key": "maintenance", "operator": "Exists"}])
    taints = [
        {"key": "maintenance", "value": "now", "effect": "NoSchedule"},
        {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"},
    ]
    w.state.nodes.upsert(_node("n1", taints=taints))
    assert w.gang.reserved == {(NS, "p0"): "n1", (NS, "p1"): "n2"}
    assert w.placeholder in w.gang.placeholders and w.disruptions == []


async def test_members_being_bound_keep_their_node() -> None:
    w = _World()
    w.gang.binding.add((NS, "p0"))
    w.state.nodes.upsert(_node("n1", unschedulable=True))
    assert w.gang.reserved[(NS, "p0")] == "n1"
    assert w.placeholder not in w.gang.placeholders  # a placeholder is never past that point
    assert [why for why, _ in w.disruptions] == [
        "node n1 holding 1 reservation(s) became unfit for them (node(s) were unschedulable)"
    ]


async def test_only_taint_or_schedulability_changes_are_rechecked() -> None:
    w = _World()
    asked: list[Gang] = []

    def counting(gang: Gang) -> list[StaticFilterPlugin]:
        asked.append(gang)
        return default_filters()

    w.state.filters_for = counting
    relabelled = _node("n1")
    relabelled["metadata"]["labels"]["team"] = "ml"
    relabelled["status"]["allocatable"]["cpu"] = "8"
    w.state.nodes.upsert(relabelled)  # labels and capacity: no Filter verdict on taints changes
    w.state.nodes.upsert(_node("n3", unschedulable=True))  # holds nothing: no gang to check
    assert asked == [] and w.disruptions == []
    w.state.nodes.upsert(_node("n2", unschedulable=True))
    assert asked == [w.gang] and len(w.disruptions) == 1


async def test_a_profiles_own_filters_decide_and_a_failing_one_keeps_the_reservation() -> None:
    class Picky:
        name = "Picky"

        def filter(self, constraints: Constraints, node: NodeFacts) -> str | None:
            return "node(s) are tainted at all" if node.taints else None

    class Broken:
        name = "Broken"

        def filter(self, constraints: Constraints, node: NodeFacts) -> str | None:
            raise RuntimeError("boom")

    w = _World()
    w.state.filters_for = lambda gang: [Broken()]
    w.state.nodes.upsert(_node("n1", unschedulable=True))
    assert len(w.gang.reserved) == 2 and w.disruptions == []  # cannot tell: nothing dropped
    w.state.filters_for = lambda gang: [Picky()]
    w.state.nodes.upsert(_node("n2", taints=[{"key": "a", "value": "b", "effect": "NoSchedule"}]))
    assert (NS, "p1") not in w.gang.reserved
    assert w.disruptions[0][0].endswith("(node(s) are tainted at all)")


async def test_node_deleted_drops_only_what_it_held() -> None:
    w = _World()
    w.state.nodes.delete(("", "n1"), None)
    assert w.gang.reserved == {(NS, "p1"): "n2"} and w.gang.placeholders == {}
    assert w.disruptions == [("node n1 holding 2 reservation(s) was deleted", False)]
    w.state.nodes.delete(("", "n3"), None)  # held nothing
    assert len(w.disruptions) == 1


async def test_a_member_leaving_is_flagged_for_the_cycle() -> None:
    w = _World()
    relabelled = _pod("p1", group="other")
    w.state.pods.upsert(relabelled)
    assert w.disruptions == [("its pod-group label changed", True)]
    assert (NS, "p1") not in w.gang.members and (NS, "p1") in w.state.gangs[
        GangKey(NS, "other")
    ].members
    w.state.pods.delete((NS, "p0"), None)
    assert w.disruptions[-1] == ("a member was deleted", True)
    assert KEY not in w.state.gangs and w.assumed() == set()  # no member left: nothing held


async def test_podgroup_changes_under_a_wait_are_passed_on() -> None:
    w = _World()
    w.state.groups["coscheduling"].upsert(_podgroup(2))
    w.state.groups["coscheduling"].upsert(_podgroup(2))  # no change: nothing to say
    w.state.groups["coscheduling"].upsert(_podgroup("two"))
    w.state.groups["coscheduling"].delete((NS, "g"), None)
    whys = [why for why, _ in w.disruptions]
    assert whys[0] == "minMember changed from 3 to 2"
    assert whys[1].startswith("its PodGroup became invalid: ")
    assert whys[2] == "its PodGroup was deleted" and len(whys) == 3
