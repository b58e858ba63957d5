"""Placement decision time in isolation: one gang on a big cluster, no I/O.

The end-to-end benchmark mixes API traffic, parsing and binding; this one times only the
scheduling decision (snapshot + Filter + Score + assign for every member) for a gang on N nodes.
A millisecond figure depends on the machine, so it is reported beside a floor measured in the
same sitting: taking the snapshot and looking at every node once (one vectorised fit check of
one member's requests). The ratio of the two travels between machines; it says how many
"reads of the cluster" a decision costs.

With a topology ask (``--topology required=block,preferred=rack``, over nodes labelled with the
node spec's ``blocks=``/``racks=``), the same gang is timed with the ask and without it in the
same sitting, and their ratio is what a topology costs.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from gang.bench.workload import Rule, rules_spec
from gang.models.settings import ScoreWeights
from gang.models.topologyapis import HOSTNAME, TopologyConstraint
from gang.scheduling.placement import Placement, Placer
from gang.sim.nodespec import BLOCK_LABEL, RACK_LABEL, node_objects, parse_pools
from gang.sim.pods import DEFAULT_TOLERATIONS
from gang.state.cache import ClusterCache
from gang.state.podinfo import parse_pod

#: the levels ``--topology`` names, coarse to fine, and their node labels
LEVELS = {"block": BLOCK_LABEL, "rack": RACK_LABEL, "hostname": HOSTNAME}


def topology_ask(text: str) -> TopologyConstraint:
    """``required=block,preferred=rack`` (either may be left out) over block → rack → host."""
    names = list(LEVELS)
    fields: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        kind, _, level = item.partition("=")
        if kind not in ("required", "preferred") or level not in LEVELS:
            raise ValueError(
                f"--topology: {item!r} must be required=LEVEL or preferred=LEVEL, LEVEL one "
                f"of {', '.join(names)}"
            )
        fields[kind] = names.index(level)
    return TopologyConstraint("bench", tuple(LEVELS.values()), **fields)  # type: ignore[arg-type]


def placement_ms(
    nodes: str = "5000:gpu=8,cpu=64,memory=512Gi,zones=8",
    members: int = 64,
    gpus: int = 1,
    repeat: int = 30,
    rules: list[Rule] | None = None,
    topology: TopologyConstraint | None = None,
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
                    # each with its index, as a training operator, an indexed Job or a
                    # LeaderWorkerSet labels its pods
                    "labels": {
                        "scheduling.x-k8s.io/pod-group": "g",
                        "training.kubeflow.org/replica-index": str(i),
                    },
                },
                "spec": {
                    "schedulerName": "gang-scheduler",
                    # as the API server admits every pod: members then share parsed
                    # constraints only if parsing makes them share
                    "tolerations": [dict(t) for t in DEFAULT_TOLERATIONS],
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
    need = cache.index.vector(pods[0].requests)
    reads = []
    for _ in range(repeat):  # the floor: the snapshot taken, every node looked at once
        start = time.perf_counter()
        snap = cache.snapshot()
        fits = np.all(snap.free[:, : len(need)] >= need, axis=1) & snap.valid
        reads.append((time.perf_counter() - start) * 1000)
        assert int(fits.sum()) == len(cache.nodes)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        # the snapshot is timed too
        result = placer.place(cache.snapshot(), pods, members, topology=topology)
        times.append((time.perf_counter() - start) * 1000)
        assert isinstance(result, Placement) and len(result.assignments) == members
    return {
        "nodes": float(len(cache.nodes)),
        "members": float(members),
        "median_ms": statistics.median(times),
        "p95_ms": sorted(times)[int(0.95 * (len(times) - 1))],
        "first_ms": times[0],
        "read_ms": statistics.median(reads),
        "ratio_to_read": statistics.median(times) / statistics.median(reads),
    }
