"""Issue 7, "During a Permit wait": a gang holding reservations while the world moves under it.

A gang waits in Permit while fewer members exist than its PodGroup's minMember: its members hold
nodes, and placeholders hold the room of the members not created yet. Each test parks a gang in
that wait on the simulator (real scheduler, real HTTP), changes one thing through the API — a
member deleted, a node deleted, cordoned or tainted, the PodGroup deleted, its minMember changed,
a member relabelled into another gang — and checks the answer: either every reservation is
released and the users are told why, or what was lost is re-planned inside the same wait (same
deadline, the other reservations untouched). Every test ends with ``assert_sound``: no node
over-committed, by the API's bound pods or by the cache's reservations, and no gang bound in part.

All pods ask for a whole 8-GPU node, so "who holds which node" is exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from gang.scheduling.gang import Gang
from tests.scheduler.conftest import Api, Env, eventually, gang_env, gang_pod, podgroup

NS = "default"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PG = ("scheduling.x-k8s.io", "v1alpha1", NS, "podgroups")
MERGE = "application/merge-patch+json"
#: a released gang backs off briefly, so a test sees who takes the room meanwhile
FAST: dict[str, Any] = {"backoff_initial_seconds": 0.5, "backoff_max_seconds": 1.0}


def whole_node(name: str, group: str, **extra: Any) -> dict[str, Any]:
    return gang_pod(name, group, gpu=8, **extra)


def find(env: Env, group: str) -> Gang | None:
    return next((g for g in env.scheduler.state.gangs.values() if g.key.group == group), None)


def nodes_held(gang: Gang) -> set[str]:
    return set(gang.reserved.values()) | {node for _, node in gang.placeholders.values()}


async def waiting(env: Env, group: str, reserved: int, placeholders: int) -> Gang:
    """Wait until ``group`` sits in its Permit wait holding exactly these reservations."""

    async def in_permit_wait() -> bool:
        gang = find(env, group)
        return (
            gang is not None
            and len(gang.reserved) == reserved
            and len(gang.placeholders) == placeholders
            and gang.permit_timer is not None
            and not gang.binding
        )

    await eventually(in_permit_wait, within=5)
    gang = find(env, group)
    assert gang is not None
    return gang


async def park(
    env: Env, group: str, min_member: int, created: int, wait_seconds: int = 30, **extra: Any
) -> Gang:
    """Create ``group`` (``minMember`` ``min_member``, ``scheduleTimeoutSeconds`` ``wait_seconds``)
    with ``created`` whole-node members, and wait until it sits in its Permit wait: the members
    reserved, placeholders for the rest."""
    await env.api.create_podgroup(podgroup(group, min_member, timeout=wait_seconds))
    await env.api.create_pods([whole_node(f"{group}-{i}", group, **extra) for i in range(created)])
    return await waiting(env, group, reserved=created, placeholders=min_member - created)


async def turned_away(env: Env, group: str) -> None:
    """Wait until ``group`` has been tried and found no room (it reserves nothing)."""

    async def no_room() -> bool:
        gang = find(env, group)
        return gang is not None and gang.last_failure is not None and not gang.reserved

    await eventually(no_room)


async def bound_of(api: Api, group: str) -> dict[str, str]:
    """The group's pods (by their current label) bound to a node: name → node."""
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in await api.raw_pods(NS)
        if (p["metadata"].get("labels") or {}).get(GROUP_LABEL) == group
        and p["spec"].get("nodeName")
    }


async def bound_count(api: Api, group: str, count: int) -> None:
    async def that_many_bound() -> bool:
        return len(await bound_of(api, group)) == count

    await eventually(that_many_bound, within=5)


async def messages(api: Api, kind: str, name: str, reason: str) -> list[str]:
    return [
        e["message"]
        for e in await api.events(NS)
        if e["involvedObject"]["kind"] == kind
        and e["involvedObject"]["name"] == name
        and e["reason"] == reason
    ]


async def told(api: Api, kind: str, name: str, reason: str, *parts: str) -> None:
    """Wait for an Event on the object whose message holds every one of ``parts``."""

    async def event_written() -> bool:
        found = await messages(api, kind, name, reason)
        return any(all(part in m for part in parts) for m in found)

    await eventually(event_written, within=5)


async def released(api: Api, group: str) -> list[str]:
    """The group's "released every reservation" PodGroup Events so far."""
    return [
        m
        for m in await messages(api, "PodGroup", group, "Unschedulable")
        if "released every reservation" in m
    ]


async def assert_sound(env: Env, min_members: dict[str, int]) -> None:
    """No node over-committed — by the API's bound pods and by the cache's bound + reserved —
    the cache's books balanced, and no gang bound in part (0 or at least minMember bound)."""
    await env.api.assert_not_overcommitted()
    cache = env.scheduler.cache
    cache.check()
    snap = cache.snapshot()
    assert (snap.free[snap.valid] >= 0).all(), "the cache holds more than a node has"
    for group, need in min_members.items():
        count = len(await bound_of(env.api, group))
        assert count == 0 or count >= need, f"gang {group} bound in part: {count}/{need}"


async def patch_podgroup(api: Api, name: str, spec: dict[str, Any]) -> None:
    await api.custom.patch_namespaced_custom_object(*PG, name, {"spec": spec}, _content_type=MERGE)


async def cache_sees(env: Env, node: str, unschedulable: bool, taints: int) -> None:
    """Wait until the scheduler's cache holds the node's new facts (the tracker reacted to the
    update in the same callback, so what it decided is decided by then)."""

    async def updated() -> bool:
        entry = env.scheduler.cache.nodes.get(node)
        return (
            entry is not None
            and entry.facts.unschedulable == unschedulable
            and len(entry.facts.taints) == taints
        )

    await eventually(updated, within=5)


# --- 1. a reserved member deleted ---------------------------------------------------------------


async def test_member_deleted_releases_every_reservation_and_another_gang_takes_the_room() -> None:
    async with gang_env("4:gpu=8", **FAST) as env:
        api = env.api
        a = await park(env, "a", 4, created=3)  # the whole cluster
        await api.create_podgroup(podgroup("b", 2, timeout=30))
        await api.create_pods([whole_node(f"b-{i}", "b") for i in range(2)])
        await turned_away(env, "b")
        await api.core.delete_namespaced_pod("a-0", NS, grace_period_seconds=0)

        # "a" keeps nothing (2 members + 1 placeholder would still block "b"), so "b" binds
        await bound_count(api, "b", 2)
        await told(api, "PodGroup", "a", "Unschedulable", "a member was deleted", "released")
        await told(api, "Pod", "a-1", "FailedScheduling", "a member was deleted")
        assert await bound_of(api, "a") == {}
        assert not nodes_held(a)  # 2 free nodes cannot hold its 4: it holds nothing
        await assert_sound(env, {"a": 4, "b": 2})


# --- 2. a node holding a reservation deleted ---------------------------------------------------


async def test_node_deleted_under_a_member_is_replanned_and_the_gang_binds_whole() -> None:
    async with gang_env("4:gpu=8", **FAST) as env:
        api = env.api
        a = await park(env, "a", 3, created=2)
        deadline, kept = a.permit_deadline, a.reserved[(NS, "a-1")]
        gone = a.reserved[(NS, "a-0")]
        await api.core.delete_node(gone)

        async def replanned() -> bool:
            return (
                (NS, "a-0") in a.reserved and gone not in nodes_held(a) and len(nodes_held(a)) == 3
            )

        await eventually(replanned)
        assert a.reserved[(NS, "a-1")] == kept  # the other reservation never moved
        assert a.permit_deadline == deadline  # the same Permit wait, not a release and a new one
        assert await released(api, "a") == []
        assert await bound_of(api, "a") == {}  # still short of its quorum: nothing bound

        await api.create_pods([whole_node("a-2", "a")])
        await bound_count(api, "a", 3)
        assert gone not in (await bound_of(api, "a")).values()
        await assert_sound(env, {"a": 3})


async def test_members_created_during_the_wait_take_the_nodes_held_for_them() -> None:
    """A job's pods come in batches: each member that a placeholder stands in for exactly is
    reserved on that placeholder's node, in the same wait, the other placeholders untouched
    (before: every batch had the rest planned again). A member that differs (another label)
    takes the full path and still completes the gang."""
    async with gang_env("5:gpu=8", **FAST) as env:
        api, cycle = env.api, env.scheduler.cycle
        a = await park(env, "a", 4, created=1)
        deadline, held = a.permit_deadline, nodes_held(a)
        for i in (1, 2):
            before = dict(a.placeholders)
            await api.create_pods([whole_node(f"a-{i}", "a")])
            await waiting(env, "a", reserved=i + 1, placeholders=3 - i)
            assert cycle.newcomers_placed == i and a.permit_deadline == deadline
            assert a.reserved[(NS, f"a-{i}")] in {node for _, node in before.values()}
            kept = {key: node for key, (_, node) in a.placeholders.items()}
            assert kept.items() < {key: node for key, (_, node) in before.items()}.items()
            assert nodes_held(a) == held
        assert await bound_of(api, "a") == {}
        await api.create_pods([whole_node("a-3", "a", labels={"shard": "last"})])
        await bound_count(api, "a", 4)
        assert cycle.newcomers_placed == 2
        await assert_sound(env, {"a": 4})


async def test_node_deleted_under_a_placeholder_is_replanned() -> None:
    async with gang_env("4:gpu=8", **FAST) as env:
        api = env.api
        a = await park(env, "a", 3, created=2)
        deadline, members = a.permit_deadline, dict(a.reserved)
        gone = next(node for _, node in a.placeholders.values())
        await api.core.delete_node(gone)

        async def holds_the_quorum_again() -> bool:
            return len(a.placeholders) == 1 and gone not in nodes_held(a)

        await eventually(holds_the_quorum_again)
        assert a.reserved == members and a.permit_deadline == deadline
        await api.create_pods([whole_node("a-2", "a")])
        await bound_count(api, "a", 3)
        await assert_sound(env, {"a": 3})


# --- 3. a node holding a reservation cordoned or tainted -----------------------------------------

CORDON = {"spec": {"unschedulable": True}}
TAINT = {"spec": {"taints": [{"key": "maintenance", "value": "now", "effect": "NoSchedule"}]}}


@pytest.mark.parametrize(
    ("patch", "facts"), [(CORDON, (True, 0)), (TAINT, (False, 1))], ids=["cordoned", "tainted"]
)
async def test_node_made_unfit_under_a_member_is_replanned(
    patch: dict[str, Any], facts: tuple[bool, int]
) -> None:
    async with gang_env("4:gpu=8", **FAST) as env:
        api = env.api
        a = await park(env, "a", 3, created=2)
        deadline, kept = a.permit_deadline, a.reserved[(NS, "a-1")]
        unfit = a.reserved[(NS, "a-0")]
        await api.core.patch_node(unfit, patch)

        async def moved_off() -> bool:
            return (NS, "a-0") in a.reserved and unfit not in nodes_held(a)

        await eventually(moved_off)
        assert a.reserved[(NS, "a-1")] == kept and a.permit_deadline == deadline
        assert await released(api, "a") == []
        assert await bound_of(api, "a") == {}
        await cache_sees(env, unfit, *facts)

        await api.create_pods([whole_node("a-2", "a")])
        await bound_count(api, "a", 3)
        assert unfit not in (await bound_of(api, "a")).values()
        await assert_sound(env, {"a": 3})


async def test_taints_the_members_tolerate_leave_the_reservation_alone() -> None:
    tolerate = [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]
    async with gang_env("4:gpu=8", **FAST) as env:
        api = env.api
        a = await park(env, "a", 3, created=2, tolerations=tolerate)
        held, deadline = dict(a.reserved), a.permit_deadline
        node = held[(NS, "a-0")]
        taints = [
            {"key": "maintenance", "value": "soon", "effect": "NoSchedule"},  # tolerated
            {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"},  # never filters
        ]
        await api.core.patch_node(node, {"spec": {"taints": taints}})
        await cache_sees(env, node, False, 2)
        assert a.reserved == held and a.permit_deadline == deadline and len(a.placeholders) == 1

        await api.create_pods([whole_node("a-2", "a", tolerations=tolerate)])
        await bound_count(api, "a", 3)
        assert (await bound_of(api, "a"))["a-0"] == node
        await assert_sound(env, {"a": 3})


# --- 4. the PodGroup deleted ----------------------------------------------------------------------


async def test_podgroup_deleted_releases_everything_and_says_so() -> None:
    async with gang_env("4:gpu=8", **FAST) as env:
        api = env.api
        await park(env, "a", 3, created=2)
        await api.create_podgroup(podgroup("b", 2, timeout=30))
        await api.create_pods([whole_node(f"b-{i}", "b") for i in range(2)])
        await turned_away(env, "b")
        await api.custom.delete_namespaced_custom_object(*PG, "a")

        await bound_count(api, "b", 2)  # the room "a" held went to "b"
        for pod in ("a-0", "a-1"):
            await told(api, "Pod", pod, "FailedScheduling", "its PodGroup was deleted", "released")
        a = find(env, "a")
        assert a is not None and not a.reserved and not a.placeholders
        assert await bound_of(api, "a") == {}
        await assert_sound(env, {"a": 3, "b": 2})


# --- 5. minMember changed -----------------------------------------------------------------------


async def test_min_member_lowered_to_what_is_reserved_binds_the_gang() -> None:
    async with gang_env("4:gpu=8", **FAST) as env:
        api = env.api
        await park(env, "a", 4, created=3)
        await patch_podgroup(api, "a", {"minMember": 3})

        await bound_count(api, "a", 3)
        a = find(env, "a")
        assert a is not None and not a.placeholders  # the 4th node's hold is gone with the wait
        assert await released(api, "a") == []
        await assert_sound(env, {"a": 3})


async def test_min_member_raised_tops_the_hold_up_and_keeps_waiting() -> None:
    async with gang_env("5:gpu=8", **FAST) as env:
        api = env.api
        a = await park(env, "a", 3, created=2)
        deadline, members = a.permit_deadline, dict(a.reserved)
        await patch_podgroup(api, "a", {"minMember": 4})

        await waiting(env, "a", reserved=2, placeholders=2)  # room for the new quorum
        assert a.reserved == members and a.permit_deadline == deadline
        assert await released(api, "a") == []
        await api.create_pods([whole_node("a-2", "a")])
        await waiting(env, "a", reserved=3, placeholders=1)
        assert await bound_of(api, "a") == {}  # 3 of 4: still nothing bound
        await api.create_pods([whole_node("a-3", "a")])
        await bound_count(api, "a", 4)
        await assert_sound(env, {"a": 4})


async def test_min_member_raised_beyond_the_cluster_waits_out_its_timeout() -> None:
    async with gang_env("4:gpu=8", **FAST) as env:
        api = env.api
        a = await park(env, "a", 3, created=2, wait_seconds=2)
        deadline, members = a.permit_deadline, dict(a.reserved)
        await patch_podgroup(api, "a", {"minMember": 5})  # 5 whole nodes: never on 4

        async def tried_to_top_up() -> bool:
            return a.min_member == 5 and "needs 3 more member(s)" in (a.last_failure or "")

        await eventually(tried_to_top_up)
        # no room for 3 more: it keeps what it holds, in the same wait, until the deadline
        assert a.reserved == members and len(a.placeholders) == 1
        assert a.permit_deadline == deadline and await released(api, "a") == []
        await told(api, "PodGroup", "a", "Unschedulable", "timed out waiting for quorum", "2/5")
        assert not a.reserved and not a.placeholders
        assert await bound_of(api, "a") == {}
        await assert_sound(env, {"a": 5})


# --- 6. a member relabelled into another gang ----------------------------------------------------


async def test_member_relabelled_leaves_its_gang_and_completes_the_other() -> None:
    async with gang_env("6:gpu=8", **FAST) as env:
        api = env.api
        a = await park(env, "a", 3, created=2)
        await park(env, "b", 2, created=1)
        await api.core.patch_namespaced_pod("a-1", NS, {"metadata": {"labels": {GROUP_LABEL: "b"}}})

        await bound_count(api, "b", 2)
        assert set(await bound_of(api, "b")) == {"b-0", "a-1"}
        await told(api, "PodGroup", "a", "Unschedulable", "its pod-group label changed", "released")
        assert (NS, "a-1") not in a.members
        assert await bound_of(api, "a") == {}
        await assert_sound(env, {"a": 3, "b": 2})
