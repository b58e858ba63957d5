"""Bad PodGroups reach the scheduler, are reported by name and reason, and block nobody else.

A real apiserver with gang's CRD schema (``manifests/crd-podgroups.yaml``) refuses many of these
at the door; the simulator, like an apiserver with a schema-less CRD (or an older one), stores
custom resources unvalidated. So every case here is first checked at the API — what the
simulator answered and stored — and then at the scheduler: an ``InvalidPodGroup`` Event and a
``Valid=False`` condition whose text names the field and the problem, while a well-formed gang
beside them binds.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from gang.models.podgroup import MAX_MIN_MEMBER, MAX_SCHEDULE_TIMEOUT_SECONDS
from gang.sim.cluster import SimCluster
from tests.badinput.conftest import recording_logs, scheduler_on
from tests.scheduler.conftest import GROUP, PLURAL, VERSION, Api, eventually, gang_pod

PODGROUPS = f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}"
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}

#: name → (spec, fragments the Event and the condition must contain)
BAD_SPECS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "zero": ({"minMember": 0}, ("spec.minMember", "greater than or equal to 1")),
    "negative": ({"minMember": -3}, ("spec.minMember", "greater than or equal to 1")),
    "huge": ({"minMember": MAX_MIN_MEMBER + 1}, ("spec.minMember", "less than or equal to 100000")),
    "int64": ({"minMember": 2**63 - 1}, ("spec.minMember", "less than or equal to 100000")),
    "uint64": ({"minMember": 2**64 - 1}, ("spec.minMember", "less than or equal to 100000")),
    # beyond 64 bits the apiserver's JSON decoder yields a float64, as the simulator's does
    "beyond-64-bits": ({"minMember": 2**64}, ("spec.minMember", "valid integer")),
    "string": ({"minMember": "3"}, ("spec.minMember", "valid integer")),
    "float": ({"minMember": 2.5}, ("spec.minMember", "valid integer")),
    "whole-float": ({"minMember": 2.0}, ("spec.minMember", "valid integer")),
    "null": ({"minMember": None}, ("spec.minMember", "valid integer")),
    "object": ({"minMember": {"value": 3}}, ("spec.minMember", "valid integer")),
    "missing": ({}, ("spec.minMember", "Field required")),
    "no-spec": ("three pods please", ("spec: required", "spec.minMember")),
    "timeout-negative": (
        {"minMember": 1, "scheduleTimeoutSeconds": -5},
        ("spec.scheduleTimeoutSeconds", "greater than or equal to 0"),
    ),
    "timeout-year": (
        {"minMember": 1, "scheduleTimeoutSeconds": 365 * 24 * 3600},
        ("spec.scheduleTimeoutSeconds", f"less than or equal to {MAX_SCHEDULE_TIMEOUT_SECONDS}"),
    ),
    "timeout-beyond-64-bits": (
        {"minMember": 1, "scheduleTimeoutSeconds": -(10**30)},
        ("spec.scheduleTimeoutSeconds", "valid integer"),
    ),
    "timeout-text": (
        {"minMember": 1, "scheduleTimeoutSeconds": "30s"},
        ("spec.scheduleTimeoutSeconds", "valid integer"),
    ),
    "res-unparsable": (
        {"minMember": 1, "minResources": {"cpu": "lots"}},
        ("spec.minResources", "cpu: quantities must match the regular expression"),
    ),
    "res-negative": (
        {"minMember": 1, "minResources": {"memory": "-1Gi"}},
        ("spec.minResources", "memory: must not be negative, got '-1Gi'"),
    ),
    "res-negative-int": (
        {"minMember": 1, "minResources": {"nvidia.com/gpu": -2}},
        ("spec.minResources", "nvidia.com/gpu: must not be negative"),
    ),
    "res-object": (
        {"minMember": 1, "minResources": {"cpu": {"cores": 2}}},
        ("spec.minResources.cpu", "valid string"),
    ),
    "res-not-a-map": (
        {"minMember": 1, "minResources": "8 cpus"},
        ("spec.minResources", "valid dictionary"),
    ),
    "everything": (
        {"minMember": 0, "scheduleTimeoutSeconds": -1, "minResources": {"cpu": "-1"}},
        ("spec.minMember", "spec.scheduleTimeoutSeconds", "spec.minResources", "; "),
    ),
}


def body(name: str, spec: Any) -> bytes:
    """A PodGroup as JSON, by the standard library: it writes integers of any size."""
    return json.dumps(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": spec,
        }
    ).encode()


async def post(http: aiohttp.ClientSession, cluster: SimCluster, data: bytes) -> tuple[int, Any]:
    async with http.post(
        cluster.url + PODGROUPS, data=data, headers={"Content-Type": "application/json"}
    ) as resp:
        return resp.status, await resp.json()


def _decoded_int(text: str) -> int | float:
    """An integer as Kubernetes' JSON decoder reads it: int64 or uint64, else a float64."""
    value = int(text)
    return value if -(2**63) <= value < 2**64 else float(value)


def invalid_events(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["involvedObject"]["name"]: e for e in events if e["reason"] == "InvalidPodGroup"}


def valid_condition(podgroup: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (podgroup.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Valid"), None)


async def test_every_bad_spec_is_reported_naming_the_problem_and_others_bind() -> None:
    async with (
        SimCluster("2:gpu=8") as cluster,
        cluster.api_client() as client,
        scheduler_on(cluster) as running,
        aiohttp.ClientSession() as http,
    ):
        api = Api(client)
        with recording_logs() as logs:
            for name, (spec, _) in BAD_SPECS.items():
                status, answer = await post(http, cluster, body(name, spec))
                # the simulator stores custom resources as sent, bad specs included
                assert status == 201, (name, answer)
                assert answer["spec"] == json.loads(json.dumps(spec), parse_int=_decoded_int)
            await api.create_pods([gang_pod(f"{name}-0", name, gpu=1) for name in BAD_SPECS])
            await api.create_pods([gang_pod(f"good-{i}", "good", gpu=1) for i in range(2)])
            await api.create_podgroup(
                {"metadata": {"name": "good"}, "spec": {"minMember": 2}}
                | {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup"}
            )

            async def good_bound() -> bool:
                return {"good-0", "good-1"} <= set(await api.bound())

            await eventually(good_bound)

            async def all_reported() -> bool:
                return set(invalid_events(await api.events())) == set(BAD_SPECS)

            await eventually(all_reported)
            events = invalid_events(await api.events())
            for name, (_, fragments) in BAD_SPECS.items():
                event = events[name]
                assert event["type"] == "Warning"
                assert event["involvedObject"]["kind"] == "PodGroup"
                for fragment in fragments:
                    assert fragment in event["message"], (name, event["message"])

            async def conditions_written() -> bool:
                for name in BAD_SPECS:
                    if valid_condition(await api.get_podgroup(name)) is None:
                        return False
                return True

            await eventually(conditions_written)
            for name, (_, fragments) in BAD_SPECS.items():
                condition = valid_condition(await api.get_podgroup(name))
                assert condition is not None
                assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
                assert condition["message"] == events[name]["message"]
                for fragment in fragments:
                    assert fragment in condition["message"]
            # members of invalid groups are never bound; only the good gang was
            assert set(await api.bound()) == {"good-0", "good-1"}
        assert running.crashed() is None
        assert not logs.crashes(), [r.getMessage() for r in logs.crashes()]


async def test_a_group_fixed_after_the_fact_binds_and_an_unreachable_quorum_waits() -> None:
    """An invalid group waits with its reason until corrected; a valid minMember no cluster can
    ever satisfy (MAX_MIN_MEMBER) waits for members, reported as such, and blocks nobody."""
    async with (
        SimCluster("2:gpu=8") as cluster,
        cluster.api_client() as client,
        scheduler_on(cluster) as running,
        aiohttp.ClientSession() as http,
    ):
        api = Api(client)
        assert (await post(http, cluster, body("later", {"minMember": 0})))[0] == 201
        assert (await post(http, cluster, body("vast", {"minMember": MAX_MIN_MEMBER})))[0] == 201
        await api.create_pods([gang_pod(f"later-{i}", "later", gpu=1) for i in range(2)])
        await api.create_pods([gang_pod(f"vast-{i}", "vast", gpu=1) for i in range(2)])

        async def told() -> bool:
            return "later" in invalid_events(await api.events())

        await eventually(told)
        assert not {"later-0", "later-1"} & set(await api.bound())
        url = f"{cluster.url}{PODGROUPS}/later"
        async with http.patch(url, json={"spec": {"minMember": 2}}, headers=MERGE_PATCH) as resp:
            assert resp.status == 200

        async def later_bound() -> bool:
            return {"later-0", "later-1"} <= set(await api.bound())

        await eventually(later_bound)

        async def vast_waits() -> bool:
            status = (await api.get_podgroup("vast")).get("status") or {}
            return any(
                c["type"] == "Scheduled" and c["status"] == "False"
                for c in status.get("conditions") or []
            )

        await eventually(vast_waits)
        vast = await api.get_podgroup("vast")
        assert valid_condition(vast) is None  # valid, just out of reach
        assert vast["status"]["phase"] in ("Pending", "Scheduling")
        assert not {"vast-0", "vast-1"} & set(await api.bound())
        assert running.crashed() is None


async def test_garbage_in_a_podgroup_status_is_not_fatal() -> None:
    """Whoever may write ``podgroups/status`` can write anything there (the simulator, like a
    CRD without a typed status, stores it): the status writer must not die of it, and replaces
    it with a well-formed status."""
    async with (
        SimCluster("2:gpu=8") as cluster,
        cluster.api_client() as client,
        scheduler_on(cluster) as running,
        aiohttp.ClientSession() as http,
    ):
        api = Api(client)
        garbage = [
            {"conditions": 5, "scheduleStartTime": {"when": "now"}},
            {"conditions": ["Valid", None, {"type": "Scheduled", "lastTransitionTime": 7}]},
            {"conditions": {"type": "Valid"}, "phase": 12},
        ]
        for i, status in enumerate(garbage):
            name = f"g{i}"
            assert (await post(http, cluster, body(name, {"minMember": 2})))[0] == 201
            async with http.patch(
                f"{cluster.url}{PODGROUPS}/{name}/status",
                json={"status": status},
                headers=MERGE_PATCH,
            ) as resp:
                assert resp.status == 200
            await api.create_pods([gang_pod(f"{name}-{j}", name, gpu=1) for j in range(2)])

        async def bound() -> bool:
            return len(await api.bound()) == 2 * len(garbage)

        await eventually(bound)

        async def rewritten() -> bool:
            for i in range(len(garbage)):
                status = (await api.get_podgroup(f"g{i}")).get("status") or {}
                conditions = status.get("conditions")
                if status.get("phase") != "Scheduled" or not isinstance(conditions, list):
                    return False
                if not all(
                    isinstance(c, dict) and isinstance(c.get("lastTransitionTime"), str)
                    for c in conditions
                ):
                    return False
            return True

        await eventually(rewritten)
        assert running.crashed() is None
