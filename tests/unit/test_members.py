"""``Members`` keeps per-value counts of its pods instead of passing over them: whatever way
members are set, replaced and removed, the gang's priority, the queue's sort key and
``placed()`` must equal the passes over the members they replace."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gang.scheduling.gang import Gang, GangKey
from gang.scheduling.members import Members
from gang.scheduling.plugins import PrioritySort
from gang.state.podinfo import QOS_RANK, PodInfo
from tests.unit.test_podinfo import make_pod

BASE = make_pod("m").container(cpu="1").group("g").meta(uid="u").info()

pods = st.builds(
    lambda name, priority, qos, created, state: replace(
        BASE,
        name=name,
        uid=f"uid-{name}-{priority}-{state}",
        priority=priority,
        qos_rank=qos,
        creation_timestamp=float(created),
        node_name="" if state == "waiting" else "n0",
        phase={"waiting": "Pending", "bound": "Running", "finished": "Succeeded"}[state],
    ),
    st.sampled_from(["a", "b", "c", "d", "e"]),
    st.integers(-2, 2),
    st.sampled_from(sorted(QOS_RANK.values())),
    st.integers(0, 3),
    st.sampled_from(["waiting", "bound", "finished"]),
)

operations = st.one_of(
    st.tuples(st.just("set"), pods),
    st.tuples(st.just("delete"), pods),
    st.tuples(st.just("pop"), pods),
    st.tuples(st.just("setdefault"), pods),
    st.tuples(st.just("update"), st.lists(pods, max_size=3)),
    st.tuples(st.just("ior"), st.lists(pods, max_size=3)),
    st.tuples(st.just("popitem"), st.none()),
    st.tuples(st.just("confirm"), st.integers(0, 4)),
    st.tuples(st.just("clear"), st.none()),
)


def _apply(members: Members, operation: str, arg: object) -> None:
    if operation == "set":
        assert isinstance(arg, PodInfo)
        members[arg.key] = arg
    elif operation == "delete":
        assert isinstance(arg, PodInfo)
        if arg.key in members:
            del members[arg.key]
    elif operation == "pop":
        assert isinstance(arg, PodInfo)
        members.pop(arg.key, None)
    elif operation == "setdefault":
        assert isinstance(arg, PodInfo)
        members.setdefault(arg.key, arg)
    elif operation == "update":
        assert isinstance(arg, list)
        members.update({pod.key: pod for pod in arg})
    elif operation == "ior":
        assert isinstance(arg, list)
        members |= [(pod.key, pod) for pod in arg]
    elif operation == "confirm":  # a waiting member's binding confirmed, as the tracker does
        assert isinstance(arg, int)
        waiting = [pod for pod in members.values() if not pod.node_name]
        if waiting:
            pod = waiting[arg % len(waiting)]
            members.now_bound(replace(pod, node_name="n1", phase="Pending"))
    elif operation == "popitem":
        if members:
            members.popitem()
    else:
        members.clear()


def _sort_key_by_passes(gang: Gang) -> tuple[object, ...]:
    """PrioritySort's key as it was computed before: passes over every member."""
    pods = list(gang.members.values())
    qos = max((p.qos_rank for p in pods), default=QOS_RANK["BestEffort"])
    created = min((p.creation_timestamp for p in pods), default=0.0)
    priority = max((p.priority for p in pods), default=0)
    half_bound = 0 if gang.bound() and gang.any_pending() else 1
    return (half_bound, -priority, -qos, created, gang.key.namespace, gang.key.group)


@settings(max_examples=300, deadline=None)
@given(st.lists(operations, max_size=25))
def test_the_counts_follow_every_write(steps: list[tuple[str, object]]) -> None:
    gang = Gang(GangKey("default", "g"))
    members = gang.members
    for operation, arg in steps:
        _apply(members, operation, arg)
        pods = list(members.values())
        assert members.priorities == _counts(p.priority for p in pods)
        assert members.qos_ranks == _counts(p.qos_rank for p in pods)
        assert members.created == _counts(p.creation_timestamp for p in pods)
        assert members.bound_count == len(gang.bound())
        assert gang.priority == max((p.priority for p in pods), default=0)
        assert gang.placed() == len(gang.bound()) + len(gang.reserved)
        assert PrioritySort().sort_key(gang) == _sort_key_by_passes(gang)
    twin = copy.deepcopy(members)  # (rebuilt member by member: counted once, not twice)
    assert type(twin) is Members and twin == members
    assert (twin.priorities, twin.bound_count) == (members.priorities, members.bound_count)


def test_a_missing_member_is_a_key_error_and_leaves_the_counts() -> None:
    members = Members({BASE.key: BASE})
    try:
        members.pop(("default", "nobody"))
    except KeyError:
        pass
    else:
        raise AssertionError("pop of a missing member without a default must raise")
    assert members.priorities == {BASE.priority: 1}
    assert members.pop(("default", "nobody"), None) is None
    assert members.pop(BASE.key) is BASE and not members.priorities


def _counts(values: Iterable[object]) -> dict[object, int]:
    out: dict[object, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out
