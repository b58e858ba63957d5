"""An apiserver that restarts, cuts watches, forgets history and loses watch events loses no pod.

A lost watch event is the nastiest of these: the stream goes on, later events move the client's
resourceVersion past the lost one, and no reconnect will ever replay it. Only the informer's
periodic relist (``resync_period_seconds``) can repair that, and the second test proves it does.
"""

from __future__ import annotations

import asyncio

from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from tests.reliability.conftest import bound, create_gang, until, verdict
from tests.scheduler.conftest import running_scheduler


async def test_restarts_and_watch_faults_while_scheduling_lose_no_pod() -> None:
    faults = Faults(seed=11, drop_event_rate=0.1, watch_drop_after=1.0)
    async with (
        SimCluster("12:gpu=8,zones=3", faults=faults, history_size=40) as cluster,
        running_scheduler(
            cluster, resync_period_seconds=2, backoff_initial_seconds=0.2, backoff_max_seconds=1
        ) as scheduler,
    ):
        members: list[str] = []
        for g in range(12):  # 12 gangs of 2-6 one-GPU pods arrive while the server misbehaves
            members += create_gang(cluster, f"w{g:02d}", 2 + g % 5)
            if g % 4 == 1:
                await cluster.restart_server(downtime=0.2)
            elif g % 4 == 2:
                cluster.drop_watches()
            elif g % 4 == 3:
                cluster.expire_history()
            await asyncio.sleep(0.15)
        await until(lambda: set(members) <= set(bound(cluster)), 30, "every member bound")
        faults.calm()
        await asyncio.sleep(0.5)  # nothing more may bind
        assert set(bound(cluster)) == set(members)
        check = verdict(cluster)
        assert check.clean and check.gangs_complete == 12, check
        audit = cluster.audit
        assert audit.double_binds == 0
        assert max(audit.bindings_accepted.values()) == 1
        counts = faults.counts
        assert counts.restarts == 3 and counts.history_expiries == 3 and counts.watches_cut > 0
        assert counts.events_dropped > 0
        informers = scheduler.informers
        assert sum(i.relists for i in informers) > len(informers)  # 410s and resyncs relisted
        assert sum(i.rewatches for i in informers) > 0  # refused watches resumed, no relist
        scheduler.cache.check()


async def test_a_pod_whose_added_event_was_dropped_is_scheduled_after_the_resync() -> None:
    faults = Faults()
    async with (
        SimCluster("2:gpu=8", faults=faults) as cluster,
        running_scheduler(cluster, resync_period_seconds=2.5) as scheduler,
    ):
        pods = next(i for i in scheduler.informers if i.kind.name == "pods")
        # begin right after a relist, so the next one is a whole period away
        relists = pods.relists
        await until(lambda: pods.relists > relists, 6, "a periodic relist")
        relists = pods.relists

        faults.drop_event_rate = 1.0
        (missed,) = create_gang(cluster, "missed", 1)
        await until(lambda: faults.counts.events_dropped >= 1, 2, "the ADDED event dropped")
        faults.drop_event_rate = 0.0
        (seen,) = create_gang(cluster, "seen", 1)  # its event moves the watch past the lost one
        await until(lambda: seen in bound(cluster), 2, "the next pod bound")
        await asyncio.sleep(0.3)
        assert pods.relists == relists, "a relist came early: the test proves nothing"
        assert missed not in bound(cluster), "the watch delivered a dropped event"

        await until(lambda: missed in bound(cluster), 6, "the missed pod bound after the resync")
        assert pods.relists > relists
        assert faults.counts.events_dropped == 1
        scheduler.cache.check()
