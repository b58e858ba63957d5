"""Reclaim's rules (``gang.queue.reclaim``) against KAI Scheduler's ``reclaimable`` checks, as data.

``tests/data/kai/reclaimable.yaml`` holds every case of KAI's ``reclaimable_test.go``: queues with
their allocation, fair share and quota, a reclaimer, and (for ``Reclaimable``) what the victims
hold per queue; KAI's answer is a bool. ``CanReclaimResources`` is gang's rule 1
(:meth:`Reclaim.refusal`), ``Reclaimable`` its rules 2-4 (:meth:`Reclaim.allows`). Where gang's
rules differ on purpose (it never pushes a victim queue below its fair share, where KAI checks
the queue before the last victim is taken; it has no non-preemptible class), the case is a
strict xfail saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gang.queue.reclaim import QueueState, Reclaim, total

DATA = Path(__file__).resolve().parents[1] / "data" / "kai" / "reclaimable.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load(DATA.read_text())["cases"]
RESOURCES = ("cpu", "memory", "gpu")

_NON_PREEMPTIBLE = (
    "a non-preemptible reclaimer may not take its queue's non-preemptible use past its quota in "
    "KAI; gang has no non-preemptible class"
)
_BELOW_SHARE = (
    "taking the victims pushes their queue below its fair share, which gang never does (KAI "
    "checks the victim queue before each victim is taken, while it is still above)"
)
DIFFERENT: dict[str, str] = {
    "reclaimable-single-department-03": (
        "the victim queue is at its fair share (3 of 3): KAI lets a reclaimer below its quota "
        "take from a queue above its quota; gang takes only from queues above their fair share"
    ),
    "reclaimable-single-department-08": _NON_PREEMPTIBLE,
    "reclaimable-multiple-departments-02": (
        "both departments are below their fair share (1 of 3, 3 of 4): they cannot evict each "
        "other in gang (KAI: the reclaimer is below its quota, the victim above its own)"
    ),
    "reclaimable-hierarchy-00": _BELOW_SHARE,
    "reclaimable-hierarchy-03": _BELOW_SHARE,
}


def _amounts(q: dict[str, Any], field: str) -> dict[str, float]:
    return {r: float(q[r][field]) for r in RESOURCES}


def _states(case: dict[str, Any]) -> dict[str, QueueState]:
    return {
        q["name"]: QueueState(
            q["name"],
            q["parent"],
            _amounts(q, "allocated"),
            _amounts(q, "fair_share"),
            # KAI's quota is the guarantee gang reads from a KAI queue
            {r: v for r, v in _amounts(q, "deserved").items() if v > 0},
        )
        for q in case["queues"]
    }


def _mark(case: dict[str, Any]) -> Any:
    reason = DIFFERENT.get(case["id"])
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, id=case["id"], marks=marks)


def test_the_table_is_whole() -> None:
    assert len(CASES) == 34
    assert set(DIFFERENT) <= {c["id"] for c in CASES}


@pytest.mark.parametrize("case", [_mark(c) for c in CASES])
def test_kai_reclaimable(case: dict[str, Any]) -> None:
    reclaimer = case["reclaimer"]
    rules = Reclaim(_states(case), reclaimer["queue"], reclaimer["required"])
    if case["function"] == "CanReclaimResources":
        assert (rules.refusal() is None) is case["expected"], rules.refusal()
        return
    taken = {q: total(vectors) for q, vectors in case["reclaimees"].items()}
    assert rules.allows(taken) is case["expected"], rules.why_not(taken)
