"""The tracker's shortcut for binding confirmations must agree with a full parse of the pod, and
leave the state a full update leaves."""

from __future__ import annotations

import copy
from typing import Any

from gang.models.podgroup import PodGroupInfo
from gang.queue.gangqueue import GangQueue
from gang.scheduling.gang import Gang
from gang.scheduling.tracker import ClusterState
from gang.state.cache import ClusterCache, PodState
from gang.state.podinfo import PodInfo, parse_pod


class _Quiet:
    def pod_event(self, *args: Any) -> None: ...
    def podgroup_event(self, *args: Any) -> None: ...
    def gang_changed(self, gang: Gang) -> None: ...

    def group_changed(self, group: PodGroupInfo) -> None: ...


def _pod(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "5",
            "labels": labels if labels is not None else {"app": "x"},
        },
        "spec": {
            "schedulerName": "gang-scheduler",
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def _node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
    }


async def _state_with_reserved_pod() -> tuple[ClusterState, dict[str, Any]]:
    state = ClusterState(
        "gang-scheduler", ClusterCache(), GangQueue(), _Quiet(), lambda g, why: None
    )
    state.nodes.upsert(_node("n1"))
    raw = _pod()
    state.pods.upsert(raw)
    gang = next(iter(state.gangs.values()))
    info = gang.members[("ns", "p")]
    state.cache.assume(info, "n1")
    gang.reserved[info.key] = "n1"
    return state, raw


def _bound(raw: dict[str, Any], rv: str = "9") -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["spec"]["nodeName"] = "n1"
    out["metadata"]["resourceVersion"] = rv
    out["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    return out


async def test_confirmation_shortcut_equals_a_full_parse() -> None:
    state, raw = await _state_with_reserved_pod()
    bound = _bound(raw)
    shortcut = state._binding_confirmed(bound)
    assert shortcut is not None
    assert isinstance(shortcut[0], PodInfo)
    assert shortcut[0] == parse_pod(bound)
    state.pods.upsert(bound)
    gang = next(iter(state.gangs.values()))
    assert gang.reserved == {} and gang.members[("ns", "p")].node_name == "n1"
    assert state.cache.state_of(("ns", "p")) is PodState.BOUND
    state.cache.check()


async def test_anything_unexpected_takes_the_full_parse() -> None:
    state, raw = await _state_with_reserved_pod()
    relabelled = _bound(raw)
    relabelled["metadata"]["labels"] = {"app": "y"}
    assert state._binding_confirmed(relabelled) is None
    elsewhere = _bound(raw)
    elsewhere["spec"]["nodeName"] = "n2"  # someone else bound it: not our reservation
    assert state._binding_confirmed(elsewhere) is None
    replaced = _bound(raw)
    replaced["metadata"]["uid"] = "u2"
    assert state._binding_confirmed(replaced) is None
    terminating = _bound(raw)
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert state._binding_confirmed(terminating) is None
    assert state._binding_confirmed(raw) is None  # not bound yet
    finished = _bound(raw)
    finished["status"]["phase"] = "Succeeded"  # bound and done in one update: leaves the cache
    assert state._binding_confirmed(finished) is None


class _Recording(_Quiet):
    def __init__(self) -> None:
        self.changed: list[tuple[str, ...]] = []
        self.woken: list[int] = []  # _may_be_a_victim's calls: the gang's reservations left

    def gang_changed(self, gang: Gang) -> None:
        self.changed.append(tuple(sorted(k[1] for k in gang.reserved)))

    def victim(self, gang: Gang) -> None:
        self.woken.append(len(gang.reserved))


def _two_member_gang(shortcut: bool) -> tuple[ClusterState, list[dict[str, Any]], _Recording]:
    reporter = _Recording()
    state = ClusterState(
        "gang-scheduler", ClusterCache(), GangQueue(), reporter, lambda g, why: None
    )
    if not shortcut:  # every update parsed whole, as before the shortcut
        state._binding_confirmed = lambda raw: None  # type: ignore[method-assign]
    state.nodes.upsert(_node("n1"))
    raws = []
    for name in ("a", "b"):
        raw = _pod({"scheduling.x-k8s.io/pod-group": "g"})
        raw["metadata"] |= {"name": name, "uid": f"u-{name}"}
        state.pods.upsert(raw)
        raws.append(raw)
    gang = next(iter(state.gangs.values()))
    for key, info in gang.members.items():
        state.cache.assume(info, "n1")
        gang.reserved[key] = "n1"
        gang.binding.add(key)
    return state, raws, reporter


async def test_a_confirmation_leaves_the_state_a_full_update_leaves() -> None:
    """Both members' confirmations, through the shortcut and through the whole parse: the
    same gang, cache, queue wake-ups and reports."""
    outcomes = []
    for shortcut in (True, False):
        state, raws, reporter = _two_member_gang(shortcut)
        state._may_be_a_victim = reporter.victim  # type: ignore[method-assign]
        for raw in raws:
            state.pods.upsert(_bound(raw))
        gang = next(iter(state.gangs.values()))
        state.cache.check()
        outcomes.append(
            (
                dict(gang.members),
                dict(gang.reserved),
                set(gang.binding),
                set(gang.bound_unseen),
                {k: (r.state, r.node, r.info) for k, r in state.cache.pods.items()},
                reporter.woken,
                reporter.changed,
                len(state.queue),
            )
        )
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][5] == [0]  # the last confirmation, once
    assert outcomes[0][6] == [(), (), ("b",), ()]  # the two pods added, then confirmed
