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
