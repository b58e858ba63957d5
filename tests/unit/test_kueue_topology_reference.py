"""Topology placement against Kueue's ``TestFindTopologyAssignments`` table, as data.

``tests/data/kueue/tas_assignments.yaml`` holds every case of the table: nodes with labels,
allocatable and conditions, pods already running, the topology levels, and per pod set a count,
a request and a topology request; Kueue's answer is how many pods go into each finest-level
domain, or a failure ("allows to fit only K out of N"). Each case here becomes a real
``ClusterCache`` (nodes and running pods through the same calls the informers make), a
``TopologyConstraint`` as gang resolves one, and the real ``Placer``; the pods placed per leaf
(per node for a hostname leaf, else per leaf's label values) must equal Kueue's, and a failure
must hold the same K of N.

Translations, each what a live cluster does: a node whose Ready condition is not True carries
the ``node.kubernetes.io/not-ready`` NoSchedule taint (the node lifecycle controller puts it
there; Kueue reads the condition, kube-scheduler and gang the taint); the flavor's node labels
become the pod set's node selector (a flavor admits only those nodes); a pod-set group (a leader
pod set and its workers) is one gang, placed in one call, gang telling the leader by its shape.
Cases using what gang does not have (elastic workload slices, node replacement from a Workload's
status, balanced placement and preferred-affinity gates, multi-layer slices, Kueue's usage not
yet running as pods, a leader of the workers' own shape) are strict xfails naming it; so is every
case where gang decides differently on purpose, with the reason.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from gang.models.settings import ScoreWeights
from gang.models.topologyapis import (
    HOSTNAME,
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    KUEUE_SLICE_REQUIRED,
    KUEUE_SLICE_SIZE,
    KUEUE_TOPOLOGY,
    Topology,
    TopologyConstraint,
    asks_in_annotations,
    resolve,
)
from gang.scheduling.placement import Placement, Placer
from gang.state.cache import ClusterCache
from gang.state.podinfo import PodInfo, parse_pod

DATA = Path(__file__).resolve().parents[1] / "data" / "kueue" / "tas_assignments.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load(DATA.read_text())["cases"]
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
_FIT = re.compile(r"allows to fit only (\d+) out of (\d+)|doesn't allow to fit any of (\d+)")

#: cases gang decides differently, by what it does not build (case numbers: the ``#i`` of each
#: case's ``source``); every other case agrees
NOT_BUILT: dict[str, tuple[str, list[int]]] = {
    "balanced": (
        "Kueue's balanced placement (alpha gate TASBalancedPlacement): gang takes the fewest "
        "domains, the last one tightest, and does not even out counts between them",
        [58, 59, 60, 61, 64, 65, 66, 67, 68, 69, 70, 72, 73, 74, 75],
    ),
    "leader-of-the-workers-shape": (
        "gang tells a leader by its shape: one with the workers' requests is one more member, "
        "so 8 workers in slices of 2 and their leader are 9 members no slice of 2 divides",
        [89],
    ),
    "preferred-affinity": (
        "preferred node affinity ordering domains (alpha gate TASRespectNodeAffinityPreferred); "
        "gang chooses domains by capacity and scores nodes by the preference inside them",
        [121, 122, 126],
    ),
    "multi-layer": (
        "multi-layer slices (Kueue's podset-slice-required-topology-constraints): gang has one "
        "slice layer",
        [114, 116, 117, 118, 119, 120],
    ),
    "elastic": (
        "Kueue elastic workload slices keep a previous slice's assignment; gang has no workload "
        "slices",
        [107, 109, 110, 111],
    ),
    "node-replacement": (
        "node replacement from a Kueue Workload's admission and status.unhealthyNodes; gang "
        "re-places a lost member inside the required domain of the members still running",
        [0],
    ),
    "flavor-usage": (
        "capacity Kueue has admitted but that runs as no pod yet (its own or a sibling "
        "flavor's); gang counts the pods there are",
        [133, 135],
    ),
}
XFAIL = {i: why for why, ids in NOT_BUILT.values() for i in ids}
#: Kueue refuses these requests before placing; gang refuses the same asks when it resolves them
REFUSED = {80, 81, 82}


def _quantity(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == "cpu" else str(amount)


def _node(spec: dict[str, Any]) -> dict[str, Any]:
    taints = list(spec.get("taints") or [])
    if not spec.get("ready", True):
        taints.append(NOT_READY_TAINT)
    allocatable = {k: str(v) for k, v in spec["allocatable"].items()}
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec["name"], "labels": dict(spec.get("labels") or {})},
        "spec": {"taints": taints, "unschedulable": bool(spec.get("unschedulable"))},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }
    return node


def _pod(
    name: str,
    requests: dict[str, Any],
    *,
    node: str | None = None,
    phase: str | None = None,
    selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    affinity: dict[str, Any] | None = None,
) -> PodInfo:
    spec: dict[str, Any] = {
        "schedulerName": "gang-scheduler",
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = affinity
    raw = {
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": spec,
        "status": {"phase": phase} if phase else {},
    }
    return parse_pod(raw)


def _constraint(levels: list[str], podset: dict[str, Any]) -> TopologyConstraint:
    ask = podset.get("topology") or {}
    index = {label: i for i, label in enumerate(levels)}
    slice_label = ask.get("slice_required_topology")
    if ask.get("slice_constraints"):
        slice_label = ask["slice_constraints"][0]["topology"]
    required = index[ask["required"]] if ask.get("required") else None
    preferred = index[ask["preferred"]] if ask.get("preferred") else None
    return TopologyConstraint(
        "default",
        tuple(levels),
        required=required,
        preferred=preferred,
        slice_level=index[slice_label] if slice_label else None,
        slice_size=int(ask.get("slice_size") or 1),
        unconstrained=bool(ask.get("unconstrained") or podset.get("implied"))
        or (required is None and preferred is None),
    )


def _outcome(case: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Per pod set: ("fit", leaf values → count) or ("miss", K, N)."""
    cache = ClusterCache()
    for spec in case["nodes"]:
        cache.upsert_node(_node(spec))
    for i, running in enumerate(case.get("pods") or []):
        if running["node"]:
            info = _pod(
                f"running-{i}", running["requests"], node=running["node"], phase=running["phase"]
            )
            if not info.terminal:
                cache.upsert_pod(info)
    levels: list[str] = case["levels"]
    hostname_leaf = levels[-1] == HOSTNAME
    selector = dict(case["flavor"]["node_labels"] or {})
    outcomes: list[tuple[Any, ...]] = []
    podsets: list[dict[str, Any]] = case["request"]["podsets"]
    placer = Placer(cache.index, ScoreWeights(), "topology.kubernetes.io/zone")
    pods_of = {}
    for n, podset in enumerate(podsets):
        requests = {r: _quantity(r, v) for r, v in podset["requests"].items() if v}
        affinity = None
        required_terms = (podset.get("node_affinity") or {}).get("required")
        if required_terms:
            affinity = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": required_terms
                    }
                }
            }
        pods_of[n] = [
            _pod(
                f"ps{n}-{i}",
                requests,
                selector={**selector, **(podset.get("node_selector") or {})},
                tolerations=podset.get("tolerations"),
                affinity=affinity,
            )
            for i in range(podset["count"])
        ]
        for pod in pods_of[n]:
            cache.index.vector(pod.requests)
    snap = cache.snapshot()  # one snapshot: each pod set consumes what it takes
    for group in _groups(podsets):
        workers = group[0]  # a pod-set group places as one gang: its workers' ask holds
        pods = [pod for n in group for pod in pods_of[n]]
        topology = _constraint(levels, podsets[workers])
        result = placer.place(snap, pods, len(pods), topology=topology)
        if not isinstance(result, Placement):
            size = topology.slice_size
            needed = podsets[workers]["count"]
            outcomes += [("miss", min(result.placed, needed) // size, needed // size)] * len(group)
            break  # Kueue stops at the first pod set that does not fit
        for n in sorted(group):
            per_leaf: Counter[tuple[str, ...]] = Counter()
            for key, node in result.assignments.items():
                if key[1].startswith(f"ps{n}-"):
                    labels = cache.nodes[node].facts.labels
                    values = (
                        (labels[HOSTNAME],) if hostname_leaf else tuple(labels[k] for k in levels)
                    )
                    per_leaf[values] += 1
            outcomes.append(("fit", dict(per_leaf)))
    return outcomes


def _groups(podsets: list[dict[str, Any]]) -> list[list[int]]:
    """Pod sets by ``podset_group`` (workers first: the larger count, else the first listed), in
    the order their first pod set comes; an ungrouped pod set is a group of its own."""
    groups: dict[object, list[int]] = {}
    for n, podset in enumerate(podsets):
        groups.setdefault(podset.get("podset_group") or n, []).append(n)
    ordered = []
    for members in groups.values():
        if len(members) == 2 and podsets[members[1]]["count"] > podsets[members[0]]["count"]:
            members = [members[1], members[0]]
        ordered.append(members)
    return ordered


def _wanted(case: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Per pod set: Kueue's answer, up to the first failure (every pod set of a failing group
    has it; Kueue stops there)."""
    wanted: list[tuple[Any, ...]] = []
    failed = ""
    for want in case["want"]:
        if failed and want["failure_reason"] != failed:
            break
        if want["assignment"] is not None:
            wanted.append(
                ("fit", {tuple(d["values"]): d["count"] for d in want["assignment"]["domains"]})
            )
            continue
        match = _FIT.search(want["failure_reason"])
        if want["failure_reason"].startswith("no topology domains at level"):
            wanted.append(("miss", 0, case["request"]["podsets"][len(wanted)]["count"]))
        elif match is None:
            raise AssertionError(f"unexpected failure string: {want['failure_reason']}")
        elif match.group(3) is not None:
            wanted.append(("miss", 0, int(match.group(3))))
        else:
            wanted.append(("miss", int(match.group(1)), int(match.group(2))))
        failed = want["failure_reason"]
    return wanted


def _number(case: dict[str, Any]) -> int:
    return int(case["source"].rsplit("#", 1)[1])


def _params(cases: list[dict[str, Any]]) -> list[Any]:
    params = []
    for case in cases:
        number = _number(case)
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[number])] if number in XFAIL else []
        params.append(pytest.param(case, id=str(number), marks=marks))
    return params


PLACED = [c for c in CASES if _number(c) not in REFUSED]


@pytest.mark.parametrize("case", _params(PLACED))
def test_gang_places_as_kueue_does(case: dict[str, Any]) -> None:
    assert _outcome(case) == _wanted(case), case["name"]


def _annotations(ask: dict[str, Any]) -> dict[str, str]:
    written = {
        KUEUE_REQUIRED: ask.get("required"),
        KUEUE_PREFERRED: ask.get("preferred"),
        KUEUE_SLICE_REQUIRED: ask.get("slice_required_topology"),
        KUEUE_SLICE_SIZE: str(ask["slice_size"]) if ask.get("slice_size") else None,
    }
    return {k: v for k, v in written.items() if v}


@pytest.mark.parametrize("case", [c for c in CASES if _number(c) in REFUSED], ids=_number)
def test_gang_refuses_what_kueue_refuses(case: dict[str, Any]) -> None:
    """The same ask, written as Kueue's annotations, resolved against the case's topology."""
    podset = case["request"]["podsets"][0]
    asks = asks_in_annotations(_annotations(podset["topology"]))
    topology = Topology("default", KUEUE_TOPOLOGY, tuple(case["levels"]))
    refusal = resolve(asks, [topology])
    assert isinstance(refusal, str), refusal
    said = case["want"][0]["failure_reason"]
    level = re.search(r"(\S+/\S+|not-existing-topology-level)", said)
    assert "slice" in refusal
    if level is not None and "size" not in said:
        assert level.group(1) in refusal


def test_the_table_is_counted() -> None:
    """How many of Kueue's cases gang reproduces (the figure in the closing note)."""
    assert len(CASES) == 140
    assert len(XFAIL) == 32 and len(REFUSED) == 3
    assert len(PLACED) - len(XFAIL) == 105
