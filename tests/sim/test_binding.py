"""pods/binding answers, byte for byte as recorded from a real apiserver (shared/k8s-api)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client as k8s

from tests.conftest import Raw, binding, pod

PODS = "/api/v1/namespaces/default/pods"


async def test_bind_success_is_201_with_status_body(raw: Raw) -> None:
    await raw.post(PODS, pod("p"))
    status, _, body = await raw.post(f"{PODS}/p/binding", binding("p", "node-00001"))
    assert status == 201
    assert (
        body == b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'
    )
    _, stored, _ = await raw.get(f"{PODS}/p")
    assert stored["spec"]["nodeName"] == "node-00001"
    scheduled = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert len(scheduled) == 1 and scheduled[0]["status"] == "True"
    assert scheduled[0]["lastProbeTime"] is None and scheduled[0]["lastTransitionTime"].endswith(
        "Z"
    )
    assert stored["status"]["phase"] == "Pending"  # no kubelet: stays Pending after binding


async def test_bind_twice_gets_recorded_409(raw: Raw) -> None:
    await raw.post(PODS, pod("p"))
    assert (await raw.post(f"{PODS}/p/binding", binding("p", "node-00000")))[0] == 201
    for node in ("node-00000", "node-00001"):  # same node or another: both refused
        status, _, body = await raw.post(f"{PODS}/p/binding", binding("p", node))
        assert status == 409
        assert body == (
            b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            b'"message":"Operation cannot be fulfilled on pods/binding \\"p\\": pod p is already '
            b'assigned to node \\"node-00000\\"","reason":"Conflict",'
            b'"details":{"name":"p","kind":"pods/binding"},"code":409}'
        )


async def test_bind_unknown_pod_is_recorded_404(raw: Raw) -> None:
    status, _, body = await raw.post(f"{PODS}/nope/binding", binding("nope", "node-00000"))
    assert status == 404
    assert orjson.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }


async def test_bind_to_missing_node_succeeds_like_a_real_server(raw: Raw) -> None:
    """The apiserver checks neither node existence nor capacity: that is the scheduler's job."""
    await raw.post(PODS, pod("p"))
    status, _, _ = await raw.post(f"{PODS}/p/binding", binding("p", "no-such-node"))
    assert status == 201


async def test_bindings_collection_and_annotations(raw: Raw) -> None:
    await raw.post(PODS, pod("p"))
    body = binding("p", "node-00002")
    body["metadata"]["annotations"] = {"scheduled-by": "gang"}
    status, _, _ = await raw.post("/api/v1/namespaces/default/bindings", body)
    assert status == 201
    _, stored, _ = await raw.get(f"{PODS}/p")
    assert stored["spec"]["nodeName"] == "node-00002"
    assert stored["metadata"]["annotations"] == {"scheduled-by": "gang"}


async def test_bind_rejects_missing_target_and_mismatched_name(raw: Raw) -> None:
    await raw.post(PODS, pod("p"))
    status, body, _ = await raw.post(f"{PODS}/p/binding", {"metadata": {"name": "p"}, "target": {}})
    assert status == 422 and body["reason"] == "Invalid"
    status, body, _ = await raw.post(f"{PODS}/p/binding", binding("other", "node-00000"))
    assert status == 400 and "does not match" in body["message"]


async def test_bind_a_terminating_pod_is_409(raw: Raw) -> None:
    await raw.post(
        PODS, pod("p", finalizers=None) | {"metadata": {"name": "p", "finalizers": ["x/y"]}}
    )
    await raw.delete(f"{PODS}/p", {"gracePeriodSeconds": 0})
    status, body, _ = await raw.post(f"{PODS}/p/binding", binding("p", "node-00000"))
    assert status == 409 and "is being deleted" in body["message"]


async def test_generated_client_binding_trap_and_raw_status(client: Any) -> None:
    """The generated client may fail to read a Binding back from the Status a success returns."""
    core = k8s.CoreV1Api(client)
    await core.create_namespaced_pod("default", pod("p"))
    await core.create_namespaced_pod("default", pod("q"))
    body = k8s.V1Binding(
        metadata=k8s.V1ObjectMeta(name="p"),
        target=k8s.V1ObjectReference(kind="Node", name="node-00000"),
    )
    with pytest.raises(ValueError, match="target"):
        await core.create_namespaced_pod_binding("p", "default", body)
    assert (await core.read_namespaced_pod("p", "default")).spec.node_name == "node-00000"
    # the way that works: read the HTTP status yourself
    body.metadata.name = "q"
    resp = await core.create_namespaced_pod_binding("q", "default", body, _preload_content=False)
    assert resp.status == 201
    assert (await resp.json())["status"] == "Success"
