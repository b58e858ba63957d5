"""A pod's ResourceClaims as gang reads them, and the catalog's devices in use (pure functions).

The scheduling side over HTTP is ``tests/scheduler/test_dra.py``; these pin the readers' error
wording (a pod with a malformed ``spec.resourceClaims`` gets a clear message, nothing crashes), why
a member waits before any Filter runs, and what counts as a device in use.
"""

from __future__ import annotations

from typing import Any

import pytest

from gang.scheduling.dra.plugin import NOT_SERVED, claims_problem
from gang.state.dra import CLAIMS, CLASSES, DraCatalog
from gang.state.podinfo import PodParseError, parse_pod
from gang.state.podrules import DeviceClaimRef

UID = "pod-uid-1"


def pod(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": "worker-0", "namespace": "default", "uid": UID},
        "spec": {
            "schedulerName": "gang-scheduler",
            "containers": [{"name": "main", "image": "x"}],
            "resourceClaims": claims,
        },
        "status": {"resourceClaimStatuses": statuses} if statuses is not None else {},
    }


def claim(name: str, **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if status.pop("deleting", False):
        meta["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    owner = status.pop("owner", None)
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "worker-0",
                "uid": owner,
                "controller": True,
            }
        ]
    return {
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": status,
    }


def result(device: str, **extra: Any) -> dict[str, Any]:
    return {
        "request": "gpu",
        "driver": "gpu.example.com",
        "pool": "node-0",
        "device": device,
        **extra,
    }


def test_claims_by_name_and_by_template_are_read_with_the_controllers_names() -> None:
    info = parse_pod(
        pod(
            [
                {"name": "shared", "resourceClaimName": "team-gpu"},
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            ],
            [{"name": "gpu", "resourceClaimName": "worker-0-gpu-x7k2p"}],
        )
    )
    assert info.rules.device_claims == (
        DeviceClaimRef("shared", claim_name="team-gpu"),
        DeviceClaimRef("gpu", template_name="one-gpu"),
    )
    assert info.claim_statuses == (("gpu", "worker-0-gpu-x7k2p"),)
    assert not info.rules.unsupported


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "gpu"}, "spec.resourceClaims[0]: Invalid value: must specify one of"),
        (
            {"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"},
            "must specify one of",
        ),
        ({"resourceClaimName": "a"}, "spec.resourceClaims[0].name: Required value"),
        ({"name": "gpu", "resourceClaimName": 7}, "spec.resourceClaims[0].resourceClaimName"),
    ],
)
def test_a_malformed_claim_reference_is_a_clear_parse_error(
    entry: dict[str, Any], message: str
) -> None:
    with pytest.raises(PodParseError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_pod(pod([entry]))


def test_a_malformed_claim_status_is_a_clear_parse_error() -> None:
    with pytest.raises(PodParseError, match=r"status.resourceClaimStatuses\[0\].name: Required"):
        parse_pod(
            pod([{"name": "gpu", "resourceClaimTemplateName": "t"}], [{"resourceClaimName": "c"}])
        )


def served(*claims: dict[str, Any]) -> DraCatalog:
    catalog = DraCatalog(served=True)
    for raw in claims:
        assert catalog.upsert(CLAIMS, raw)
    return catalog


@pytest.mark.parametrize(
    ("claims", "statuses", "catalog", "problem"),
    [
        (
            [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            None,
            served(),
            "ResourceClaim not created yet",
        ),
        (
            [{"name": "gpu", "resourceClaimName": "c"}],
            None,
            served(),
            'resourceclaim "c" not found',
        ),
        (
            [{"name": "gpu", "resourceClaimName": "c"}],
            None,
            served(claim("c", deleting=True)),
            'resourceclaim "c" is being deleted',
        ),
        (
            [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            [{"name": "gpu", "resourceClaimName": "c"}],
            served(claim("c", owner="someone-else")),
            "ResourceClaim default/c was not created for pod default/worker-0 (pod is not owner)",
        ),
        (
            [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            [{"name": "gpu", "resourceClaimName": "c"}],
            served(claim("c", owner=UID)),
            None,
        ),
        ([{"name": "gpu", "resourceClaimTemplateName": "t"}], [{"name": "gpu"}], served(), None),
        ([{"name": "gpu", "resourceClaimName": "c"}], None, DraCatalog(), NOT_SERVED),
    ],
)
def test_why_a_member_waits_before_any_filter(
    claims: list[dict[str, Any]], statuses: Any, catalog: DraCatalog, problem: str | None
) -> None:
    found = claims_problem(catalog, parse_pod(pod(claims, statuses)))
    assert found == problem if problem is None else problem in (found or "")


def test_a_claim_with_256_consumers_takes_no_more() -> None:
    full = claim("c", allocation={"devices": {"results": [result("gpu-0")]}})
    full["status"]["reservedFor"] = [
        {"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(256)
    ]
    problem = claims_problem(
        served(full), parse_pod(pod([{"name": "gpu", "resourceClaimName": "c"}]))
    )
    assert problem is not None and "256" in problem


def test_devices_in_use_count_allocations_and_plans_but_not_admin_access() -> None:
    catalog = served(
        claim("a", allocation={"devices": {"results": [result("gpu-0")]}}),
        claim("admin", allocation={"devices": {"results": [result("gpu-1", adminAccess=True)]}}),
        claim("b"),
    )
    assert catalog.in_use() == {("gpu.example.com", "node-0", "gpu-0")}
    planned = {"devices": {"results": [result("gpu-2")]}}
    catalog.plan(("default", "b"), planned, ("default", "worker-0"), UID)
    assert ("gpu.example.com", "node-0", "gpu-2") in catalog.in_use()
    # the claim served allocated and reserved for the member: the written fact replaces the plan
    written = claim("b", allocation=planned)
    written["status"]["reservedFor"] = [{"resource": "pods", "name": "worker-0", "uid": UID}]
    catalog.upsert(CLAIMS, written)
    assert not catalog.in_flight
    assert ("gpu.example.com", "node-0", "gpu-2") in catalog.in_use()
    catalog.unplan(("default", "worker-0"))  # nothing left to forget
    assert ("gpu.example.com", "node-0", "gpu-2") in catalog.in_use()


def test_a_malformed_object_is_kept_aside_with_its_reason() -> None:
    catalog = DraCatalog(served=True)
    assert catalog.upsert(CLASSES, {"metadata": {"name": "bad"}, "spec": {"selectors": "nope"}})
    assert "bad" not in catalog.classes
    assert catalog.rejected[(CLASSES, "", "bad")]


def test_an_anonymised_snapshot_keeps_every_device_reference_consistent() -> None:
    """Node, pod, claim and template names are replaced everywhere they are named (a slice's
    node and pool, a claim's owner, consumers, results and node selector, the pod's claim
    references and statuses); device names and attributes stay."""
    import orjson

    from gang.app.snapshot import anonymise

    node, pod_name, claim_name = "gpu-box-7", "alice-train-0", "alice-train-0-gpu-x7k2p"
    items = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {}}},
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": "alice"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "image": "x"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "alice-gpus"}],
            },
            "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim_name}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "alice-gpus", "namespace": "alice"},
            "spec": {"spec": {}},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu.example.com"},
            "spec": {"driver": "gpu.example.com", "nodeName": node, "pool": {"name": node}},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": claim_name,
                "namespace": "alice",
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu", "team": "alice"},
                "ownerReferences": [
                    {"kind": "Pod", "name": pod_name, "uid": "u", "controller": True}
                ],
            },
            "spec": {},
            "status": {
                "allocation": {
                    "devices": {"results": [{"pool": node, "device": "gpu-0"}]},
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    },
                },
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": "u"}],
            },
        },
    ]
    out = anonymise({"kind": "GangSnapshot", "items": items})["items"]
    text = orjson.dumps(out).decode()
    for secret in (node, pod_name, claim_name, "alice"):
        assert secret not in text, secret
    by_kind = {o["kind"]: o for o in out}
    new_node, new_pod = by_kind["Node"]["metadata"]["name"], by_kind["Pod"]["metadata"]["name"]
    claim_obj, piece = by_kind["ResourceClaim"], by_kind["ResourceSlice"]["spec"]
    status = claim_obj["status"]
    assert piece["nodeName"] == piece["pool"]["name"] == new_node
    assert status["allocation"]["devices"]["results"] == [{"pool": new_node, "device": "gpu-0"}]
    terms = status["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == [new_node]
    assert (
        status["reservedFor"][0]["name"]
        == claim_obj["metadata"]["ownerReferences"][0]["name"]
        == new_pod
    )
    pod_spec, pod_status = by_kind["Pod"]["spec"], by_kind["Pod"]["status"]
    assert (
        pod_status["resourceClaimStatuses"][0]["resourceClaimName"] == claim_obj["metadata"]["name"]
    )
    template = by_kind["ResourceClaimTemplate"]["metadata"]["name"]
    assert pod_spec["resourceClaims"][0]["resourceClaimTemplateName"] == template
    assert claim_obj["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
