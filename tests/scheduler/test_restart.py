"""After a restart nothing is known but what the API says: half-bound gangs complete first, nearby."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from gang.sim.cluster import SimCluster
from tests.scheduler.conftest import Api, eventually, gang_pod, podgroup, running_scheduler


async def test_half_bound_gang_completes_near_its_bound_members() -> None:
    async with SimCluster("8:gpu=8,zones=2") as cluster, cluster.api_client() as client:
        api = Api(client)
        await api.create_podgroup(podgroup("half", 8))
        await api.create_pods([gang_pod(f"half-{i}", "half", gpu=4) for i in range(8)])
        # a previous scheduler instance bound three members into zone-1, then died
        for i, node in enumerate(["node-00001", "node-00003", "node-00003"]):
            await api.bind(f"half-{i}", node)
        # a competing gang that would also like zone-1
        await api.create_podgroup(podgroup("other", 4))
        await api.create_pods(
            [gang_pod(f"other-{i}", "other", gpu=8, priority_class=None) for i in range(4)]
        )
        async with running_scheduler(cluster):

            async def done() -> bool:
                return {f"half-{i}" for i in range(8)} <= set(await api.bound())

            await eventually(done)
            bound = await api.bound()
            nodes = {
                n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
                for n in await api.raw_nodes()
            }
            assert {nodes[bound[f"half-{i}"]] for i in range(8)} == {"zone-1"}
            assert bound["half-0"] == "node-00001"  # facts stay facts: no re-binding
            await api.assert_not_overcommitted()


@pytest.mark.parametrize("event_loop", ["auto", "asyncio"])
async def test_gang_run_command_against_a_kubeconfig(event_loop: str) -> None:
    """``gang run --kubeconfig`` as a user runs it: a separate process, SIGTERM to stop; on
    uvloop (the default where installed, as here) and on asyncio's own loop."""
    async with SimCluster("2:gpu=8") as cluster, cluster.api_client() as client:
        api = Api(client)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gang",
            "run",
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "--log-level",
            "INFO",
            "--event-loop",
            event_loop,
            "--port",
            "0",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await api.create_podgroup(podgroup("cli", 2))
            await api.create_pods([gang_pod(f"cli-{i}", "cli", gpu=2) for i in range(2)])

            async def bound() -> bool:
                return len(await api.bound()) == 2

            await eventually(bound, within=20)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0, err.decode()
        expected = "uvloop" if event_loop == "auto" else "asyncio"
        assert f"event loop: {expected}" in err.decode()
