"""``Gang.any_pending`` is ``bool(Gang.pending())``: asked per binding answer, per gang on a
/metrics scrape, and wherever only *whether* a member waits matters, it must agree with the
list on every mix of member states (bound, finished, deleting, gated, reserved, waiting). The
same mixes pin the other shortcuts a cycle takes over a gang's members: ``bound()`` from the
bound count, and VolumeBinding's PreFilter looking only at the waiting members with claims."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from gang.scheduling.gang import Gang, GangKey
from gang.scheduling.volumes import VolumeBinding
from gang.state.cache import Snapshot
from gang.state.podindex import PodIndex
from gang.state.podinfo import PodInfo
from gang.state.volumes import VolumeCatalog
from tests.unit.test_podinfo import make_pod

STATES = ["waiting", "bound", "finished", "deleting", "gated", "reserved"]


def _member(name: str, state: str, claim: str | None = None) -> PodInfo:
    builder = make_pod(name).container(cpu="1").group("g")
    builder.spec(schedulerName="gang-scheduler")
    if claim is not None:
        builder.spec(volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])
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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(STATES), max_size=8))
def test_bound_agrees_with_the_members_on_their_nodes(states: list[str]) -> None:
    """``bound()`` answers from ``Members.bound_count`` when it is 0: it must still list every
    member on a node and not finished, whatever the mix."""
    gang = Gang(GangKey("default", "g"))
    for i, state in enumerate(states):
        pod = _member(f"m{i}", state)
        gang.members[pod.key] = pod
    expected = [p.name for p in gang.members.values() if p.node_name and not p.terminal]
    assert [p.name for p in gang.bound()] == expected
    assert len(expected) == states.count("bound")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(STATES), st.booleans()), max_size=8))
def test_volume_prefilter_judges_exactly_the_waiting_members_with_claims(
    members: list[tuple[str, bool]],
) -> None:
    """VolumeBinding's PreFilter skips a member without claims before asking whether it waits:
    the verdict is still the one for the first waiting member mounting a claim (every claim
    here is missing), and a member bound, finished, deleting, gated or reserved is not judged."""
    gang = Gang(GangKey("default", "g"))
    for i, (state, claims) in enumerate(members):
        pod = _member(f"m{i}", state, f"data-m{i}" if claims else None)
        assert pod.rules.claims == ((f"data-m{i}",) if claims else ())
        gang.members[pod.key] = pod
        if state == "reserved":
            gang.reserved[pod.key] = "n1"
    snap = SimpleNamespace(volumes=VolumeCatalog(), pods=PodIndex())
    verdict = VolumeBinding().pre_filter(gang, cast(Snapshot, snap))
    first = next((i for i, (s, c) in enumerate(members) if s == "waiting" and c), None)
    if first is None:
        assert verdict is None
    else:
        assert verdict == f'persistentvolumeclaim "data-m{first}" not found (pod default/m{first})'
