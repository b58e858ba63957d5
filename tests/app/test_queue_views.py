"""What users see of queues from a running ``gang run`` process: ``/debug/queues``, the
per-queue metrics, ``gang queues`` (the table), ``gang explain`` for a gang its queue holds
back, and the queue objects' own status as each API writes it."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, redirect_stdout

import aiohttp

from gang.app.process import Process
from gang.bench.queueload import KAI, VOLCANO, QueueDef, QueueLoad
from gang.cli import main as gang_main
from gang.models.settings import Settings
from gang.sim.cluster import SimCluster
from tests.scheduler.conftest import eventually


@asynccontextmanager
async def gang_run(cluster: SimCluster) -> AsyncIterator[str]:
    """A ``gang run`` process on ``cluster``; yields its HTTP endpoint once it is ready."""
    settings = Settings.model_validate(
        {"kubeconfig": str(cluster.kubeconfig_path), "server": {"host": "127.0.0.1", "port": 0}}
    )
    process = Process(settings)
    task = asyncio.create_task(process.run())
    try:
        async with aiohttp.ClientSession() as http:

            async def ready() -> bool:
                if process.server is None or not process.server.port:
                    return False
                async with http.get(f"http://127.0.0.1:{process.server.port}/readyz") as r:
                    return r.status == 200

            await eventually(ready)
        assert process.server is not None
        yield f"http://127.0.0.1:{process.server.port}"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = gang_main(list(argv))
    return code, out.getvalue()


async def test_queues_as_users_see_them() -> None:
    async with (
        SimCluster("4:gpu=8,cpu=32,memory=256Gi") as cluster,
        cluster.api_client() as client,
        gang_run(cluster) as base,
        aiohttp.ClientSession() as http,
    ):
        load = QueueLoad(
            client,
            KAI,
            [QueueDef("research", quota=16, backlog=0), QueueDef("capped", limit=8, backlog=0)],
        )
        await load.setup()
        for _ in range(2):
            await load.add_gang("research")  # 2 x 8 GPUs: within its quota
        for _ in range(2):
            await load.add_gang("capped")  # the second would pass its limit of 8

        async def queues() -> list[dict[str, object]]:
            async with http.get(base + "/debug/queues") as resp:
                assert resp.status == 200
                rows: list[dict[str, object]] = await resp.json()
                return rows

        async def settled() -> bool:
            rows = {r["name"]: r for r in await queues()}
            return (
                rows.get("research", {}).get("allocated", {}).get("nvidia.com/gpu") == "16"
                and rows.get("capped", {}).get("allocated", {}).get("nvidia.com/gpu") == "8"
                and rows["capped"]["pending_gangs"] == 1
            )

        await eventually(settled, within=15)
        rows = {r["name"]: r for r in await queues()}
        research, capped = rows["research"], rows["capped"]
        assert research["api"] == "kai" and research["quota"] == {"nvidia.com/gpu": "16"}
        # 32 GPUs; research asks for 16 (its quota), capped for 16 but may hold 8: a fair
        # share is never more than a queue asks for, nor more than its limit
        assert research["fair_share"]["nvidia.com/gpu"] == "16"
        assert capped["fair_share"]["nvidia.com/gpu"] == "8"
        assert capped["limit"] == {"nvidia.com/gpu": "8"} and capped["problem"] is None

        async with http.get(base + "/metrics") as resp:
            metrics = await resp.text()
        assert (
            'gang_queue_allocated{api="kai",queue="research",resource="nvidia.com/gpu"} 16.0'
            in metrics
        )
        assert 'gang_queue_pending_gangs{api="kai",queue="capped"} 1.0' in metrics

        code, table = await asyncio.to_thread(_cli, "queues", "--scheduler", base)
        assert code == 0
        header, *lines = table.splitlines()
        assert header.split() == [
            "QUEUE", "API", "PARENT", "WEIGHT", "QUOTA", "LIMIT", "FAIR", "ALLOCATED", "STANDING"
        ]  # fmt: skip
        research_line = next(line for line in lines if line.startswith("research"))
        assert "gpu 16" in research_line and "1.00" in research_line  # 16 of a fair 16
        assert "capped (kai): 1 gang(s) waiting" in table

        code, explained = await asyncio.to_thread(
            _cli, "explain", "--scheduler", base, "capped/capped-g0001"
        )
        assert code == 0, explained
        assert "QUEUE-BLOCKED" in explained
        assert "queue capped at its limit: holds 8 GPUs of its limit 8 GPUs" in explained
        assert "raise the queue's limit" in explained

        async def kai_status() -> bool:
            queue = await load.custom.get_cluster_custom_object(
                "scheduling.run.ai", "v2", "queues", "research"
            )
            status = queue.get("status") or {}
            return status.get("allocated", {}).get("nvidia.com/gpu") == "16"

        await eventually(kai_status)


async def test_volcano_queue_status_is_written_as_volcano_writes_it() -> None:
    async with (
        SimCluster("2:gpu=8,cpu=32,memory=256Gi") as cluster,
        cluster.api_client() as client,
        gang_run(cluster),
    ):
        load = QueueLoad(client, VOLCANO, [QueueDef("team", weight=2, backlog=0)])
        await load.setup()
        await load.add_gang("team")

        async def written() -> bool:
            queue = await load.custom.get_cluster_custom_object(
                "scheduling.volcano.sh", "v1beta1", "queues", "team"
            )
            status = queue.get("status") or {}
            return (
                status.get("state") == "Open"
                and status.get("allocated", {}).get("nvidia.com/gpu") == "8"
                and status.get("running") == 1
            )

        await eventually(written, within=15)
