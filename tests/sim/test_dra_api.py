"""Dynamic Resource Allocation (``resource.k8s.io/v1``) in the simulator, observed over HTTP.

The four kinds as a 1.34+ server serves them (discovery, CRUD, watch, field selectors, tables,
strict field validation), the claim status rules a scheduler's writes meet (``gang.sim.dra``),
the resource claim controller stand-in (``gang.sim.resourceclaims``) and the kubelet stand-in's
refusal of a pod whose claims are not reserved for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s

from gang.sim.cluster import SimCluster
from gang.sim.dra import DELETE_PROTECTION
from gang.sim.kubelet import KubeletConfig
from gang.sim.resourceclaims import POD_CLAIM_NAME, generate_name
from tests.conftest import Raw, binding, pod
from tests.sim.kubectl_server import gang_sim_serve

API = "/apis/resource.k8s.io/v1"
CLAIMS = f"{API}/namespaces/default/resourceclaims"
TEMPLATES = f"{API}/namespaces/default/resourceclaimtemplates"
PODS = "/api/v1/namespaces/default/pods"
EVENTS = "/api/v1/namespaces/default/events"
DRIVER = "gpu.example.com"
NODE = "node-00000"
DEADLINE = 3.0
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
ALLOCATION = {
    "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}]}
}
CLAIM_SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}


def claim(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": CLAIM_SPEC,
        **extra,
    }


def template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "from-template"}},
            "spec": CLAIM_SPEC,
        },
    }


def resource_slice(name: str, node: str, driver: str = DRIVER) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }


def device_class(name: str) -> dict[str, Any]:
    selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [selector]},
    }


def consumer(name: str, uid: str) -> dict[str, str]:
    return {"resource": "pods", "name": name, "uid": uid}


def claiming_pod(name: str, **pod_claim: str) -> dict[str, Any]:
    """A pod with one claim ``gpu`` (``resourceClaimName`` or ``resourceClaimTemplateName``)."""
    return pod(name, resourceClaims=[{"name": "gpu", **pod_claim}])


async def ok(call: Any, expected: int = 200) -> dict[str, Any]:
    status, body, _ = await call
    assert status == expected, body
    result: dict[str, Any] = body
    return result


async def eventually(
    fetch: Callable[[], Any], until: Callable[[Any], bool], what: str = "condition"
) -> Any:
    """Call ``fetch`` until ``until`` holds on its answer; fail after DEADLINE seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while True:
        value = await fetch()
        if until(value):
            return value
        assert loop.time() < deadline, f"{what} never held: {value}"
        await asyncio.sleep(0.02)


async def get(raw: Raw, path: str) -> Any:
    status, body, _ = await raw.get(path)
    return body if status == 200 else None


async def write_status(raw: Raw, name: str, status: dict[str, Any]) -> tuple[int, Any]:
    current = await ok(raw.get(f"{CLAIMS}/{name}"))
    code, body, _ = await raw.put(f"{CLAIMS}/{name}/status", {**current, "status": status})
    return code, body


async def allocated(raw: Raw, name: str, *consumers: dict[str, str]) -> dict[str, Any]:
    """What kube-scheduler does: the finalizer first, then allocation and reservation."""
    await ok(raw.patch(f"{CLAIMS}/{name}", {"metadata": {"finalizers": [DELETE_PROTECTION]}}))
    status: dict[str, Any] = {"allocation": ALLOCATION}
    if consumers:
        status["reservedFor"] = list(consumers)
    code, body = await write_status(raw, name, status)
    assert code == 200, body
    return dict(body)


async def events_for(raw: Raw, pod_name: str, reason: str) -> list[dict[str, Any]]:
    query = urlencode({"fieldSelector": f"involvedObject.name={pod_name},reason={reason}"})
    body = await ok(raw.get(f"{EVENTS}?{query}"))
    return list(body["items"])


async def set_phase(raw: Raw, name: str, phase: str) -> None:
    current = await ok(raw.get(f"{PODS}/{name}"))
    await ok(raw.put(f"{PODS}/{name}/status", {**current, "status": {"phase": phase}}))


@pytest.fixture
async def bare() -> AsyncIterator[Raw]:
    """A cluster without controllers: the server's rules alone, nobody cleaning up."""
    async with SimCluster("1", controllers=False) as sim, aiohttp.ClientSession() as session:
        yield Raw(session, sim.url)


# --- the API ---------------------------------------------------------------------------------


async def test_discovery_serves_the_four_kinds_as_upstream(raw: Raw) -> None:
    groups = await ok(raw.get("/apis"))
    group = next(g for g in groups["groups"] if g["name"] == "resource.k8s.io")
    assert group["preferredVersion"] == {"groupVersion": "resource.k8s.io/v1", "version": "v1"}
    listed = await ok(raw.get(API))
    by_name = {r["name"]: r for r in listed["resources"]}
    assert set(by_name) == {
        "deviceclasses",
        "resourceclaims",
        "resourceclaims/status",
        "resourceclaimtemplates",
        "resourceslices",
    }
    assert {n: r["namespaced"] for n, r in by_name.items() if "/" not in n} == {
        "deviceclasses": False,
        "resourceclaims": True,
        "resourceclaimtemplates": True,
        "resourceslices": False,
    }
    assert not any("shortNames" in r for r in by_name.values())  # none upstream either
    assert set(by_name["resourceclaims/status"]["verbs"]) == {"get", "patch", "update"}


@pytest.mark.parametrize(
    ("collection", "body"),
    [
        (f"{API}/deviceclasses", device_class("gpu")),
        (CLAIMS, claim("c1")),
        (TEMPLATES, template("t1")),
        (f"{API}/resourceslices", resource_slice("s1", NODE)),
    ],
)
async def test_crud_and_watch(raw: Raw, collection: str, body: dict[str, Any]) -> None:
    name = body["metadata"]["name"]
    start = (await ok(raw.get(collection)))["metadata"]["resourceVersion"]
    created = await ok(raw.post(collection, body), 201)
    assert created["kind"] == body["kind"] and created["metadata"]["uid"]
    patched = await ok(raw.patch(f"{collection}/{name}", {"metadata": {"labels": {"a": "b"}}}))
    assert patched["metadata"]["labels"] == {"a": "b"}
    listed = await ok(raw.get(f"{collection}?labelSelector=a%3Db"))
    assert [o["metadata"]["name"] for o in listed["items"]] == [name]
    deleted = await ok(raw.delete(f"{collection}/{name}"))
    assert deleted["kind"] == body["kind"]  # every DRA kind answers a DELETE with the object
    events = await raw.watch_lines(
        f"{collection}?watch=1&resourceVersion={start}", max_events=3, seconds=2
    )
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


async def test_claims_through_the_generated_client_with_v1_defaults(client: Any) -> None:
    api = k8s.ResourceV1Api(client)
    made = await api.create_namespaced_resource_claim("default", claim("typed"))
    request = made.spec.devices.requests[0]
    assert (request.exactly.allocation_mode, request.exactly.count) == ("ExactCount", 1)
    await api.create_resource_slice(resource_slice("s-a", "node-00000"))
    await api.create_resource_slice(resource_slice("s-b", "node-00001", driver="nic.example.com"))
    on_node = await api.list_resource_slice(field_selector="spec.nodeName=node-00001")
    assert [s.metadata.name for s in on_node.items] == ["s-b"]
    by_driver = await api.list_resource_slice(field_selector=f"spec.driver={DRIVER}")
    assert [s.metadata.name for s in by_driver.items] == ["s-a"]


async def test_field_selectors_as_upstream(raw: Raw) -> None:
    status, body, _ = await raw.get(f"{CLAIMS}?fieldSelector=spec.nodeName%3Dx")
    assert status == 400 and body["message"] == "field label not supported: spec.nodeName"


async def test_status_subresource_split(bare: Raw) -> None:
    raw = bare
    created = await ok(raw.post(CLAIMS, claim("c", status={"allocation": ALLOCATION})), 201)
    assert "status" not in created  # PrepareForCreate drops it
    # a status write changes status only: spec and metadata (ResetObjectMetaForStatus) stay
    other_spec = {"devices": {"requests": []}}
    written = await ok(
        raw.put(
            f"{CLAIMS}/c/status",
            {
                **created,
                "metadata": {**created["metadata"], "labels": {"x": "y"}, "finalizers": ["f/x"]},
                "spec": other_spec,
                "status": {"allocation": ALLOCATION},
            },
        )
    )
    assert written["status"] == {"allocation": ALLOCATION}
    assert written["spec"] == created["spec"] and "labels" not in written["metadata"]
    assert "finalizers" not in written["metadata"]
    # a main-resource write ignores status and may change metadata
    updated = await ok(
        raw.put(
            f"{CLAIMS}/c",
            {**written, "metadata": {**written["metadata"], "labels": {"x": "y"}}, "status": {}},
        )
    )
    assert updated["status"] == {"allocation": ALLOCATION}
    assert updated["metadata"]["labels"] == {"x": "y"}
    # the spec is immutable
    status, body, _ = await raw.put(f"{CLAIMS}/c", {**updated, "spec": other_spec})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec"
    assert body["message"].endswith(": field is immutable")


# --- the status rules (422 Invalid, upstream's words) ----------------------------------------


async def test_reserved_for_needs_an_allocation(bare: Raw) -> None:
    raw = bare
    await ok(raw.post(CLAIMS, claim("c")), 201)
    status, body = await write_status(raw, "c", {"reservedFor": [consumer("p", "u1")]})
    assert status == 422
    assert body["message"] == (
        'ResourceClaim.resource.k8s.io "c" is invalid: status.reservedFor: Forbidden: '
        "may not be specified when `allocated` is not set"
    )
    assert body["details"] == {
        "name": "c",
        "group": "resource.k8s.io",
        "kind": "ResourceClaim",
        "causes": [
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: may not be specified when `allocated` is not set",
                "field": "status.reservedFor",
            }
        ],
    }


async def test_reserved_for_is_unique_by_uid_and_at_most_256(bare: Raw) -> None:
    raw = bare
    await ok(raw.post(CLAIMS, claim("c")), 201)
    twice = [consumer("a", "u1"), consumer("b", "u1")]
    status, body = await write_status(raw, "c", {"allocation": ALLOCATION, "reservedFor": twice})
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueDuplicate",
            "message": 'Duplicate value: "u1"',
            "field": "status.reservedFor[1]",
        }
    ]
    many = [consumer(f"p{i}", f"u{i}") for i in range(257)]
    status, body = await write_status(raw, "c", {"allocation": ALLOCATION, "reservedFor": many})
    assert status == 422
    assert body["message"].endswith(
        "status.reservedFor: Too many: 257: must have at most 256 items"
    )
    assert body["details"]["causes"][0]["reason"] == "FieldValueTooMany"
    status, body = await write_status(
        raw, "c", {"allocation": ALLOCATION, "reservedFor": many[:256]}
    )
    assert status == 200, body


async def test_allocation_is_immutable_but_may_be_removed(bare: Raw) -> None:
    raw = bare
    await ok(raw.post(CLAIMS, claim("c")), 201)
    await allocated(raw, "c", consumer("p", "u1"))
    moved = {"devices": {"results": [{**ALLOCATION["devices"]["results"][0], "device": "gpu-1"}]}}
    status, body = await write_status(
        raw, "c", {"allocation": moved, "reservedFor": [consumer("p", "u1")]}
    )
    assert status == 422
    cause = body["details"]["causes"][0]
    assert cause["field"] == "status.allocation" and cause["reason"] == "FieldValueInvalid"
    assert cause["message"].startswith("Invalid value: ")
    assert cause["message"].endswith(": field is immutable")
    # removing it while consumers remain leaves a reservation without an allocation
    status, body = await write_status(raw, "c", {"reservedFor": [consumer("p", "u1")]})
    assert status == 422 and body["details"]["causes"][0]["field"] == "status.reservedFor"
    assert await write_status(raw, "c", {}) == (200, await ok(raw.get(f"{CLAIMS}/c")))


async def test_reserving_with_a_strategic_merge_patch_as_kube_scheduler(bare: Raw) -> None:
    raw = bare
    await ok(raw.post(CLAIMS, claim("c")), 201)
    uid = (await allocated(raw, "c", consumer("a", "u1")))["metadata"]["uid"]
    patch = {"metadata": {"uid": uid}, "status": {"reservedFor": [consumer("b", "u2")]}}
    status, body, _ = await raw.patch(
        f"{CLAIMS}/c/status", patch, "application/strategic-merge-patch+json"
    )
    assert status == 200, body
    assert body["status"]["reservedFor"] == [consumer("a", "u1"), consumer("b", "u2")]
    # a claim being deleted (held by its finalizer) may lose consumers but gain none
    await ok(raw.delete(f"{CLAIMS}/c"))
    patch["status"]["reservedFor"] = [consumer("c", "u3")]
    status, body, _ = await raw.patch(
        f"{CLAIMS}/c/status", patch, "application/strategic-merge-patch+json"
    )
    assert status == 422
    assert body["details"]["causes"][0]["message"] == (
        "Forbidden: new entries may not be added while `deallocationRequested` or "
        "`deletionTimestamp` are set"
    )


async def test_new_allocation_names_requests_of_the_claim(bare: Raw) -> None:
    raw = bare
    await ok(raw.post(CLAIMS, claim("c")), 201)
    wrong = {"devices": {"results": [{**ALLOCATION["devices"]["results"][0], "request": "tpu"}]}}
    status, body = await write_status(raw, "c", {"allocation": wrong})
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "tpu": must be the name of a request in the claim or '
            "the name of a request and a subrequest separated by '/'",
            "field": "status.allocation.devices.results[0].request",
        }
    ]


async def test_create_validation_of_requests(bare: Raw) -> None:
    raw = bare
    bad = claim("c")
    bad["spec"] = {"devices": {"requests": [{"name": "gpu"}]}}
    status, body, _ = await raw.post(CLAIMS, bad)
    assert status == 422
    assert body["message"] == (
        'ResourceClaim.resource.k8s.io "c" is invalid: spec.devices.requests[0]: Required value: '
        "exactly one of `exactly` or `firstAvailable` is required"
    )


async def test_strict_field_validation_knows_the_schemas(raw: Raw) -> None:
    typo = claim("c")
    typo["spec"] = {"devices": {"requests": [{"name": "gpu", "exactlyy": {}}]}}
    status, body, _ = await raw.post(f"{CLAIMS}?fieldValidation=Strict", typo)
    assert status == 400
    assert 'unknown field "spec.devices.requests[0].exactlyy"' in body["message"]
    assert (await raw.post(f"{CLAIMS}?fieldValidation=Strict", claim("ok")))[0] == 201
    status, document, _ = await raw.get("/openapi/v3/apis/resource.k8s.io/v1")
    assert status == 200
    assert "io.k8s.api.resource.v1.ResourceClaim" in document["components"]["schemas"]


async def test_tables_print_the_claim_state(bare: Raw) -> None:
    raw = bare
    await ok(raw.post(CLAIMS, claim("c")), 201)
    table = await ok(raw.get(CLAIMS, headers=TABLE))
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "State", "Age"]
    assert table["rows"][0]["cells"][:2] == ["c", "pending"]
    await allocated(raw, "c", consumer("p", "u1"))
    table = await ok(raw.get(CLAIMS, headers=TABLE))
    assert table["rows"][0]["cells"][:2] == ["c", "allocated,reserved"]
    await ok(raw.post(f"{API}/resourceslices", resource_slice("s", NODE)), 201)
    table = await ok(raw.get(f"{API}/resourceslices", headers=TABLE))
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Node",
        "Driver",
        "Pool",
        "Age",
    ]
    assert table["rows"][0]["cells"][:4] == ["s", NODE, DRIVER, NODE]


# --- the resource claim controller -----------------------------------------------------------


def test_generate_name_truncates_in_proportion() -> None:
    assert generate_name("job-0", "gpu") == "job-0-gpu-"
    long_pod, long_claim = "p" * 60, "c" * 30
    name = generate_name(long_pod, long_claim)
    # 60*57//92 and 30*57//92 characters, joined by one hyphen and nothing after
    assert name == "p" * 37 + "-" + "c" * 18


async def test_claim_from_template(raw: Raw) -> None:
    await ok(raw.post(TEMPLATES, template("gpu-template")), 201)
    made = await ok(
        raw.post(PODS, claiming_pod("worker", resourceClaimTemplateName="gpu-template")), 201
    )
    uid = made["metadata"]["uid"]
    current = await eventually(
        lambda: get(raw, f"{PODS}/worker"),
        lambda p: bool((p.get("status") or {}).get("resourceClaimStatuses")),
        "pod status names its claim",
    )
    [entry] = current["status"]["resourceClaimStatuses"]
    assert entry["name"] == "gpu" and entry["resourceClaimName"].startswith("worker-gpu-")
    generated = await ok(raw.get(f"{CLAIMS}/{entry['resourceClaimName']}"))
    meta = generated["metadata"]
    assert meta["generateName"] == "worker-gpu-"
    assert meta["annotations"] == {"note": "from-template", POD_CLAIM_NAME: "gpu"}
    assert meta["labels"] == {"team": "ml"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "worker",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    request = generated["spec"]["devices"]["requests"][0]
    assert request["exactly"] == {
        "deviceClassName": "gpu",
        "allocationMode": "ExactCount",
        "count": 1,
    }
    # the pod status write is lost: the claim the pod owns is found again, no second one made
    await ok(raw.put(f"{PODS}/worker/status", {**current, "status": {"phase": "Pending"}}))
    again = await eventually(
        lambda: get(raw, f"{PODS}/worker"),
        lambda p: bool((p.get("status") or {}).get("resourceClaimStatuses")),
        "pod status names its claim again",
    )
    assert again["status"]["resourceClaimStatuses"] == [entry]
    assert len((await ok(raw.get(CLAIMS)))["items"]) == 1


async def test_missing_template_is_reported_then_used_when_it_appears(raw: Raw) -> None:
    await ok(raw.post(PODS, claiming_pod("w", resourceClaimTemplateName="later")), 201)
    [event] = await eventually(
        lambda: events_for(raw, "w", "FailedResourceClaimCreation"), bool, "a warning"
    )
    assert event["type"] == "Warning" and event["source"] == {"component": "resource_claim"}
    assert event["message"] == (
        'PodResourceClaim gpu: resource claim template "later": '
        'resourceclaimtemplate.resource.k8s.io "later" not found'
    )
    await ok(raw.post(TEMPLATES, template("later")), 201)
    await eventually(lambda: get(raw, CLAIMS), lambda body: len(body["items"]) == 1, "a claim")


async def test_finished_and_deleted_pods_release_the_claim(raw: Raw) -> None:
    await ok(raw.post(CLAIMS, claim("shared")), 201)
    a = await ok(raw.post(PODS, claiming_pod("a", resourceClaimName="shared")), 201)
    b = await ok(raw.post(PODS, claiming_pod("b", resourceClaimName="shared")), 201)
    refs = [consumer(p["metadata"]["name"], p["metadata"]["uid"]) for p in (a, b)]
    await allocated(raw, "shared", *refs)
    await ok(raw.delete(f"{PODS}/a"))  # not bound: gone at once
    current = await eventually(
        lambda: get(raw, f"{CLAIMS}/shared"),
        lambda c: c["status"].get("reservedFor") == [refs[1]],
        "the deleted pod's reservation removed",
    )
    assert current["status"]["allocation"] == ALLOCATION  # b still uses it
    await set_phase(raw, "b", "Succeeded")
    released = await eventually(
        lambda: get(raw, f"{CLAIMS}/shared"),
        lambda c: not c.get("status") and not c["metadata"].get("finalizers"),
        "deallocated and unprotected",
    )
    assert released["metadata"]["name"] == "shared"  # a user's claim stays


async def test_a_generated_claim_goes_with_its_pod(raw: Raw) -> None:
    await ok(raw.post(TEMPLATES, template("t")), 201)
    made = await ok(raw.post(PODS, claiming_pod("p", resourceClaimTemplateName="t")), 201)
    current = await eventually(
        lambda: get(raw, f"{PODS}/p"),
        lambda p: bool((p.get("status") or {}).get("resourceClaimStatuses")),
        "the claim made",
    )
    name = current["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    await allocated(raw, name, consumer("p", made["metadata"]["uid"]))
    await ok(raw.delete(f"{PODS}/p"))
    await eventually(lambda: get(raw, f"{CLAIMS}/{name}"), lambda c: c is None, "claim deleted")


async def test_an_allocated_claim_is_reserved_for_a_bound_pod(raw: Raw) -> None:
    await ok(raw.post(CLAIMS, claim("c")), 201)
    await allocated(raw, "c")
    made = await ok(raw.post(PODS, claiming_pod("p", resourceClaimName="c")), 201)
    await ok(raw.post(f"{PODS}/p/binding", binding("p", NODE)), 201)
    await eventually(
        lambda: get(raw, f"{CLAIMS}/c"),
        lambda c: c["status"].get("reservedFor") == [consumer("p", made["metadata"]["uid"])],
        "reserved for the bound pod",
    )


# --- the kubelet stand-in --------------------------------------------------------------------


@pytest.fixture
async def kubelet_raw() -> AsyncIterator[Raw]:
    config = KubeletConfig(start_delay=0.02, termination_delay=0.02, dra_retry_seconds=0.2)
    async with SimCluster("2", kubelet=config) as sim, aiohttp.ClientSession() as session:
        yield Raw(session, sim.url)


async def test_kubelet_waits_for_a_reserved_claim(kubelet_raw: Raw) -> None:
    raw = kubelet_raw
    await ok(raw.post(TEMPLATES, template("t")), 201)
    made = await ok(raw.post(PODS, claiming_pod("p", resourceClaimTemplateName="t")), 201)
    uid = made["metadata"]["uid"]
    current = await eventually(
        lambda: get(raw, f"{PODS}/p"),
        lambda p: bool((p.get("status") or {}).get("resourceClaimStatuses")),
        "the claim made",
    )
    name = current["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    generated = await ok(raw.get(f"{CLAIMS}/{name}"))
    await ok(raw.post(f"{PODS}/p/binding", binding("p", NODE)), 201)
    [event] = await eventually(
        lambda: events_for(raw, "p", "FailedPrepareDynamicResources"), bool, "a warning"
    )
    assert event["type"] == "Warning" and event["source"] == {"component": "kubelet", "host": NODE}
    assert event["message"] == (
        "Failed to prepare dynamic resources: prepare dynamic resources: "
        f"pod p ({uid}) is not allowed to use ResourceClaim {name} "
        f"({generated['metadata']['uid']})"
    )
    await asyncio.sleep(0.3)  # a retry or two: still Pending, no second Event for the same words
    assert (await ok(raw.get(f"{PODS}/p")))["status"]["phase"] == "Pending"
    assert len(await events_for(raw, "p", "FailedPrepareDynamicResources")) == 1
    await allocated(raw, name, consumer("p", uid))
    await eventually(
        lambda: get(raw, f"{PODS}/p"), lambda p: p["status"]["phase"] == "Running", "Running"
    )


async def test_kubelet_reports_a_missing_claim(kubelet_raw: Raw) -> None:
    raw = kubelet_raw
    await ok(raw.post(PODS, claiming_pod("p", resourceClaimName="nope")), 201)
    await ok(raw.post(f"{PODS}/p/binding", binding("p", NODE)), 201)
    [event] = await eventually(
        lambda: events_for(raw, "p", "FailedPrepareDynamicResources"), bool, "a warning"
    )
    assert event["message"] == (
        "Failed to prepare dynamic resources: prepare dynamic resources: "
        'fetch ResourceClaim nope: resourceclaims.resource.k8s.io "nope" not found'
    )
    await ok(raw.post(PODS, pod("plain")), 201)  # a pod without claims starts as before
    await ok(raw.post(f"{PODS}/plain/binding", binding("plain", NODE)), 201)
    await eventually(
        lambda: get(raw, f"{PODS}/plain"), lambda p: p["status"]["phase"] == "Running", "Running"
    )
    assert (await ok(raw.get(f"{PODS}/p")))["status"]["phase"] == "Pending"


# --- the real kubectl ------------------------------------------------------------------------

MANIFESTS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c1}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu}
"""


def test_kubectl_applies_and_prints_claims(tmp_path: Path) -> None:
    with gang_sim_serve(tmp_path, nodes="1") as served:
        served.kubectl("apply", "-f", "-", stdin=MANIFESTS)
        out = served.kubectl("get", "resourceclaims")
        assert out.split() == ["NAME", "STATE", "AGE", "c1", "pending", out.split()[-1]]
        typo = MANIFESTS.replace("deviceClassName", "deviceClassNam")
        stderr = served.kubectl_fails("apply", "-f", "-", stdin=typo.replace("c1", "c2"))
        assert 'unknown field "spec.devices.requests[0].exactly.deviceClassNam"' in stderr
