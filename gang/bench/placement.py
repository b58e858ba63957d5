"""Placement decision time in isolation: one gang on a big cluster, no I/O.

The end-to-end benchmark mixes API traffic, parsing and binding; this one times only the
scheduling decision (snapshot + Filter + Score + assign for every member) for a gang on N nodes,
which is the part the "< 20 ms for 64 members over 5,000 nodes" target is about.
"""

from __future__ import annotations

import statistics
import time

from gang.bench.workload import Rule, rules_spec
from gang.models.settings import ScoreWeights
from gang.scheduling.placement import Placement, Placer
from gang.sim.nodespec import node_objects, parse_pools
from gang.state.cache import ClusterCache
from gang.state.podinfo import parse_pod


def placement_ms(
    nodes: str = "5000:gpu=8,cpu=64,memory=512Gi,zones=8",
    members: int = 64,
    gpus: int = 1,
    repeat: int = 30,
    rules: list[Rule] | None = None,
) -> dict[str, float]:
    cache = ClusterCache()
    for node in node_objects(parse_pools(nodes)):
        node["spec"] = {}  # as the node controller leaves a Ready node: untainted
        cache.upsert_node(node)
    pods = [
        parse_pod(
            {
                "metadata": {
                    "name": f"m-{i:03d}",
                    "namespace": "bench",
                    "uid": f"u{i}",
                    "labels": {"scheduling.x-k8s.io/pod-group": "g"},
                },
                "spec": {
                    "schedulerName": "gang-scheduler",
                    **rules_spec("g", rules or []),
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {
                                "requests": {
                                    "cpu": "500m",
                                    "memory": "1Gi",
                                    "nvidia.com/gpu": str(gpus),
                                }
                            },
                        }
                    ],
                },
                "status": {"phase": "Pending", "qosClass": "Burstable"},
            }
        )
        for i in range(members)
    ]
    for pod in pods:
        cache.index.vector(pod.requests)
    placer = Placer(cache.index, ScoreWeights(), "topology.kubernetes.io/zone")
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = placer.place(cache.snapshot(), pods, members)  # the snapshot is timed too
        times.append((time.perf_counter() - start) * 1000)
        assert isinstance(result, Placement) and len(result.assignments) == members
    return {
        "nodes": float(len(cache.nodes)),
        "members": float(members),
        "median_ms": statistics.median(times),
        "p95_ms": sorted(times)[int(0.95 * (len(times) - 1))],
        "first_ms": times[0],
    }
