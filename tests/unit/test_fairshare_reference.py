"""Fair-share arithmetic against KAI Scheduler's own division table, replayed as data.

``tests/data/kai/resource_division.yaml`` holds every case of KAI's ``resource_division_test.go``
(70 divisions: per resource, over quota only, and all resources at once), with the fair share and
the undivided remainder KAI asserts. ``gang.queue.fairshare.divide`` must give exactly the same
numbers: gang's fair share is KAI's, so a platform team moving from KAI sees the same split.

``tests/data/kueue/fair_sharing.yaml`` holds Kueue's ``fair_sharing_test.go`` (25 cases): how much
a queue borrows above its quota, per mille of what its cohort could lend, over its weight
(Kueue's dominant resource share). gang shows it beside each queue's standing and breaks ties
between queues with it (``gang.queue.fairshare.borrowing``); the cases that use Kueue concepts
gang's queues do not have (flavors, lending and borrowing limits, cohorts with quota of their
own) are strict xfails saying so.
"""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from gang.models.quantity import resource_units
from gang.queue.fairshare import Borrowing, Slot, borrowing, divide, divide_over_quota, share_text

DATA = Path(__file__).resolve().parents[1] / "data" / "kai" / "resource_division.yaml"
TABLE = yaml.safe_load(DATA.read_text())
CASES = TABLE["cases"]


def _slots(case: dict[str, Any], resource: str) -> list[Slot]:
    return [
        Slot(
            name=q["name"],
            quota=q[resource]["quota"],
            limit=q[resource]["limit"],
            weight=q[resource]["over_quota_weight"],
            request=q[resource]["request"],
            fair=q[resource]["fair_share"],
            priority=q.get("priority", 0),
            creation=q.get("creation", 0.0),
            uid=q["uid"],
        )
        for q in case["queues"]
    ]


def test_the_table_is_whole() -> None:
    assert len(CASES) == 70
    assert len({c["id"] for c in CASES}) == 70


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kai_resource_division(case: dict[str, Any]) -> None:
    resources = [case["resource"]] if "resource" in case else list(case["total"])
    for resource in resources:
        slots = _slots(case, resource)
        total = case["total"][resource]
        if case["function"] == "divideOverQuotaResource":
            left = divide_over_quota(total, slots)
        else:
            left = divide(total, slots)
        fair = {s.name: s.fair for s in slots}
        for queue, expected in case["expected"].items():
            if resource in expected:
                assert fair[queue] == expected[resource], (queue, resource, case["name"])
        if "expected_remaining" in case:
            assert left == case["expected_remaining"]


# --- Kueue: how much a queue borrows (its dominant resource share) --------------------------

KUEUE = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "data" / "kueue" / "fair_sharing.yaml").read_text()
)["cases"]
#: deliberate differences: Kueue concepts gang's queues do not have
NOT_IN_GANG = {
    "multiple flavors": "gang has no ResourceFlavors: a queue's quota is one amount per resource",
    "cohort has resource share": (
        "a Kueue cohort adds quota of its own; a gang parent queue divides its fair share"
    ),
    "resource share defined for resources only available at the root cohort": (
        "a Kueue cohort adds quota of its own; a gang parent queue divides its fair share"
    ),
    "resource share affected by borrowing limit": "gang has no borrowingLimit",
}


def _flavor(cq: dict[str, Any], what: str) -> dict[str, float]:
    """A ClusterQueue's single flavor as gang's per-resource amounts."""
    (flavor,) = cq["flavors"].values()
    if what == "quota":
        return {r: float(resource_units(r, q["nominal"])) for r, q in flavor.items()}
    (used,) = (cq.get("usage") or {"": {}}).values()
    return {r: float(v) for r, v in used.items()}


def _kueue_share(case: dict[str, Any], cq: dict[str, Any]) -> Borrowing:
    cohort = [q for q in case["cluster_queues"] if q["cohort"] and q["cohort"] == cq["cohort"]]
    lendable: dict[str, float] = {}
    for member in cohort:  # what the cohort could lend: its queues' quotas, this one's included
        for resource, amount in _flavor(member, "quota").items():
            lendable[resource] = lendable.get(resource, 0.0) + amount
    request = case.get("workload_request")
    weight = float(Decimal(cq["weight"])) if cq.get("weight") is not None else 1.0
    return borrowing(
        _flavor(cq, "quota"),
        _flavor(cq, "usage"),
        lendable,
        weight,
        {r: float(v) for f in (request or {}).values() for r, v in f.items()},
    )


def _kueue_params() -> list[Any]:
    out = []
    for case in KUEUE:
        reason = NOT_IN_GANG.get(case["name"])
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        out.append(pytest.param(case, marks=marks, id=f"{case['source']}/{case['name']}"))
    return out


def test_the_kueue_table_is_whole() -> None:
    assert len(KUEUE) == 25


@pytest.mark.parametrize("case", _kueue_params())
def test_kueue_fair_sharing(case: dict[str, Any]) -> None:
    if case["source"] == "TestPreciseWeightedShareSerialized":
        ratio, weight = case["drs"]["unweighted_ratio"], case["drs"]["fair_weight"]
        precise = 0.0 if ratio == 0 else math.inf if weight == 0 else ratio / weight
        assert share_text(precise) == case["expected"]["serialized"]
        return
    queues = {q["name"]: q for q in case["cluster_queues"]}
    if case["source"] == "TestIsBorrowingOn":
        found = _kueue_share(case, queues[case["target"]])
        requested = [r for f in (case.get("requested") or {}).values() for r, v in f.items() if v]
        assert found.borrowing == case["expected"]["borrowing"]
        assert found.borrowing_on(requested) == case["expected"]["borrowing_on_requested"]
        return
    for expected in case["expected"]:
        if expected["node_type"] != "cluster_queue":
            continue  # a cohort: gang's parent queues are not measured this way
        found = _kueue_share(case, queues[expected["name"]])
        assert (found.share, found.dominant, found.borrowing) == (
            expected["share"],
            expected["dominant_resource"],
            expected["borrowing"],
        ), expected["name"]
