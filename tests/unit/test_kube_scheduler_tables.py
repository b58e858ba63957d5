"""kube-scheduler's InterPodAffinity and PodTopologySpread test tables, reproduced by gang.

Every case of the ported tables runs; the few where gang differs on purpose (or cannot see what
kube-scheduler sees) are listed in ``DIFFERENT`` with the reason and must still differ (strict
xfail), so the list stays true."""

from __future__ import annotations

from typing import Any

import pytest

from gang.scheduling.interpodaffinity import InterPodAffinity
from gang.scheduling.topologyspread import PodTopologySpread, parse_default_constraints
from tests.unit.kube_scheduler_tables import case_id, check, load

AFFINITY = load("interpodaffinity.yaml")
SPREAD = load("podtopologyspread.yaml")

#: case id → why gang's answer differs from kube-scheduler's test expectation
DIFFERENT: dict[str, str] = {}
for _name in (
    "TestPodTopologySpreadScore[24] matchLabelKeys ignored when feature gate disabled",
    "TestPreFilterState[28] matchLabelKeys ignored when feature gate disabled",
):
    DIFFERENT[_name] = (
        "gang always honours matchLabelKeys (on by default in kube-scheduler since 1.27); the "
        "case turns the feature gate off"
    )


def _params(cases: list[dict[str, Any]]) -> list[Any]:
    out = []
    for case in cases:
        cid = case_id(case)
        marks = [pytest.mark.xfail(strict=True, reason=DIFFERENT[cid])] if cid in DIFFERENT else []
        out.append(pytest.param(case, id=cid, marks=marks))
    return out


@pytest.mark.parametrize("case", _params(AFFINITY))
def test_inter_pod_affinity(case: dict[str, Any]) -> None:
    args = case.get("args") or {}
    plugin = InterPodAffinity(
        hard_pod_affinity_weight=int(args.get("hardPodAffinityWeight", 1)),
        ignore_preferred_terms_of_existing_pods=bool(
            args.get("ignorePreferredTermsOfExistingPods", False)
        ),
    )
    check(case, plugin)


def _spread_plugin(case: dict[str, Any]) -> PodTopologySpread:
    args = case.get("args") or {}
    if args.get("defaultingType") == "List":
        return PodTopologySpread(parse_default_constraints(args.get("defaultConstraints")), "List")
    return PodTopologySpread()


@pytest.mark.parametrize("case", _params(SPREAD))
def test_pod_topology_spread(case: dict[str, Any]) -> None:
    check(case, _spread_plugin(case))


def _node(name: str, zone: str | None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if zone is not None:
        labels["topology.kubernetes.io/zone"] = zone
    return {"metadata": {"name": name, "labels": labels}}


def _replica(index: str, **more: Any) -> dict[str, Any]:
    labels = {"job-name": "j", "replica-index": index}
    return {"metadata": {"name": f"j-{index}", "namespace": "default", "labels": labels}, **more}


#: Score cases where no placed pod matches a constraint's selector, worked out by hand with
#: kube-scheduler's formulas (``scoreForCount``: count * log(domains + 2) + maxSkew - 1 on a
#: node carrying the key, rounded; then ``NormalizeScore``), since the ported tables have none
#: where such a constraint's constant moves the normalized scores.
WORKED_SCORES: list[dict[str, Any]] = [
    {
        # a training operator's per-replica Service selects the pod; the other replica's pod
        # is not selected by it. System defaults: node-b lacks a zone, so it scores 2 (host
        # only) against node-a's 2 + 4; normalized 100 * (6 + 2 - s) / 6
        "name": "system defaults, a per-replica Service, a node without a zone",
        "kind": "score",
        "pod": _replica("0", spec={}),
        "existing": [_replica("1", spec={"nodeName": "node-a"})],
        "nodes": [_node("node-a", "z1"), _node("node-b", None)],
        "objects": [
            {"kind": "Service", "metadata": {"name": f"j-{i}"}, "spec": {"selector": sel}}
            for i, sel in enumerate(_replica(str(i))["metadata"]["labels"] for i in range(2))
        ],
        "scores": {"node-a": 33, "node-b": 100},
    },
    {
        # its own two constraints: one counts a pod on node-a (1 * log 5 + 0), the other
        # selects nothing placed (0 + 2 - 1 on every node): 2.61 → 3, 1, 1; normalized
        # 100 * (3 + 1 - s) / 3
        "name": "a constraint matching no placed pod still adds maxSkew - 1",
        "kind": "score",
        "pod": {
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}},
            "spec": {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": "a"}},
                    },
                    {
                        "maxSkew": 2,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": "none"}},
                    },
                ]
            },
        },
        "existing": [
            {
                "metadata": {"name": "e", "namespace": "default", "labels": {"app": "a"}},
                "spec": {"nodeName": "node-a"},
            }
        ],
        "nodes": [_node("node-a", "z1"), _node("node-b", "z1"), _node("node-c", "z2")],
        "scores": {"node-a": 33, "node-b": 100, "node-c": 100},
    },
]


@pytest.mark.parametrize("case", WORKED_SCORES, ids=[c["name"] for c in WORKED_SCORES])
def test_pod_topology_spread_scores_worked_from_kube_scheduler_s_formulas(
    case: dict[str, Any],
) -> None:
    check(case, PodTopologySpread())
