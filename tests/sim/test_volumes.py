"""Storage resources and the PV controller stand-in, observed over HTTP with kubernetes-asyncio."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from gang.sim.cluster import SimCluster
from gang.sim.storage import DEFAULT_CLASS_ANNOTATION, PV_PROTECTION, PVC_PROTECTION
from gang.sim.volumes import (
    BETA_STORAGE_PROVISIONER,
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    PROVISIONED_BY,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
)
from tests.conftest import Raw
from tests.sim.test_kubectl import Served, served  # noqa: F401  (the fixture, by name)

NS = "default"
DRIVER = "csi.example.com"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


class Kube:
    """The typed clients, answering plain JSON (no generated models in the way)."""

    def __init__(self, api_client: Any, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.core: Any = k8s.CoreV1Api(api_client)
        self.storage: Any = k8s.StorageV1Api(api_client)

    @staticmethod
    async def _json(call: Awaitable[Any]) -> dict[str, Any]:
        """The answer's JSON; ApiException for an error status (unpreloaded answers never raise)."""
        resp = await call
        result: dict[str, Any] = await resp.json()
        if resp.status >= 300:
            err = ApiException(status=resp.status, reason=resp.reason)
            err.body = json.dumps(result)
            raise err
        return result

    async def create_pvc(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._json(
            self.core.create_namespaced_persistent_volume_claim(NS, body, _preload_content=False)
        )

    async def pvc(self, name: str) -> dict[str, Any]:
        return await self._json(
            self.core.read_namespaced_persistent_volume_claim(name, NS, _preload_content=False)
        )

    async def patch_pvc(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._json(
            self.core.patch_namespaced_persistent_volume_claim(
                name, NS, body, _preload_content=False
            )
        )

    async def create_pv(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._json(self.core.create_persistent_volume(body, _preload_content=False))

    async def pv(self, name: str) -> dict[str, Any]:
        return await self._json(self.core.read_persistent_volume(name, _preload_content=False))

    async def pvs(self) -> dict[str, dict[str, Any]]:
        body = await self._json(self.core.list_persistent_volume(_preload_content=False))
        return {v["metadata"]["name"]: v for v in body["items"]}

    async def create_class(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._json(self.storage.create_storage_class(body, _preload_content=False))

    async def events(self, name: str) -> list[dict[str, Any]]:
        body = await self._json(
            self.core.list_namespaced_event(
                NS, field_selector=f"involvedObject.name={name}", _preload_content=False
            )
        )
        return list(body["items"])

    async def reasons(self, name: str) -> list[str]:
        return [e["reason"] for e in await self.events(name)]

    async def bound(self, name: str) -> dict[str, Any]:
        """Wait until the claim is Bound; return it."""
        claim: dict[str, Any] = {}

        async def is_bound() -> bool:
            nonlocal claim
            claim = await self.pvc(name)
            return bool(claim["status"].get("phase") == "Bound")

        await until(is_bound)
        return claim

    async def gone(self, read: Callable[[], Awaitable[Any]]) -> None:
        async def missing() -> bool:
            try:
                await read()
            except ApiException as err:
                assert err.status == 404
                return True
            return False

        await until(missing)


async def until(check: Callable[[], Awaitable[bool]], within: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        assert loop.time() < deadline, f"not reached within {within}s: {check.__name__}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def kube(cluster: SimCluster, client: Any) -> Kube:
    """On the shared 4-node, 2-zone cluster (``node-00001`` is in ``zone-1``)."""
    return Kube(client, cluster)


def claim(
    name: str,
    size: str = "10Gi",
    storage_class: str | None = None,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "accessModes": list(modes),
        "resources": {"requests": {"storage": size}},
        **spec,
    }
    if storage_class is not None:
        body["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": body,
    }


def volume(
    name: str,
    size: str = "10Gi",
    storage_class: str = "",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "hostPath": {"path": f"/data/{name}"},
        **spec,
    }
    if storage_class:
        body["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": body,
    }


def storage_class(
    name: str,
    mode: str | None = None,
    provisioner: str = DRIVER,
    default: bool = False,
    **fields: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {DEFAULT_CLASS_ANNOTATION: "true"}
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta,
        "provisioner": provisioner,
        **fields,
    }
    if mode is not None:
        body["volumeBindingMode"] = mode
    return body


def affinity(key: str, value: str) -> dict[str, Any]:
    return {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
            ]
        }
    }


# --- discovery -------------------------------------------------------------------------------


async def test_discovery_lists_the_storage_resources(kube: Kube, raw: Raw) -> None:
    (_, core, _), (_, groups, _), (_, group, _), (_, storage, _) = [
        await raw.get(path)
        for path in ("/api/v1", "/apis", "/apis/storage.k8s.io", "/apis/storage.k8s.io/v1")
    ]
    resources = {r["name"]: r for r in core["resources"]}
    pvc = resources["persistentvolumeclaims"]
    assert pvc["kind"] == "PersistentVolumeClaim" and pvc["namespaced"] is True
    assert pvc["shortNames"] == ["pvc"] and pvc["singularName"] == "persistentvolumeclaim"
    assert resources["persistentvolumeclaims/status"]["verbs"] == ["get", "patch", "update"]
    pv = resources["persistentvolumes"]
    assert pv["kind"] == "PersistentVolume" and pv["namespaced"] is False
    assert pv["shortNames"] == ["pv"]
    assert resources["persistentvolumes/status"]["namespaced"] is False
    assert "storage.k8s.io" in {g["name"] for g in groups["groups"]}
    assert group["preferredVersion"] == {"groupVersion": "storage.k8s.io/v1", "version": "v1"}
    assert storage["groupVersion"] == "storage.k8s.io/v1"
    by_name = {r["name"]: r for r in storage["resources"]}
    assert set(by_name) == {"storageclasses", "csinodes"}
    assert by_name["storageclasses"]["shortNames"] == ["sc"]
    assert by_name["storageclasses"]["namespaced"] is False
    assert by_name["csinodes"]["kind"] == "CSINode" and by_name["csinodes"]["namespaced"] is False
    assert "shortNames" not in by_name["csinodes"]
    listed = await kube.storage.get_api_resources()  # the typed discovery client agrees
    assert {r.name for r in listed.resources} == {"storageclasses", "csinodes"}


def test_kubectl_sees_the_storage_resources(served: Served) -> None:  # noqa: F811
    status, body = served.request(
        "POST", "/apis/storage.k8s.io/v1/storageclasses", storage_class("fast")
    )
    assert status == 201, body
    status, body = served.request(
        "POST", "/api/v1/namespaces/default/persistentvolumeclaims", claim("data", "1Gi", "fast")
    )
    assert status == 201, body
    resources = served.kubectl("api-resources", "--no-headers")
    rows = {line.split()[0]: line.split() for line in resources.splitlines() if line.strip()}
    assert rows["persistentvolumeclaims"][1] == "pvc"
    assert rows["persistentvolumes"][1] == "pv"
    assert rows["storageclasses"][1:3] == ["sc", "storage.k8s.io/v1"]
    assert rows["csinodes"][1] == "storage.k8s.io/v1"
    assert "namespaces" in rows and "pods" in rows  # the rest of discovery still works
    claims = json.loads(served.kubectl("get", "pvc", "-o", "json"))
    assert [c["metadata"]["name"] for c in claims["items"]] == ["data"]
    volumes = json.loads(served.kubectl("get", "pv", "-o", "json"))
    assert [v["spec"]["claimRef"]["name"] for v in volumes["items"]] == ["data"]
    classes = served.kubectl("get", "sc", "-o", "name")
    assert classes.split() == ["storageclass.storage.k8s.io/fast"]
    out = served.kubectl("get", "pvc,pv,sc,csinodes", "-A")
    assert "data" in out and "fast" in out


# --- CRUD and defaults -------------------------------------------------------------------------


async def test_pvc_crud_defaults_and_status_subresource(kube: Kube) -> None:
    created = await kube.create_pvc(claim("data", "5Gi", status={"phase": "Bound"}))
    assert created["kind"] == "PersistentVolumeClaim" and created["apiVersion"] == "v1"
    assert created["status"] == {"phase": "Pending"}  # a posted status is dropped
    assert created["spec"]["volumeMode"] == "Filesystem"
    assert "storageClassName" not in created["spec"]  # no default class exists
    assert created["metadata"]["finalizers"] == [PVC_PROTECTION]
    assert (await kube.pvc("data"))["metadata"]["uid"] == created["metadata"]["uid"]

    patched = await kube.patch_pvc("data", {"metadata": {"labels": {"team": "ml"}}})
    assert patched["metadata"]["labels"] == {"team": "ml"}
    # a main-resource write does not change status; the status subresource does
    patched = await kube.patch_pvc("data", {"status": {"phase": "Lost"}})
    assert patched["status"] == {"phase": "Pending"}
    resp = await kube.core.patch_namespaced_persistent_volume_claim_status(
        "data", NS, {"status": {"phase": "Lost"}}, _preload_content=False
    )
    assert (await resp.json())["status"]["phase"] == "Lost"

    listed = await kube.core.list_namespaced_persistent_volume_claim(
        NS, label_selector="team=ml", _preload_content=False
    )
    assert [c["metadata"]["name"] for c in (await listed.json())["items"]] == ["data"]
    everywhere = await kube.core.list_persistent_volume_claim_for_all_namespaces(
        _preload_content=False
    )
    assert len((await everywhere.json())["items"]) == 1

    await kube.core.delete_namespaced_persistent_volume_claim("data", NS, _preload_content=False)
    await kube.gone(lambda: kube.pvc("data"))  # unused: the protection finalizer goes at once


async def test_pvc_validation_is_422(kube: Kube) -> None:
    bad = claim("bad", modes=())
    del bad["spec"]["resources"]
    with pytest.raises(ApiException) as err:
        await kube.create_pvc(bad)
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["reason"] == "Invalid"
    assert {c["field"] for c in body["details"]["causes"]} == {
        "spec.accessModes",
        "spec.resources[storage]",
    }
    assert "at least 1 access mode is required" in body["message"]
    with pytest.raises(ApiException) as err:
        await kube.create_pvc(claim("odd", modes=("ReadWriteSometimes",)))
    assert err.value.status == 422


async def test_pv_crud_and_defaults(kube: Kube, raw: Raw) -> None:
    created = await kube.create_pv(volume("disk-1", "20Gi", status={"phase": "Bound"}))
    assert created["kind"] == "PersistentVolume" and "namespace" not in created["metadata"]
    assert created["status"]["phase"] == "Available"
    assert created["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert created["spec"]["volumeMode"] == "Filesystem"
    assert created["metadata"]["finalizers"] == [PV_PROTECTION]
    resp = await kube.core.patch_persistent_volume(
        "disk-1", {"metadata": {"labels": {"tier": "ssd"}}}, _preload_content=False
    )
    assert (await resp.json())["metadata"]["labels"] == {"tier": "ssd"}
    resp = await kube.core.patch_persistent_volume_status(
        "disk-1", {"status": {"phase": "Failed", "message": "disk gone"}}, _preload_content=False
    )
    assert (await resp.json())["status"]["phase"] == "Failed"
    assert set(await kube.pvs()) == {"disk-1"}
    # namespaced URLs do not exist for a cluster-scoped resource
    assert (await raw.get("/api/v1/namespaces/default/persistentvolumes"))[0] == 404
    await kube.core.delete_persistent_volume("disk-1", _preload_content=False)
    await kube.gone(lambda: kube.pv("disk-1"))  # not Bound: pv-protection lets it go

    for broken in (
        {**volume("no-source"), "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["RWO"]}},
        {**volume("no-size"), "spec": {"accessModes": ["ReadWriteOnce"], "nfs": {"path": "/"}}},
    ):
        with pytest.raises(ApiException) as err:
            await kube.create_pv(broken)
        assert err.value.status == 422


async def test_storage_class_and_csinode_crud_and_defaults(kube: Kube) -> None:
    created = await kube.create_class(storage_class("fast"))
    assert created["apiVersion"] == "storage.k8s.io/v1" and created["kind"] == "StorageClass"
    assert created["volumeBindingMode"] == "Immediate"
    assert created["reclaimPolicy"] == "Delete"
    local = await kube.create_class(
        storage_class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")
    )
    assert local["volumeBindingMode"] == "WaitForFirstConsumer"
    resp = await kube.storage.patch_storage_class(
        "fast", {"metadata": {"labels": {"tier": "gold"}}}, _preload_content=False
    )
    assert (await resp.json())["metadata"]["labels"] == {"tier": "gold"}
    resp = await kube.storage.list_storage_class(_preload_content=False)
    assert [c["metadata"]["name"] for c in (await resp.json())["items"]] == ["fast", "local"]
    await kube.storage.delete_storage_class("local", _preload_content=False)
    resp = await kube.storage.list_storage_class(_preload_content=False)
    assert [c["metadata"]["name"] for c in (await resp.json())["items"]] == ["fast"]
    with pytest.raises(ApiException) as err:
        await kube.create_class({**storage_class("nothing"), "provisioner": ""})
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        await kube.create_class(storage_class("odd", "Eventually"))
    assert err.value.status == 422

    csinode = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "node-00000"},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": "node-00000", "topologyKeys": [ZONE]}]},
    }
    resp = await kube.storage.create_csi_node(csinode, _preload_content=False)
    assert resp.status == 201
    resp = await kube.storage.read_csi_node("node-00000", _preload_content=False)
    assert (await resp.json())["spec"] == csinode["spec"]
    resp = await kube.storage.list_csi_node(_preload_content=False)
    assert len((await resp.json())["items"]) == 1
    await kube.storage.delete_csi_node("node-00000", _preload_content=False)
    resp = await kube.storage.list_csi_node(_preload_content=False)
    assert (await resp.json())["items"] == []


async def test_namespace_labels_round_trip_with_the_name_label(kube: Kube) -> None:
    resp = await kube.core.create_namespace(
        {"metadata": {"name": "team", "labels": {"owner": "ml"}}}, _preload_content=False
    )
    created = await resp.json()
    assert created["metadata"]["labels"] == {"owner": "ml", "kubernetes.io/metadata.name": "team"}
    # the server owns that label: it comes back whatever a client writes
    resp = await kube.core.patch_namespace(
        "team",
        {"metadata": {"labels": {"kubernetes.io/metadata.name": "other", "owner": "infra"}}},
        _preload_content=False,
    )
    assert (await resp.json())["metadata"]["labels"] == {
        "owner": "infra",
        "kubernetes.io/metadata.name": "team",
    }
    resp = await kube.core.read_namespace("default", _preload_content=False)
    assert (await resp.json())["metadata"]["labels"] == {"kubernetes.io/metadata.name": "default"}
    resp = await kube.core.list_namespace(
        label_selector="kubernetes.io/metadata.name in (team,kube-system)", _preload_content=False
    )
    names = [n["metadata"]["name"] for n in (await resp.json())["items"]]
    assert names == ["kube-system", "team"]


async def test_a_claim_without_class_gets_the_default_class(kube: Kube) -> None:
    early = await kube.create_pvc(claim("early"))
    assert "storageClassName" not in early["spec"]
    explicit = await kube.create_pvc(claim("none", storage_class=""))
    await kube.create_class(storage_class("standard", default=True))
    late = await kube.create_pvc(claim("late"))
    assert late["spec"]["storageClassName"] == "standard"  # DefaultStorageClass admission
    # retroactive assignment by the PV controller; an explicit "" is left alone
    assert (await kube.bound("early"))["spec"]["storageClassName"] == "standard"
    await kube.bound("late")
    await asyncio.sleep(0.1)
    kept = await kube.pvc("none")
    assert kept["spec"]["storageClassName"] == "" and kept["status"]["phase"] == "Pending"
    assert explicit["spec"]["storageClassName"] == ""
    assert "FailedBinding" in await kube.reasons("none")


# --- dynamic provisioning ------------------------------------------------------------------------


async def test_immediate_class_provisions_and_binds_at_once(kube: Kube) -> None:
    await kube.create_class(storage_class("fast", mountOptions=["noatime"]))
    created = await kube.create_pvc(claim("data", "8Gi", "fast", ("ReadWriteOnce",)))
    uid = created["metadata"]["uid"]
    bound = await kube.bound("data")
    name = f"pvc-{uid}"
    assert bound["spec"]["volumeName"] == name
    annotations = bound["metadata"]["annotations"]
    assert annotations[BIND_COMPLETED] == "yes"
    assert annotations[BOUND_BY_CONTROLLER] == "yes"
    assert annotations[STORAGE_PROVISIONER] == DRIVER
    assert annotations[BETA_STORAGE_PROVISIONER] == DRIVER
    assert bound["status"] == {
        "phase": "Bound",
        "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "8Gi"},
    }
    pv = await kube.pv(name)
    spec = pv["spec"]
    assert spec["capacity"] == {"storage": "8Gi"}
    assert spec["accessModes"] == ["ReadWriteOnce"]
    assert spec["storageClassName"] == "fast"
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert spec["volumeMode"] == "Filesystem"
    assert spec["mountOptions"] == ["noatime"]
    assert spec["csi"]["driver"] == DRIVER and spec["csi"]["volumeHandle"]
    assert "nodeAffinity" not in spec
    ref = spec["claimRef"]
    assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
        "PersistentVolumeClaim",
        NS,
        "data",
        uid,
    )
    assert pv["metadata"]["annotations"][PROVISIONED_BY] == DRIVER
    assert BOUND_BY_CONTROLLER not in pv["metadata"]["annotations"]  # the provisioner set it
    assert pv["status"]["phase"] == "Bound"
    reasons = await kube.reasons("data")
    assert "ProvisioningSucceeded" in reasons and "ExternalProvisioning" in reasons


async def test_wait_for_first_consumer_waits_for_the_selected_node(kube: Kube) -> None:
    await kube.create_class(storage_class("local-ssd", "WaitForFirstConsumer"))
    created = await kube.create_pvc(claim("scratch", "1Gi", "local-ssd"))
    await until(lambda: _has_reason(kube, "scratch", "WaitForFirstConsumer"))
    await asyncio.sleep(0.1)
    waiting = await kube.pvc("scratch")
    assert waiting["status"]["phase"] == "Pending"
    assert STORAGE_PROVISIONER not in (waiting["metadata"].get("annotations") or {})
    assert await kube.pvs() == {}

    # the scheduler picks node-00001 (zone-1 of 2)
    await kube.patch_pvc("scratch", {"metadata": {"annotations": {SELECTED_NODE: "node-00001"}}})
    bound = await kube.bound("scratch")
    assert bound["metadata"]["annotations"][STORAGE_PROVISIONER] == DRIVER
    pv = await kube.pv(f"pvc-{created['metadata']['uid']}")
    assert pv["spec"]["nodeAffinity"] == affinity(ZONE, "zone-1")
    assert pv["status"]["phase"] == "Bound"


async def test_a_node_without_zone_pins_the_volume_to_its_hostname(kube: Kube) -> None:
    await kube.core.create_node(
        {"metadata": {"name": "edge", "labels": {HOSTNAME: "edge"}}}, _preload_content=False
    )
    await kube.create_class(storage_class("local-ssd", "WaitForFirstConsumer"))
    created = await kube.create_pvc(
        {
            **claim("scratch", "1Gi", "local-ssd"),
            "metadata": {"name": "scratch", "annotations": {SELECTED_NODE: "edge"}},
        }
    )
    await kube.bound("scratch")
    pv = await kube.pv(f"pvc-{created['metadata']['uid']}")
    assert pv["spec"]["nodeAffinity"] == affinity(HOSTNAME, "edge")


async def test_the_drivers_csinode_topology_keys_decide_the_affinity(kube: Kube) -> None:
    await kube.core.patch_node(
        "node-00000", {"metadata": {"labels": {"example.com/rack": "r7"}}}, _preload_content=False
    )
    await kube.storage.create_csi_node(
        {
            "metadata": {"name": "node-00000"},
            "spec": {
                "drivers": [
                    {"name": DRIVER, "nodeID": "i-123", "topologyKeys": ["example.com/rack"]}
                ]
            },
        },
        _preload_content=False,
    )
    await kube.create_class(storage_class("racked", "WaitForFirstConsumer"))
    created = await kube.create_pvc(
        {
            **claim("ckpt", "1Gi", "racked"),
            "metadata": {"name": "ckpt", "annotations": {SELECTED_NODE: "node-00000"}},
        }
    )
    await kube.bound("ckpt")
    pv = await kube.pv(f"pvc-{created['metadata']['uid']}")
    assert pv["spec"]["nodeAffinity"] == affinity("example.com/rack", "r7")


async def test_the_provisioning_delay_is_observable() -> None:
    async with (
        SimCluster("1", provisioning_delay=0.4) as cluster,
        cluster.api_client() as api_client,
    ):
        kube = Kube(api_client, cluster)
        await kube.create_class(storage_class("slow", "WaitForFirstConsumer"))
        await kube.create_pvc(claim("data", "1Gi", "slow"))
        await kube.patch_pvc("data", {"metadata": {"annotations": {SELECTED_NODE: "node-00000"}}})
        await asyncio.sleep(0.15)
        waiting = await kube.pvc("data")
        assert waiting["metadata"]["annotations"][STORAGE_PROVISIONER] == DRIVER
        assert waiting["status"]["phase"] == "Pending"
        assert await kube.pvs() == {}
        bound = await kube.bound("data")
        assert bound["spec"]["volumeName"] in await kube.pvs()
        assert cluster.volumes is not None
        cluster.volumes.provisioning_delay = 0  # a runtime knob
        await kube.create_class(storage_class("quick"))
        await kube.create_pvc(claim("more", "1Gi", "quick"))
        await kube.bound("more")


async def test_an_unknown_selected_node_fails_and_clears_the_annotation(kube: Kube) -> None:
    await kube.create_class(storage_class("local-ssd", "WaitForFirstConsumer"))
    await kube.create_pvc(claim("scratch", "1Gi", "local-ssd"))
    await kube.patch_pvc("scratch", {"metadata": {"annotations": {SELECTED_NODE: "ghost"}}})
    await until(lambda: _has_reason(kube, "scratch", "ProvisioningFailed"))

    async def cleared() -> bool:
        annotations = (await kube.pvc("scratch"))["metadata"].get("annotations") or {}
        return SELECTED_NODE not in annotations

    await until(cleared)
    assert await kube.pvs() == {}
    await kube.patch_pvc("scratch", {"metadata": {"annotations": {SELECTED_NODE: "node-00000"}}})
    await kube.bound("scratch")


async def test_no_provisioner_and_missing_class_leave_the_claim_pending(kube: Kube) -> None:
    await kube.create_class(storage_class("manual", provisioner="kubernetes.io/no-provisioner"))
    await kube.create_pvc(claim("a", "1Gi", "manual"))
    await kube.create_pvc(claim("b", "1Gi", "missing"))
    await until(lambda: _has_reason(kube, "a", "ProvisioningFailed"))
    await until(lambda: _has_reason(kube, "b", "ProvisioningFailed"))
    assert await kube.pvs() == {}
    # the class appears later: the claim is provisioned then
    await kube.create_class(storage_class("missing"))
    await kube.bound("b")


# --- static binding ------------------------------------------------------------------------------


async def test_an_immediate_claim_binds_the_smallest_matching_volume(kube: Kube) -> None:
    await kube.create_class(storage_class("manual", provisioner="kubernetes.io/no-provisioner"))
    for pv in (
        volume("small", "5Gi", "manual"),
        volume("right", "20Gi", "manual"),
        volume("large", "100Gi", "manual"),
        volume("other-class", "10Gi", "gold"),
        volume("read-only", "10Gi", "manual", modes=("ReadOnlyMany",)),
        volume("block", "10Gi", "manual", volumeMode="Block"),
    ):
        await kube.create_pv(pv)
    await kube.create_pvc(claim("data", "10Gi", "manual"))
    bound = await kube.bound("data")
    assert bound["spec"]["volumeName"] == "right"
    assert bound["status"]["capacity"] == {"storage": "20Gi"}
    assert bound["metadata"]["annotations"][BOUND_BY_CONTROLLER] == "yes"
    assert STORAGE_PROVISIONER not in bound["metadata"]["annotations"]
    pv = await kube.pv("right")
    assert pv["status"]["phase"] == "Bound"
    assert pv["spec"]["claimRef"]["uid"] == bound["metadata"]["uid"]
    assert pv["metadata"]["annotations"][BOUND_BY_CONTROLLER] == "yes"
    for name in ("small", "large", "other-class", "read-only", "block"):
        assert (await kube.pv(name))["status"]["phase"] == "Available"


async def test_a_class_less_claim_binds_a_class_less_volume_that_appears_later(
    kube: Kube,
) -> None:
    await kube.create_pvc(claim("data", "1Gi", storage_class=""))
    await until(lambda: _has_reason(kube, "data", "FailedBinding"))
    await kube.create_pv(volume("labelled", "2Gi"))
    assert (await kube.bound("data"))["spec"]["volumeName"] == "labelled"


async def test_a_claim_selector_filters_volumes(kube: Kube) -> None:
    plain = volume("plain", "1Gi")
    tagged = {**volume("tagged", "1Gi"), "metadata": {"name": "tagged", "labels": {"set": "a"}}}
    await kube.create_pv(plain)
    await kube.create_pv(tagged)
    await kube.create_pvc(claim("data", "1Gi", "", selector={"matchLabels": {"set": "a"}}))
    assert (await kube.bound("data"))["spec"]["volumeName"] == "tagged"


async def test_a_claim_naming_a_volume_binds_it(kube: Kube) -> None:
    await kube.create_class(storage_class("local-ssd", "WaitForFirstConsumer"))
    await kube.create_pv(volume("mine", "10Gi", "local-ssd"))
    await kube.create_pv(volume("tiny", "1Gi", "local-ssd"))
    await kube.create_pvc(claim("data", "5Gi", "local-ssd", volumeName="mine"))
    bound = await kube.bound("data")  # named: bound without waiting for a consumer
    assert bound["spec"]["volumeName"] == "mine"
    assert bound["metadata"]["annotations"][BIND_COMPLETED] == "yes"
    assert BOUND_BY_CONTROLLER not in bound["metadata"]["annotations"]  # the user chose it
    await kube.create_pvc(claim("big", "5Gi", "local-ssd", volumeName="tiny"))
    await until(lambda: _has_reason(kube, "big", "FailedBinding"))
    assert (await kube.pvc("big"))["status"]["phase"] == "Pending"


async def test_wait_for_first_consumer_binds_a_static_volume_only_when_prebound(
    kube: Kube,
) -> None:
    await kube.create_class(
        storage_class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")
    )
    await kube.create_pv(volume("local-1", "10Gi", "local"))
    created = await kube.create_pvc(claim("data", "10Gi", "local"))
    await until(lambda: _has_reason(kube, "data", "WaitForFirstConsumer"))
    await asyncio.sleep(0.1)
    assert (await kube.pv("local-1"))["status"]["phase"] == "Available"
    # what kube-scheduler's volume binder does for a static volume: set the claimRef
    meta = created["metadata"]
    ref = {"kind": "PersistentVolumeClaim", "namespace": NS, "name": "data", "uid": meta["uid"]}
    await kube.core.patch_persistent_volume(
        "local-1", {"spec": {"claimRef": ref}}, _preload_content=False
    )
    bound = await kube.bound("data")
    assert bound["spec"]["volumeName"] == "local-1"
    assert (await kube.pv("local-1"))["status"]["phase"] == "Bound"


# --- reclaiming and protection -----------------------------------------------------------------


async def test_deleting_a_claim_deletes_its_volume_with_reclaim_policy_delete(kube: Kube) -> None:
    await kube.create_class(storage_class("fast"))
    await kube.create_pvc(claim("data", "1Gi", "fast"))
    name = (await kube.bound("data"))["spec"]["volumeName"]
    await kube.core.delete_namespaced_persistent_volume_claim("data", NS, _preload_content=False)
    await kube.gone(lambda: kube.pvc("data"))
    await kube.gone(lambda: kube.pv(name))


async def test_deleting_a_claim_releases_a_retained_volume(kube: Kube) -> None:
    await kube.create_class(storage_class("keep", reclaimPolicy="Retain"))
    await kube.create_pvc(claim("data", "1Gi", "keep"))
    name = (await kube.bound("data"))["spec"]["volumeName"]
    assert (await kube.pv(name))["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    await kube.core.delete_namespaced_persistent_volume_claim("data", NS, _preload_content=False)
    await kube.gone(lambda: kube.pvc("data"))

    async def released() -> bool:
        return bool((await kube.pv(name))["status"]["phase"] == "Released")

    await until(released)
    await asyncio.sleep(0.1)
    assert (await kube.pv(name))["status"]["phase"] == "Released"  # kept


async def test_a_claim_in_use_by_a_scheduled_pod_is_protected(kube: Kube) -> None:
    await kube.create_class(storage_class("fast"))
    await kube.create_pvc(claim("data", "1Gi", "fast"))
    volume_name = (await kube.bound("data"))["spec"]["volumeName"]
    pod = {
        "metadata": {"name": "trainer"},
        "spec": {
            "containers": [{"name": "main", "image": "trainer"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    await kube.core.create_namespaced_pod(NS, pod, _preload_content=False)
    binding = {"metadata": {"name": "trainer"}, "target": {"kind": "Node", "name": "node-00000"}}
    await kube.core.create_namespaced_pod_binding("trainer", NS, binding, _preload_content=False)
    await kube.core.delete_namespaced_persistent_volume_claim("data", NS, _preload_content=False)
    await asyncio.sleep(0.1)
    terminating = await kube.pvc("data")
    assert terminating["metadata"]["deletionTimestamp"]
    assert terminating["metadata"]["finalizers"] == [PVC_PROTECTION]
    # a bound volume is protected too
    await kube.core.delete_persistent_volume(volume_name, _preload_content=False)
    await asyncio.sleep(0.1)
    assert (await kube.pv(volume_name))["metadata"]["finalizers"] == [PV_PROTECTION]
    await kube.core.delete_namespaced_pod(
        "trainer", NS, grace_period_seconds=0, _preload_content=False
    )
    await kube.gone(lambda: kube.pvc("data"))
    await kube.gone(lambda: kube.pv(volume_name))


async def test_controllers_false_leaves_claims_alone() -> None:
    async with (
        SimCluster("1", controllers=False) as cluster,
        cluster.api_client() as api_client,
    ):
        kube = Kube(api_client, cluster)
        assert cluster.volumes is None
        await kube.create_class(storage_class("fast"))
        created = await kube.create_pvc(claim("data", "1Gi", "fast"))
        assert created["status"] == {"phase": "Pending"}  # defaulting is the server's, still on
        await asyncio.sleep(0.1)
        assert (await kube.pvc("data"))["status"]["phase"] == "Pending"
        assert await kube.pvs() == {}


async def _has_reason(kube: Kube, name: str, reason: str) -> bool:
    return reason in await kube.reasons(name)
