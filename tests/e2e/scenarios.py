"""The examples/ scenarios, written once and run on the simulator and on a real cluster.

A scenario only talks to a ``Target``: a kubernetes-asyncio ApiClient (raw REST plus discovery,
so PodGroups and built-in kinds are created the same way ``kubectl create -f`` does), the names
of the nodes it may use, and how long to wait. ``tests/e2e/conftest.py`` builds a Target from a
``SimCluster`` with the scheduler in-process, or from a real cluster (``GANG_E2E_KUBECONFIG``)
with ``gang run`` as a subprocess and kubelet-free Nodes — and the same assertions must hold on
both:

- every gang of a fitting example is bound whole, and only to the test's nodes;
- its group object's status says so, in its API's words (Coscheduling: phase Scheduled or
  Running with ``scheduled`` = members; Volcano: phase Running with a ``Scheduled`` condition;
  native: ``PodGroupScheduled``/``PodGroupInitiallyScheduled`` True);
- a Volcano group moves to Inqueue before any of its pods exists (the Training Operator v1
  creates pods only then, so its example is applied in that order);
- every bound pod has a ``Scheduled`` Event, and a gang that cannot fit gets ``FailedScheduling``
  Events with the aggregated reason, no pod bound, and holds nothing another gang needs;
- no node is over-committed (requests of bound, unfinished pods ≤ allocatable).

The examples' pods are pinned to the test's nodes (a nodeSelector on the label ``gang-e2e``,
which every test node carries), so on a real cluster no container is ever started on a real node.
"""

from __future__ import annotations

import asyncio
import copy
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from kubernetes_asyncio.client.exceptions import ApiException

from gang.models.podgroup import POD_GROUP_GROUP, POD_GROUP_LABEL, POD_GROUP_VERSION
from gang.models.quantity import resource_units
from gang.state.podinfo import parse_pod
from gang.state.resources import ResourceIndex

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NODE_LABEL = "gang-e2e"
NAME_PREFIX = "gang-e2e"
#: kinds whose pods come from ``spec.template``
WORKLOAD_KINDS = ("Job", "StatefulSet", "Deployment", "ReplicaSet", "DaemonSet")
COSCHEDULING, VOLCANO, NATIVE = "coscheduling", "volcano", "native"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: native PodGroup versions, newest first, with the condition each reports scheduling in
NATIVE_APIS = {
    "scheduling.k8s.io/v1beta1": "PodGroupInitiallyScheduled",
    "scheduling.k8s.io/v1alpha3": "PodGroupInitiallyScheduled",
    "scheduling.k8s.io/v1alpha2": "PodGroupScheduled",
}


@dataclass(frozen=True)
class ExampleGang:
    """One gang of an example: its group object's name, member count and API."""

    name: str
    size: int
    api: str = COSCHEDULING


#: the gangs each fitting example holds
FITTING: dict[str, tuple[ExampleGang, ...]] = {
    "training-job.yaml": (ExampleGang("llm-finetune", 4),),
    "mpi-job.yaml": (ExampleGang("mpi-allreduce", 5),),
    "plain-pods-gang.yaml": (ExampleGang("data-prep", 3),),
    "trainjob-coscheduling.yaml": (ExampleGang("llama-sft", 3),),
    "mpijob-v2.yaml": (ExampleGang("osu-allreduce", 3),),
    "pytorchjob-volcano.yaml": (ExampleGang("mnist-ddp", 3, VOLCANO),),
    "leaderworkerset-volcano.yaml": (
        ExampleGang("vllm-llama-0-6c9f7d4b8", 3, VOLCANO),
        ExampleGang("vllm-llama-1-6c9f7d4b8", 3, VOLCANO),
    ),
    "jobset-native-podgroup.yaml": (ExampleGang("jax-pretrain", 4, NATIVE),),
}
#: examples whose operator creates the pods only once the group has left phase Pending
WAIT_FOR_INQUEUE = ("pytorchjob-volcano.yaml",)
TOO_BIG = ("too-big-gang.yaml", "pretrain-70b", 8)


def claimed_group(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(API, group name) a pod names, read the way each API's scheduler reads it."""
    meta = pod.get("metadata") or {}
    if name := (meta.get("labels") or {}).get(POD_GROUP_LABEL):
        return COSCHEDULING, name
    if name := (meta.get("annotations") or {}).get(VOLCANO_GROUP_ANNOTATION):
        return VOLCANO, name
    if name := ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName"):
        return NATIVE, name
    return None


def node_pool(prefix: str) -> str:
    """The test cluster: 6 nodes x 8 GPUs in 2 zones, 48 GPUs (the too-big gang needs 64)."""
    return f"6:gpu=8,zones=2,prefix={prefix},label:{NODE_LABEL}=true"


def random_suffix() -> str:
    return secrets.token_hex(3)


# --- manifests -----------------------------------------------------------------------------


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def pod_spec_of(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc.get("kind") == "Pod":
        spec: dict[str, Any] = doc.setdefault("spec", {})
        return spec
    if doc.get("kind") in WORKLOAD_KINDS:
        template: dict[str, Any] = doc.setdefault("spec", {}).setdefault("template", {})
        pod_spec: dict[str, Any] = template.setdefault("spec", {})
        return pod_spec
    return None


def pinned(doc: dict[str, Any], node_selector: dict[str, str]) -> dict[str, Any]:
    """A copy of ``doc`` whose pods may only land on nodes with ``node_selector``'s labels."""
    out = copy.deepcopy(doc)
    spec = pod_spec_of(out)
    if spec is not None and node_selector:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **node_selector}
    return out


# --- talking to a cluster ------------------------------------------------------------------


class Kube:
    """Raw REST through a kubernetes-asyncio ApiClient, resolving kinds by discovery."""

    def __init__(self, api_client: Any) -> None:
        self.client = api_client
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        """Answer the decoded JSON body; raise kubernetes-asyncio's ApiException on an error."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        resp = await self.client.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        if resp.status >= 400:  # not raised by the client when the content is not preloaded
            error = ApiException(status=resp.status, reason=resp.reason)
            error.body = await resp.text()
            resp.release()
            raise error
        return await resp.json()

    @staticmethod
    def group_version_path(api_version: str) -> str:
        return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"

    async def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) of a kind, from the server's discovery documents."""
        key = (api_version, kind)
        if key not in self._resources:
            listing = await self.request("GET", self.group_version_path(api_version))
            for r in listing["resources"]:
                if "/" not in r["name"]:
                    self._resources[(api_version, r["kind"])] = (r["name"], r["namespaced"])
        if key not in self._resources:
            raise LookupError(f"the server does not serve {kind} in {api_version}")
        return self._resources[key]

    async def collection_path(self, api_version: str, kind: str, namespace: str | None) -> str:
        plural, namespaced = await self.resource(api_version, kind)
        base = self.group_version_path(api_version)
        if namespaced:
            assert namespace, f"{kind} is namespaced"
            return f"{base}/namespaces/{namespace}/{plural}"
        return f"{base}/{plural}"

    async def create(self, doc: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = doc.get("metadata", {}).get("namespace") or namespace
        path = await self.collection_path(doc["apiVersion"], doc["kind"], ns)
        created: dict[str, Any] = await self.request("POST", path, doc)
        return created

    async def items(self, path: str, **query: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await self.request("GET", path, query=query))["items"]
        return items

    async def pods(self, namespace: str | None = None, **query: Any) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return await self.items(path, **query)

    async def nodes(self) -> list[dict[str, Any]]:
        return await self.items("/api/v1/nodes")

    async def events(self, namespace: str) -> list[dict[str, Any]]:
        return await self.items(f"/api/v1/namespaces/{namespace}/events")

    async def podgroup(
        self, namespace: str, name: str, api_version: str = f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}"
    ) -> dict[str, Any]:
        path = f"{await self.collection_path(api_version, 'PodGroup', namespace)}/{name}"
        found: dict[str, Any] = await self.request("GET", path)
        return found

    async def serves(self, api_version: str, kind: str) -> bool:
        try:
            await self.resource(api_version, kind)
        except (LookupError, ApiException):
            return False
        return True

    async def group_api_version(self, api: str) -> str:
        """The apiVersion a gang API's group objects are read in on this cluster."""
        if api == COSCHEDULING:
            return f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}"
        if api == VOLCANO:
            return VOLCANO_API
        for api_version in NATIVE_APIS:
            if await self.serves(api_version, "PodGroup"):
                return api_version
        raise LookupError("the server serves no native (scheduling.k8s.io) PodGroup")


@dataclass
class Target:
    """Where the scenarios run: a cluster, the nodes they may use, and how long to wait."""

    name: str
    kube: Kube
    nodes: tuple[str, ...]
    node_selector: dict[str, str] = field(default_factory=lambda: {NODE_LABEL: "true"})
    patience: float = 10.0
    namespaces: list[str] = field(default_factory=list)

    async def new_namespace(self) -> str:
        name = f"{NAME_PREFIX}-{random_suffix()}"
        await self.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {NODE_LABEL: "true"}},
            }
        )
        self.namespaces.append(name)
        return name

    async def apply(
        self, example: str, namespace: str, docs: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """Create ``docs`` (by default every document of ``examples/<example>``) in
        ``namespace``, in file order."""
        if docs is None:
            docs = load_documents(EXAMPLES / example)
        return [await self.kube.create(pinned(d, self.node_selector), namespace) for d in docs]


async def eventually(
    check: Callable[[], Awaitable[Any]], within: float, what: str, every: float = 0.05
) -> Any:
    """Poll ``check`` until it answers something truthy; fail with the last answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        answer = await check()
        if answer:
            return answer
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not within {within}s")
        await asyncio.sleep(every)


# --- assertions ----------------------------------------------------------------------------


async def gang_pods(
    target: Target, namespace: str, group: str, api: str = COSCHEDULING
) -> list[dict[str, Any]]:
    if api == COSCHEDULING:
        return await target.kube.pods(namespace, labelSelector=f"{POD_GROUP_LABEL}={group}")
    return [p for p in await target.kube.pods(namespace) if claimed_group(p) == (api, group)]


async def wait_gang_bound(target: Target, namespace: str, gang: ExampleGang) -> None:
    """All members exist and are bound, to the test's nodes only."""

    async def bound() -> bool:
        pods = await gang_pods(target, namespace, gang.name, gang.api)
        return len(pods) == gang.size and all(p["spec"].get("nodeName") for p in pods)

    await eventually(bound, target.patience, f"gang {namespace}/{gang.name} bound whole")
    pods = await gang_pods(target, namespace, gang.name, gang.api)
    assert len(pods) == gang.size, f"{gang.name}: {len(pods)} pods, expected {gang.size}"
    off = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    assert set(off.values()) <= set(target.nodes), (
        f"{gang.name} bound outside the test nodes: {off}"
    )


def _conditions(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or [] if "type" in c}


async def assert_podgroup_scheduled(target: Target, namespace: str, gang: ExampleGang) -> None:
    """The group object says the gang is scheduled, in its own API's words."""
    api_version = await target.kube.group_api_version(gang.api)

    async def reported() -> dict[str, Any] | None:
        obj = await target.kube.podgroup(namespace, gang.name, api_version)
        status = obj.get("status") or {}
        conditions = _conditions(status)
        if gang.api == COSCHEDULING:
            scheduled = conditions.get("Scheduled") or {}
            ok = (
                status.get("phase") in ("Scheduled", "Running")
                and status.get("scheduled") == gang.size
                and bool(status.get("scheduleStartTime"))
                and scheduled.get("status") == "True"
            )
        elif gang.api == VOLCANO:
            ok = (
                status.get("phase") == "Running"
                and (conditions.get("Scheduled") or {}).get("status") == "True"
            )
        else:
            condition = conditions.get(NATIVE_APIS[api_version]) or {}
            ok = condition.get("status") == "True" and condition.get("reason") == "Scheduled"
        return status if ok else None

    await eventually(reported, target.patience, f"{gang.api} group {gang.name} reports Scheduled")


async def assert_scheduled_events(target: Target, namespace: str, gang: ExampleGang) -> None:
    """Every bound member has kube-scheduler's ``Scheduled`` Event naming its node."""
    pods = {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in await gang_pods(target, namespace, gang.name, gang.api)
    }

    async def all_told() -> bool:
        told = {
            e["involvedObject"]["name"]: e["message"]
            for e in await target.kube.events(namespace)
            if e["reason"] == "Scheduled" and e["involvedObject"].get("kind") == "Pod"
        }
        return all(
            told.get(name) == f"Successfully assigned {namespace}/{name} to {node}"
            for name, node in pods.items()
        )

    await eventually(all_told, target.patience, f"Scheduled events for every pod of {gang.name}")


async def assert_not_overcommitted(target: Target) -> None:
    """Sum the requests of every bound, unfinished pod per test node against allocatable."""
    index = ResourceIndex()
    nodes = {n["metadata"]["name"]: n for n in await target.kube.nodes()}
    used: dict[str, np.ndarray] = {}
    for raw in await target.kube.pods():
        info = parse_pod(raw)
        if not info.assigned or info.terminal or info.node_name not in target.nodes:
            continue
        vec = index.vector(info.requests)
        used[info.node_name] = (
            index.fit(used.get(info.node_name, np.zeros(0, dtype=np.int64))) + vec
        )
    for name, total in used.items():
        alloc = nodes[name]["status"]["allocatable"]
        cap = index.fit(index.vector({k: resource_units(k, v) for k, v in alloc.items()}))
        total = index.fit(total)
        over = {
            index.names[i]: (int(total[i]), int(cap[i]))
            for i in range(len(total))
            if total[i] > cap[i]
        }
        assert not over, f"node {name} over-committed (requested, allocatable): {over}"


# --- scenarios -----------------------------------------------------------------------------


async def example_fits(target: Target, example: str) -> str:
    """Apply a fitting example into a fresh namespace: each gang binds whole, and says so.
    Returns the namespace, for checks of where the pods went."""
    gangs = FITTING[example]
    for api in {g.api for g in gangs}:
        try:
            await target.kube.group_api_version(api)
        except LookupError as err:
            if target.name == "sim":  # the simulator serves every gang API
                raise
            pytest.skip(f"{example}: {err} (needs Kubernetes 1.36+ with GenericWorkload)")
    namespace = await target.new_namespace()
    docs = load_documents(EXAMPLES / example)
    if example in WAIT_FOR_INQUEUE:  # what the operator does: the group, Inqueue, then pods
        [gang] = gangs
        await target.apply(example, namespace, docs[:1])
        await wait_inqueue(target, namespace, gang)
        docs = docs[1:]
    await target.apply(example, namespace, docs)
    for gang in gangs:
        await wait_gang_bound(target, namespace, gang)
    for gang in gangs:
        await assert_podgroup_scheduled(target, namespace, gang)
        await assert_scheduled_events(target, namespace, gang)
    await assert_not_overcommitted(target)
    return namespace


async def wait_inqueue(target: Target, namespace: str, gang: ExampleGang) -> None:
    """A Volcano group with no pod yet moves to Inqueue once its minResources could fit."""

    async def inqueue() -> bool:
        obj = await target.kube.podgroup(namespace, gang.name, VOLCANO_API)
        return (obj.get("status") or {}).get("phase") == "Inqueue"

    await eventually(inqueue, target.patience, f"Volcano group {gang.name} Inqueue, no pods yet")
    assert not await gang_pods(target, namespace, gang.name, gang.api)


async def too_big_waits_and_holds_nothing(target: Target) -> None:
    """The too-big gang: reported as never fitting, with the reason; nothing bound or held."""
    example, group, size = TOO_BIG
    namespace = await target.new_namespace()
    await target.apply(example, namespace)

    async def reported() -> list[dict[str, Any]]:
        return [
            e
            for e in await target.kube.events(namespace)
            if e["reason"] == "FailedScheduling" and e["involvedObject"].get("kind") == "Pod"
        ]

    failures = await eventually(reported, target.patience, f"FailedScheduling events for {group}")
    message = failures[0]["message"]
    # it can never fit (48 GPUs, it needs 64), and says so, distinct from "not now"
    assert message.startswith(
        f"gang {namespace}/{group} can never fit this cluster, even with every node empty: "
        f"needs {size} more member(s) placed together"
    ), message
    assert "Insufficient nvidia.com/gpu" in message, message
    assert failures[0]["type"] == "Warning"

    async def unschedulable() -> dict[str, Any] | None:
        status = (await target.kube.podgroup(namespace, group)).get("status") or {}
        conditions = _conditions(status)
        scheduled = conditions.get("Scheduled") or {}
        ok = status.get("phase") == "Scheduling" and scheduled.get("reason") == "NeverFits"
        return status if ok and "Unschedulable" in conditions else None

    status = await eventually(unschedulable, target.patience, f"PodGroup {group} Unschedulable")
    conditions = _conditions(status)
    assert status.get("scheduled", 0) == 0 and conditions["Scheduled"]["status"] == "False"
    assert "Insufficient nvidia.com/gpu" in conditions["Scheduled"]["message"], status
    # the phase reads "in progress": the condition says it will not run as the cluster is
    never = conditions["Unschedulable"]
    assert (never["status"], never["reason"]) == ("True", "NeverFits"), never
    assert never["message"].startswith("will not run on the cluster as it is, "), never
    pods = await gang_pods(target, namespace, group)
    assert len(pods) == size
    assert not [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")], "bound"

    # nothing held: a gang that fits in what is left binds while the big one keeps waiting
    await example_fits(target, "training-job.yaml")
    pods = await gang_pods(target, namespace, group)
    assert not [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")], "bound"
