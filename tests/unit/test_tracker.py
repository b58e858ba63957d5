"""The tracker's shortcut for binding confirmations must agree with a full parse of the pod."""

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
    assert isinstance(shortcut, PodInfo)
    assert shortcut == parse_pod(bound)
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
