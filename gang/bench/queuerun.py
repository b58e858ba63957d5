"""``gang bench --workload queues``: a shared cluster's queues over time, with gang's processes.

The scheduler tests run the queue scenarios in-process and compressed in time; this runs them as
a user would — ``gang sim serve`` (or a real cluster, ``--kubeconfig``) and ``gang run`` as
processes, the driver of ``gang.bench.queueload`` beside them — for as long as asked, through
one queue API, and reports each queue's GPUs over time and its time-averaged share over the
second half of the run beside the share it should have.

Scenarios (the issue's, in GPUs):
- ``weighted``: 128 GPUs, two queues weighted 1:3 (an ElasticQuota: ``min`` 32/96), both
  backlogged with 8 x 1-GPU gangs: 32/96;
- ``lend``: quotas 32/32/64 with the third idle: 64/64/0, every GPU in use;
- ``limit``: one queue limited to 24 on an idle 128-GPU cluster: 24, never more;
- ``tree``: 300 GPUs, P1 (children weighted 1/1/3) and P2 (one child), P1:P2 1:1, gangs of
  2 x 1 GPU: 30/30/90/150 (Volcano and KAI: ElasticQuotas have no parents).
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gang.bench.queueload import ELASTIC_QUOTA, QueueDef, QueueLoad
from gang.bench.runner import (
    ChildProcesses,
    cancel_on_sigterm,
    free_port,
    machine,
    process_log_path,
    scheduler_args,
    stop_process,
)


@dataclass(frozen=True, slots=True)
class Scenario:
    nodes: str
    queues: tuple[QueueDef, ...]
    #: GPUs each queue should hold
    expected: dict[str, int]
    members: int = 8
    finish: bool = True


def scenario(name: str, api: str) -> Scenario:
    eq = api == ELASTIC_QUOTA
    queues: tuple[QueueDef, ...]
    if name == "weighted":
        queues = (
            QueueDef("team-a", quota=32, backlog=3)
            if eq
            else QueueDef("team-a", weight=1, backlog=3),
            QueueDef("team-b", quota=96, backlog=3)
            if eq
            else QueueDef("team-b", weight=3, backlog=3),
        )
        return Scenario("16:gpu=8,cpu=64,memory=512Gi", queues, {"team-a": 32, "team-b": 96})
    if name == "lend":
        queues = (
            QueueDef("team-a", quota=32, backlog=3),
            QueueDef("team-b", quota=32, backlog=3),
            QueueDef("team-c", quota=64, backlog=0),
        )
        expected = {"team-a": 64, "team-b": 64, "team-c": 0}
        return Scenario("16:gpu=8,cpu=64,memory=512Gi", queues, expected)
    if name == "limit":
        queues = (QueueDef("capped", limit=24, backlog=4),)
        return Scenario("16:gpu=8,cpu=64,memory=512Gi", queues, {"capped": 24})
    if name == "tree":
        if eq:
            raise ValueError("the tree scenario needs parents: ElasticQuotas have none")
        queues = (
            QueueDef("p1", weight=1, backlog=0),
            QueueDef("p2", weight=1, backlog=0),
            QueueDef("a1", weight=1, parent="p1", backlog=20),
            QueueDef("a2", weight=1, parent="p1", backlog=20),
            QueueDef("a3", weight=3, parent="p1", backlog=50),
            QueueDef("b1", weight=1, parent="p2", backlog=80),
        )
        expected = {"a1": 30, "a2": 30, "a3": 90, "b1": 150}
        return Scenario("75:gpu=4,cpu=64,memory=512Gi", queues, expected, members=2)
    if name == "reclaim":
        # the measurement: A fills 128 GPUs with 8 x 1-GPU gangs, B (equal weight)
        # returns with 8 such gangs; nothing finishes: B gets its half only by reclaim
        queues = (
            QueueDef("team-a", backlog=0, gangs=16),
            QueueDef("team-b", backlog=0, gangs=8, arrive_at=5.0),
        )
        expected = {"team-a": 64, "team-b": 64}
        return Scenario("16:gpu=8,cpu=64,memory=512Gi", queues, expected, finish=False)
    raise ValueError(f"unknown scenario {name!r}: weighted, lend, limit, tree or reclaim")


@dataclass(slots=True)
class QueueResult:
    scenario: str
    api: str
    seconds: float
    finish_every: float
    machine: str
    expected: dict[str, int]
    #: time-averaged GPUs per queue over the second half
    second_half: dict[str, float] = field(default_factory=dict)
    #: per second: GPUs per queue (the last sample of each second)
    timeline: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    peak: dict[str, int] = field(default_factory=dict)
    finished: int = 0
    #: seconds into the run at which each queue first held what it should (never: absent)
    reached: dict[str, float] = field(default_factory=dict)

    def worst_miss(self) -> float:
        return max(
            (abs(self.second_half.get(q, 0.0) - v) for q, v in self.expected.items()), default=0.0
        )


async def run_queues(
    name: str,
    api: str,
    seconds: float,
    finish_every: float,
    kubeconfig: str | None = None,
    say: Any = print,
) -> QueueResult:
    from gang.kube.client import make_api_client

    plan = scenario(name, api)
    children = ChildProcesses()
    with (
        tempfile.TemporaryDirectory(prefix="gang-bench-") as tmp,
        process_log_path(Path(tmp)).open("wb") as log,
    ):
        children.log = log
        if kubeconfig is None:
            kubeconfig = await children.start_simulator(Path(tmp), plan.nodes)
        client = await make_api_client(kubeconfig)
        try:
            with cancel_on_sigterm():
                scheduler = await children.spawn(*scheduler_args(kubeconfig, free_port()))
                await asyncio.sleep(2.0)  # its informers list before the first gang arrives
                load = QueueLoad(
                    client, api, plan.queues, members=plan.members, finish_every=finish_every
                )
                await load.setup()
                shares = await load.run(seconds, finish=plan.finish)
                await stop_process(scheduler)
        finally:
            await client.close()
            await children.stop_all()
    result = QueueResult(name, api, seconds, finish_every, machine(), plan.expected)
    result.second_half = {q: round(v, 1) for q, v in shares.average(seconds / 2).items()}
    result.peak = {q.name: shares.peak(q.name) for q in plan.queues}
    result.finished = load.finished
    for queue, want in plan.expected.items():
        hit = next((at for at, held in shares.samples if held.get(queue, 0) == want), None)
        if hit is not None:
            result.reached[queue] = round(hit, 2)
    by_second: dict[int, dict[str, int]] = {}
    for at, held in shares.samples:
        by_second[int(at)] = held
    result.timeline = sorted(by_second.items())
    return result


def report(result: QueueResult) -> str:
    queues = list(result.expected)
    lines = [
        f"queues: scenario {result.scenario} via {result.api}, {result.seconds:g} s, "
        + (
            f"a gang finishing every {result.finish_every:g} s ({result.finished} finished)"
            if scenario(result.scenario, result.api).finish
            else "nothing finishing"
        )
        + f", {result.machine}",
        "  t(s)  " + "  ".join(f"{q:>7}" for q in queues),
    ]
    for second, held in result.timeline:
        lines.append(f"  {second:>4}  " + "  ".join(f"{held.get(q, 0):>7}" for q in queues))
    lines.append(
        "  second half, time-averaged: "
        + ", ".join(
            f"{q} {result.second_half.get(q, 0.0):g} (fair {v})" for q, v in result.expected.items()
        )
    )
    lines.append(f"  worst miss: {result.worst_miss():.1f} GPUs; peak: {result.peak}")
    if result.scenario == "reclaim":
        arrived = next(
            q.arrive_at
            for q in scenario(result.scenario, result.api).queues
            if q.gangs and q.arrive_at
        )
        reached = result.reached.get("team-b")
        lines.append(
            "  team-b arrived at "
            f"{arrived:g} s and "
            + (
                f"held its 64 GPUs {reached - arrived:.1f} s later"
                if reached is not None
                else "never held its 64 GPUs"
            )
        )
    return "\n".join(lines)
