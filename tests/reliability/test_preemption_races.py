"""Two preemptors planned back to back must not split one elastic victim gang below its quorum.

Found by ``gang chaos --mode preempt`` (seed 4: ``chaos/low006``, 8 members, minMember 4, left 3/4
bound) and fixed: a plan now counts pods claimed by a preemption under way (marked, or chosen by
another gang's plan) as leaving, never as victims again. Before the fix each plan counted an
elastic victim's members above ``minMember`` among the members still running, including those
another preemption in flight has already taken (marked, evicting, not yet terminating). Two plans
made before the first one's evictions commit — two high-priority gangs arriving together, or every
pending preemptor re-planning at once after a restart while ``Evictor.recover`` finishes the old
marks — each take "the members above the quorum", and together they evict the gang below it. The
chaos run needs kills and luck to see it; here it is made exact: both PodGroups are created in one
synchronous step (the scheduler plans the two gangs in consecutive cycles), and API latency keeps
the first plan's evictions from committing before the second plan is made.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from gang.bench.chaosplan import GangPlan, pod_manifests, podgroup_manifest
from gang.sim.cluster import SimCluster
from gang.sim.kubelet import KubeletConfig
from tests.reliability.conftest import NS, PODGROUPS, until, verdict
from tests.scheduler.conftest import running_scheduler

LOW, HIGH = "low", "high"
HOSTNAME = "kubernetes.io/hostname"


def _gang(cluster: SimCluster, gang: GangPlan, node: str | None = None) -> list[dict[str, Any]]:
    """Create ``gang``'s pods (pinned to ``node``); its PodGroup is returned, not created."""
    api = cluster.api
    pods = pod_manifests(gang, NS)
    for pod in pods:
        if node is not None:
            pod["spec"]["nodeSelector"] = {HOSTNAME: node}
        api.create(api.rt_pods, NS, pod)
    return [podgroup_manifest(gang, NS)]


def _live(cluster: SimCluster, gang: str) -> int:
    """Members of ``gang`` bound and not being deleted."""
    return sum(
        1
        for p in cluster.store.items(cluster.api.rt_pods.storage_key, NS)
        if p["metadata"]["name"].startswith(f"{gang}-")
        and p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
    )


@asynccontextmanager
async def _prioritised() -> AsyncIterator[SimCluster]:
    """Two nodes of 4 GPUs, a kubelet whose pods take a second to terminate, and the priority
    classes ``low`` (10) and ``high`` (1000)."""
    kubelet = KubeletConfig(start_delay=0.05, termination_delay=1.0)
    async with SimCluster("2:gpu=4", kubelet=kubelet) as cluster:
        api = cluster.api
        for name, value in ((LOW, 10), (HIGH, 1000)):
            api.create(api.rt_priority, None, {"metadata": {"name": name}, "value": value})
        yield cluster


def _quiet(cluster: SimCluster) -> bool:
    pods = cluster.store.items(cluster.api.rt_pods.storage_key, NS)
    return not any(p["metadata"].get("deletionTimestamp") for p in pods)


async def test_two_preemptors_never_take_an_elastic_victim_below_its_quorum() -> None:
    async with _prioritised() as cluster:
        api = cluster.api
        podgroups = api.registry.by_key(PODGROUPS)
        # the elastic victim fills both nodes: 4 members on each, 4 of 8 may go
        low = GangPlan("elastic", 8, 4, 1, "1", LOW, 0.0, grace_seconds=1)
        for group in _gang(cluster, low):
            api.create(podgroups, NS, group)
        async with running_scheduler(cluster):
            await until(lambda: _live(cluster, "elastic") == 8, 15, "the elastic gang bound")
            # 2 + 3 members above the quorum are wanted, one node each: together more than the
            # 4 the elastic gang can lose, so one preemptor must take it whole (or wait)
            a = _gang(cluster, GangPlan("high-a", 2, 2, 1, "1", HIGH, 0.0, 1), "node-00000")
            b = _gang(cluster, GangPlan("high-b", 3, 3, 1, "1", HIGH, 0.0, 1), "node-00001")
            cluster.faults.latency = 0.1  # the scheduler's writes (marks, evictions) are slow
            for group in a + b:  # one synchronous step: both gangs become ready together
                api.create(podgroups, NS, group)

            def settled() -> bool:
                return _quiet(cluster) and _live(cluster, "high-a") + _live(cluster, "high-b") == 5

            await until(settled, 20, "both preemptors bound")
            left = _live(cluster, "elastic")
            assert left == 0 or left >= 4, f"elastic gang left with {left}/4 members"
            assert not verdict(cluster).partial_gangs


async def test_a_half_bound_victim_is_not_completed_around_the_members_being_evicted() -> None:
    """A scheduler killed mid-gang leaves ``half`` with 2 of its 4 members bound (a fact the next
    one must finish, or leave whole). A high-priority gang pinned to that node arrives too: it
    preempts the 2 bound members. Found by ``gang chaos --mode crash`` (seed 3: ``chaos/g000``
    left 3/7 or 4/7 bound in about one run in four): the next cycle counted the 2 victims, still
    bound while their eviction was under way, towards ``half``'s quorum and bound its 2 pending
    members on the free node — a partial gang once the victims were gone. Its members now wait
    while members of theirs are leaving, and a gang whose members are in Permit or binding is
    never chosen as a victim."""
    async with _prioritised() as cluster:
        api = cluster.api
        podgroups = api.registry.by_key(PODGROUPS)
        for group in _gang(cluster, GangPlan("half", 4, 4, 1, "1", LOW, 0.0, grace_seconds=1)):
            api.create(podgroups, NS, group)
        for i in range(2):  # bound before the crash
            target = {"kind": "Node", "name": "node-00000"}
            name = f"half-{i:02d}"
            api.bind(NS, name, {"metadata": {"name": name}, "target": target})
        urgent = GangPlan("urgent", 4, 4, 1, "1", HIGH, 0.0, 1)
        for group in _gang(cluster, urgent, "node-00000"):
            api.create(podgroups, NS, group)
        cluster.faults.latency = 0.1  # the marks and evictions are slow to commit
        async with running_scheduler(cluster):
            await until(lambda: _live(cluster, "urgent") == 4, 20, "the preemptor bound")
            await until(lambda: _quiet(cluster), 10, "the victims gone")
            left = _live(cluster, "half")
            assert left == 0 or left >= 4, f"half left with {left}/4 members"
            assert not verdict(cluster).partial_gangs
