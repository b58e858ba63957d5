"""``gang run`` SIGKILLed between a gang's first and last binding: the next process completes it.

The kill is exact, not timed: a store listener fires as the third member's binding commits and
SIGKILLs the scheduler right there, before the 201 even leaves the simulator. With one bind in
flight at a time (``bind_concurrency`` 1) the fourth POST was never sent, so the gang is left
3/8 bound, the rest only reserved in a process that no longer exists. The new process knows
only what the API says: three bound members are facts, the other five are pending again.
"""

from __future__ import annotations

from pathlib import Path

from gang.bench.supervisor import SchedulerProcess
from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from gang.sim.store import MODIFIED, StoredEvent
from tests.reliability.conftest import NS, bind_foreign, bound, create_gang, until, verdict, zones


async def test_sigkill_mid_bind_restart_completes_the_gang_next_to_its_bound_members(
    tmp_path: Path,
) -> None:
    # 3 zones x 4 nodes x 8 GPUs; a slow binding path spreads the gang's bindings out
    async with SimCluster("12:gpu=8,zones=3", faults=Faults(binding_latency=0.05)) as cluster:
        members = create_gang(cluster, "train", 8, gpu=2)
        scheduler = SchedulerProcess(
            cluster.kubeconfig_path,
            env={"GANG_SCHEDULER__BIND_CONCURRENCY": "1"},
            log_path=tmp_path / "scheduler.log",
        )
        kills_at: list[int] = []

        def kill_at_third_binding(storage_key: str, event: StoredEvent) -> None:
            if storage_key != cluster.api.rt_pods.storage_key or event.type != MODIFIED:
                return
            if event.prev is None or event.prev["spec"].get("nodeName"):
                return
            done = sum(1 for m in members if m in bound(cluster))
            if done == 3 and scheduler.kill():
                kills_at.append(done)

        cluster.store.add_listener(kill_at_third_binding)
        await scheduler.start()
        try:
            await until(lambda: kills_at, 30, "the third binding")
            assert await scheduler.wait() < 0  # killed by a signal
            cluster.store.remove_listener(kill_at_third_binding)
            first = {m: n for m, n in bound(cluster).items() if m in members}
            assert len(first) == 3, f"expected 3 of 8 bound at the crash, got {first}"
            zone_of = zones(cluster)
            (home,) = {zone_of[n] for n in first.values()}  # one zone so far

            # while it is down, another scheduler fills 20 of 32 GPUs in a second zone: that
            # zone becomes the tightest fit for the 5 members left (10 GPUs); only knowing where
            # the bound members are keeps them home (26 GPUs free there)
            other = sorted({z for z in zone_of.values() if z != home})[0]
            nodes = sorted(n for n, z in zone_of.items() if z == other)
            for i, (node, gpu) in enumerate(zip(nodes, (8, 8, 4), strict=False)):
                bind_foreign(cluster, f"foreign-{i}", node, gpu)

            await scheduler.start()
            await until(lambda: set(members) <= set(bound(cluster)), 30, "all 8 members bound")
            final = bound(cluster)
            assert {m: final[m] for m in first} == first  # facts stay facts
            assert {zone_of[final[m]] for m in members} == {home}
            # no pod bound twice: one binding POST per member, and no 409 for a bound pod
            audit = cluster.audit
            assert {m: audit.binding_posts[(NS, m)] for m in members} == dict.fromkeys(members, 1)
            assert audit.conflicts == []
            check = verdict(cluster)
            assert check.clean, check
            assert scheduler.unexpected_exits == []
        finally:
            assert await scheduler.stop() is not None
        assert scheduler.starts == 2 and scheduler.kills == 1
