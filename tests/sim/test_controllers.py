"""The Job and StatefulSet controller stand-ins, observed over HTTP with kubernetes-asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from gang.sim.cluster import SimCluster
from gang.sim.controllers import COMPLETION_INDEX
from gang.sim.kubelet import EXIT_CODE, RUN_SECONDS, KubeletConfig
from tests.conftest import Raw

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
NS = "default"


class Kube:
    def __init__(self, api_client: Any) -> None:
        self.core: Any = k8s.CoreV1Api(api_client)
        self.batch: Any = k8s.BatchV1Api(api_client)
        self.apps: Any = k8s.AppsV1Api(api_client)
        self.scheduling: Any = k8s.SchedulingV1Api(api_client)

    async def pods(self, ns: str = NS) -> dict[str, dict[str, Any]]:
        resp = await self.core.list_namespaced_pod(ns, _preload_content=False)
        return {p["metadata"]["name"]: p for p in (await resp.json())["items"]}

    async def job(self, name: str) -> dict[str, Any]:
        resp = await self.batch.read_namespaced_job(name, NS, _preload_content=False)
        result: dict[str, Any] = await resp.json()
        return result

    async def sts(self, name: str) -> dict[str, Any]:
        resp = await self.apps.read_namespaced_stateful_set(name, NS, _preload_content=False)
        result: dict[str, Any] = await resp.json()
        return result

    async def events(self) -> list[dict[str, Any]]:
        resp = await self.core.list_namespaced_event(NS, _preload_content=False)
        items: list[dict[str, Any]] = (await resp.json())["items"]
        return items

    async def bind_all(self, node: str = "node-00000") -> None:
        for name, pod in (await self.pods()).items():
            if not pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
                with contextlib.suppress(ApiException):
                    await self.core.create_namespaced_pod_binding(
                        name,
                        NS,
                        {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
                        _preload_content=False,
                    )


@pytest.fixture
async def kube() -> AsyncIterator[Kube]:
    async with SimCluster("2:gpu=8") as cluster, cluster.api_client() as api_client:
        yield Kube(api_client)


@contextlib.asynccontextmanager
async def running_kube() -> AsyncIterator[Kube]:
    """A cluster with the kubelet stand-in, and a stand-in scheduler binding every pod."""
    config = KubeletConfig(start_delay=0.02, termination_delay=0.02)
    async with SimCluster("2:gpu=8", kubelet=config) as cluster, cluster.api_client() as client:
        kube = Kube(client)

        async def binder() -> None:
            while True:
                await kube.bind_all()
                await asyncio.sleep(0.02)

        task = asyncio.create_task(binder())
        try:
            yield kube
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def until(check: Callable[[], Awaitable[bool]], within: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        assert loop.time() < deadline, f"not reached within {within}s: {check.__name__}"
        await asyncio.sleep(0.02)


def template(
    group: str | None = "train",
    restart: str = "Never",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    all_labels = {**({GROUP_LABEL: group} if group else {}), **(labels or {})}
    meta: dict[str, Any] = {"labels": all_labels}
    if annotations:
        meta["annotations"] = annotations
    return {
        "metadata": meta,
        "spec": {
            "schedulerName": "gang-scheduler",
            "restartPolicy": restart,
            "containers": [
                {
                    "name": "main",
                    "image": "pytorch-trainer:2.4",
                    "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}},
                }
            ],
            **spec,
        },
    }


def job(name: str, *, indexed: bool = True, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"template": template(), **spec}
    if indexed:
        body["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": body}


def statefulset(name: str, replicas: int, policy: str = "Parallel") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": name}},
            "template": template("mpi", restart="Always", labels={"app": name}),
        },
    }


# --- Jobs ----------------------------------------------------------------------------------


async def test_indexed_job_creates_one_pod_per_index_like_the_real_controller(kube: Kube) -> None:
    created = await kube.batch.create_namespaced_job(
        NS, job("train", completions=4, parallelism=4), _preload_content=False
    )
    body = await created.json()
    uid = body["metadata"]["uid"]
    # what the apiserver did to the Job on the way in
    assert body["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert body["spec"]["backoffLimit"] == 6 and body["spec"]["suspend"] is False
    assert body["status"] == {} and body["metadata"]["generation"] == 1

    async def four_pods() -> bool:
        return len(await kube.pods()) == 4

    await until(four_pods)
    pods = await kube.pods()
    by_index = {}
    for name, pod in pods.items():
        match = re.fullmatch(r"train-(\d)-[a-z0-9]{5}", name)
        assert match, name
        index = match.group(1)
        by_index[index] = pod
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["labels"] == {
            GROUP_LABEL: "train",
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": "train",
            "controller-uid": uid,
            "job-name": "train",
            COMPLETION_INDEX: index,
        }
        assert meta["annotations"] == {COMPLETION_INDEX: index}
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "train",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert spec["schedulerName"] == "gang-scheduler"
        assert spec["restartPolicy"] == "Never"
        assert spec["hostname"] == f"train-{index}"
        # created through the pod create path: admission defaulted requests from limits
        container = spec["containers"][0]
        assert container["resources"]["requests"] == {"cpu": "1", "nvidia.com/gpu": "2"}
        assert container["env"] == [
            {
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {
                    "fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']",
                    }
                },
            }
        ]
        assert pod["status"]["qosClass"] == "Burstable"
    assert sorted(by_index) == ["0", "1", "2", "3"]

    async def status_active() -> bool:
        return bool((await kube.job("train"))["status"].get("active") == 4)

    await until(status_active)
    status = (await kube.job("train"))["status"]
    assert status["ready"] == 0 and status["terminating"] == 0 and "startTime" in status
    created_events = [e for e in await kube.events() if e["reason"] == "SuccessfulCreate"]
    assert sorted(e["message"] for e in created_events) == sorted(f"Created pod: {n}" for n in pods)
    assert all(e["involvedObject"]["kind"] == "Job" for e in created_events)


async def test_non_indexed_job_runs_min_of_parallelism_and_completions(kube: Kube) -> None:
    await kube.batch.create_namespaced_job(
        NS, job("work", indexed=False, completions=2, parallelism=5)
    )

    async def two_pods() -> bool:
        return len(await kube.pods()) == 2

    await until(two_pods)
    await asyncio.sleep(0.1)  # and no more
    pods = await kube.pods()
    assert len(pods) == 2
    for name, pod in pods.items():
        assert re.fullmatch(r"work-[a-z0-9]{5}", name), name
        assert COMPLETION_INDEX not in pod["metadata"]["labels"]
        assert pod["metadata"]["labels"]["job-name"] == "work"
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "work"
        assert "hostname" not in pod["spec"]
        assert pod["spec"]["schedulerName"] == "gang-scheduler"


async def test_job_completes_when_every_index_succeeded() -> None:
    async with running_kube() as kube:
        body = job("done", completions=3, parallelism=3)
        body["spec"]["template"]["metadata"]["annotations"] = {RUN_SECONDS: "0.05"}
        await kube.batch.create_namespaced_job(NS, body)

        async def complete() -> bool:
            conditions = (await kube.job("done"))["status"].get("conditions") or []
            return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

        await until(complete)
        status = (await kube.job("done"))["status"]
        assert status["succeeded"] == 3 and status["completedIndexes"] == "0-2"
        assert "active" not in status and "completionTime" in status
        await asyncio.sleep(0.1)
        assert len(await kube.pods()) == 3  # nothing replaces a succeeded pod


async def test_failed_pods_are_replaced_up_to_the_backoff_limit() -> None:
    async with running_kube() as kube:
        body = job("flaky", indexed=False, completions=1, backoffLimit=2)
        body["spec"]["template"]["metadata"]["annotations"] = {
            RUN_SECONDS: "0.02",
            EXIT_CODE: "1",
        }
        await kube.batch.create_namespaced_job(NS, body)

        async def failed() -> bool:
            conditions = (await kube.job("flaky"))["status"].get("conditions") or []
            return any(c["type"] == "Failed" for c in conditions)

        await until(failed)
        status = (await kube.job("flaky"))["status"]
        assert status["failed"] == 3  # the first pod and two replacements
        [condition] = status["conditions"]
        assert condition["reason"] == "BackoffLimitExceeded"
        await asyncio.sleep(0.1)
        pods = await kube.pods()
        assert len(pods) == 3
        assert {p["status"]["phase"] for p in pods.values()} == {"Failed"}


async def test_suspended_job_creates_nothing_until_resumed(kube: Kube) -> None:
    await kube.batch.create_namespaced_job(
        NS, job("later", completions=2, parallelism=2, suspend=True)
    )
    await asyncio.sleep(0.1)
    assert await kube.pods() == {}
    await kube.batch.patch_namespaced_job("later", NS, {"spec": {"suspend": False}})

    async def two_pods() -> bool:
        return len(await kube.pods()) == 2

    await until(two_pods)


async def test_refused_pod_creation_is_reported_and_retried(kube: Kube) -> None:
    body = job("prio", completions=1)
    body["spec"]["template"]["spec"]["priorityClassName"] = "training"
    await kube.batch.create_namespaced_job(NS, body)

    async def reported() -> bool:
        return any(e["reason"] == "FailedCreate" for e in await kube.events())

    await until(reported)
    failure = next(e for e in await kube.events() if e["reason"] == "FailedCreate")
    assert failure["type"] == "Warning"
    assert "no PriorityClass with name training was found" in failure["message"]
    assert await kube.pods() == {}
    await kube.scheduling.create_priority_class({"metadata": {"name": "training"}, "value": 100})

    async def created() -> bool:
        return len(await kube.pods()) == 1

    await until(created, within=4)  # the first retry comes after 1 s


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            {"restartPolicy": "Always"},
            "spec.template.spec.restartPolicy",
            'Unsupported value: "Always": supported values: "OnFailure", "Never"',
        ),
        (None, "spec.completions", "Required value: when completion mode is Indexed"),
    ],
)
async def test_invalid_jobs_are_refused(
    raw: Raw, change: dict[str, Any] | None, field: str, message: str
) -> None:
    body = job("bad", completions=None if change is None else 1)
    if change is None:
        del body["spec"]["completions"]
        body["spec"]["parallelism"] = 2
    else:
        body["spec"]["template"]["spec"].update(change)
    status, answer, _ = await raw.post("/apis/batch/v1/namespaces/default/jobs", body)
    assert status == 422, answer
    assert answer["reason"] == "Invalid"
    assert answer["message"] == f'Job.batch "bad" is invalid: {field}: {message}'


# --- StatefulSets --------------------------------------------------------------------------


async def test_parallel_statefulset_creates_every_ordinal_at_once(kube: Kube) -> None:
    created = await kube.apps.create_namespaced_stateful_set(
        NS, statefulset("worker", 4), _preload_content=False
    )
    uid = (await created.json())["metadata"]["uid"]

    async def status_four() -> bool:
        return bool((await kube.sts("worker"))["status"].get("replicas") == 4)

    await until(status_four)
    pods = await kube.pods()
    assert sorted(pods) == [f"worker-{i}" for i in range(4)]
    for i in range(4):
        pod = pods[f"worker-{i}"]
        labels = pod["metadata"]["labels"]
        assert labels[GROUP_LABEL] == "mpi" and labels["app"] == "worker"
        assert labels["statefulset.kubernetes.io/pod-name"] == f"worker-{i}"
        assert labels["apps.kubernetes.io/pod-index"] == str(i)
        assert labels["controller-revision-hash"].startswith("worker-")
        assert pod["spec"]["hostname"] == f"worker-{i}"
        assert pod["spec"]["subdomain"] == "worker"
        assert pod["spec"]["schedulerName"] == "gang-scheduler"
        [ref] = pod["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["apiVersion"], ref["uid"]) == ("StatefulSet", "apps/v1", uid)
    status = (await kube.sts("worker"))["status"]
    assert status["observedGeneration"] == 1
    assert status["currentRevision"] == status["updateRevision"]
    assert status["availableReplicas"] == 0  # nothing runs without a kubelet

    await kube.apps.patch_namespaced_stateful_set("worker", NS, {"spec": {"replicas": 2}})

    async def scaled_down() -> bool:
        return sorted(await kube.pods()) == ["worker-0", "worker-1"]

    await until(scaled_down)

    async def status_two() -> bool:
        return bool((await kube.sts("worker"))["status"].get("replicas") == 2)

    await until(status_two)


async def test_statefulset_ordinals_start_where_spec_ordinals_says(kube: Kube) -> None:
    """``spec.ordinals.start`` (GA in 1.31): LeaderWorkerSet's worker sets number from 1."""
    body = statefulset("group-0", 3)
    body["spec"]["ordinals"] = {"start": 1}
    await kube.apps.create_namespaced_stateful_set(NS, body)

    async def three() -> bool:
        return bool((await kube.sts("group-0"))["status"].get("replicas") == 3)

    await until(three)
    pods = await kube.pods()
    assert sorted(pods) == ["group-0-1", "group-0-2", "group-0-3"]
    assert pods["group-0-1"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"

    await kube.apps.patch_namespaced_stateful_set("group-0", NS, {"spec": {"replicas": 1}})

    async def scaled_down() -> bool:
        return sorted(await kube.pods()) == ["group-0-1"]

    await until(scaled_down)


async def test_ordered_ready_statefulset_waits_for_each_pod() -> None:
    """The default policy creates ordinal N+1 only once N runs — a gang must use Parallel."""
    async with SimCluster("2") as cluster, cluster.api_client() as api_client:
        kube = Kube(api_client)
        await kube.apps.create_namespaced_stateful_set(
            NS, statefulset("ordered", 3, "OrderedReady")
        )
        await asyncio.sleep(0.2)
        assert sorted(await kube.pods()) == ["ordered-0"]
    async with running_kube() as kube:
        await kube.apps.create_namespaced_stateful_set(
            NS, statefulset("ordered", 3, "OrderedReady")
        )

        async def all_ready() -> bool:
            return bool((await kube.sts("ordered"))["status"].get("readyReplicas") == 3)

        await until(all_ready)


async def test_finished_statefulset_pods_are_replaced() -> None:
    async with running_kube() as kube:
        body = statefulset("svc", 1)
        body["spec"]["template"]["metadata"]["annotations"] = {RUN_SECONDS: "0.05"}
        await kube.apps.create_namespaced_stateful_set(NS, body)
        first = None

        async def replaced() -> bool:
            nonlocal first
            pod = (await kube.pods()).get("svc-0")
            if pod is None:
                return False
            if first is None:
                first = pod["metadata"]["uid"]
            return bool(pod["metadata"]["uid"] != first)

        await until(replaced)


async def test_statefulset_selector_must_match_the_template(raw: Raw) -> None:
    body = statefulset("odd", 1)
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    status, answer, _ = await raw.post("/apis/apps/v1/namespaces/default/statefulsets", body)
    assert status == 422, answer
    assert "`selector` does not match template `labels`" in answer["message"]


# --- garbage collection, services, switching off ---------------------------------------------


async def test_deleting_the_owner_deletes_its_pods(kube: Kube) -> None:
    await kube.batch.create_namespaced_job(NS, job("train", completions=2, parallelism=2))
    await kube.apps.create_namespaced_stateful_set(NS, statefulset("worker", 2))

    async def four() -> bool:
        return len(await kube.pods()) == 4

    await until(four)
    await kube.core.create_namespaced_pod(
        NS, {"metadata": {"name": "bystander"}, "spec": template(None)["spec"]}
    )
    await kube.bind_all()  # a bound pod is deleted gracefully: it stays Terminating
    await kube.batch.delete_namespaced_job("train", NS, propagation_policy="Background")
    await kube.apps.delete_namespaced_stateful_set("worker", NS)

    async def only_terminating_left() -> bool:
        pods = await kube.pods()
        owned = [p for n, p in pods.items() if n != "bystander"]
        return "bystander" in pods and all(p["metadata"].get("deletionTimestamp") for p in owned)

    await until(only_terminating_left)
    assert not (await kube.pods())["bystander"]["metadata"].get("deletionTimestamp")


async def test_unbound_owned_pods_go_at_once(kube: Kube) -> None:
    await kube.batch.create_namespaced_job(NS, job("train", completions=3, parallelism=3))

    async def three() -> bool:
        return len(await kube.pods()) == 3

    await until(three)
    await kube.batch.delete_namespaced_job("train", NS)

    async def none() -> bool:
        return await kube.pods() == {}

    await until(none)


async def test_services_are_served_with_defaults(kube: Kube) -> None:
    headless = {
        "metadata": {"name": "worker"},
        "spec": {"clusterIP": "None", "selector": {"app": "worker"}},
    }
    plain = {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
    await kube.core.create_namespaced_service(NS, headless)
    await kube.core.create_namespaced_service(NS, plain)
    got = await kube.core.read_namespaced_service("worker", NS)
    assert got.spec.cluster_ip == "None" and got.spec.type == "ClusterIP"
    web = await kube.core.read_namespaced_service("web", NS)
    assert web.spec.cluster_ip.startswith("10.96.")
    assert web.spec.ports[0].protocol == "TCP" and web.spec.ports[0].target_port == 80


async def test_controllers_can_be_switched_off() -> None:
    async with (
        SimCluster("1", controllers=False) as cluster,
        cluster.api_client() as api_client,
    ):
        kube = Kube(api_client)
        await kube.batch.create_namespaced_job(NS, job("inert", completions=2))
        await kube.apps.create_namespaced_stateful_set(NS, statefulset("inert", 2))
        await asyncio.sleep(0.1)
        assert await kube.pods() == {}
        assert (await kube.job("inert"))["status"] == {}
