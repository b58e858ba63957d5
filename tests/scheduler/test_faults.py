"""A flaky apiserver (429s with Retry-After, 500s, latency) delays gangs but never splits them."""

from __future__ import annotations

from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from tests.scheduler.conftest import Api, eventually, gang_pod, podgroup, running_scheduler


async def test_binds_are_retried_through_errors_and_throttling() -> None:
    faults = Faults(seed=3)
    async with (
        SimCluster("4:gpu=8,zones=2", faults=faults) as cluster,
        cluster.api_client() as client,
    ):
        api = Api(client)
        await api.create_podgroup(podgroup("flaky", 8))
        await api.create_pods([gang_pod(f"flaky-{i}", "flaky", gpu=2) for i in range(8)])
        await api.create_pods([gang_pod(f"solo-{i}", None, gpu=1) for i in range(4)])
        # from now on half of all requests fail, the scheduler's lists and binds included
        faults.error_rate, faults.throttle_rate, faults.latency_jitter = 0.3, 0.2, 0.02
        async with running_scheduler(cluster) as scheduler:

            async def all_bound() -> bool:
                try:
                    return len(await api.bound()) == 12
                except Exception:  # the test's own reads meet the injected faults too
                    return False

            await eventually(all_bound, within=30)
            faults.error_rate = faults.throttle_rate = 0.0
            assert faults.counts.server_errors + faults.counts.throttled > 0
            assert scheduler.binder.errors > 0  # some binds did fail and were retried
            await api.assert_not_overcommitted()
            scheduler.cache.check()
