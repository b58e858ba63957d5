"""Leader election: one leader schedules, a standby takes over, a leader that cannot renew stops."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from gang.kube.client import make_api_client
from gang.kube.leader import LeaderElector, LeadershipLost
from gang.kube.transport import Kube
from gang.models.settings import LeaderElection
from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from tests.scheduler.conftest import Api, eventually, gang_pod, podgroup

LEASE = {
    "GANG_LEADER_ELECTION__ENABLED": "true",
    "GANG_LEADER_ELECTION__LEASE_DURATION_SECONDS": "2",
    "GANG_LEADER_ELECTION__RENEW_DEADLINE_SECONDS": "1.5",
    "GANG_LEADER_ELECTION__RETRY_PERIOD_SECONDS": "0.25",
    "GANG_SERVER__HOST": "127.0.0.1",
    "GANG_LOGGING__LEVEL": "WARNING",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def gang_process(
    kubeconfig: str, name: str, port: int
) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {**os.environ, **LEASE, "POD_NAME": name}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gang",
        "run",
        "--kubeconfig",
        kubeconfig,
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def holder(api: Api) -> str:
    from kubernetes_asyncio import client as k8s

    coordination: Any = k8s.CoordinationV1Api(api.core.api_client)
    try:
        lease = await coordination.read_namespaced_lease("gang-scheduler", "gang-system")
    except Exception:
        return ""
    return str(lease.spec.holder_identity or "")


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as resp,
    ):
        return resp.status, await resp.text()


async def test_one_leader_schedules_and_a_standby_takes_over() -> None:
    async with SimCluster("4:gpu=8") as cluster, cluster.api_client() as client:
        api = Api(client)
        await api.core.create_namespace({"metadata": {"name": "gang-system"}})
        ports = {"a": free_port(), "b": free_port()}
        kubeconfig = str(cluster.kubeconfig_path)
        async with (
            gang_process(kubeconfig, "a", ports["a"]) as proc_a,
            gang_process(kubeconfig, "b", ports["b"]) as proc_b,
        ):
            procs = {"a": proc_a, "b": proc_b}

            async def elected() -> bool:
                return (await holder(api)).split("_")[0] in procs

            await eventually(elected, within=15)
            leader = (await holder(api)).split("_")[0]
            standby = "b" if leader == "a" else "a"

            async def both_ready() -> bool:
                try:
                    statuses = [(await get(p, "/readyz"))[0] for p in ports.values()]
                    return statuses == [200, 200]
                except aiohttp.ClientError:
                    return False

            await eventually(both_ready, within=15)
            assert (await get(ports[standby], "/readyz"))[1].startswith("standby")

            await api.create_podgroup(podgroup("first", 2))
            await api.create_pods([gang_pod(f"first-{i}", "first", gpu=4) for i in range(2)])

            async def first_bound() -> bool:
                return len(await api.bound()) == 2

            await eventually(first_bound, within=15)

            async def scheduled_by() -> set[str]:
                return {
                    e["reportingInstance"].split("_")[0]
                    for e in await api.events()
                    if e["reason"] == "Scheduled"
                }

            async def first_events() -> bool:
                return bool(await scheduled_by())

            await eventually(first_events)
            assert await scheduled_by() == {leader}  # only the leader schedules
            status, metrics = await get(ports[leader], "/metrics")
            assert status == 200 and "gang_leader 1.0" in metrics
            assert "gang_leader 0.0" in (await get(ports[standby], "/metrics"))[1]

            procs[leader].kill()  # the leader dies without releasing the lease
            await procs[leader].wait()
            loop = asyncio.get_running_loop()
            died = loop.time()

            async def taken_over() -> bool:
                return (await holder(api)).startswith(f"{standby}_")

            await eventually(taken_over, within=10)
            # at most one lease duration (2 s) plus a retry period after the last renewal, and a
            # little slack for process scheduling on a busy machine
            assert loop.time() - died < 2 + 0.25 + 1.5

            await api.create_podgroup(podgroup("second", 2))
            await api.create_pods([gang_pod(f"second-{i}", "second", gpu=4) for i in range(2)])

            async def second_bound() -> bool:
                return {"second-0", "second-1"} <= set(await api.bound())

            await eventually(second_bound, within=15)

            procs[standby].send_signal(signal.SIGTERM)  # graceful: releases the lease
            _, err = await asyncio.wait_for(procs[standby].communicate(), 20)
            assert procs[standby].returncode == 0, err.decode()
            assert await holder(api) == ""
            await api.assert_not_overcommitted()


async def test_a_leader_that_cannot_renew_stops_scheduling_at_once() -> None:
    faults = Faults()
    async with SimCluster("1:gpu=8", faults=faults) as cluster, cluster.api_client() as client:
        await Api(client).core.create_namespace({"metadata": {"name": "gang-system"}})
        config = LeaderElection(
            enabled=True,
            lease_duration_seconds=1.5,
            renew_deadline_seconds=1.0,
            retry_period_seconds=0.1,
        )
        api_client = await make_api_client(str(cluster.kubeconfig_path))
        elector = LeaderElector(Kube(api_client, max_retries=0), config, "lonely")
        leading = asyncio.Event()
        stopped = asyncio.Event()

        async def lead() -> None:
            leading.set()
            try:
                await asyncio.sleep(3600)
            finally:
                stopped.set()

        task = asyncio.create_task(elector.run(lead))
        await asyncio.wait_for(leading.wait(), 5)
        assert elector.is_leader
        faults.error_rate = 1.0  # the apiserver stops answering: no renewal can succeed
        with pytest.raises(LeadershipLost):
            await asyncio.wait_for(task, 5)
        assert stopped.is_set() and not elector.is_leader
        await api_client.close()
