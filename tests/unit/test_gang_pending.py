"""``Gang.any_pending`` is ``bool(Gang.pending())``: asked per binding answer, per gang on a
/metrics scrape, and wherever only *whether* a member waits matters, it must agree with the
list on every mix of member states (bound, finished, deleting, gated, reserved, waiting)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gang.scheduling.gang import Gang, GangKey
from gang.state.podinfo import PodInfo
from tests.unit.test_podinfo import make_pod

STATES = ["waiting", "bound", "finished", "deleting", "gated", "reserved"]


def _member(name: str, state: str) -> PodInfo:
    builder = make_pod(name).container(cpu="1").group("g")
    builder.spec(schedulerName="gang-scheduler")
    if state in ("bound", "finished"):
        builder.spec(nodeName="n0").status(phase="Succeeded" if state == "finished" else "Running")
    elif state == "deleting":
        builder.meta(deletionTimestamp="2026-11-29T00:00:00Z")
    elif state == "gated":
        builder.spec(schedulingGates=[{"name": "example.com/wait"}])
    return builder.meta(uid=f"uid-{name}").info()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(STATES), max_size=8))
def test_any_pending_agrees_with_the_pending_list(states: list[str]) -> None:
    gang = Gang(GangKey("default", "g"))
    for i, state in enumerate(states):
        pod = _member(f"m{i}", state)
        gang.members[pod.key] = pod
        if state == "reserved":
            gang.reserved[pod.key] = "n1"
    assert gang.any_pending() == bool(gang.pending()) == ("waiting" in states)
