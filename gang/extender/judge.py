"""One pod against the nodes kube-scheduler asks about: gang's Filter verdicts and Score, scaled.

The verdicts come from ``Placer.evaluate`` — the same Filter and Score plugins, on the same
kind of snapshot, as a gang's scheduling cycle — so the extender never disagrees with
``gang run`` about a node. What differs is where the snapshot comes from (the request's node
objects, or gang's informer-fed cache; see ``gang.extender.server``) and the scale of the
scores:

- gang's total for a node is a weighted sum of 0..100 normalized plugin scores, so at most
  ``100 * (sum of the weights)``. kube-scheduler wants 0..10 (``MaxExtenderPriority``) and
  multiplies it by the extender's ``weight`` and by 10. The extender's score is
  ``round(10 * total / max_total)``, rounded half up and clamped to 0..10: linear over the
  maximum possible total, so the order of gang's preferences survives (up to the 11 levels
  the protocol allows).
- GangPacking is left out of ``max_total``: it prefers the topology domains already holding
  the pod's gang during a gang's cycle, and an extender call is one pod outside any cycle, so
  it scores 0 on every node there and would only squeeze the range.
- A node the pod cannot go to scores 0.

A node rejected by a static filter (cordon, taints, node affinity) is reported as
*unresolvable* — kube-scheduler's own plugins say UnschedulableAndUnresolvable for those, and
preemption cannot help; one rejected for resources or host ports is merely failed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from gang.extender.models import MAX_EXTENDER_PRIORITY
from gang.scheduling.framework import MAX_NODE_SCORE
from gang.scheduling.placement import Evaluation, Placer
from gang.scheduling.plugins import GangPacking
from gang.state.cache import ClusterCache
from gang.state.podinfo import PodInfo

REASON_UNKNOWN_NODE = "node(s) unknown to the gang extender (not in its node cache)"
REASON_REJECTED = "node(s) rejected by the gang extender"


@dataclass(slots=True)
class Verdict:
    """The answer for the nodes asked about, in the order they were asked."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    scores: dict[str, int] = field(default_factory=dict)  # every node asked about, 0..10


def max_total(evaluation: Evaluation) -> float:
    """The largest weighted total a node can reach in this single-pod evaluation: the Score
    plugins that scored the pod (a rule's score counts only for pods stating that rule)."""
    weight = sum(w for name, w in evaluation.weights.items() if name != GangPacking.name)
    return MAX_NODE_SCORE * weight


def extender_score(total: float, maximum: float) -> int:
    """gang's weighted total → kube-scheduler's 0..10: linear over ``maximum``, half up."""
    if maximum <= 0 or not math.isfinite(total):
        return 0
    scaled = math.floor(total / maximum * MAX_EXTENDER_PRIORITY + 0.5)
    return max(0, min(MAX_EXTENDER_PRIORITY, scaled))


def judge(cache: ClusterCache, placer: Placer, pod: PodInfo, names: Sequence[str]) -> Verdict:
    """Filter and score ``pod`` on the nodes ``names`` of ``cache`` (nothing is consumed).

    ``placer`` must have been built over ``cache.index``. Raises ``PluginError`` if a plugin
    fails or overruns its budget.
    """
    cache.index.vector(pod.requests)  # register the pod's resources before the snapshot
    snap = cache.snapshot()
    evaluation = placer.evaluate(snap, pod)
    static = placer.static(snap, pod.constraints)
    top = max_total(evaluation)
    verdict = Verdict()
    for name in names:
        entry = cache.nodes.get(name)
        if entry is None:
            verdict.failed[name] = REASON_UNKNOWN_NODE
            verdict.scores[name] = 0
            continue
        row = entry.row
        if evaluation.feasible[row]:
            verdict.passed.append(name)
            verdict.scores[name] = extender_score(evaluation.scores.get(row, 0.0), top)
            continue
        verdict.scores[name] = 0
        reason = ", ".join(evaluation.reasons.get(row) or [REASON_REJECTED])
        if not static.mask[row]:
            verdict.unresolvable[name] = reason
        else:
            verdict.failed[name] = reason
    return verdict


def cache_of_nodes(nodes: Sequence[dict[str, object]]) -> tuple[ClusterCache, list[str]]:
    """A cache holding only ``nodes`` (no pods: free = allocatable) and their names in order;
    objects without a name are left out (there is no name to answer for), and of two objects
    with one name the first counts."""
    cache = ClusterCache(capacity=max(1, len(nodes)))
    names: list[str] = []
    for raw in nodes:
        meta = raw.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(name, str) and name and name not in cache.nodes:
            cache.upsert_node(raw)
            if name in cache.nodes:
                names.append(name)
    return cache, names
