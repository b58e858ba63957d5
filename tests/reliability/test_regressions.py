"""Regressions found by the chaos runs, each reduced to a deterministic scenario.

The first two live in the window between a binding's 201 and the informer's event confirming
it: the binder is done with the member but the API view the scheduler holds still shows it
unassigned. Anything that re-entered Permit for the gang in that window used to POST the bound
members again, and a release used to forget them from the cache although they were bound (their
capacity vanished: over-commit). The window is normally milliseconds; a lagging or reconnecting
watch stretches it, and a lost confirmation (the simulator's ``drop_event_rate``) keeps it open
until the next resync. Here the confirmations are withheld outright, so each test is exact.

The third needed no fault at all (a crash-restart chaos run found it): a gang that reached its
quorum while a member beyond ``minMember`` did not fit was done with as "scheduled", and that
member stayed Pending for good, even once room freed up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from gang.sim.api import DeleteOptions
from gang.sim.cluster import SimCluster
from gang.sim.server import SimServer
from gang.sim.store import MODIFIED, StoredEvent
from tests.reliability.conftest import (
    NS,
    PODGROUPS,
    bind_foreign,
    bound,
    create_gang,
    until,
    verdict,
)
from tests.scheduler.conftest import running_scheduler


@pytest.fixture
def withhold_confirmations(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """While ``switch["on"]``, watchers never see a pod's binding (its nodeName being set)."""
    switch = {"on": False}
    original = SimServer._event_line

    def event_line(
        self: SimServer, rt: Any, event: StoredEvent, matches: Callable[[Any], bool]
    ) -> bytes | None:
        if (
            switch["on"]
            and rt.plural == "pods"
            and event.type == MODIFIED
            and event.prev is not None
            and not event.prev["spec"].get("nodeName")
            and event.obj["spec"].get("nodeName")
        ):
            return None
        return original(self, rt, event, matches)

    monkeypatch.setattr(SimServer, "_event_line", event_line)
    return switch


async def test_a_disruption_after_the_binds_posts_no_binding_again(
    withhold_confirmations: dict[str, bool],
) -> None:
    async with SimCluster("4:gpu=8") as cluster, running_scheduler(cluster):
        withhold_confirmations["on"] = True
        members = create_gang(cluster, "g", 3)
        await until(lambda: set(members) <= set(bound(cluster)), 5, "all bound")
        await asyncio.sleep(0.3)  # every 201 is in; no confirmation is
        api = cluster.api  # a disruption: the PodGroup's minMember changes 3 -> 2
        patch = {"spec": {"minMember": 2}}
        api.patch(api.registry.by_key(PODGROUPS), NS, "g", "application/merge-patch+json", patch)
        await asyncio.sleep(1.0)
        assert cluster.audit.conflicts == []
        assert {cluster.audit.binding_posts[(NS, m)] for m in members} == {1}


async def test_a_released_gang_keeps_the_capacity_of_its_bound_members(
    withhold_confirmations: dict[str, bool],
) -> None:
    async with SimCluster("1:gpu=8") as cluster, running_scheduler(cluster):
        withhold_confirmations["on"] = True
        create_gang(cluster, "g", 3, gpu=2)  # 6 of the node's 8 GPUs
        await until(lambda: len(bound(cluster)) == 3, 5, "all bound")
        await asyncio.sleep(0.3)
        withhold_confirmations["on"] = False
        api = cluster.api  # a user deletes one member of the bound (unconfirmed) gang
        api.delete(api.rt_pods, NS, "g-00", DeleteOptions(0))
        await asyncio.sleep(0.5)
        create_gang(cluster, "big", 1, gpu=8)  # would fit only were g-01 and g-02 forgotten
        await asyncio.sleep(1.5)
        assert "big-00" not in bound(cluster)
        assert verdict(cluster).overcommitted_nodes == []


async def test_a_member_beyond_the_quorum_is_placed_once_room_frees_up() -> None:
    async with SimCluster("1:gpu=8") as cluster:
        bind_foreign(cluster, "other", "node-00000", 4)  # room for 2 of the 3 members
        async with running_scheduler(
            cluster, resync_period_seconds=1, unschedulable_flush_seconds=1
        ):
            members = create_gang(cluster, "g", 3, gpu=2, min_member=2)
            await until(lambda: len(set(members) & set(bound(cluster))) == 2, 5, "the quorum")
            await asyncio.sleep(1.0)  # well after the cycle that placed the quorum
            cluster.api.delete(cluster.api.rt_pods, NS, "other", DeleteOptions(0))
            await until(lambda: set(members) <= set(bound(cluster)), 3, "the third member")
