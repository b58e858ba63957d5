"""Discovery, lists, selectors, paging and server-side tables over HTTP, as kube-apiserver answers."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlencode

import pytest
from kubernetes_asyncio import client as k8s

from gang.sim.cluster import SimCluster
from tests.conftest import Raw, binding, pod

PODS = "/api/v1/namespaces/default/pods"
PG_API = "scheduling.x-k8s.io/v1alpha1"
PODGROUPS = f"/apis/{PG_API}/namespaces/default/podgroups"
GROUPS = {
    "events.k8s.io": ["v1"],
    "coordination.k8s.io": ["v1"],
    # the default Kubernetes version (1.37): the native gang API beside PriorityClasses
    "scheduling.k8s.io": ["v1", "v1beta1", "v1alpha3"],
    "storage.k8s.io": ["v1"],
    "batch": ["v1"],
    "apps": ["v1"],
    "policy": ["v1"],
    # Dynamic Resource Allocation, served by every version the simulator can be (1.34+)
    "resource.k8s.io": ["v1"],
    "scheduling.x-k8s.io": ["v1alpha1"],
    "scheduling.sigs.k8s.io": ["v1alpha1"],
    "scheduling.volcano.sh": ["v1beta1"],
    "scheduling.run.ai": ["v2"],
    "kueue.x-k8s.io": ["v1beta2"],
    "kai.scheduler": ["v1alpha1"],
    "topology.volcano.sh": ["v1alpha1"],
}
NOT_FOUND = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "the server could not find the requested resource",
    "reason": "NotFound",
    "details": {},
    "code": 404,
}
KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)
TABLE = {"Accept": KUBECTL_ACCEPT}


def podgroup(name: str, min_member: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": PG_API,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }


def q(path: str, **params: str) -> str:
    return f"{path}?{urlencode(params)}"


def names(body: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


async def create(raw: Raw, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, created, _ = await raw.post(path, body)
    assert status == 201, created
    result: dict[str, Any] = created
    return result


# --- discovery ----------------------------------------------------------------------------


async def test_version_with_and_without_trailing_slash(raw: Raw) -> None:
    status, body, _ = await raw.get("/version")
    assert status == 200
    assert body["major"] == "1" and body["minor"].isdigit()
    assert body["gitVersion"].startswith(f"v{body['major']}.{body['minor']}.")
    assert body["platform"] == "linux/amd64"
    status, again, _ = await raw.get("/version/")
    assert status == 200 and again == body


async def test_core_api_versions(raw: Raw) -> None:
    for path in ("/api", "/api/"):
        status, body, _ = await raw.get(path)
        assert status == 200
        assert body["kind"] == "APIVersions"
        assert body["versions"] == ["v1"]
        [cidr] = body["serverAddressByClientCIDRs"]
        assert cidr["clientCIDR"] == "0.0.0.0/0"


async def test_api_group_list_names_every_group(raw: Raw) -> None:
    status, body, _ = await raw.get("/apis")
    assert status == 200
    assert body["kind"] == "APIGroupList" and body["apiVersion"] == "v1"
    groups = {g["name"]: g for g in body["groups"]}
    assert set(groups) == set(GROUPS)  # the core group is served under /api, not listed here
    for name, versions in GROUPS.items():
        group = groups[name]
        assert group["versions"] == [
            {"groupVersion": f"{name}/{v}", "version": v} for v in versions
        ]
        assert group["preferredVersion"] == group["versions"][0]
    status, slashed, _ = await raw.get("/apis/")
    assert status == 200 and slashed == body


@pytest.mark.parametrize("group", sorted(GROUPS))
async def test_api_group(raw: Raw, group: str) -> None:
    status, body, _ = await raw.get(f"/apis/{group}")
    assert status == 200
    version = GROUPS[group][0]
    assert body == {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in GROUPS[group]],
        "preferredVersion": {"groupVersion": f"{group}/{version}", "version": version},
    }


def _by_name(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in body["resources"]}


async def test_core_v1_resource_list(raw: Raw) -> None:
    status, body, _ = await raw.get("/api/v1")
    assert status == 200
    assert body["kind"] == "APIResourceList" and body["apiVersion"] == "v1"
    assert body["groupVersion"] == "v1"
    resources = _by_name(body)
    assert {
        "namespaces",
        "namespaces/status",
        "nodes",
        "nodes/status",
        "pods",
        "pods/status",
        "pods/binding",
        "events",
        "bindings",
        "services",
        "services/status",
    } <= set(resources)
    pods = resources["pods"]
    assert pods["singularName"] == "pod" and pods["namespaced"] is True and pods["kind"] == "Pod"
    assert set(pods["verbs"]) == {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    }
    assert pods["shortNames"] == ["po"] and pods["categories"] == ["all"]
    assert resources["pods/status"] == {
        "name": "pods/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["get", "patch", "update"],
    }
    assert resources["pods/binding"] == {
        "name": "pods/binding",
        "singularName": "",
        "namespaced": True,
        "kind": "Binding",
        "verbs": ["create"],
    }
    assert resources["bindings"]["verbs"] == ["create"]
    nodes = resources["nodes"]
    assert (
        nodes["namespaced"] is False and nodes["kind"] == "Node" and nodes["shortNames"] == ["no"]
    )
    assert resources["namespaces"]["namespaced"] is False
    assert resources["events"]["kind"] == "Event" and resources["events"]["namespaced"] is True


async def test_podgroup_resource_list(raw: Raw) -> None:
    status, body, _ = await raw.get(f"/apis/{PG_API}")
    assert status == 200
    assert body["kind"] == "APIResourceList" and body["groupVersion"] == PG_API
    resources = _by_name(body)
    assert set(resources) == {
        "podgroups",
        "podgroups/status",
        "elasticquotas",
        "elasticquotas/status",
    }
    pg = resources["podgroups"]
    assert pg["kind"] == "PodGroup" and pg["namespaced"] is True
    assert pg["singularName"] == "podgroup"
    assert "pg" in pg["shortNames"]
    assert {"get", "list", "watch", "create", "patch"} <= set(pg["verbs"])
    assert resources["podgroups/status"]["kind"] == "PodGroup"
    assert set(resources["podgroups/status"]["verbs"]) == {"get", "patch", "update"}


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ("events.k8s.io", {"events"}),
        ("coordination.k8s.io", {"leases"}),
        ("scheduling.k8s.io", {"priorityclasses"}),
        ("storage.k8s.io", {"storageclasses", "csinodes"}),
        ("batch", {"jobs", "jobs/status"}),
        ("apps", {"statefulsets", "statefulsets/status", "replicasets", "replicasets/status"}),
        ("policy", {"poddisruptionbudgets", "poddisruptionbudgets/status"}),
        (
            "resource.k8s.io",
            {
                "deviceclasses",
                "resourceclaims",
                "resourceclaims/status",
                "resourceclaimtemplates",
                "resourceslices",
            },
        ),
        (
            "scheduling.x-k8s.io",
            {"podgroups", "podgroups/status", "elasticquotas", "elasticquotas/status"},
        ),
        ("scheduling.sigs.k8s.io", {"podgroups", "podgroups/status"}),
        # Volcano's PodGroup has no status subresource, its Queue has one, as upstream
        ("scheduling.volcano.sh", {"podgroups", "queues", "queues/status"}),
        ("scheduling.run.ai", {"queues", "queues/status"}),
        # Kueue's and KAI's Topology: no status subresource, as upstream
        ("kueue.x-k8s.io", {"topologies"}),
        ("kai.scheduler", {"topologies"}),
        ("topology.volcano.sh", {"hypernodes", "hypernodes/status"}),
    ],
)
async def test_group_version_resource_lists_are_listable(
    raw: Raw, group: str, expected: set[str]
) -> None:
    """Every resource discovery announces with the list verb answers a list of its kind."""
    gv = f"{group}/{GROUPS[group][0]}"
    status, body, _ = await raw.get(f"/apis/{gv}")
    assert status == 200
    assert body["kind"] == "APIResourceList" and body["groupVersion"] == gv
    resources = _by_name(body)
    assert set(resources) == expected
    for name, entry in resources.items():
        if "/" in name:
            continue
        status, listed, _ = await raw.get(f"/apis/{gv}/{name}")
        assert status == 200, (name, listed)
        assert listed["kind"] == f"{entry['kind']}List" and listed["apiVersion"] == gv


@pytest.mark.parametrize(
    "path",
    [
        "/apis/nope",
        "/apis/nope/v1",
        "/apis/policy/v2",
        "/apis/scheduling.x-k8s.io/v1",
        "/api/v2",
        "/api/v1/widgets",
        "/api/v1/namespaces/default/widgets",
        "/apis/scheduling.x-k8s.io/v1alpha1/widgets",
        "/api/v1/namespaces/default/nodes",  # nodes are cluster-scoped
        "/api/v1/nodes/node-00000/exec",  # no such subresource
    ],
)
async def test_unknown_group_version_or_resource_is_404_status(raw: Raw, path: str) -> None:
    status, body, _ = await raw.get(path)
    assert status == 404
    assert body == NOT_FOUND


async def test_non_api_path_is_plain_404(raw: Raw) -> None:
    status, body, data = await raw.get("/no/such/thing")
    assert status == 404
    assert data == b"404 page not found\n"
    assert isinstance(body, str)  # not a Status


async def test_discovery_through_kubernetes_asyncio(client: Any) -> None:
    core = await k8s.CoreApi(client).get_api_versions()
    assert core.versions == ["v1"]
    groups = await k8s.ApisApi(client).get_api_versions()
    assert {g.name for g in groups.groups} == set(GROUPS)
    pg = next(g for g in groups.groups if g.name == "scheduling.x-k8s.io")
    assert pg.preferred_version.group_version == PG_API
    info = await k8s.VersionApi(client).get_code()
    assert info.major == "1" and info.git_version.startswith("v1.")


# --- lists --------------------------------------------------------------------------------


async def test_pod_list_shape_and_resource_version(cluster: SimCluster, raw: Raw) -> None:
    await create(raw, PODS, pod("b"))
    last = await create(raw, PODS, pod("a"))
    status, body, _ = await raw.get(PODS)
    assert status == 200
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
    assert body["metadata"] == {"resourceVersion": str(cluster.store.rv)}
    assert body["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"]
    assert names(body) == ["a", "b"]  # key order, not creation order
    for item in body["items"]:  # built-in list items carry no kind/apiVersion on the wire
        assert "kind" not in item and "apiVersion" not in item
        assert item["metadata"]["namespace"] == "default"


async def test_node_list_items_carry_no_kind(cluster: SimCluster, raw: Raw) -> None:
    status, body, _ = await raw.get("/api/v1/nodes")
    assert status == 200
    assert body["kind"] == "NodeList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"] == str(cluster.store.rv)
    assert names(body) == [f"node-{i:05d}" for i in range(4)]
    assert all("kind" not in n and "apiVersion" not in n for n in body["items"])


async def test_podgroup_list_items_carry_kind(cluster: SimCluster, raw: Raw) -> None:
    await create(raw, PODGROUPS, podgroup("g2"))
    await create(raw, PODGROUPS, podgroup("g1"))
    status, body, _ = await raw.get(PODGROUPS)
    assert status == 200
    assert body["kind"] == "PodGroupList" and body["apiVersion"] == PG_API
    assert body["metadata"]["resourceVersion"] == str(cluster.store.rv)
    assert names(body) == ["g1", "g2"]
    for item in body["items"]:  # custom resources are unstructured: items keep kind/apiVersion
        assert item["kind"] == "PodGroup" and item["apiVersion"] == PG_API


LABELLED = {
    "a": {"app": "web", "tier": "front"},
    "b": {"app": "web", "tier": "back"},
    "c": {"app": "db"},
    "d": {},
    "e": {"app": "cache", "tier": "back", "canary": "true"},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d", "e"]),  # includes pods without the label
        ("tier in (front,back)", ["a", "b", "e"]),
        ("tier notin (front)", ["b", "c", "d", "e"]),  # includes pods without the label
        ("tier", ["a", "b", "e"]),
        ("!tier", ["c", "d"]),
        ("app=web,tier!=front", ["b"]),
        ("app in (web,cache),tier=back,!canary", ["b"]),
        ("app,!canary", ["a", "b", "c"]),
        ("app=nope", []),
        ("", ["a", "b", "c", "d", "e"]),
    ],
)
async def test_label_selectors(raw: Raw, selector: str, expected: list[str]) -> None:
    for name, labels in LABELLED.items():
        await create(raw, PODS, pod(name, labels=labels))
    status, body, _ = await raw.get(q(PODS, labelSelector=selector))
    assert status == 200, body
    assert names(body) == expected


@pytest.mark.parametrize(
    "selector",
    ["app in web", "app=(web", "a b", "app=web,", "=web", "tier notin", "app=web!"],
)
async def test_malformed_label_selector_is_400(raw: Raw, selector: str) -> None:
    status, body, _ = await raw.get(q(PODS, labelSelector=selector))
    assert status == 400
    assert body["kind"] == "Status" and body["reason"] == "BadRequest" and body["code"] == 400
    assert body["message"]


async def _field_fixture(raw: Raw) -> None:
    await create(raw, "/api/v1/namespaces", {"metadata": {"name": "team"}})
    await create(raw, PODS, pod("bound"))
    await create(raw, PODS, pod("running"))
    await create(raw, PODS, pod("waiting"))
    await create(raw, PODS, pod("other", scheduler="default-scheduler"))
    await create(raw, "/api/v1/namespaces/team/pods", pod("t1"))
    for name, node in (("bound", "node-00001"), ("running", "node-00002")):
        status, _, _ = await raw.post(f"{PODS}/{name}/binding", binding(name, node))
        assert status == 201
    status, _, _ = await raw.patch(f"{PODS}/running/status", {"status": {"phase": "Running"}})
    assert status == 200


@pytest.mark.parametrize(
    ("path", "selector", "expected"),
    [
        (PODS, "metadata.name=waiting", ["waiting"]),
        (PODS, "metadata.name!=waiting", ["bound", "other", "running"]),
        ("/api/v1/pods", "metadata.namespace=team", ["t1"]),
        ("/api/v1/pods", "metadata.namespace!=team", ["bound", "other", "running", "waiting"]),
        (PODS, "spec.nodeName=node-00001", ["bound"]),
        (PODS, "spec.nodeName=", ["other", "waiting"]),  # unassigned pods
        ("/api/v1/pods", "spec.nodeName=", ["other", "waiting", "t1"]),
        (PODS, "spec.nodeName!=", ["bound", "running"]),
        (PODS, "spec.schedulerName=default-scheduler", ["other"]),
        (PODS, "spec.schedulerName==gang-scheduler", ["bound", "running", "waiting"]),
        (PODS, "status.phase=Running", ["running"]),
        (PODS, "status.phase=Pending", ["bound", "other", "waiting"]),
        (PODS, "status.phase!=Running,spec.schedulerName=gang-scheduler", ["bound", "waiting"]),
        (PODS, "spec.nodeName=,spec.schedulerName=gang-scheduler", ["waiting"]),
        ("/api/v1/nodes", "metadata.name=node-00003", ["node-00003"]),
    ],
)
async def test_field_selectors(raw: Raw, path: str, selector: str, expected: list[str]) -> None:
    await _field_fixture(raw)
    status, body, _ = await raw.get(q(path, fieldSelector=selector))
    assert status == 200, body
    assert names(body) == expected


async def test_unsupported_field_selector_is_400(raw: Raw) -> None:
    status, body, _ = await raw.get(q(PODS, fieldSelector="spec.foo=bar"))
    assert status == 400
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "field label not supported: spec.foo",
        "reason": "BadRequest",
        "code": 400,
    }
    # a field supported on pods is not automatically supported elsewhere
    status, body, _ = await raw.get(q("/api/v1/nodes", fieldSelector="spec.nodeName=x"))
    assert status == 400 and body["message"] == "field label not supported: spec.nodeName"


async def test_list_all_namespaces_versus_one(raw: Raw) -> None:
    await create(raw, "/api/v1/namespaces", {"metadata": {"name": "team"}})
    await create(raw, "/api/v1/namespaces/team/pods", pod("x"))
    await create(raw, "/api/v1/namespaces/team/pods", pod("a"))
    await create(raw, PODS, pod("z"))
    status, body, _ = await raw.get("/api/v1/pods")
    assert status == 200 and body["kind"] == "PodList"
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]] == [
        ("default", "z"),
        ("team", "a"),
        ("team", "x"),
    ]
    status, body, _ = await raw.get("/api/v1/namespaces/team/pods")
    assert status == 200 and names(body) == ["a", "x"]
    # listing in a namespace that does not exist is an empty list, not a 404
    status, body, _ = await raw.get("/api/v1/namespaces/ghost/pods")
    assert status == 200 and body["items"] == []


async def test_list_resource_version_semantics(cluster: SimCluster, raw: Raw) -> None:
    await create(raw, PODS, pod("p"))
    current = cluster.store.rv
    for rv in ("0", str(current), str(current - 1)):
        status, body, _ = await raw.get(q(PODS, resourceVersion=rv))
        assert status == 200 and names(body) == ["p"]
    status, body, _ = await raw.get(q(PODS, resourceVersion=str(current + 1_000_000)))
    assert status == 504
    assert body["kind"] == "Status" and body["reason"] == "Timeout" and body["code"] == 504
    assert (
        body["message"] == f"Too large resource version: {current + 1_000_000}, current: {current}"
    )
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    status, body, _ = await raw.get(q(PODS, resourceVersion="abc"))
    assert status == 400 and body["reason"] == "BadRequest"


# --- paging -------------------------------------------------------------------------------


async def test_paging_walks_a_consistent_snapshot(cluster: SimCluster, raw: Raw) -> None:
    all_names = [f"p{i}" for i in range(7)]
    for name in all_names:
        await create(raw, PODS, pod(name))
    snapshot_rv = str(cluster.store.rv)

    seen: list[str] = []
    rvs: list[str] = []
    remaining: list[int | None] = []
    token: str | None = None
    pages = 0
    while True:
        params = {"limit": "2", **({"continue": token} if token else {})}
        status, body, _ = await raw.get(q(PODS, **params))
        assert status == 200, body
        assert body["kind"] == "PodList"
        pages += 1
        assert len(body["items"]) <= 2
        seen.extend(names(body))
        rvs.append(body["metadata"]["resourceVersion"])
        remaining.append(body["metadata"].get("remainingItemCount"))
        token = body["metadata"].get("continue")
        if pages == 1:
            # changes made while the client pages: none may show up in this list
            await create(raw, PODS, pod("p9-new"))
            await create(raw, PODS, pod("a-new"))
            await raw.delete(f"{PODS}/p5", {"gracePeriodSeconds": 0})
            await raw.patch(f"{PODS}/p4", {"metadata": {"labels": {"changed": "yes"}}})
        if not token:
            break
        assert pages < 10
    assert pages == 4
    assert seen == all_names  # every item exactly once, in order, from the first page's view
    assert rvs == [snapshot_rv] * 4
    assert remaining == [5, 3, 1, None]
    # a new list sees the current state
    status, body, _ = await raw.get(PODS)
    assert names(body) == ["a-new", "p0", "p1", "p2", "p3", "p4", "p6", "p9-new"]
    assert int(body["metadata"]["resourceVersion"]) > int(snapshot_rv)


async def test_paging_snapshot_keeps_old_object_versions(raw: Raw) -> None:
    for name in ("p0", "p1", "p2"):
        await create(raw, PODS, pod(name))
    status, first, _ = await raw.get(q(PODS, limit="1"))
    assert status == 200 and names(first) == ["p0"]
    await raw.patch(f"{PODS}/p2", {"metadata": {"labels": {"changed": "yes"}}})
    token = first["metadata"]["continue"]
    status, rest, _ = await raw.get(q(PODS, limit="5", **{"continue": token}))
    assert status == 200 and names(rest) == ["p1", "p2"]
    assert "changed" not in (rest["items"][1]["metadata"].get("labels") or {})
    assert "continue" not in rest["metadata"] and "remainingItemCount" not in rest["metadata"]


async def test_continue_without_limit_returns_the_rest_of_the_snapshot(raw: Raw) -> None:
    for name in ("p0", "p1", "p2", "p3"):
        await create(raw, PODS, pod(name))
    status, first, _ = await raw.get(q(PODS, limit="1"))
    assert status == 200 and names(first) == ["p0"]
    for name in ("p1", "p2"):  # the live list shrinks; the snapshot does not
        await raw.delete(f"{PODS}/{name}", {"gracePeriodSeconds": 0})
    status, rest, _ = await raw.get(q(PODS, **{"continue": first["metadata"]["continue"]}))
    assert status == 200 and names(rest) == ["p1", "p2", "p3"]
    assert rest["metadata"] == {"resourceVersion": first["metadata"]["resourceVersion"]}


async def test_limit_larger_than_list_has_no_continue(raw: Raw) -> None:
    for name in ("p0", "p1"):
        await create(raw, PODS, pod(name))
    status, body, _ = await raw.get(q(PODS, limit="2"))
    assert status == 200 and names(body) == ["p0", "p1"]
    assert set(body["metadata"]) == {"resourceVersion"}


async def test_paging_with_selectors(raw: Raw) -> None:
    for i in range(6):
        await create(raw, PODS, pod(f"p{i}", labels={"even": str(i % 2 == 0).lower()}))
    seen: list[str] = []
    token: str | None = None
    while True:
        params = {"limit": "2", "labelSelector": "even=true"}
        if token:
            params["continue"] = token
        status, body, _ = await raw.get(q(PODS, **params))
        assert status == 200, body
        seen.extend(names(body))
        # like etcd, the server cannot count what a selector would keep: no remainingItemCount
        assert "remainingItemCount" not in body["metadata"]
        token = body["metadata"].get("continue")
        if not token:
            break
    assert seen == ["p0", "p2", "p4"]


@pytest.mark.parametrize("token", ["garbage", "!!!", "bm90LWEtdG9rZW4"])
async def test_malformed_continue_token_is_400(raw: Raw, token: str) -> None:
    await create(raw, PODS, pod("p"))
    status, body, _ = await raw.get(q(PODS, limit="1", **{"continue": token}))
    assert status == 400
    assert body["kind"] == "Status" and body["reason"] == "BadRequest" and body["code"] == 400
    assert body["message"].startswith("invalid continue token: ")


async def test_expired_continue_token_is_410(raw: Raw) -> None:
    for name in ("p0", "p1", "p2"):
        await create(raw, PODS, pod(name))
    status, first, _ = await raw.get(q(PODS, limit="1"))
    token = first["metadata"]["continue"]
    # a well-formed token for a list the server no longer remembers (as after compaction)
    snap, offset = base64.urlsafe_b64decode(token).decode().split(":")
    stale = base64.urlsafe_b64encode(f"{int(snap) + 1000}:{offset}".encode()).decode()
    status, body, _ = await raw.get(q(PODS, limit="1", **{"continue": stale}))
    assert status == 410
    assert body["kind"] == "Status" and body["reason"] == "Expired" and body["code"] == 410
    assert body["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result."
    )
    # the genuine token still works
    status, body, _ = await raw.get(q(PODS, limit="1", **{"continue": token}))
    assert status == 200 and names(body) == ["p1"]


async def test_many_concurrent_pagers_evict_the_oldest_snapshot(raw: Raw) -> None:
    for name in ("p0", "p1"):
        await create(raw, PODS, pod(name))
    tokens = []
    for _ in range(100):
        status, body, _ = await raw.get(q(PODS, limit="1"))
        tokens.append(body["metadata"]["continue"])
    status, body, _ = await raw.get(q(PODS, limit="1", **{"continue": tokens[0]}))
    assert status == 410 and body["reason"] == "Expired"
    status, body, _ = await raw.get(q(PODS, limit="1", **{"continue": tokens[-1]}))
    assert status == 200 and names(body) == ["p1"]


# --- tables -------------------------------------------------------------------------------

POD_COLUMNS = [
    "Name",
    "Ready",
    "Status",
    "Restarts",
    "Age",
    "IP",
    "Node",
    "Nominated Node",
    "Readiness Gates",
]
NODE_COLUMNS = [
    "Name",
    "Status",
    "Roles",
    "Age",
    "Version",
    "Internal-IP",
    "External-IP",
    "OS-Image",
    "Kernel-Version",
    "Container-Runtime",
]
PODGROUP_COLUMNS = ["Name", "Phase", "MinMember", "Scheduled", "Running", "Age"]


def _columns(table: dict[str, Any]) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"]]


async def test_pod_table(cluster: SimCluster, raw: Raw) -> None:
    await create(raw, PODS, pod("bound"))
    await create(raw, PODS, pod("waiting"))
    assert (await raw.post(f"{PODS}/bound/binding", binding("bound", "node-00002")))[0] == 201
    status, table, _ = await raw.get(PODS, headers=TABLE)
    assert status == 200
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"]["resourceVersion"] == str(cluster.store.rv)
    assert _columns(table) == POD_COLUMNS
    wide = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 1]
    assert wide == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    rows = {row["cells"][0]: row for row in table["rows"]}
    assert set(rows) == {"bound", "waiting"}
    for row in rows.values():
        assert len(row["cells"]) == len(POD_COLUMNS)
        assert row["cells"][1:4] == ["0/1", "Pending", "0"]
        assert row["cells"][4].endswith("s")  # just created: an age in seconds
        # the default includeObject=Metadata embeds PartialObjectMetadata
        assert row["object"]["kind"] == "PartialObjectMetadata"
        assert row["object"]["apiVersion"] == "meta.k8s.io/v1"
        assert row["object"]["metadata"]["name"] == row["cells"][0]
    assert rows["bound"]["cells"][6] == "node-00002"
    assert rows["waiting"]["cells"][6] == "<none>"


async def test_node_table(raw: Raw) -> None:
    await raw.patch("/api/v1/nodes/node-00001", {"spec": {"unschedulable": True}})
    status, table, _ = await raw.get("/api/v1/nodes", headers=TABLE)
    assert status == 200 and table["kind"] == "Table"
    assert _columns(table) == NODE_COLUMNS
    assert [r["cells"][0] for r in table["rows"]] == [f"node-{i:05d}" for i in range(4)]
    status_cells = {r["cells"][0]: r["cells"][1] for r in table["rows"]}
    assert status_cells == {
        "node-00000": "Ready",
        "node-00001": "Ready,SchedulingDisabled",
        "node-00002": "Ready",
        "node-00003": "Ready",
    }
    for row in table["rows"]:
        assert row["cells"][2] == "<none>"  # no role labels
        assert row["cells"][5].startswith("10.")  # InternalIP


async def test_podgroup_table(raw: Raw) -> None:
    await create(raw, PODGROUPS, podgroup("g1", 3))
    await create(raw, PODGROUPS, podgroup("g2", 2))
    status, _, _ = await raw.patch(
        f"{PODGROUPS}/g1/status", {"status": {"phase": "Scheduling", "scheduled": 2}}
    )
    assert status == 200
    status, table, _ = await raw.get(PODGROUPS, headers=TABLE)
    assert status == 200 and table["kind"] == "Table"
    assert _columns(table) == PODGROUP_COLUMNS
    cells = {r["cells"][0]: r["cells"][:5] for r in table["rows"]}
    assert cells == {"g1": ["g1", "Scheduling", 3, 2, 0], "g2": ["g2", "", 2, 0, 0]}
    # across namespaces too (kubectl get pg -A)
    status, table, _ = await raw.get(f"/apis/{PG_API}/podgroups", headers=TABLE)
    assert status == 200 and len(table["rows"]) == 2


async def test_table_for_a_single_object(raw: Raw) -> None:
    await create(raw, PODS, pod("one"))
    status, table, _ = await raw.get(f"{PODS}/one", headers=TABLE)
    assert status == 200 and table["kind"] == "Table"
    assert [r["cells"][0] for r in table["rows"]] == ["one"]


async def test_table_include_object(raw: Raw) -> None:
    created = await create(raw, PODS, pod("p"))
    status, table, _ = await raw.get(q(PODS, includeObject="Object"), headers=TABLE)
    assert status == 200
    [row] = table["rows"]
    assert row["object"] == created  # the whole object, kind and apiVersion included
    assert row["object"]["kind"] == "Pod" and row["object"]["spec"]["containers"]
    status, table, _ = await raw.get(q(PODS, includeObject="None"), headers=TABLE)
    assert status == 200
    [row] = table["rows"]
    assert "object" not in row


async def test_table_invalid_include_object_is_400(raw: Raw) -> None:
    await create(raw, PODS, pod("p"))
    status, body, _ = await raw.get(q(PODS, includeObject="Everything"), headers=TABLE)
    assert status == 400
    assert body["kind"] == "Status" and body["reason"] == "BadRequest"
    assert body["message"] == 'unrecognized includeObject value: "Everything"'


async def test_table_pages_carry_continue(raw: Raw) -> None:
    for i in range(3):
        await create(raw, PODS, pod(f"p{i}"))
    status, table, _ = await raw.get(q(PODS, limit="2"), headers=TABLE)
    assert status == 200 and [r["cells"][0] for r in table["rows"]] == ["p0", "p1"]
    token = table["metadata"]["continue"]
    status, table, _ = await raw.get(q(PODS, limit="2", **{"continue": token}), headers=TABLE)
    assert status == 200 and [r["cells"][0] for r in table["rows"]] == ["p2"]
    assert "continue" not in table["metadata"]


async def test_table_only_when_asked(raw: Raw) -> None:
    await create(raw, PODS, pod("p"))
    status, body, _ = await raw.get(PODS, headers={"Accept": "application/json"})
    assert status == 200 and body["kind"] == "PodList"
    status, body, _ = await raw.get(
        PODS, headers={"Accept": "application/json;as=Table;v=v1beta1;g=meta.k8s.io"}
    )
    assert status == 200
    assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1beta1"
