"""Pod admission as a real kube-apiserver does it: defaulting, priority, QoS, validation.

A scheduler reads pods as the server stored them, not as their author wrote them, so these
tests compare against what a real server returns (shared/k8s-api/pod-bound.json is a whole pod
recorded after a binding) and against its exact refusals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s

from tests.conftest import Raw, pod

PODS = "/api/v1/namespaces/default/pods"
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
RECORDED = json.loads(
    (Path(__file__).resolve().parent.parent / "fixtures" / "pod-bound.json").read_text()
)
NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
UNREACHABLE = {
    "key": "node.kubernetes.io/unreachable",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
QUANTITY_REGEX_MESSAGE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def bare_pod(name: str, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A pod with exactly the containers given (default: one without resources)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": list(containers) or [{"name": "c", "image": "busybox:1.36"}],
            **spec,
        },
    }


def container(name: str = "c", **resources: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", "resources": resources}


async def create(raw: Raw, body: dict[str, Any], path: str = PODS) -> dict[str, Any]:
    status, obj, _ = await raw.post(path, body)
    assert status == 201, obj
    result: dict[str, Any] = obj
    return result


async def test_requests_are_defaulted_from_limits(raw: Raw) -> None:
    body = bare_pod(
        "p",
        container(
            limits={"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"},
            requests={"cpu": "500m"},
        ),
        initContainers=[container("init", limits={"cpu": "1", "memory": "64Mi"})],
    )
    obj = await create(raw, body)
    [main] = obj["spec"]["containers"]
    assert main["resources"]["limits"] == {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}
    # a request given stays; each missing one is the limit
    assert main["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}
    [init] = obj["spec"]["initContainers"]
    assert init["resources"]["requests"] == {"cpu": "1", "memory": "64Mi"}
    assert init["terminationMessagePath"] == "/dev/termination-log"
    # requests without limits are left alone
    obj = await create(raw, bare_pod("q", container(requests={"cpu": "1"})))
    assert obj["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


@pytest.mark.parametrize(
    ("containers", "qos"),
    [
        ([container(limits={"cpu": "1", "memory": "1Gi"})], "Guaranteed"),
        (
            [
                container(
                    limits={"cpu": "1", "memory": "1Gi"}, requests={"cpu": "1", "memory": "1Gi"}
                ),
                container("d", limits={"cpu": "250m", "memory": "64Mi", "nvidia.com/gpu": "2"}),
            ],
            "Guaranteed",
        ),
        ([container(requests={"cpu": "1"})], "Burstable"),
        ([container(limits={"cpu": "1"})], "Burstable"),  # no memory limit
        ([container(limits={"cpu": "2", "memory": "1Gi"}, requests={"cpu": "1"})], "Burstable"),
        (
            [container(limits={"cpu": "1", "memory": "1Gi"}), container("d")],
            "Burstable",  # one container without resources spoils Guaranteed
        ),
        ([container()], "BestEffort"),
        ([{"name": "c", "image": "busybox:1.36"}], "BestEffort"),
        ([container(limits={"nvidia.com/gpu": "1"})], "BestEffort"),  # only cpu/memory count
    ],
)
async def test_status_is_reset_on_create_with_the_qos_class(
    raw: Raw, containers: list[dict[str, Any]], qos: str
) -> None:
    body = bare_pod("p", *containers)
    body["status"] = {"phase": "Running", "podIP": "10.0.0.9", "conditions": [{"type": "Ready"}]}
    obj = await create(raw, body)
    assert obj["status"] == {"phase": "Pending", "qosClass": qos}
    _, stored, _ = await raw.get(f"{PODS}/p")
    assert stored["status"] == {"phase": "Pending", "qosClass": qos}


async def test_scheduler_name_defaults_to_default_scheduler(raw: Raw) -> None:
    obj = await create(raw, bare_pod("p"))
    assert obj["spec"]["schedulerName"] == "default-scheduler"
    obj = await create(raw, pod("q", scheduler="gang-scheduler"))
    assert obj["spec"]["schedulerName"] == "gang-scheduler"


async def test_priority_is_resolved_from_the_priority_class(raw: Raw) -> None:
    # no class at all: priority 0, and no class name is invented
    obj = await create(raw, bare_pod("zero"))
    assert obj["spec"]["priority"] == 0
    assert obj["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert "priorityClassName" not in obj["spec"]
    await create(
        raw,
        {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"},
        PCS,
    )
    obj = await create(raw, bare_pod("p", priorityClassName="high"))
    assert obj["spec"]["priority"] == 1000
    assert obj["spec"]["priorityClassName"] == "high"
    assert obj["spec"]["preemptionPolicy"] == "Never"  # taken from the class


async def test_unknown_priority_class_is_403(raw: Raw) -> None:
    status, body, _ = await raw.post(PODS, bare_pod("x", priorityClassName="nope"))
    assert status == 403
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "x" is forbidden: no PriorityClass with name nope was found',
        "reason": "Forbidden",
        "details": {"name": "x", "kind": "pods"},
        "code": 403,
    }
    assert (await raw.get(f"{PODS}/x"))[0] == 404


async def test_priority_value_in_the_pod_must_match_the_class(raw: Raw) -> None:
    status, body, _ = await raw.post(PODS, bare_pod("x", priority=5))
    assert status == 403
    assert body["message"] == (
        'pods "x" is forbidden: the integer value of priority (5) must not be provided in pod '
        "spec; priority admission controller computed 0 from the given PriorityClass name"
    )
    # the value the class gives is accepted
    obj = await create(raw, bare_pod("y", priority=0))
    assert obj["spec"]["priority"] == 0


async def test_global_default_class_applies_when_no_class_is_named(raw: Raw) -> None:
    await create(
        raw, {"metadata": {"name": "batch-default"}, "value": 50, "globalDefault": True}, PCS
    )
    obj = await create(raw, bare_pod("p"))
    assert obj["spec"]["priorityClassName"] == "batch-default"
    assert obj["spec"]["priority"] == 50
    # a named class still wins
    await create(raw, {"metadata": {"name": "urgent"}, "value": 900}, PCS)
    obj = await create(raw, bare_pod("q", priorityClassName="urgent"))
    assert (obj["spec"]["priorityClassName"], obj["spec"]["priority"]) == ("urgent", 900)


async def test_system_cluster_critical_exists(raw: Raw, client: Any) -> None:
    scheduling = k8s.SchedulingV1Api(client)
    pc = await scheduling.read_priority_class("system-cluster-critical")
    assert pc.value == 2000000000
    assert pc.preemption_policy == "PreemptLowerPriority"
    node_critical = await scheduling.read_priority_class("system-node-critical")
    assert node_critical.value == 2000001000
    obj = await create(
        raw,
        bare_pod("dns", priorityClassName="system-cluster-critical"),
        "/api/v1/namespaces/kube-system/pods",
    )
    assert obj["spec"]["priority"] == 2000000000


async def test_defaults_match_a_pod_recorded_from_a_real_server(raw: Raw) -> None:
    """Write the recorded pod as its author did, bind it, and compare with the recording."""
    recorded = json.loads(json.dumps(RECORDED))
    await create(raw, {"metadata": {"name": "bench"}}, "/api/v1/namespaces")
    authored = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "g0000-000", "labels": recorded["metadata"]["labels"]},
        "spec": {
            "schedulerName": "cosched",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "pause:3",
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                }
            ],
        },
    }
    pods = "/api/v1/namespaces/bench/pods"
    await create(raw, authored, pods)
    node = recorded["spec"]["nodeName"]
    status, _, _ = await raw.post(
        f"{pods}/g0000-000/binding",
        {"metadata": {"name": "g0000-000"}, "target": {"kind": "Node", "name": node}},
    )
    assert status == 201
    _, stored, _ = await raw.get(f"{pods}/g0000-000")
    assert stored["spec"] == recorded["spec"]
    assert stored["status"]["phase"] == recorded["status"]["phase"] == "Pending"
    assert stored["status"]["qosClass"] == recorded["status"]["qosClass"]
    [cond] = stored["status"]["conditions"]
    [want] = recorded["status"]["conditions"]
    assert cond.keys() == want.keys()
    assert {k: cond[k] for k in ("type", "status", "lastProbeTime")} == {
        k: want[k] for k in ("type", "status", "lastProbeTime")
    }
    assert stored["status"].keys() == recorded["status"].keys()
    assert stored["metadata"].keys() == recorded["metadata"].keys()
    assert stored["metadata"]["labels"] == recorded["metadata"]["labels"]


async def test_default_tolerations_and_pull_policies(raw: Raw) -> None:
    obj = await create(raw, bare_pod("p"))
    assert obj["spec"]["tolerations"] == [NOT_READY, UNREACHABLE]
    for key in ("restartPolicy", "dnsPolicy", "enableServiceLinks", "securityContext"):
        assert key in obj["spec"]
    assert (obj["spec"]["restartPolicy"], obj["spec"]["dnsPolicy"]) == ("Always", "ClusterFirst")
    assert obj["spec"]["securityContext"] == {} and obj["spec"]["enableServiceLinks"] is True
    assert obj["spec"]["terminationGracePeriodSeconds"] == 30
    # a toleration of its own for one of the taints: only the other default is added
    own = {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 5,
    }
    obj = await create(raw, bare_pod("q", tolerations=[own]))
    assert obj["spec"]["tolerations"] == [own, UNREACHABLE]
    # tolerating every taint (empty key, Exists): nothing to add
    everything = {"operator": "Exists"}
    obj = await create(raw, bare_pod("r", tolerations=[everything]))
    assert obj["spec"]["tolerations"] == [everything]
    # an unrelated NoSchedule toleration does not count
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    obj = await create(raw, bare_pod("s", tolerations=[gpu]))
    assert obj["spec"]["tolerations"] == [gpu, NOT_READY, UNREACHABLE]
    # imagePullPolicy: Always for :latest or no tag, else IfNotPresent
    images = {
        "a": "busybox",
        "b": "busybox:latest",
        "c": "busybox:1.36",
        "d": "localhost:5000/team/img",
        "e": "localhost:5000/team/img:v2",
        "f": "busybox@sha256:" + "0" * 64,
    }
    containers = [{"name": n, "image": i} for n, i in images.items()]
    obj = await create(raw, bare_pod("t", *containers))
    policies = {c["name"]: c["imagePullPolicy"] for c in obj["spec"]["containers"]}
    assert policies == {
        "a": "Always",
        "b": "Always",
        "c": "IfNotPresent",
        "d": "Always",
        "e": "IfNotPresent",
        "f": "IfNotPresent",
    }
    # a policy given is kept
    obj = await create(
        raw, bare_pod("u", {"name": "c", "image": "busybox", "imagePullPolicy": "Never"})
    )
    assert obj["spec"]["containers"][0]["imagePullPolicy"] == "Never"


@pytest.mark.parametrize("bad", ["1.5.5", "abc", "1Gb", ""])
@pytest.mark.parametrize("where", ["limits", "requests"])
async def test_unparsable_quantity_is_400(raw: Raw, bad: str, where: str) -> None:
    body = bare_pod("p", container(**{where: {"cpu": bad}}))
    status, err, _ = await raw.post(PODS, body)
    assert status == 400
    assert err == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'Pod in version "v1" cannot be handled as a Pod: {QUANTITY_REGEX_MESSAGE}',
        "reason": "BadRequest",
        "code": 400,
    }
    assert (await raw.get(f"{PODS}/p"))[0] == 404


async def test_negative_quantity_is_422(raw: Raw) -> None:
    status, err, _ = await raw.post(PODS, bare_pod("p", container(requests={"cpu": "-1"})))
    assert status == 422
    cause = 'Invalid value: "-1": must be greater than or equal to 0'
    assert err["reason"] == "Invalid"
    assert (
        err["message"] == f'Pod "p" is invalid: spec.containers[0].resources.requests[cpu]: {cause}'
    )
    assert err["details"] == {
        "name": "p",
        "kind": "Pod",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": cause,
                "field": "spec.containers[0].resources.requests[cpu]",
            }
        ],
    }


async def test_requests_above_limits_are_422(raw: Raw) -> None:
    body = bare_pod("p", container(limits={"cpu": "1"}, requests={"cpu": "2"}))
    status, err, _ = await raw.post(PODS, body)
    assert status == 422 and err["reason"] == "Invalid"
    assert err["message"].startswith('Pod "p" is invalid: spec.containers[0].resources.requests')
    assert "must be less than or equal to cpu limit" in err["message"]
    assert (await raw.get(f"{PODS}/p"))[0] == 404


async def test_missing_containers_is_422(raw: Raw) -> None:
    for spec in ({"containers": []}, {}):
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
        status, err, _ = await raw.post(PODS, body)
        assert status == 422
        assert err == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'Pod "p" is invalid: spec.containers: Required value',
            "reason": "Invalid",
            "details": {
                "name": "p",
                "kind": "Pod",
                "causes": [
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value",
                        "field": "spec.containers",
                    }
                ],
            },
            "code": 422,
        }
