"""Seeded chaos runs (``gang.bench.chaos``), bounded in time, with the invariants at the end.

The full run turns every fault knob on at once while ``gang run`` is SIGKILLed and restarted;
the crash-restart runs only kill the scheduler, more often, while a slow binding path keeps gangs
half-bound at the moment of the kill. The preemption run kills it at evictions, so victims are
left half-evicted and preemptors nominated but unbound when a fresh scheduler takes over.
``gang chaos --runs N`` runs many more seeds by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from gang.bench.chaos import ChaosRun, run_chaos
from gang.bench.chaosplan import ChaosConfig
from gang.bench.supervisor import SchedulerProcess
from gang.sim.cluster import SimCluster

#: each run's faults fall at planned seconds: run alone (README's test command), not beside
#: other tests competing for the cores
pytestmark = pytest.mark.serial


@pytest.fixture(autouse=True)
def _quiet_aiohttp_server() -> Iterator[None]:
    """A client SIGKILLed mid-request makes aiohttp log a traceback: expected in these runs."""
    logger = logging.getLogger("aiohttp.server")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


async def test_a_seeded_chaos_run_keeps_every_invariant() -> None:
    result = await run_chaos(ChaosConfig(seed=7, duration=20, mode="full"))
    print(result.report())
    assert result.ok, result.report()
    injected = result.faults
    assert result.kills >= 2 and result.scheduler_starts == result.kills + 1
    assert injected.restarts >= 1 and injected.history_expiries >= 1
    assert injected.watches_cut >= 1 and injected.events_dropped >= 1
    assert injected.throttled >= 1 and injected.server_errors >= 1
    assert result.verdict.gangs_complete >= 5 and result.bindings >= 30


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_crash_restart_runs_leave_no_partial_gang(seed: int) -> None:
    result = await run_chaos(ChaosConfig(seed=seed, duration=6, mode="crash"))
    print(result.report())
    assert result.ok, result.report()
    assert result.kills >= 1 and result.bindings >= 10


@pytest.mark.parametrize("seed", [1])
async def test_kills_at_evictions_leave_no_partial_victim_gang(seed: int) -> None:
    result = await run_chaos(ChaosConfig(seed=seed, duration=12, mode="preempt"))
    print(result.report())
    assert result.ok, result.report()
    assert result.evictions > 0 and result.victim_gangs > 0, result.report()
    # a kill fell right after an eviction committed (its answer never reached the scheduler),
    # i.e. before the preemptor could bind; a fresh scheduler had to finish the preemption
    assert result.eviction_kills >= 1, result.report()
    assert not result.verdict.partial_gangs and not result.victim_gangs_partial
    assert not result.unserved_preemptors and result.preemptors_bound >= 1


@pytest.mark.parametrize("seed", [2])
async def test_kills_at_reclaim_evictions_and_queue_changes_leave_every_queue_its_share(
    seed: int,
) -> None:
    result = await run_chaos(ChaosConfig(seed=seed, duration=12, mode="reclaim"))
    print(result.report())
    assert result.ok, result.report()
    assert result.evictions > 0 and result.victim_gangs > 0, result.report()
    assert result.eviction_kills >= 1 and result.queue_changes == 4, result.report()
    assert not result.victim_gangs_partial and not result.queue_below_share
    assert not result.unserved_preemptors and result.preemptors_bound == result.preemptors


async def test_a_planned_watch_cut_with_no_watch_open_cuts_the_next_one_opened() -> None:
    """The scheduler (or the server) restarting when a cut falls: the fault is owed, not lost,
    and paid once, on the next watch opened."""
    run = ChaosRun(ChaosConfig(seed=1, duration=1, mode="full"))
    async with SimCluster("1") as cluster:
        run._cluster = cluster
        run._scheduler = SchedulerProcess(cluster.kubeconfig_path)  # never started: not exited
        run.in_chaos = True
        run._cut_watches()
        await run._supervise()  # still no watch open
        assert cluster.faults.counts.watches_cut == 0
        watch = cluster.store.subscribe(cluster.api.rt_pods.storage_key, cluster.store.rv)
        await run._supervise()
        assert cluster.faults.counts.watches_cut == 1
        assert watch.queue.get_nowait() is None  # its stream ends: the client resumes
        await run._supervise()
        assert cluster.faults.counts.watches_cut == 1  # one cut owed, one made
