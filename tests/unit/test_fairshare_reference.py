"""Fair-share arithmetic against KAI Scheduler's own division table, replayed as data.

``tests/data/kai/resource_division.yaml`` holds every case of KAI's ``resource_division_test.go``
(70 divisions: per resource, over quota only, and all resources at once), with the fair share and
the undivided remainder KAI asserts. ``gang.queue.fairshare.divide`` must give exactly the same
numbers: gang's fair share is KAI's, so a platform team moving from KAI sees the same split.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gang.queue.fairshare import Slot, divide, divide_over_quota

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
