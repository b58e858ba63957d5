"""The ceiling a scheduler's throughput is measured against: bindings with no decisions.

A pods/s figure depends on the machine (a plain Python loop runs 2-3x slower on one than on
another) and on the API server; alone it says little. What it means is its ratio to the most
the same server, on the same machine, in the same sitting, can take: a binder that already
knows every pod's node and does nothing but POST bindings. That is what this module is.

It runs as its own process (``python -m gang.bench.ceiling``), like the scheduler it stands
in for, so it never shares an event loop with the driver that watches and timestamps. It
lists the unbound pods of a namespace and the nodes, assigns pods to nodes first-fit on
their requests (the answer, known before the first POST), then binds them in equal segments,
one per concurrency level, with that many POSTs in flight. Each segment's rate is bindings
answered over the segment's span; the ceiling is the best segment. On a simulator with a
real server's latency shape (``gang sim serve --api-latency real``) the rate rises with
concurrency and then saturates, so the levels show where.

Nothing here is gang's scheduling code: the assignment is a plain greedy fill, and the POSTs
go through the same transport (``gang.kube.transport.Kube.bind``) gang's binder uses.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from gang.kube.transport import NODES, PODS, Kube, KubeError
from gang.models.quantity import resource_units
from gang.state.podinfo import pod_requests

Obj = dict[str, Any]
#: the in-flight POSTs of each segment unless told otherwise: around and past where a real
#: server saturates (measured: 714 pods/s at 64, 909 at 128)
DEFAULT_LEVELS: tuple[int, ...] = (64, 128, 256)


@dataclass(frozen=True, slots=True)
class Segment:
    concurrency: int
    pods: int
    seconds: float
    errors: int

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else 0.0


@dataclass(slots=True)
class CeilingResult:
    pods: int
    unplaced: int
    segments: list[Segment]
    #: the binder's own CPU seconds while it POSTed the bindings (after its list and plan):
    #: what a binding costs a client that decides nothing, to set gang's cost per pod against
    cpu_seconds: float = 0.0

    @property
    def pods_per_second(self) -> float:
        """The ceiling: the best segment's rate."""
        return max((s.pods_per_second for s in self.segments), default=0.0)

    @property
    def best_concurrency(self) -> int:
        best = max(self.segments, key=lambda s: s.pods_per_second, default=None)
        return best.concurrency if best is not None else 0

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        body["pods_per_second"] = self.pods_per_second
        body["best_concurrency"] = self.best_concurrency
        for seg, raw in zip(self.segments, body["segments"], strict=True):
            raw["pods_per_second"] = seg.pods_per_second
        return body


def assign(nodes: Iterable[Obj], pods: Iterable[Obj]) -> tuple[list[tuple[str, str, str]], int]:
    """First-fit: each pod (in the order given) on the first node with room for its requests.
    Returns (namespace, pod, node) triples and how many pods found no room."""
    free: list[tuple[str, dict[str, int]]] = []
    for node in nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        room = {k: resource_units(k, v) for k, v in allocatable.items()}
        free.append((node["metadata"]["name"], room))
    out: list[tuple[str, str, str]] = []
    unplaced = 0
    start = 0  # nodes before it are full for every pod seen so far of the same shape
    for pod in pods:
        need = pod_requests(pod.get("spec") or {})
        for i in range(start, len(free)):
            name, room = free[i]
            if all(room.get(k, 0) >= v for k, v in need.items()):
                for k, v in need.items():
                    room[k] -= v
                meta = pod["metadata"]
                out.append((meta["namespace"], meta["name"], name))
                break
            if i == start:
                start += 1  # (the workloads here are one shape: a full node stays full)
        else:
            unplaced += 1
    return out, unplaced


def segments(items: Sequence[Any], levels: Sequence[int]) -> list[Sequence[Any]]:
    """``items`` in ``len(levels)`` consecutive, nearly equal parts."""
    count = len(levels)
    size, extra = divmod(len(items), count)
    out, at = [], 0
    for i in range(count):
        step = size + (1 if i < extra else 0)
        out.append(items[at : at + step])
        at += step
    return out


async def bind_segment(
    kube: Kube, assignments: Sequence[tuple[str, str, str]], concurrency: int
) -> Segment:
    """POST every binding of ``assignments`` with ``concurrency`` in flight; one retry loop
    per pod on 429/5xx (honouring Retry-After), as any client does."""
    queue = iter(assignments)
    errors = 0

    async def worker() -> None:
        nonlocal errors
        for namespace, name, node in queue:
            while True:
                try:
                    await kube.bind(namespace, name, node)
                    break
                except KubeError as err:
                    errors += 1
                    if not err.retryable:
                        break
                    await asyncio.sleep(err.retry_after if err.retry_after is not None else 0.05)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return Segment(concurrency, len(assignments), time.perf_counter() - start, errors)


async def measure(
    kubeconfig: str,
    namespace: str,
    levels: Sequence[int] = DEFAULT_LEVELS,
    node_labels: Mapping[str, str] | None = None,
) -> CeilingResult:
    """Bind every unbound pod of ``namespace`` (onto nodes carrying ``node_labels``, if given)
    in one segment per concurrency level."""
    from gang.kube.client import make_api_client

    client = await make_api_client(kubeconfig)
    try:
        kube = Kube(client)
        wanted = dict(node_labels or {})
        nodes = [
            n
            for n in (await kube.list(NODES))[0]
            if not (n.get("spec") or {}).get("unschedulable")
            and wanted.items() <= ((n["metadata"].get("labels") or {}).items())
        ]
        pods = [
            p
            for p in (await kube.list(PODS))[0]
            if p["metadata"].get("namespace") == namespace
            and not (p.get("spec") or {}).get("nodeName")
        ]
        pods.sort(key=lambda p: p["metadata"]["name"])
        plan, unplaced = assign(nodes, pods)
        cpu = time.process_time()
        done = [
            await bind_segment(kube, part, level)
            for part, level in zip(segments(plan, levels), levels, strict=True)
        ]
        return CeilingResult(len(plan), unplaced, done, time.process_time() - cpu)
    finally:
        await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gang.bench.ceiling",
        description="Bind a namespace's unbound pods with no decisions: the server's ceiling.",
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument(
        "--levels",
        default=",".join(map(str, DEFAULT_LEVELS)),
        help="bindings in flight per segment, comma-separated",
    )
    parser.add_argument("--node-label", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
        if not levels or min(levels) < 1:
            raise ValueError
    except ValueError:
        parser.error(f"--levels: positive integers, comma-separated, not {args.levels!r}")
    labels = dict(item.split("=", 1) for item in args.node_label)
    result = asyncio.run(measure(args.kubeconfig, args.namespace, levels, labels))
    sys.stdout.buffer.write(orjson.dumps(result.to_json()) + b"\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
