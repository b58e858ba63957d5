"""kubernetes-asyncio works against the simulator unchanged: kubeconfig, typed models, CRs, auth."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from gang.sim.cluster import SimCluster
from tests.conftest import Raw, pod

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
MERGE = "application/merge-patch+json"


def podgroup(name: str, min_member: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "labels": {"team": "ml"}},
        "spec": {"minMember": min_member},
    }


def typed_binding(name: str, node: str) -> Any:
    return k8s.V1Binding(
        metadata=k8s.V1ObjectMeta(name=name),
        target=k8s.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )


async def test_load_kube_config_with_a_fresh_api_client(cluster: SimCluster) -> None:
    """The usual production pattern: load the kubeconfig globally, then make an ApiClient."""
    saved = k8s.Configuration.get_default_copy()
    try:
        await config.load_kube_config(config_file=str(cluster.kubeconfig_path))
        assert k8s.Configuration.get_default_copy().host == cluster.url
        async with k8s.ApiClient() as api:
            nodes = await k8s.CoreV1Api(api).list_node()
            assert len(nodes.items) == 4
    finally:
        k8s.Configuration.set_default(saved)


async def test_typed_nodes_deserialize(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    nodes = await core.list_node()
    assert isinstance(nodes, k8s.V1NodeList)
    assert int(nodes.metadata.resource_version) > 0
    assert [n.metadata.name for n in nodes.items] == [f"node-{i:05d}" for i in range(4)]
    for node in nodes.items:
        assert isinstance(node, k8s.V1Node)
        assert node.status.capacity["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["cpu"] == "32"
        assert node.metadata.labels["topology.kubernetes.io/zone"] in ("zone-0", "zone-1")
        info = node.status.node_info
        assert isinstance(info, k8s.V1NodeSystemInfo)
        assert info.kubelet_version == "v1.30.0-gang-sim"
        assert info.operating_system == "linux" and info.architecture == "amd64"
        assert info.container_runtime_version and info.machine_id and info.boot_id
        [ready] = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready.status == "True"
        assert {a.type for a in node.status.addresses} == {"InternalIP", "Hostname"}
        assert not node.spec.taints  # the node controller cleared the not-ready taint
    one = await core.read_node("node-00002")
    assert one.metadata.uid == nodes.items[2].metadata.uid
    assert one.metadata.creation_timestamp.tzinfo is not None


async def test_typed_pods_deserialize_and_bind(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    created = await core.create_namespaced_pod("default", pod("typed", gpu=2))
    assert isinstance(created, k8s.V1Pod)
    assert created.status.phase == "Pending"
    assert created.status.qos_class == "Guaranteed"  # limits only: requests default to them
    container = created.spec.containers[0]
    assert container.resources.limits["nvidia.com/gpu"] == "2"
    assert container.resources.requests == container.resources.limits
    assert created.spec.scheduler_name == "gang-scheduler"

    # the binding answers 201 with a Status: read the status code, not a Binding
    resp = await core.create_namespaced_pod_binding(
        "typed", "default", typed_binding("typed", "node-00003"), _preload_content=False
    )
    assert resp.status == 201
    assert json.loads(await resp.read()) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }

    pods = await core.list_namespaced_pod("default")
    assert isinstance(pods, k8s.V1PodList)
    [bound] = pods.items
    assert bound.spec.node_name == "node-00003"
    [scheduled] = [c for c in bound.status.conditions if c.type == "PodScheduled"]
    assert scheduled.status == "True"
    assert scheduled.last_transition_time is not None and scheduled.last_probe_time is None
    assert bound.status.phase == "Pending"


async def test_binding_with_preloaded_content_fails_client_side_as_on_a_real_server(
    client: Any,
) -> None:
    """Recorded behaviour: the generated client cannot read a Status as a Binding."""
    core = k8s.CoreV1Api(client)
    await core.create_namespaced_pod("default", pod("p"))
    with pytest.raises(ValueError, match="target"):
        await core.create_namespaced_pod_binding("p", "default", typed_binding("p", "node-00000"))
    # ... although the binding itself succeeded
    assert (await core.read_namespaced_pod("p", "default")).spec.node_name == "node-00000"
    # with _preload_content=False the client raises nothing: the status code tells
    resp = await core.create_namespaced_pod_binding(
        "p", "default", typed_binding("p", "node-00001"), _preload_content=False
    )
    assert resp.status == 409
    assert json.loads(await resp.read())["reason"] == "Conflict"


async def test_typed_watch_of_pods(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    await core.create_namespaced_pod("default", pod("first"))
    listed = await core.list_namespaced_pod("default")

    async def changes() -> None:
        await asyncio.sleep(0.1)
        await core.create_namespaced_pod("default", pod("second"))
        resp = await core.create_namespaced_pod_binding(
            "second", "default", typed_binding("second", "node-00001"), _preload_content=False
        )
        assert resp.status == 201
        await core.delete_namespaced_pod("first", "default", grace_period_seconds=0)

    task = asyncio.create_task(changes())
    w = watch.Watch()
    seen = []
    async with asyncio.timeout(5):
        async for event in w.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=2,
        ):
            assert isinstance(event["object"], k8s.V1Pod)
            seen.append(
                (event["type"], event["object"].metadata.name, event["object"].spec.node_name)
            )
            if len(seen) == 3:
                w.stop()
    await task
    assert seen == [
        ("ADDED", "second", None),
        ("MODIFIED", "second", "node-00001"),
        ("DELETED", "first", None),
    ]


async def test_typed_watch_of_nodes_from_scratch(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    w = watch.Watch()
    names = []
    async with asyncio.timeout(5):
        async for event in w.stream(core.list_node, timeout_seconds=1):
            assert event["type"] == "ADDED"
            assert isinstance(event["object"], k8s.V1Node)
            assert event["object"].status.node_info.kubelet_version
            names.append(event["object"].metadata.name)
            if len(names) == 4:
                w.stop()
    assert names == [f"node-{i:05d}" for i in range(4)]


async def test_podgroups_through_custom_objects_api(client: Any) -> None:
    custom = k8s.CustomObjectsApi(client)
    created = await custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, podgroup("gang")
    )
    assert created["kind"] == "PodGroup" and created["metadata"]["generation"] == 1
    assert created["spec"] == {"minMember": 2}

    got = await custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "gang")
    assert got == created

    listed = await custom.list_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, label_selector="team=ml"
    )
    assert listed["kind"] == "PodGroupList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["gang"]

    patched = await custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "gang", {"spec": {"minMember": 3}}, _content_type=MERGE
    )
    assert patched["spec"]["minMember"] == 3
    assert patched["metadata"]["generation"] == 2
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    status = await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "gang",
        {"status": {"phase": "Scheduled", "scheduled": 3}},
        _content_type=MERGE,
    )
    assert status["status"] == {"phase": "Scheduled", "scheduled": 3}
    assert status["metadata"]["generation"] == 2  # a status write is not a spec change
    assert status["spec"]["minMember"] == 3

    # a status subresource keeps the main resource from writing status
    main = await custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "gang",
        {"status": {"phase": "Failed"}},
        _content_type=MERGE,
    )
    assert main["status"]["phase"] == "Scheduled"

    # without _content_type the client labels a dict as a JSON patch, which must be a list
    with pytest.raises(ApiException) as info:
        await custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, "gang", {"spec": {"minMember": 4}}
        )
    assert info.value.status == 400
    assert json.loads(info.value.body)["message"] == (
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    )
    # ... and a real JSON patch (a list) is what it is for
    jp = await custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "gang",
        [{"op": "replace", "path": "/spec/minMember", "value": 4}],
    )
    assert jp["spec"]["minMember"] == 4 and jp["metadata"]["generation"] == 3


async def test_watch_podgroups_through_custom_objects_api(client: Any) -> None:
    custom = k8s.CustomObjectsApi(client)
    await custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, podgroup("a"))
    listed = await custom.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)

    async def changes() -> None:
        await asyncio.sleep(0.1)
        await custom.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, podgroup("b")
        )
        await custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            "a",
            {"status": {"phase": "Running"}},
            _content_type=MERGE,
        )

    task = asyncio.create_task(changes())
    w = watch.Watch()
    seen = []
    async with asyncio.timeout(5):
        async for event in w.stream(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            "default",
            PLURAL,
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=2,
        ):
            obj = event["object"]
            assert isinstance(obj, dict) and obj["kind"] == "PodGroup"
            seen.append(
                (event["type"], obj["metadata"]["name"], obj.get("status", {}).get("phase"))
            )
            if len(seen) == 2:
                w.stop()
    await task
    assert seen == [("ADDED", "b", None), ("MODIFIED", "a", "Running")]


async def test_typed_lease(client: Any) -> None:
    coordination = k8s.CoordinationV1Api(client)
    now = datetime.now(UTC).replace(microsecond=123456)
    lease = k8s.V1Lease(
        metadata=k8s.V1ObjectMeta(name="gang-scheduler", namespace="kube-system"),
        spec=k8s.V1LeaseSpec(
            holder_identity="replica-a",
            lease_duration_seconds=15,
            acquire_time=now,
            renew_time=now,
        ),
    )
    created = await coordination.create_namespaced_lease("kube-system", lease)
    assert isinstance(created, k8s.V1Lease)
    assert created.spec.holder_identity == "replica-a"
    assert created.spec.lease_duration_seconds == 15
    assert created.spec.renew_time == now  # microseconds survive the round trip
    created.spec.holder_identity = "replica-b"
    replaced = await coordination.replace_namespaced_lease("gang-scheduler", "kube-system", created)
    assert replaced.spec.holder_identity == "replica-b"
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    # a stale resourceVersion is refused: leader election relies on it
    created.spec.holder_identity = "replica-c"
    with pytest.raises(ApiException) as info:
        await coordination.replace_namespaced_lease("gang-scheduler", "kube-system", created)
    assert info.value.status == 409
    leases = await coordination.list_namespaced_lease("kube-system")
    assert [item.spec.holder_identity for item in leases.items] == ["replica-b"]


async def test_typed_events_v1_event(client: Any) -> None:
    core = k8s.CoreV1Api(client)
    events_api = k8s.EventsV1Api(client)
    p = await core.create_namespaced_pod("default", pod("p"))
    now = datetime.now(UTC).replace(microsecond=500000)
    event = k8s.EventsV1Event(
        metadata=k8s.V1ObjectMeta(name="p.gang.1", namespace="default"),
        event_time=now,
        reporting_controller="gang-scheduler",
        reporting_instance="gang-scheduler-0",
        action="Binding",
        reason="Scheduled",
        type="Normal",
        note="Successfully assigned default/p to node-00000",
        regarding=k8s.V1ObjectReference(
            kind="Pod", namespace="default", name="p", uid=p.metadata.uid, api_version="v1"
        ),
    )
    created = await events_api.create_namespaced_event("default", event)
    assert isinstance(created, k8s.EventsV1Event)
    assert created.reason == "Scheduled" and created.type == "Normal"
    assert created.regarding.name == "p" and created.regarding.uid == p.metadata.uid
    assert created.event_time == now
    listed = await events_api.list_namespaced_event("default")
    assert [e.metadata.name for e in listed.items] == ["p.gang.1"]
    # the same event through the core/v1 view, as a real server stores both in one place
    core_events = await core.list_namespaced_event("default")
    [core_event] = core_events.items
    assert core_event.involved_object.name == "p"
    assert core_event.reason == "Scheduled" and core_event.message == event.note


async def test_bearer_token_cluster() -> None:
    async with SimCluster("2", token="s3cret") as sim:
        kubeconfig = yaml.safe_load(sim.kubeconfig_path.read_text())
        assert kubeconfig["users"][0]["user"] == {"token": "s3cret"}
        # written whole, then moved into place: nothing half written is left beside it
        assert sorted(p.name for p in sim.kubeconfig_path.parent.iterdir()) == ["kubeconfig"]
        async with sim.api_client() as api:
            core = k8s.CoreV1Api(api)
            nodes = await core.list_node()
            assert [n.metadata.name for n in nodes.items] == ["node-00000", "node-00001"]
            await core.create_namespaced_pod("default", pod("p"))
        unauthorized = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }
        async with aiohttp.ClientSession() as session:
            raw = Raw(session, sim.url)
            for path in ("/api/v1/nodes", "/api/v1/namespaces/default/pods/p", "/apis"):
                status, body, _ = await raw.get(path)
                assert (status, body) == (401, unauthorized), path
            status, body, _ = await raw.get(
                "/api/v1/nodes", headers={"Authorization": "Bearer wrong"}
            )
            assert (status, body) == (401, unauthorized)
            status, body, _ = await raw.post("/api/v1/namespaces/default/pods", pod("sneaky"))
            assert status == 401
            status, body, _ = await raw.get(
                "/api/v1/namespaces/default/pods", headers={"Authorization": "Bearer s3cret"}
            )
            assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["p"]
        # a client with the wrong token gets an ApiException 401
        doc = dict(kubeconfig)
        doc["users"] = [{"name": doc["users"][0]["name"], "user": {"token": "nope"}}]
        api = await config.new_client_from_config_dict(doc)
        try:
            with pytest.raises(ApiException) as info:
                await k8s.CoreV1Api(api).list_node()
            assert info.value.status == 401
        finally:
            await api.close()
