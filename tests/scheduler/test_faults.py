"""A flaky apiserver (429s with Retry-After, 500s, latency) delays gangs but never splits them."""

from __future__ import annotations

from gang.sim.faults import Faults
from tests.scheduler.conftest import eventually, gang_env, gang_pod, podgroup


async def test_binds_are_retried_through_errors_and_throttling() -> None:
    faults = Faults(seed=3)
    async with gang_env("4:gpu=8,zones=2", {"faults": faults}) as env:
        api = env.api
        await api.create_podgroup(podgroup("flaky", 8))
        await api.create_pods([gang_pod(f"flaky-{i}", "flaky", gpu=2) for i in range(8)])
        await api.create_pods([gang_pod(f"solo-{i}", None, gpu=1) for i in range(4)])
        # from now on a quarter of all requests fail: the binds must push through
        faults.error_rate, faults.throttle_rate, faults.latency_jitter = 0.15, 0.1, 0.02

        async def all_bound() -> bool:
            try:
                return len(await api.bound()) == 12
            except Exception:  # our own checks also meet the injected faults
                return False

        await eventually(all_bound, within=30)
        faults.error_rate = faults.throttle_rate = 0.0
        assert faults.counts.server_errors + faults.counts.throttled > 0
        assert env.scheduler.binder.errors > 0  # some binds did fail and were retried
        await api.assert_not_overcommitted()
        env.scheduler.cache.check()
