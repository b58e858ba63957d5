"""CRUD verbs over HTTP, answered as a real kube-apiserver answers them.

Create defaults and refusals, optimistic concurrency on PUT, the status subresource split,
the three patch flavours (and the 415 for strategic merge on a custom resource), pod spec
immutability, graceful deletion, finalizers, preconditions, deletecollection, the two views of
Events, PriorityClasses and PodDisruptionBudgets. Exact bodies are compared where a client or an
operator reads them; see shared/k8s-api for what was recorded from a real server.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from gang.sim.cluster import SimCluster
from tests.conftest import Raw, binding, pod

PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
NAMESPACES = "/api/v1/namespaces"
PG_GROUP, PG_VERSION = "scheduling.x-k8s.io", "v1alpha1"
PGS = f"/apis/{PG_GROUP}/{PG_VERSION}/namespaces/default/podgroups"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
CORE_EVENTS = "/api/v1/namespaces/default/events"
V1_EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"

UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
SMP = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
MERGE = "application/merge-patch+json"


def failure(
    code: int, reason: str | None, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A v1.Status failure body, as the Go encoder writes it (empty fields omitted)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason is not None:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def podgroup(name: str, min_member: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
        **extra,
    }


def parse_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


async def created(raw: Raw, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, obj, _ = await raw.post(path, body)
    assert status == 201, obj
    result: dict[str, Any] = obj
    return result


async def fetch(raw: Raw, path: str) -> dict[str, Any]:
    status, obj, _ = await raw.get(path)
    assert status == 200, obj
    result: dict[str, Any] = obj
    return result


# --- create --------------------------------------------------------------------------------


async def test_create_defaults_uid_timestamp_and_resource_version(raw: Raw) -> None:
    _, before, _ = await raw.get(PODS)
    start = int(time.time())
    obj = await created(raw, PODS, pod("p"))
    meta = obj["metadata"]
    assert UID.match(meta["uid"])
    assert RFC3339_Z.match(meta["creationTimestamp"])
    assert start <= parse_time(meta["creationTimestamp"]) <= time.time() + 1
    assert meta["resourceVersion"].isdigit()
    assert int(meta["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert meta["namespace"] == "default"
    assert (obj["apiVersion"], obj["kind"]) == ("v1", "Pod")
    assert await fetch(raw, f"{PODS}/p") == obj
    # the list now reflects exactly that write
    _, after, _ = await raw.get(PODS)
    assert after["metadata"]["resourceVersion"] == meta["resourceVersion"]
    # a second object gets its own uid and a later version
    other = await created(raw, PODS, pod("q"))
    assert other["metadata"]["uid"] != meta["uid"]
    assert int(other["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])


async def test_create_duplicate_is_409_already_exists(raw: Raw) -> None:
    await created(raw, PODS, pod("x"))
    status, body, _ = await raw.post(PODS, pod("x"))
    assert status == 409
    assert body == failure(
        409, "AlreadyExists", 'pods "x" already exists', {"name": "x", "kind": "pods"}
    )
    # validation comes before the storage's exists check
    invalid = pod("x")
    invalid["spec"]["containers"] = []
    status, body, _ = await raw.post(PODS, invalid)
    assert status == 422 and body["reason"] == "Invalid"
    await created(raw, PGS, podgroup("g"))
    status, body, _ = await raw.post(PGS, podgroup("g"))
    assert status == 409
    assert body == failure(
        409,
        "AlreadyExists",
        'podgroups.scheduling.x-k8s.io "g" already exists',
        {"name": "g", "group": PG_GROUP, "kind": "podgroups"},
    )


async def test_generate_name_appends_five_random_characters(raw: Raw) -> None:
    names = set()
    for _ in range(3):
        body = pod("unused")
        body["metadata"] = {"generateName": "job-"}
        obj = await created(raw, PODS, body)
        name = obj["metadata"]["name"]
        assert re.fullmatch(r"job-[bcdfghjklmnpqrstvwxz2456789]{5}", name), name
        assert obj["metadata"]["generateName"] == "job-"
        names.add(name)
        assert (await raw.get(f"{PODS}/{name}"))[0] == 200
    assert len(names) == 3
    # neither a name nor a generateName: 422
    body = pod("unused")
    body["metadata"] = {}
    status, err, _ = await raw.post(PODS, body)
    assert status == 422 and err["reason"] == "Invalid"
    assert "metadata.name: Required value: name or generateName is required" in err["message"]


async def test_create_in_missing_namespace_is_404(raw: Raw) -> None:
    status, body, _ = await raw.post("/api/v1/namespaces/nope/pods", pod("p"))
    assert status == 404
    assert body == failure(
        404, "NotFound", 'namespaces "nope" not found', {"name": "nope", "kind": "namespaces"}
    )


async def test_create_with_invalid_name_is_422(raw: Raw) -> None:
    subdomain = (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        r"regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )
    cause = f'Invalid value: "Bad_Name": {subdomain}'
    status, body, _ = await raw.post(PODS, pod("Bad_Name"))
    assert status == 422
    assert body == failure(
        422,
        "Invalid",
        f'Pod "Bad_Name" is invalid: metadata.name: {cause}',
        {
            "name": "Bad_Name",
            "kind": "Pod",
            "causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "metadata.name"}],
        },
    )
    # a custom resource names its kind with its group, and says so in the details
    status, body, _ = await raw.post(PGS, podgroup("Bad_Name"))
    assert status == 422
    assert (
        body["message"]
        == f'PodGroup.scheduling.x-k8s.io "Bad_Name" is invalid: metadata.name: {cause}'
    )
    assert (body["details"]["group"], body["details"]["kind"]) == (PG_GROUP, "PodGroup")
    # namespaces are RFC 1123 labels: no dots
    label = (
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    )
    status, body, _ = await raw.post(NAMESPACES, {"metadata": {"name": "a.b"}})
    assert status == 422
    assert (
        body["message"]
        == f'Namespace "a.b" is invalid: metadata.name: Invalid value: "a.b": {label}'
    )
    # too long, though well formed
    long_name = "a" * 254
    status, body, _ = await raw.post(PODS, pod(long_name))
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": f'Invalid value: "{long_name}": must be no more than 253 characters',
            "field": "metadata.name",
        }
    ]


async def test_create_with_namespace_mismatch_is_400(raw: Raw) -> None:
    body = pod("p")
    body["metadata"]["namespace"] = "kube-system"
    status, err, _ = await raw.post(PODS, body)
    assert status == 400
    assert err == failure(
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
    )
    assert (await raw.get(f"{PODS}/p"))[0] == 404
    assert (await raw.get("/api/v1/namespaces/kube-system/pods/p"))[0] == 404


async def test_create_with_resource_version_is_refused_by_storage(raw: Raw) -> None:
    """etcd3's store refuses it with a plain error: HTTP 500, no reason, no details."""
    expected = failure(500, None, "resourceVersion should not be set on objects to be created")
    body = pod("p")
    body["metadata"]["resourceVersion"] = "5"
    status, err, _ = await raw.post(PODS, body)
    assert (status, err) == (500, expected)
    assert (await raw.get(f"{PODS}/p"))[0] == 404
    # re-posting an object just read back: the version check comes before the exists check
    obj = await created(raw, PODS, pod("q"))
    status, err, _ = await raw.post(PODS, obj)
    assert (status, err) == (500, expected)
    # "0" is no version at all and is accepted
    body = pod("r")
    body["metadata"]["resourceVersion"] = "0"
    assert (await raw.post(PODS, body))[0] == 201


async def test_create_with_wrong_kind_is_400(raw: Raw) -> None:
    body = pod("p")
    body["kind"] = "Node"
    status, err, _ = await raw.post(PODS, body)
    assert status == 400 and err["reason"] == "BadRequest" and err["kind"] == "Status"
    assert (await raw.get(f"{PODS}/p"))[0] == 404
    body = pod("p")
    body["apiVersion"] = "apps/v1"
    status, err, _ = await raw.post(PODS, body)
    assert status == 400 and err["reason"] == "BadRequest"


async def test_create_with_malformed_json_is_400(raw: Raw) -> None:
    status, err, _ = await raw.request("POST", PODS, data=b'{"metadata": {"name": "p"')
    assert status == 400
    assert err["kind"] == "Status" and err["reason"] == "BadRequest" and err["code"] == 400
    status, err, _ = await raw.request("POST", PODS, data=b"[1, 2]")
    assert status == 400 and err["reason"] == "BadRequest"


# --- get -----------------------------------------------------------------------------------


async def test_get_missing_is_404(raw: Raw) -> None:
    status, body, _ = await raw.get(f"{PODS}/x")
    assert status == 404
    assert body == failure(404, "NotFound", 'pods "x" not found', {"name": "x", "kind": "pods"})
    status, body, _ = await raw.get(f"{PGS}/x")
    assert status == 404
    assert body == failure(
        404,
        "NotFound",
        'podgroups.scheduling.x-k8s.io "x" not found',
        {"name": "x", "group": PG_GROUP, "kind": "podgroups"},
    )


async def test_get_missing_through_the_client_raises_404(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    with pytest.raises(ApiException) as info:
        await core.read_namespaced_pod("x", "default")
    assert info.value.status == 404
    assert orjson.loads(info.value.body)["reason"] == "NotFound"


# --- update (PUT) --------------------------------------------------------------------------


async def test_put_with_stale_resource_version_is_409(raw: Raw) -> None:
    await created(raw, PODS, pod("x"))
    stale = await fetch(raw, f"{PODS}/x")
    status, _, _ = await raw.patch(f"{PODS}/x", {"metadata": {"labels": {"a": "1"}}})
    assert status == 200
    stale["metadata"]["labels"] = {"b": "2"}
    status, body, _ = await raw.put(f"{PODS}/x", stale)
    assert status == 409
    assert body == failure(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on pods "x": {STALE}',
        {"name": "x", "kind": "pods"},
    )
    assert (await fetch(raw, f"{PODS}/x"))["metadata"]["labels"] == {"a": "1"}


async def test_put_with_stale_version_through_the_client_raises_409(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    first = await core.create_namespaced_pod("default", pod("x"))
    await core.patch_namespaced_pod("x", "default", {"metadata": {"labels": {"a": "1"}}})
    first.metadata.labels = {"b": "2"}
    with pytest.raises(ApiException) as info:
        await core.replace_namespaced_pod("x", "default", first)
    assert info.value.status == 409
    assert orjson.loads(info.value.body)["message"].endswith(STALE)
    # re-read, change, write: the usual retry succeeds
    fresh = await core.read_namespaced_pod("x", "default")
    fresh.metadata.labels = {**fresh.metadata.labels, "b": "2"}
    done = await core.replace_namespaced_pod("x", "default", fresh)
    assert done.metadata.labels == {"a": "1", "b": "2"}


async def test_put_without_resource_version_is_unconditional(raw: Raw) -> None:
    await created(raw, PODS, pod("x"))
    current = await fetch(raw, f"{PODS}/x")
    await raw.patch(f"{PODS}/x", {"metadata": {"labels": {"a": "1"}}})  # someone else wrote
    del current["metadata"]["resourceVersion"]
    current["metadata"]["labels"] = {"mine": "yes"}
    status, body, _ = await raw.put(f"{PODS}/x", current)
    assert status == 200
    assert body["metadata"]["labels"] == {"mine": "yes"}  # last writer wins
    assert (await fetch(raw, f"{PODS}/x")) == body


async def test_noop_update_keeps_the_resource_version(cluster: SimCluster, raw: Raw) -> None:
    await created(raw, PODS, pod("x"))
    current = await fetch(raw, f"{PODS}/x")
    rv = cluster.store.rv
    status, body, _ = await raw.put(f"{PODS}/x", current)
    assert status == 200 and body == current
    status, body, _ = await raw.patch(
        f"{PODS}/x", {"metadata": {"labels": current["metadata"]["labels"]}}
    )
    assert status == 200 and body == current
    assert cluster.store.rv == rv  # nothing was written
    # while a real change does bump it
    status, body, _ = await raw.patch(f"{PODS}/x", {"metadata": {"labels": {"a": "1"}}})
    assert int(body["metadata"]["resourceVersion"]) > int(current["metadata"]["resourceVersion"])


async def test_put_of_missing_pod_is_404(raw: Raw) -> None:
    status, body, _ = await raw.put(f"{PODS}/ghost", pod("ghost"))
    assert status == 404
    assert body == failure(
        404, "NotFound", 'pods "ghost" not found', {"name": "ghost", "kind": "pods"}
    )
    assert (await raw.get(f"{PODS}/ghost"))[0] == 404


async def test_lease_put_creates_a_missing_lease(raw: Raw) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "gang-scheduler"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    status, body, _ = await raw.put(f"{LEASES}/gang-scheduler", lease)
    assert status == 201  # created by the PUT
    assert UID.match(body["metadata"]["uid"]) and body["spec"]["holderIdentity"] == "a"
    body["spec"]["holderIdentity"] = "b"
    status, again, _ = await raw.put(f"{LEASES}/gang-scheduler", body)
    assert status == 200  # an ordinary update now
    assert again["spec"]["holderIdentity"] == "b"
    assert again["metadata"]["uid"] == body["metadata"]["uid"]


async def test_update_keeps_creation_timestamp_and_refuses_another_uid(raw: Raw) -> None:
    obj = await created(raw, PODS, pod("x"))
    meta = obj["metadata"]
    changed = {
        **obj,
        "metadata": {**meta, "creationTimestamp": "2001-01-01T00:00:00Z", "labels": {"a": "1"}},
    }
    status, body, _ = await raw.put(f"{PODS}/x", changed)
    assert status == 200
    assert body["metadata"]["creationTimestamp"] == meta["creationTimestamp"]  # silently kept
    assert body["metadata"]["labels"] == {"a": "1"}
    # a uid in the body is a precondition on the object's identity
    other_uid = "00000000-0000-4000-8000-000000000000"
    wrong = {**body, "metadata": {**body["metadata"], "uid": other_uid}}
    status, err, _ = await raw.put(f"{PODS}/x", wrong)
    assert status == 409
    assert err == failure(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on pods "x": Precondition failed: '
        f"UID in precondition: {other_uid}, UID in object meta: {meta['uid']}",
        {"name": "x", "kind": "pods"},
    )
    # a patch cannot change it either: the uid is an immutable field
    status, err, _ = await raw.patch(f"{PODS}/x", {"metadata": {"uid": other_uid}})
    assert status == 422 and err["reason"] == "Invalid"
    assert err["message"] == (
        f'Pod "x" is invalid: metadata.uid: Invalid value: "{other_uid}": field is immutable'
    )
    # without a uid the object's own is kept
    no_uid = {**body, "metadata": {k: v for k, v in body["metadata"].items() if k != "uid"}}
    no_uid["metadata"]["labels"] = {"a": "2"}
    status, body, _ = await raw.put(f"{PODS}/x", no_uid)
    assert status == 200 and body["metadata"]["uid"] == meta["uid"]


# --- the status subresource split ----------------------------------------------------------


async def test_main_resource_writes_do_not_change_status(cluster: SimCluster, raw: Raw) -> None:
    obj = await created(raw, PODS, pod("p"))
    rv = cluster.store.rv
    running = {**obj, "status": {"phase": "Running"}}
    status, body, _ = await raw.put(f"{PODS}/p", running)
    assert status == 200 and body["status"]["phase"] == "Pending"
    status, body, _ = await raw.patch(f"{PODS}/p", {"status": {"phase": "Running"}})
    assert status == 200 and body["status"]["phase"] == "Pending"
    assert cluster.store.rv == rv  # both were no-ops
    # nodes: same split
    node = await fetch(raw, f"{NODES}/node-00000")
    status, body, _ = await raw.patch(
        f"{NODES}/node-00000",
        {"metadata": {"labels": {"x": "1"}}, "status": {"allocatable": {"cpu": "1"}}},
    )
    assert status == 200
    assert body["metadata"]["labels"]["x"] == "1"
    assert body["status"] == node["status"]
    # podgroups (a custom resource with a status subresource): same split
    await created(raw, PGS, podgroup("g"))
    status, body, _ = await raw.patch(f"{PGS}/g", {"status": {"phase": "Running"}})
    assert status == 200 and "status" not in body


async def test_status_writes_change_only_status(raw: Raw) -> None:
    # pods: spec is kept, status written; pods/status may still update labels and annotations
    await created(raw, PODS, pod("p"))
    status, body, _ = await raw.patch(
        f"{PODS}/p/status",
        {
            "spec": {"nodeName": "node-00001"},
            "metadata": {"labels": {"via-status": "1"}},
            "status": {"phase": "Running", "podIP": "10.1.0.5"},
        },
    )
    assert status == 200
    assert "nodeName" not in body["spec"]
    assert body["status"]["phase"] == "Running" and body["status"]["podIP"] == "10.1.0.5"
    assert body["status"]["qosClass"] == "Guaranteed"
    assert body["metadata"]["labels"]["via-status"] == "1"
    assert await fetch(raw, f"{PODS}/p") == body
    # a PUT on pods/status likewise
    body["status"]["phase"] = "Succeeded"
    body["spec"]["schedulerName"] = "other"
    status, put, _ = await raw.put(f"{PODS}/p/status", body)
    assert status == 200
    assert (
        put["status"]["phase"] == "Succeeded" and put["spec"]["schedulerName"] == "gang-scheduler"
    )

    # nodes
    node = await fetch(raw, f"{NODES}/node-00002")
    status, body, _ = await raw.patch(
        f"{NODES}/node-00002/status",
        {"spec": {"unschedulable": True}, "status": {"allocatable": {"cpu": "7"}}},
    )
    assert status == 200
    assert body["spec"] == node["spec"]
    assert body["status"]["allocatable"]["cpu"] == "7"
    assert body["status"]["capacity"] == node["status"]["capacity"]

    # podgroups: a custom resource's status write keeps everything but status
    await created(raw, PGS, podgroup("g"))
    status, body, _ = await raw.patch(
        f"{PGS}/g/status",
        {
            "metadata": {"labels": {"ignored": "1"}},
            "spec": {"minMember": 9},
            "status": {"phase": "Scheduling", "scheduled": 1},
        },
    )
    assert status == 200
    assert body["status"] == {"phase": "Scheduling", "scheduled": 1}
    assert body["spec"] == {"minMember": 2}
    assert "labels" not in body["metadata"]


async def test_podgroup_status_given_on_create_is_dropped(raw: Raw) -> None:
    obj = await created(raw, PGS, podgroup("g", status={"phase": "Running", "running": 5}))
    assert "status" not in obj
    assert "status" not in await fetch(raw, f"{PGS}/g")


async def test_podgroup_generation_tracks_spec_changes_only(raw: Raw) -> None:
    obj = await created(raw, PGS, podgroup("g"))
    assert obj["metadata"]["generation"] == 1
    _, body, _ = await raw.patch(f"{PGS}/g", {"spec": {"minMember": 3}})
    assert body["metadata"]["generation"] == 2
    _, body, _ = await raw.patch(f"{PGS}/g/status", {"status": {"phase": "Pending"}})
    assert body["metadata"]["generation"] == 2 and body["status"] == {"phase": "Pending"}
    _, body, _ = await raw.patch(f"{PGS}/g", {"metadata": {"labels": {"a": "1"}}})
    assert body["metadata"]["generation"] == 2  # metadata is not spec
    # a client cannot set the generation itself
    body["metadata"]["generation"] = 40
    body["spec"]["minMember"] = 4
    status, body, _ = await raw.put(f"{PGS}/g", body)
    assert status == 200 and body["metadata"]["generation"] == 3


# --- patch ---------------------------------------------------------------------------------


async def test_merge_patch(raw: Raw) -> None:
    await created(raw, PODS, pod("p", labels={"a": "1", "b": "2"}))
    status, body, _ = await raw.patch(
        f"{PODS}/p",
        {"metadata": {"labels": {"a": None, "c": "3"}, "annotations": {"note": "x"}}},
        MERGE,
    )
    assert status == 200
    assert body["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert body["metadata"]["annotations"] == {"note": "x"}
    # lists are replaced wholesale by a merge patch
    status, body, _ = await raw.patch(
        f"{PODS}/p/status",
        {"status": {"conditions": [{"type": "A", "status": "True"}]}},
        MERGE,
    )
    status, body, _ = await raw.patch(
        f"{PODS}/p/status",
        {"status": {"conditions": [{"type": "B", "status": "True"}]}},
        MERGE,
    )
    assert [c["type"] for c in body["status"]["conditions"]] == ["B"]


async def test_strategic_merge_patch_of_conditions_like_kube_scheduler(raw: Raw) -> None:
    await created(raw, PODS, pod("p"))
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        "lastProbeTime": None,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status, body, _ = await raw.patch(
        f"{PODS}/p/status",
        {
            "status": {
                "$setElementOrder/conditions": [{"type": "PodScheduled"}],
                "conditions": [unschedulable],
            }
        },
        SMP,
    )
    assert status == 200
    [cond] = body["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert "$setElementOrder/conditions" not in body["status"]
    # a second writer adds a condition, and orders the list, without repeating the first
    status, body, _ = await raw.patch(
        f"{PODS}/p/status",
        {
            "status": {
                "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "PodScheduled"}],
                "conditions": [{"type": "Ready", "status": "False"}],
            }
        },
        SMP,
    )
    assert status == 200
    assert [(c["type"], c["status"]) for c in body["status"]["conditions"]] == [
        ("Ready", "False"),
        ("PodScheduled", "False"),
    ]
    # and an element merges by its key: only the named fields change
    status, body, _ = await raw.patch(
        f"{PODS}/p/status",
        {"status": {"conditions": [{"type": "PodScheduled", "message": "0/4 nodes: retrying"}]}},
        SMP,
    )
    scheduled = next(c for c in body["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["message"] == "0/4 nodes: retrying" and scheduled["reason"] == "Unschedulable"
    assert len(body["status"]["conditions"]) == 2
    assert body["spec"]["schedulerName"] == "gang-scheduler"


async def test_json_patch(raw: Raw) -> None:
    await created(raw, PODS, pod("p", labels={"a": "1"}))
    ops = [
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/a"},
    ]
    status, body, _ = await raw.patch(f"{PODS}/p", ops, JSON_PATCH)
    assert status == 200
    assert body["metadata"]["labels"] == {"b": "2"}
    # a failing operation: the whole patch is refused with 422 and nothing changes
    status, err, _ = await raw.patch(
        f"{PODS}/p",
        [
            {"op": "add", "path": "/metadata/labels/c", "value": "3"},
            {"op": "test", "path": "/metadata/labels/b", "value": "not-2"},
        ],
        JSON_PATCH,
    )
    assert status == 422
    assert err["reason"] == "Invalid" and err["code"] == 422
    assert err["message"] == "the server rejected our request due to an error in our request"
    [cause] = err["details"]["causes"]
    assert cause["reason"] == "UnexpectedServerResponse" and cause["message"]
    assert (await fetch(raw, f"{PODS}/p"))["metadata"]["labels"] == {"b": "2"}
    # an object where a list of operations is expected cannot even be decoded: 400
    status, err, _ = await raw.patch(f"{PODS}/p", {"metadata": {}}, JSON_PATCH)
    assert status == 400
    assert err == failure(
        400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    )


async def test_strategic_merge_patch_on_a_custom_resource_is_415(raw: Raw) -> None:
    await created(raw, PGS, podgroup("g"))
    status, body, _ = await raw.patch(f"{PGS}/g", {"spec": {"minMember": 3}}, SMP)
    assert status == 415
    assert body == failure(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )
    assert (await fetch(raw, f"{PGS}/g"))["spec"] == {"minMember": 2}
    # built-in types accept it
    await created(raw, PODS, pod("p"))
    assert (await raw.patch(f"{PODS}/p", {"metadata": {"labels": {"a": "1"}}}, SMP))[0] == 200


async def test_patch_carrying_a_stale_resource_version_is_409(raw: Raw) -> None:
    obj = await created(raw, PODS, pod("x"))
    rv = obj["metadata"]["resourceVersion"]
    await raw.patch(f"{PODS}/x", {"metadata": {"labels": {"a": "1"}}})
    for ctype in (MERGE, SMP):
        status, body, _ = await raw.patch(
            f"{PODS}/x", {"metadata": {"resourceVersion": rv, "labels": {"b": "2"}}}, ctype
        )
        assert status == 409
        assert body == failure(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on pods "x": {STALE}',
            {"name": "x", "kind": "pods"},
        )
    # with the current version the same patch goes through
    current = (await fetch(raw, f"{PODS}/x"))["metadata"]["resourceVersion"]
    status, body, _ = await raw.patch(
        f"{PODS}/x", {"metadata": {"resourceVersion": current, "labels": {"b": "2"}}}
    )
    assert status == 200 and body["metadata"]["labels"] == {"a": "1", "b": "2"}


async def test_client_custom_object_patches_need_an_explicit_content_type(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    custom = k8s.CustomObjectsApi(client)
    await custom.create_namespaced_custom_object(
        PG_GROUP, PG_VERSION, "default", "podgroups", podgroup("g")
    )
    patched = await custom.patch_namespaced_custom_object(
        PG_GROUP,
        PG_VERSION,
        "default",
        "podgroups",
        "g",
        {"spec": {"minMember": 4}},
        _content_type=MERGE,
    )
    assert patched["spec"] == {"minMember": 4} and patched["metadata"]["generation"] == 2
    patched = await custom.patch_namespaced_custom_object_status(
        PG_GROUP,
        PG_VERSION,
        "default",
        "podgroups",
        "g",
        {"status": {"phase": "Running"}},
        _content_type=MERGE,
    )
    assert patched["status"] == {"phase": "Running"} and patched["spec"] == {"minMember": 4}

    # Without _content_type the client picks application/json-patch+json for a dict body,
    # which no apiserver can decode as a list of operations.
    sent: list[str] = []
    original = client.rest_client.request

    async def spy(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(kwargs["headers"]["Content-Type"])
        return await original(method, url, *args, **kwargs)

    monkeypatch.setattr(client.rest_client, "request", spy)
    for call in (
        custom.patch_namespaced_custom_object,
        custom.patch_namespaced_custom_object_status,
    ):
        with pytest.raises(ApiException) as info:
            await call(
                PG_GROUP, PG_VERSION, "default", "podgroups", "g", {"spec": {"minMember": 5}}
            )
        assert info.value.status == 400
        assert orjson.loads(info.value.body) == failure(
            400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    assert sent == [JSON_PATCH, JSON_PATCH]
    # a list body is a proper JSON patch, and that content type is then right
    done = await custom.patch_namespaced_custom_object(
        PG_GROUP,
        PG_VERSION,
        "default",
        "podgroups",
        "g",
        [{"op": "replace", "path": "/spec/minMember", "value": 6}],
    )
    assert done["spec"] == {"minMember": 6} and sent[-1] == JSON_PATCH


# --- pod spec immutability -----------------------------------------------------------------


async def test_pod_spec_is_immutable_but_for_images_and_added_tolerations(raw: Raw) -> None:
    obj = await created(raw, PODS, pod("p"))
    # resources by PUT
    changed = orjson.loads(orjson.dumps(obj))
    changed["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2"
    status, err, _ = await raw.put(f"{PODS}/p", changed)
    assert status == 422 and err["reason"] == "Invalid"
    assert err["message"].startswith(
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change'
    )
    assert [c["field"] for c in err["details"]["causes"]] == ["spec"]
    # nodeName by PATCH (binding is the only way to set it)
    status, err, _ = await raw.patch(f"{PODS}/p", {"spec": {"nodeName": "node-00000"}})
    assert status == 422 and err["reason"] == "Invalid"
    # resources by strategic merge patch
    status, err, _ = await raw.patch(
        f"{PODS}/p",
        {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}},
        SMP,
    )
    assert status == 422
    assert await fetch(raw, f"{PODS}/p") == obj
    # an image may change
    status, body, _ = await raw.patch(
        f"{PODS}/p", {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}, SMP
    )
    assert status == 200 and body["spec"]["containers"][0]["image"] == "busybox:1.37"
    # a toleration may be added, not removed
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    grown = {
        **body,
        "spec": {**body["spec"], "tolerations": [*body["spec"]["tolerations"], toleration]},
    }
    status, body, _ = await raw.put(f"{PODS}/p", grown)
    assert status == 200 and toleration in body["spec"]["tolerations"]
    shrunk = {**body, "spec": {**body["spec"], "tolerations": body["spec"]["tolerations"][1:]}}
    status, err, _ = await raw.put(f"{PODS}/p", shrunk)
    assert status == 422 and err["details"]["causes"][0]["field"] == "spec.tolerations"


# --- delete --------------------------------------------------------------------------------


async def test_unbound_pod_is_deleted_at_once(raw: Raw) -> None:
    await created(raw, PODS, pod("p"))
    status, body, _ = await raw.delete(f"{PODS}/p", {"gracePeriodSeconds": 60})
    assert status == 200
    assert body["kind"] == "Pod" and body["metadata"]["name"] == "p"
    assert (await raw.get(f"{PODS}/p"))[0] == 404
    status, body, _ = await raw.delete(f"{PODS}/p")
    assert status == 404 and body["message"] == 'pods "p" not found'


async def test_bound_pod_deletion_is_graceful_without_a_kubelet(raw: Raw) -> None:
    await created(raw, PODS, pod("p"))
    assert (await raw.post(f"{PODS}/p/binding", binding("p", "node-00000")))[0] == 201
    start = int(time.time())
    status, body, _ = await raw.delete(f"{PODS}/p")
    assert status == 200
    meta = body["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30  # the pod's terminationGracePeriodSeconds
    assert start + 30 <= parse_time(meta["deletionTimestamp"]) <= time.time() + 31
    stored = await fetch(raw, f"{PODS}/p")  # no kubelet confirms the kill: it stays
    assert stored["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    # a shorter grace shortens it; a longer one does not extend it
    status, body, _ = await raw.delete(f"{PODS}/p", {"gracePeriodSeconds": 10})
    assert body["metadata"]["deletionGracePeriodSeconds"] == 10
    status, body, _ = await raw.delete(f"{PODS}/p", {"gracePeriodSeconds": 20})
    assert body["metadata"]["deletionGracePeriodSeconds"] == 10
    # a terminating pod can still be updated (and its deletionTimestamp cannot be cleared);
    # the update does not complete the deletion, which waits for its grace period
    stored = await fetch(raw, f"{PODS}/p")
    status, body, _ = await raw.patch(
        f"{PODS}/p", {"metadata": {"deletionTimestamp": None, "labels": {"a": "1"}}}
    )
    assert status == 200 and body["metadata"]["labels"] == {"a": "1"}
    assert body["metadata"]["deletionTimestamp"] == stored["metadata"]["deletionTimestamp"]
    status, body, _ = await raw.patch(f"{PODS}/p/status", {"status": {"phase": "Running"}})
    assert status == 200
    assert (await fetch(raw, f"{PODS}/p"))["status"]["phase"] == "Running"
    # grace 0 as a query parameter forces it
    status, body, _ = await raw.delete(f"{PODS}/p?gracePeriodSeconds=0")
    assert status == 200
    assert (await raw.get(f"{PODS}/p"))[0] == 404


async def test_grace_zero_in_delete_options_deletes_a_bound_pod_at_once(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    await core.create_namespaced_pod("default", pod("p"))
    await core.create_namespaced_pod_binding(
        "p",
        "default",
        k8s.V1Binding(
            metadata=k8s.V1ObjectMeta(name="p"),
            target=k8s.V1ObjectReference(kind="Node", name="node-00001"),
        ),
        _preload_content=False,
    )
    deleted = await core.delete_namespaced_pod(
        "p", "default", body=k8s.V1DeleteOptions(grace_period_seconds=0)
    )
    assert deleted.metadata.name == "p"
    with pytest.raises(ApiException) as info:
        await core.read_namespaced_pod("p", "default")
    assert info.value.status == 404


async def test_finalizers_hold_an_object_until_removed(raw: Raw) -> None:
    body = pod("p")
    body["metadata"]["finalizers"] = ["example.com/keep"]
    await created(raw, PODS, body)
    status, deleted, _ = await raw.delete(f"{PODS}/p", {"gracePeriodSeconds": 0})
    assert status == 200
    assert deleted["metadata"]["deletionTimestamp"]
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    held = await fetch(raw, f"{PODS}/p")
    assert (
        held["metadata"]["finalizers"] == ["example.com/keep"]
        and held["metadata"]["deletionTimestamp"]
    )
    status, last, _ = await raw.patch(f"{PODS}/p", {"metadata": {"finalizers": None}})
    assert status == 200 and last["metadata"]["name"] == "p"
    assert (await raw.get(f"{PODS}/p"))[0] == 404

    # a bound pod with a finalizer: removing the finalizer during the grace period does not
    # end it early; a forced delete (grace 0) then waits only for the finalizer
    body = pod("q")
    body["metadata"]["finalizers"] = ["example.com/keep"]
    await created(raw, PODS, body)
    assert (await raw.post(f"{PODS}/q/binding", binding("q", "node-00000")))[0] == 201
    status, deleted, _ = await raw.delete(f"{PODS}/q")
    assert status == 200 and deleted["metadata"]["deletionGracePeriodSeconds"] == 30
    status, deleted, _ = await raw.delete(f"{PODS}/q", {"gracePeriodSeconds": 0})
    assert status == 200 and deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    assert (await raw.get(f"{PODS}/q"))[0] == 200  # the finalizer holds it
    status, _, _ = await raw.patch(f"{PODS}/q", {"metadata": {"finalizers": None}})
    assert status == 200
    assert (await raw.get(f"{PODS}/q"))[0] == 404

    # a custom resource: two finalizers, removed one at a time by JSON patch
    body = podgroup("g")
    body["metadata"]["finalizers"] = ["a.example.com/x", "b.example.com/y"]
    await created(raw, PGS, body)
    status, deleted, _ = await raw.delete(f"{PGS}/g")
    assert status == 200 and deleted["metadata"]["deletionTimestamp"]
    status, _, _ = await raw.patch(
        f"{PGS}/g", [{"op": "remove", "path": "/metadata/finalizers/0"}], JSON_PATCH
    )
    assert status == 200
    held = await fetch(raw, f"{PGS}/g")
    assert held["metadata"]["finalizers"] == ["b.example.com/y"]
    status, _, _ = await raw.patch(
        f"{PGS}/g", [{"op": "remove", "path": "/metadata/finalizers/0"}], JSON_PATCH
    )
    assert status == 200
    assert (await raw.get(f"{PGS}/g"))[0] == 404


async def test_delete_precondition_on_uid(raw: Raw) -> None:
    obj = await created(raw, PODS, pod("p"))
    uid = obj["metadata"]["uid"]
    wrong = "00000000-0000-4000-8000-000000000000"
    status, body, _ = await raw.delete(f"{PODS}/p", {"preconditions": {"uid": wrong}})
    assert status == 409
    assert body == failure(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on pods "p": Precondition failed: '
        f"UID in precondition: {wrong}, UID in object meta: {uid}",
        {"name": "p", "kind": "pods"},
    )
    assert (await raw.get(f"{PODS}/p"))[0] == 200
    status, _, _ = await raw.delete(f"{PODS}/p", {"preconditions": {"uid": uid}})
    assert status == 200
    assert (await raw.get(f"{PODS}/p"))[0] == 404


async def test_delete_answers_a_status_for_nodes_and_the_object_for_pods(raw: Raw) -> None:
    node = await fetch(raw, f"{NODES}/node-00003")
    status, body, _ = await raw.delete(f"{NODES}/node-00003")
    assert status == 200
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "node-00003", "kind": "nodes", "uid": node["metadata"]["uid"]},
    }
    assert (await raw.get(f"{NODES}/node-00003"))[0] == 404
    obj = await created(raw, PODS, pod("p"))
    status, body, _ = await raw.delete(f"{PODS}/p")
    assert status == 200
    assert body["kind"] == "Pod" and body["metadata"]["uid"] == obj["metadata"]["uid"]
    assert body["spec"] == obj["spec"]


async def test_deleting_a_namespace_removes_its_pods(raw: Raw) -> None:
    await created(raw, NAMESPACES, {"metadata": {"name": "team"}})
    for name in ("a", "b"):
        await created(raw, "/api/v1/namespaces/team/pods", pod(name))
    await created(raw, PODS, pod("outside"))
    status, body, _ = await raw.delete(f"{NAMESPACES}/team")
    assert status == 200 and body["kind"] == "Namespace" and body["metadata"]["name"] == "team"
    for _ in range(40):  # a real server empties it through the namespace controller
        _, listed, _ = await raw.get("/api/v1/namespaces/team/pods")
        if not listed["items"] and (await raw.get(f"{NAMESPACES}/team"))[0] == 404:
            break
        await asyncio.sleep(0.05)
    _, listed, _ = await raw.get("/api/v1/namespaces/team/pods")
    assert listed["items"] == []
    assert (await raw.get(f"{NAMESPACES}/team"))[0] == 404
    assert (await raw.get(f"{PODS}/outside"))[0] == 200


async def test_deletecollection_by_label_selector(raw: Raw) -> None:
    for name, labels in (("a", {"job": "x"}), ("b", {"job": "x"}), ("c", {"job": "y"})):
        await created(raw, PODS, pod(name, labels=labels))
    status, body, _ = await raw.delete(f"{PODS}?labelSelector=job%3Dx")
    assert status == 200
    assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "b"]
    assert all("kind" not in i for i in body["items"])  # typed list items carry no kind
    _, listed, _ = await raw.get(PODS)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["c"]


# --- events: one object, two APIs -----------------------------------------------------------


async def test_events_are_one_object_seen_through_two_apis(raw: Raw) -> None:
    obj = await created(raw, PODS, pod("p"))
    regarding = {
        "kind": "Pod",
        "namespace": "default",
        "name": "p",
        "uid": obj["metadata"]["uid"],
        "apiVersion": "v1",
    }
    v1_event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "p.0001", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "gang-scheduler",
        "reportingInstance": "gang-scheduler-0",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "type": "Warning",
        "regarding": regarding,
        "note": "0/4 nodes are available",
    }
    made = await created(raw, V1_EVENTS, v1_event)
    assert made["regarding"] == regarding and made["note"] == "0/4 nodes are available"
    core = await fetch(raw, f"{CORE_EVENTS}/p.0001")
    assert (core["apiVersion"], core["kind"]) == ("v1", "Event")
    assert core["involvedObject"] == regarding
    assert core["message"] == "0/4 nodes are available"
    assert core["reportingComponent"] == "gang-scheduler"
    assert core["reason"] == "FailedScheduling" and core["type"] == "Warning"
    assert "regarding" not in core and "note" not in core
    assert core["metadata"]["uid"] == made["metadata"]["uid"]

    core_event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "p.0002"},
        "involvedObject": regarding,
        "reason": "Scheduled",
        "message": "Successfully assigned default/p to node-00000",
        "type": "Normal",
        "source": {"component": "gang-scheduler"},
        "firstTimestamp": "2026-01-01T00:00:01Z",
        "lastTimestamp": "2026-01-01T00:00:01Z",
        "count": 1,
        "reportingComponent": "gang-scheduler",
    }
    await created(raw, CORE_EVENTS, core_event)
    seen = await fetch(raw, f"{V1_EVENTS}/p.0002")
    assert (seen["apiVersion"], seen["kind"]) == ("events.k8s.io/v1", "Event")
    assert seen["regarding"] == regarding
    assert seen["note"] == "Successfully assigned default/p to node-00000"
    assert seen["reportingController"] == "gang-scheduler"
    assert seen["deprecatedSource"] == {"component": "gang-scheduler"}
    assert seen["deprecatedFirstTimestamp"] == "2026-01-01T00:00:01Z"
    assert seen["deprecatedCount"] == 1
    assert "involvedObject" not in seen and "message" not in seen

    _, core_list, _ = await raw.get(CORE_EVENTS)
    _, v1_list, _ = await raw.get(V1_EVENTS)
    assert (core_list["kind"], core_list["apiVersion"]) == ("EventList", "v1")
    assert (v1_list["kind"], v1_list["apiVersion"]) == ("EventList", "events.k8s.io/v1")
    assert [e["metadata"]["name"] for e in core_list["items"]] == ["p.0001", "p.0002"]
    assert [e["metadata"]["name"] for e in v1_list["items"]] == ["p.0001", "p.0002"]
    assert [e["message"] for e in core_list["items"]] == [e["note"] for e in v1_list["items"]]
    # a field selector of each view works on its own field names
    _, by_core, _ = await raw.get(
        f"{CORE_EVENTS}?fieldSelector=involvedObject.name%3Dp,reason%3DScheduled"
    )
    assert [e["metadata"]["name"] for e in by_core["items"]] == ["p.0002"]
    _, by_v1, _ = await raw.get(
        f"{V1_EVENTS}?fieldSelector=regarding.name%3Dp,reason%3DFailedScheduling"
    )
    assert [e["metadata"]["name"] for e in by_v1["items"]] == ["p.0001"]


# --- priority classes and disruption budgets -----------------------------------------------


async def test_priority_classes(raw: Raw) -> None:
    made = await created(
        raw,
        PCS,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "training"},
            "value": 1000,
            "description": "batch training",
        },
    )
    assert made["value"] == 1000 and made["preemptionPolicy"] == "PreemptLowerPriority"
    assert "namespace" not in made["metadata"]
    listed = await fetch(raw, PCS)
    names = [i["metadata"]["name"] for i in listed["items"]]
    assert names == ["system-cluster-critical", "system-node-critical", "training"]
    # the value of a class is immutable
    status, err, _ = await raw.patch(f"{PCS}/training", {"value": 2000})
    assert status == 422
    assert err["message"] == (
        'PriorityClass.scheduling.k8s.io "training" is invalid: '
        "value: Forbidden: may not be changed in an update."
    )
    # one globalDefault only: the Priority admission plugin forbids a second
    await created(
        raw,
        PCS,
        {"metadata": {"name": "default-low"}, "value": 10, "globalDefault": True},
    )
    status, err, _ = await raw.post(
        PCS, {"metadata": {"name": "default-high"}, "value": 20, "globalDefault": True}
    )
    assert status == 403
    assert err == failure(
        403,
        "Forbidden",
        'priorityclasses.scheduling.k8s.io "default-high" is forbidden: '
        "PriorityClass default-low is already marked as default. Only one default can exist",
        {"name": "default-high", "group": "scheduling.k8s.io", "kind": "priorityclasses"},
    )
    assert (await raw.get(f"{PCS}/default-high"))[0] == 404
    # nor may an existing class become a second default
    status, err, _ = await raw.patch(f"{PCS}/training", {"globalDefault": True})
    assert status == 403 and err["reason"] == "Forbidden"
    # the default itself may be updated
    status, _, _ = await raw.patch(f"{PCS}/default-low", {"description": "the default"})
    assert status == 200


async def test_pod_disruption_budgets(client: Any, raw: Raw) -> None:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "train"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"job": "train"}}},
    }
    made = await created(raw, PDBS, pdb)
    assert made["metadata"]["generation"] == 1 and UID.match(made["metadata"]["uid"])
    fetched = await fetch(raw, f"{PDBS}/train")  # the disruption controller adds a status
    assert fetched["spec"] == made["spec"]
    assert fetched["metadata"]["uid"] == made["metadata"]["uid"]
    policy = k8s.PolicyV1Api(client)
    read = await policy.read_namespaced_pod_disruption_budget("train", "default")
    assert read.spec.min_available == 2
    assert read.spec.selector.match_labels == {"job": "train"}
    listed = await policy.list_namespaced_pod_disruption_budget("default")
    assert [i.metadata.name for i in listed.items] == ["train"]
    everywhere = await fetch(raw, "/apis/policy/v1/poddisruptionbudgets")
    assert everywhere["kind"] == "PodDisruptionBudgetList"
    assert [i["metadata"]["name"] for i in everywhere["items"]] == ["train"]
    status, _, _ = await raw.post(PDBS, pdb)
    assert status == 409
