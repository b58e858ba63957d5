"""Bad pods: refused at the door where a real apiserver refuses them, reported where they get in.

Malformed or negative quantities never reach a scheduler on a real cluster: admission answers
400 (unparsable, with the apiserver's very message) or 422 (negative, naming the field), and the
simulator does the same. Fields the simulator does not type-check (a real apiserver would) and
objects stored before validation existed do reach the scheduler; each such pod of ours gets a
``FailedScheduling`` Warning naming the field, and every other pod keeps being scheduled.
"""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest

from gang.models.quantity import FORMAT_MESSAGE
from gang.sim.cluster import SimCluster
from tests.badinput.conftest import assert_not_overcommitted, recording_logs, scheduler_on
from tests.scheduler.conftest import Api, eventually, gang_pod

PODS = "/api/v1/namespaces/default/pods"


def with_resources(name: str, **resources: Any) -> dict[str, Any]:
    pod = gang_pod(name, None)
    pod["spec"]["containers"][0]["resources"] = resources
    return pod


def with_spec(name: str, **spec: Any) -> dict[str, Any]:
    pod = gang_pod(name, None)
    pod["spec"].update(spec)
    return pod


#: name → (pod, HTTP status, fragments of the Status message)
REFUSED: dict[str, tuple[dict[str, Any], int, tuple[str, ...]]] = {
    "req-unparsable": (
        with_resources("a", requests={"cpu": "lots"}),
        400,
        ('Pod in version "v1" cannot be handled as a Pod: ', FORMAT_MESSAGE),
    ),
    "lim-unparsable": (with_resources("b", limits={"memory": "1Qi"}), 400, (FORMAT_MESSAGE,)),
    "req-object": (
        with_resources("c", requests={"cpu": {"cores": 1}}),
        400,
        ("quantity must be a string or a number",),
    ),
    "req-list": (
        with_resources("d", requests=["cpu", "1"]),
        400,
        ("spec.containers[0].resources.requests: expected a map",),
    ),
    "req-negative": (
        with_resources("e", requests={"cpu": "-1"}),
        422,
        (
            'Pod "e" is invalid: ',
            "spec.containers[0].resources.requests[cpu]",
            "greater than or equal to 0",
        ),
    ),
    "lim-negative": (
        with_resources("f", limits={"nvidia.com/gpu": "-2"}),
        422,
        ("spec.containers[0].resources.limits[nvidia.com/gpu]", "greater than or equal to 0"),
    ),
    "overhead-negative": (
        with_spec("g", overhead={"memory": "-1Gi"}),
        422,
        ("spec.overhead[memory]", "greater than or equal to 0"),
    ),
    "req-over-limit": (
        with_resources("h", requests={"cpu": "2"}, limits={"cpu": "1"}),
        422,
        ("spec.containers[0].resources.requests", "must be less than or equal to cpu limit of 1"),
    ),
    "containers-a-number": (with_spec("i", containers=3), 400, ("cannot be handled as a Pod",)),
    "container-a-string": (with_spec("j", containers=["main"]), 400, ("spec.containers[0]",)),
    "tolerations-a-number": (with_spec("k", tolerations=7), 400, ("cannot be handled as a Pod",)),
}


@pytest.mark.parametrize("case", list(REFUSED))
async def test_admission_refuses_bad_quantities_with_a_status(case: str) -> None:
    pod, code, fragments = REFUSED[case]
    async with SimCluster("1:gpu=8") as cluster, aiohttp.ClientSession() as http:
        async with http.post(cluster.url + PODS, json=pod) as resp:
            answer = await resp.json()
            assert resp.status == code, answer
        assert answer["kind"] == "Status" and answer["status"] == "Failure"
        assert answer["code"] == code
        assert answer["reason"] == ("BadRequest" if code == 400 else "Invalid")
        for fragment in fragments:
            assert fragment in answer["message"], answer["message"]
        if code == 422:  # field-level causes, as kubectl prints them
            assert answer["details"]["causes"]
        async with http.get(cluster.url + PODS) as resp:
            assert (await resp.json())["items"] == []


#: pods the simulator stores although a real apiserver would not (it does not type-check these
#: fields): name → (spec changes, the Event's field and problem)
ADMITTED: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "selector-text": ({"nodeSelector": "gpu"}, ("spec.nodeSelector", "expected an object")),
    "toleration-number": ({"tolerations": [5]}, ("spec.tolerations[0]", "expected an object")),
    "affinity-number": ({"affinity": 3}, ("spec.affinity", "expected an object")),
    "gates-text": ({"schedulingGates": "later"}, ("spec.schedulingGates", "expected a list")),
    "unknown-operator": (
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "a", "operator": "Near"}]}
                        ]
                    }
                }
            }
        },
        ("matchExpressions[0].operator", 'unsupported operator "Near"'),
    ),
}

#: stored behind admission's back (an object older than today's validation, a restored backup):
#: name → (requests, the Event's field and problem)
STORED: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "stored-unparsable": (
        {"cpu": "lots"},
        ("spec.containers[0].resources.requests[cpu]", 'invalid quantity "lots"'),
    ),
    "stored-negative": (
        {"memory": "-1Gi"},
        ("spec.containers[0].resources.requests[memory]", "greater than or equal to 0", '"-1Gi"'),
    ),
    "stored-tiny-negative": (
        {"cpu": "-1n"},
        ("spec.containers[0].resources.requests[cpu]", "greater than or equal to 0"),
    ),
    "stored-object": (
        {"nvidia.com/gpu": {"count": 1}},
        ("spec.containers[0].resources.requests[nvidia.com/gpu]", "invalid quantity"),
    ),
}


def failed_scheduling(events: list[dict[str, Any]]) -> dict[str, str]:
    return {
        e["involvedObject"]["name"]: e["message"]
        for e in events
        if e["reason"] == "FailedScheduling" and e["type"] == "Warning"
    }


async def test_unreadable_pods_get_an_event_naming_the_field_and_others_bind() -> None:
    async with (
        SimCluster("2:gpu=8") as cluster,
        cluster.api_client() as client,
        scheduler_on(cluster) as running,
    ):
        api = Api(client)
        with recording_logs() as logs:
            async with aiohttp.ClientSession() as http:
                for name, (changes, _) in ADMITTED.items():
                    async with http.post(
                        cluster.url + PODS, json=with_spec(name, **changes)
                    ) as resp:
                        assert resp.status == 201, await resp.text()
            # valid pods (nobody's, so far), then rewritten in storage as ours, with quantities
            # admission would refuse
            await api.create_pods([gang_pod(name, None, scheduler="nobody") for name in STORED])
            pods = cluster.api.rt_pods.storage_key
            for name, (requests, _) in STORED.items():
                stored = copy.deepcopy(cluster.store.get(pods, "default", name))
                assert stored is not None
                stored["spec"]["containers"][0]["resources"]["requests"] = requests
                stored["spec"]["schedulerName"] = "gang-scheduler"
                cluster.store.commit(pods, stored)
            await api.create_pods([gang_pod(f"fine-{i}", None, gpu=1) for i in range(3)])

            async def fine_bound() -> bool:
                return {"fine-0", "fine-1", "fine-2"} <= set(await api.bound())

            await eventually(fine_bound)
            expected = {**ADMITTED, **STORED}

            async def reported() -> bool:
                return set(expected) <= set(failed_scheduling(await api.events()))

            await eventually(reported)
            messages = failed_scheduling(await api.events())
            for name, (_, fragments) in expected.items():
                assert messages[name].startswith("pod cannot be scheduled: "), messages[name]
                for fragment in fragments:
                    assert fragment in messages[name], (name, messages[name])
            assert set(await api.bound()) == {"fine-0", "fine-1", "fine-2"}
            # once fixed (here: deleted and created again, as a pod spec is immutable), it binds
            name = "stored-unparsable"
            await api.core.delete_namespaced_pod(
                name, "default", grace_period_seconds=0, _preload_content=False
            )
            await api.create_pods([gang_pod(name, None, gpu=1)])

            async def fixed_bound() -> bool:
                return name in await api.bound()

            await eventually(fixed_bound)
            assert await assert_not_overcommitted(cluster) == 4
        assert running.crashed() is None
        assert not logs.crashes(), [r.getMessage() for r in logs.crashes()]
