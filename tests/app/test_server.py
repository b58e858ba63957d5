"""/healthz, /readyz, /metrics and /debug/gangs of a running ``gang run`` process (in-process)."""

from __future__ import annotations

import asyncio

import aiohttp

from gang.app.process import Process
from gang.models.settings import Settings
from gang.sim.cluster import SimCluster
from tests.scheduler.conftest import Api, eventually, gang_pod, podgroup


async def test_status_endpoints_and_graceful_stop() -> None:
    async with SimCluster("2:gpu=8") as cluster, cluster.api_client() as client:
        api = Api(client)
        settings = Settings.model_validate(
            {
                "kubeconfig": str(cluster.kubeconfig_path),
                "server": {"host": "127.0.0.1", "port": 0},
                "scheduler": {"default_schedule_timeout_seconds": 30},
            }
        )
        process = Process(settings)
        task = asyncio.create_task(process.run())
        async with aiohttp.ClientSession() as http:

            async def ready() -> bool:
                if process.server is None or not process.server.port:
                    return False
                async with http.get(f"http://127.0.0.1:{process.server.port}/readyz") as resp:
                    return resp.status == 200

            await eventually(ready)
            base = f"http://127.0.0.1:{process.server.port}" if process.server else ""
            async with http.get(base + "/healthz") as resp:
                assert resp.status == 200 and await resp.text() == "ok"

            await api.create_podgroup(podgroup("fits", 2))
            await api.create_pods([gang_pod(f"fits-{i}", "fits", gpu=4) for i in range(2)])
            await api.create_podgroup(podgroup("waits", 3))  # only 2 of 3 members will exist
            await api.create_pods([gang_pod(f"waits-{i}", "waits", gpu=1) for i in range(2)])
            await api.create_podgroup(podgroup("nofit", 2))
            await api.create_pods([gang_pod(f"nofit-{i}", "nofit", gpu=9) for i in range(2)])

            async def fits_bound() -> bool:
                return {"fits-0", "fits-1"} <= set(await api.bound())

            await eventually(fits_bound)

            async def metrics() -> str:
                async with http.get(base + "/metrics") as resp:
                    assert resp.status == 200
                    assert resp.headers["Content-Type"].startswith("text/plain")
                    return await resp.text()

            async def counted() -> bool:
                return "gang_pods_bound_total 2.0" in await metrics()

            await eventually(counted)
            text = await metrics()
            for name in (
                'gang_scheduling_attempts_total{result="scheduled"}',
                'gang_scheduling_attempts_total{result="unschedulable"}',
                "gang_time_to_full_gang_seconds_bucket",
                "gang_gangs_waiting",
                'gang_queue_depth{queue="unschedulable"}',
                "gang_permit_timeouts_total",
                "gang_bind_errors_total",
                "gang_events_posted_total",
                "gang_events_dropped_total 0.0",
                "gang_status_writes_total",
                "gang_status_backlog",
                "gang_pod_condition_writes_total",
                "gang_leader 1.0",
            ):
                assert name in text, name
            samples = {
                line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("gang_informer_")
            }
            # 6 pods created and 2 bound (the pods were created after the first list); 3
            # PodGroups, heard of moments ago; the nodes listed once and not changed since
            assert samples['gang_informer_events_total{kind="pods"}'] >= 8
            assert samples['gang_informer_events_total{kind="podgroups"}'] >= 3
            assert samples['gang_informer_relists_total{kind="pods"}'] == 1
            assert samples['gang_informer_silence_seconds{kind="pods"}'] < 10
            assert samples['gang_informer_events_total{kind="nodes"}'] == 0

            async with http.get(base + "/debug/gangs?format=json") as resp:
                gangs = {g["name"]: g for g in await resp.json()}
            assert gangs["fits"]["bound"] == 2 and gangs["fits"]["why_pending"] is None
            assert gangs["waits"]["reserved"] == 2 and gangs["waits"]["placeholders"] == 1
            assert gangs["waits"]["why_pending"].startswith("waiting for quorum: 2/3")
            assert gangs["waits"]["permit_wait_seconds_left"] > 0
            assert (
                "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
                in gangs["nofit"]["why_pending"]
            )
            async with http.get(base + "/debug/gangs") as resp:
                page = await resp.text()
                assert resp.headers["Content-Type"].startswith("text/html")
                assert "<td>nofit</td>" in page and "Insufficient nvidia.com/gpu" in page

            async with http.post(base + "/debug/gangs", data=b"x" * 4096) as resp:
                assert resp.status == 405  # read-only: nothing here mutates anything
            async with http.delete(base + "/metrics") as resp:
                assert resp.status == 405
            async with http.get(base + "/nope") as resp:
                assert resp.status == 404

        process.stopping.set()
        assert await asyncio.wait_for(task, 20) == 0
        # only-reserved members were released on the way out: nothing of "waits" got bound
        assert not {"waits-0", "waits-1"} & set(await api.bound())
