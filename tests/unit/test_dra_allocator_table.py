"""gang's structured allocator against Kubernetes' own allocator test table.

The cases are ``k8s.io/dynamic-resource-allocation``'s ``TestAllocator`` table, ported as data
(``tests/data/dra``). Each runs through :class:`gang.scheduling.dra.allocator.Allocator` as the
Go runner runs it: the same claims, classes, slices, node and devices in use; the same expected
allocation (results in any order) or error (by substring).

gang implements the DRA features of Kubernetes 1.34 that are on by default — counts, ``All``,
``firstAvailable``, CEL selectors, ``matchAttribute``/``distinctAttribute``, admin access, device
taints, partitionable devices' counters — always on. Each case it decides differently is a strict
xfail with the reason, so a fix shows up as an XPASS.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gang.models.dra import DraParseError, parse_claim, parse_class, parse_slice
from gang.scheduling.dra.allocator import AllocationError, Allocator
from gang.state.nodefacts import node_facts
from tests.data.dra.allocator_cases import CASES

#: cases gang decides differently, by reason; each a strict xfail (a fix shows up as an XPASS)
GATE_OFF = (
    "admin-access-disabled",
    "prioritized-list-disabled",
    "partitionable-devices-disabled-other-device-do-not-consume-counters",
    "partitionable-devices-disabled-per-device-node-selection",
    "tainted-disabled",
    "tainted-prioritized-list-disabled",
    "tainted-admin-access-disabled",
    "tainted-all-devices-single-disabled",
)
CONSUMABLE_CAPACITY = (
    "consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
    "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
    "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
    "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
    "consumable-capacity-multi-allocatable-device-with-zero-request-policy",
    "consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
    "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
    "consumable-capacity-multi-allocatable-device-with-range-policy-step",
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy",
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
    "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
    "consumable-capacity-with-multi-allocatable-device-backtrack",
    "consumable-capacity-multi-allocatable-device-with-subrequest",
    "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
    "allow-multiple-allocations-with-partitionable-device",
    "consumable-capacity-with-partitionable-device-multiple-capacity-pools",
    "with-distinct-constraints",
    "with-distinct-constraints-unknown-type-attribute",
    "with-distinct-constraints-with-subrequests",
    "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
    "list-attributes-distinct-constraint-list-of-string-values-all-distinct",
    "list-attributes-distinct-constraint-list-of-string-values-with-common-elements",
    "list-attributes-distinct-constraint-mixed-scalar-and-list-all-distinct",
    "list-attributes-distinct-constraint-mixed-scalar-and-list-with-common-elements",
    "list-attributes-distinct-constraint-list-of-int-values-all-distinct",
    "list-attributes-distinct-constraint-list-of-bool-values-all-distinct",
    "list-attributes-distinct-constraint-list-of-version-values-all-distinct",
)
LIST_ATTRIBUTES = (
    "list-attributes-match-constaint-list-of-string-values-with-common-elements",
    "list-attributes-match-constaint-list-of-string-values-with-partially-common-elements",
    "list-attributes-match-constaint-list-of-string-values-without-common-elements",
    "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-common-elements",
    "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-partially-common-elements",
    "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-without-common-elements",
    "list-attributes-match-constaint-list-of-int-values-with-common-elements",
    "list-attributes-match-constaint-list-of-bool-values-with-common-elements",
    "list-attributes-match-constaint-list-of-version-values-with-common-elements",
    "list-attributes-match-constaint-with-empty-or-unknown-type",
)
BINDING_CONDITIONS = (
    "device-binding-conditions",
    "binding-conditions-multiple-devices",
    "binding-conditions-with-and-without",
    "node-restriction",
    "partitionable-devices-with-binding-conditions",
    "partitionable-devices-with-binding-conditions-multiple",
    "partitionable-devices-with-binding-conditions-some-devices-no-conditions",
    "partitionable-devices-with-binding-conditions-multi-slices",
    "partitionable-devices-with-binding-conditions-and-taints-tolerated",
    "consumable-capacity-disabled-feature",
    "consumable-capacity-disabled-feature-with-prioritized-list",
    "check-combinations-with-backtracking-across-slices-and-pools",
)
REASONS = {
    **dict.fromkeys(
        GATE_OFF,
        "the case turns a feature gate off (admin access, prioritized list, device taints or "
        "partitionable devices); gang always has these Kubernetes 1.34 features on",
    ),
    **dict.fromkeys(CONSUMABLE_CAPACITY, "consumable capacity (alpha) is not built"),
    **dict.fromkeys(LIST_ATTRIBUTES, "list-typed attributes (alpha) are not built"),
    **dict.fromkeys(
        BINDING_CONDITIONS,
        "binding conditions (alpha) are not built: a device that has them is never chosen",
    ),
}

DEFAULT_NODE = {"metadata": {"name": "node-1", "labels": {"region": "region-1", "planet": "earth"}}}


def _params() -> list[Any]:
    params = []
    for case in CASES:
        reason = REASONS.get(case["name"])
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(case, id=case["name"], marks=marks))
    return params


def _normal(allocation: Mapping[str, Any]) -> Any:
    """An allocation with its unordered parts sorted (the Go matcher ignores their order)."""
    out = dict(allocation)
    devices = dict(out.get("devices") or {})
    devices["results"] = sorted(
        devices.get("results") or [],
        key=lambda r: (r["request"], r["driver"], r["pool"], r["device"]),
    )
    out["devices"] = devices
    selector = out.get("nodeSelector")
    if selector:
        terms = []
        for term in selector.get("nodeSelectorTerms") or []:
            terms.append(
                {
                    k: sorted(
                        ({**r, "values": sorted(r.get("values") or [])} for r in v),
                        key=lambda r: (r["key"], r["operator"], r["values"]),
                    )
                    for k, v in term.items()
                }
            )
        out["nodeSelector"] = {"nodeSelectorTerms": terms}
    return out


def _run(case: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    classes = {c.name: c for c in (parse_class(raw) for raw in case["classes"])}
    slices = [parse_slice(raw) for raw in case["slices"]]
    claims = [parse_claim(raw) for raw in case["claims"]]
    in_use = {tuple(d) for d in case["allocated_devices"]}
    allocator = Allocator(classes, slices, frozenset(in_use))  # type: ignore[arg-type]
    node = node_facts(case["node"] or DEFAULT_NODE)
    return allocator.allocate(node, claims)


@pytest.mark.parametrize("case", _params())
def test_allocator_case(case: Mapping[str, Any]) -> None:
    expected_error = case["expect_error"]
    try:
        got = _run(case)
    except (AllocationError, DraParseError) as err:
        assert expected_error is not None, f"unexpected error: {err}"
        assert expected_error in str(err), f"{err!s} does not say {expected_error!r}"
        return
    assert expected_error is None, f"expected an error saying {expected_error!r}, got {got}"
    expected = case["expect_results"]
    if not expected:
        assert not got, f"expected nothing allocated, got {got}"
        return
    assert got is not None, "expected an allocation, got none"
    assert [_normal(a) for a in got] == [_normal(a) for a in expected]
