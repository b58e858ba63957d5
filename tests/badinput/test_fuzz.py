"""Fuzzing what users send the scheduler: random and garbage PodGroups and pods, many at once.

Two levels. The pure one throws arbitrary JSON at ``parse_podgroup`` and at the status the
writer derives from it: no exception, ever, and whatever was stored, the status gang writes back
is one the CRD accepts. The live one creates ``GANG_FUZZ_PODGROUPS`` (default 200; raise it for
longer offline runs) hypothesis-generated PodGroups with member pods — well-formed, subtly wrong
and plain garbage, with garbage statuses written over some — against the real scheduler on the
simulator, then checks that nothing crashed (no task died, nothing logged an error or a
traceback, no 5xx from the API), that every invalid group was reported with its reason, that
nothing is over-committed, and that a well-formed gang created afterwards still binds.

The live test uses hypothesis as a generator (one aggregate run, which does not shrink):
generation is derandomized, its figures are printed (``pytest -s``), and a failure names the
PodGroups involved.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gang.binding.groupstatus import coscheduling_status as podgroup_status
from gang.models.podgroup import (
    MAX_MIN_MEMBER,
    MAX_SCHEDULE_TIMEOUT_SECONDS,
    PodGroupInfo,
    parse_podgroup,
)
from gang.scheduling.gang import Gang, GangKey
from gang.sim.cluster import SimCluster
from gang.state.podinfo import parse_pod
from tests.badinput.conftest import (
    assert_not_overcommitted,
    field_garbage,
    json_values,
    mutations,
    quantity_garbage,
    recording_logs,
    scheduler_on,
)
from tests.scheduler.conftest import GROUP, PLURAL, VERSION, eventually
from tests.test_manifests import podgroup as crd_podgroup
from tests.test_manifests import podgroup_validator

FUZZ_PODGROUPS = int(os.environ.get("GANG_FUZZ_PODGROUPS", "200"))
LABEL = "scheduling.x-k8s.io/pod-group"
PODS = "/api/v1/namespaces/default/pods"
PODGROUPS = f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}"

# --- strategies ---------------------------------------------------------------------------------

timestamps = st.sampled_from(
    ["2026-01-02T03:04:05Z", "2026-01-02T03:04:05.5+01:00", "yesterday", "2026-13-40T99:99:99Z", ""]
)
resource_names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "", "x" * 300])
good_quantities = st.sampled_from(["0", "1", "500m", "2Gi", "1.5", "1e3"]) | st.integers(0, 64)
min_members = st.one_of(
    st.integers(1, 3),
    st.integers(-3, 0),
    st.integers(MAX_MIN_MEMBER - 1, MAX_MIN_MEMBER + 1),
    st.sampled_from([2**31, 2**63 - 1, 2**64 - 1, 2**64, 10**30, -(10**30)]),
    field_garbage,
)
timeouts = st.one_of(
    st.integers(1, 30),
    st.integers(-5, 0),
    st.integers(MAX_SCHEDULE_TIMEOUT_SECONDS, MAX_SCHEDULE_TIMEOUT_SECONDS + 1),
    field_garbage,
)
min_resources = st.one_of(
    st.dictionaries(resource_names, good_quantities, max_size=3),
    st.dictionaries(resource_names | st.text(max_size=8), quantity_garbage, max_size=4),
    field_garbage,
)
#: well-formed specs, so that many gangs bind while the garbage arrives
plausible_specs = st.fixed_dictionaries(
    {"minMember": st.integers(1, 3)},
    optional={
        "scheduleTimeoutSeconds": st.integers(1, 30),
        "minResources": st.dictionaries(st.sampled_from(["cpu", "memory"]), good_quantities),
    },
)
garbage_specs = st.fixed_dictionaries(
    {},
    optional={
        "minMember": min_members,
        "scheduleTimeoutSeconds": timeouts,
        "minResources": min_resources,
        "extra": json_values,
    },
)
specs = st.one_of(plausible_specs, garbage_specs, json_values)
conditions = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["Valid", "Scheduled"]) | json_values,
        "status": st.sampled_from(["True", "False"]) | json_values,
        "lastTransitionTime": timestamps | json_values,
    },
)
statuses = st.one_of(
    st.none(),
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "conditions": st.lists(conditions | json_values, max_size=3) | json_values,
            "scheduleStartTime": timestamps | json_values,
            "phase": st.sampled_from(["Pending", "Running"]) | json_values,
        },
    ),
)

#: a member; ``mutations`` replace one to three of its fields with garbage (its metadata, which
#: carries the name and the group label, is set separately)
MEMBER: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {},
    "spec": {
        "schedulerName": "gang-scheduler",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                            ]
                        }
                    ]
                }
            }
        },
        "containers": [
            {
                "name": "main",
                "image": "trainer:1",
                "ports": [{"containerPort": 8080}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }
        ],
    },
}
members = st.lists(
    st.one_of(st.just(MEMBER), mutations(MEMBER, keep=frozenset({"metadata", "schedulerName"}))),
    max_size=3,
)
labels = st.one_of(st.none(), st.just("own"), st.text(max_size=10), st.sampled_from(["", "x" * 64]))


@dataclass
class Case:
    spec: Any
    has_spec: bool
    status: Any
    members: list[Any]
    label: str | None
    metadata: dict[str, Any] = field(default_factory=dict)


cases = st.builds(
    Case,
    spec=specs,
    has_spec=st.booleans() | st.just(True),
    status=statuses,
    members=members,
    label=labels,
    metadata=st.fixed_dictionaries(
        {}, optional={"labels": json_values, "annotations": json_values, "finalizers": json_values}
    ),
)


def generate(count: int) -> list[Case]:
    """``count`` cases from hypothesis, derandomized: the same ones on every run."""
    found: list[Case] = []

    @settings(
        max_examples=count,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases)
    def collect(case: Case) -> None:
        found.append(case)

    collect()
    return found[:count]


# --- the pure level -----------------------------------------------------------------------------

raw_podgroups = st.fixed_dictionaries(
    {},
    optional={
        "metadata": json_values
        | st.fixed_dictionaries(
            {},
            optional={
                "name": st.text(max_size=8) | json_values,
                "namespace": st.text(max_size=8) | json_values,
                "uid": json_values,
                "resourceVersion": st.integers(-5, 2**64) | json_values,
                "creationTimestamp": timestamps | json_values,
            },
        ),
        "spec": specs,
        "status": statuses,
        "kind": json_values,
    },
)


@functools.cache
def _validator() -> Any:
    return podgroup_validator()


@settings(max_examples=400, deadline=None, derandomize=True)
@given(raw=raw_podgroups)
def test_any_stored_podgroup_parses_and_yields_a_status_the_crd_accepts(
    raw: dict[str, Any],
) -> None:
    info = parse_podgroup(raw)  # never raises: the error path is PodGroupInfo.error
    assert isinstance(info, PodGroupInfo)
    assert info.error is None or info.error.startswith("spec")
    if info.error is not None:
        assert (info.min_member, dict(info.min_resources)) == (1, {})
    else:
        assert 1 <= info.min_member <= MAX_MIN_MEMBER
    conditions = info.status.get("conditions", [])
    assert isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions)
    # what the status writer makes of it (with and without members) is what the CRD accepts
    gang = Gang(GangKey("team", "train"), podgroup=info)
    validator = _validator()
    for status in (podgroup_status(gang, dict(info.status)), podgroup_status(gang, {})):
        validator.validate(crd_podgroup(status=status))


# --- the live level -----------------------------------------------------------------------------


@dataclass
class Tally:
    answers: Counter[tuple[str, int]] = field(default_factory=Counter)
    stored_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    stored_pods: int = 0
    last_rv: dict[str, int] = field(default_factory=dict)

    def note(self, kind: str, status: int, answer: Any) -> None:
        self.answers[(kind, status)] += 1
        if status in (200, 201) and isinstance(answer, dict):
            rv = int(answer["metadata"]["resourceVersion"])
            self.last_rv[kind] = max(self.last_rv.get(kind, 0), rv)

    def server_errors(self) -> int:
        return sum(n for (_, status), n in self.answers.items() if status >= 500)


async def send(
    http: aiohttp.ClientSession,
    method: str,
    url: str,
    payload: Any,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    data = json.dumps(payload).encode()  # the standard library writes integers of any size
    async with http.request(method, url, data=data, headers={"Content-Type": content_type}) as resp:
        return resp.status, await resp.json(content_type=None)


async def create_case(
    http: aiohttp.ClientSession, cluster: SimCluster, name: str, case: Case, tally: Tally
) -> None:
    group: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {**case.metadata, "name": name},
    }
    if case.has_spec:
        group["spec"] = case.spec
    status, answer = await send(http, "POST", cluster.url + PODGROUPS, group)
    tally.note("podgroups", status, answer)
    if status == 201:
        tally.stored_groups[name] = answer
        if case.status is not None:
            status, answer = await send(
                http,
                "PATCH",
                f"{cluster.url}{PODGROUPS}/{name}/status",
                {"status": case.status},
                "application/merge-patch+json",
            )
            tally.note("podgroups/status", status, answer)
            if status == 200:
                tally.stored_groups[name] = answer
    label = name if case.label == "own" else case.label
    for i, member in enumerate(case.members):
        pod = {**member, "metadata": {"name": f"{name}-{i}"}}
        if label is not None:
            pod["metadata"]["labels"] = {LABEL: label}
        status, answer = await send(http, "POST", cluster.url + PODS, pod)
        tally.note("pods", status, answer)
        tally.stored_pods += status == 201


def final_gang() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A well-formed gang for the nodes no fuzzed pod can use (tainted, GPUs)."""
    group = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": "final"},
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30},
    }
    pods = []
    for i in range(2):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"final-{i}", "labels": {LABEL: "final"}},
            "spec": {
                "schedulerName": "gang-scheduler",
                "nodeSelector": {"pool": "final"},
                "tolerations": [
                    {"key": "final", "operator": "Equal", "value": "only", "effect": "NoSchedule"}
                ],
                "containers": [
                    {
                        "name": "main",
                        "image": "trainer:1",
                        "resources": {"limits": {"nvidia.com/gpu": "8"}},
                    }
                ],
            },
        }
        pods.append(pod)
    return group, pods


async def test_fuzzed_podgroups_and_pods_never_crash_the_scheduler() -> None:
    generated = generate(FUZZ_PODGROUPS)
    assert len(generated) == FUZZ_PODGROUPS
    nodes = (
        "6:cpu=32,memory=128Gi;2:gpu=8,prefix=final,label:pool=final,taint:final=only:NoSchedule"
    )
    tally = Tally()
    async with SimCluster(nodes) as cluster, aiohttp.ClientSession() as http:
        with recording_logs() as logs:
            async with scheduler_on(cluster, event_qps=10_000, event_burst=10_000) as running:
                scheduler = running.scheduler
                limit = asyncio.Semaphore(16)

                async def one(i: int, case: Case) -> None:
                    async with limit:
                        await create_case(http, cluster, f"fz-{i:05d}", case, tally)

                await asyncio.gather(*(one(i, c) for i, c in enumerate(generated)))

                async def caught_up() -> bool:
                    seen = {i.kind.name: int(i.resource_version or 0) for i in scheduler.informers}
                    return all(
                        seen[kind] >= rv for kind, rv in tally.last_rv.items() if kind in seen
                    )

                await eventually(caught_up, within=20)
                invalid = {
                    name: info.error
                    for name, stored in tally.stored_groups.items()
                    if (info := parse_podgroup(stored)).error is not None
                }

                async def events() -> dict[str, str]:
                    async with http.get(cluster.url + "/api/v1/namespaces/default/events") as resp:
                        items = (await resp.json())["items"]
                    return {
                        e["involvedObject"]["name"]: e["message"]
                        for e in items
                        if e["reason"] == "InvalidPodGroup"
                    }

                async def all_reported() -> bool:
                    return set(invalid) <= set(await events())

                await eventually(all_reported, within=20)
                reported = await events()
                for name, error in invalid.items():
                    assert reported[name] == error[:1024], name

                group, pods = final_gang()
                status, answer = await send(http, "POST", cluster.url + PODGROUPS, group)
                assert status == 201, answer
                for pod in pods:
                    status, answer = await send(http, "POST", cluster.url + PODS, pod)
                    assert status == 201, answer

                def bound() -> dict[str, str]:
                    return {
                        p["metadata"]["name"]: p["spec"]["nodeName"]
                        for p in cluster.store.items(cluster.api.rt_pods.storage_key)
                        if p["spec"].get("nodeName")
                    }

                async def final_bound() -> bool:
                    return {"final-0", "final-1"} <= set(bound())

                await eventually(final_bound, within=20)
                assert {bound()["final-0"], bound()["final-1"]} == {"final-00000", "final-00001"}
                checked = await assert_not_overcommitted(cluster)
                crashed = running.crashed()
                unreadable = 0
                for raw in cluster.store.items(cluster.api.rt_pods.storage_key):
                    try:
                        parse_pod(raw)
                    except ValueError:
                        unreadable += 1
        crashes = logs.crashes()
    print(
        f"\nFIGURES fuzz: {len(generated)} fuzzed PodGroups "
        f"({len(tally.stored_groups)} stored, {len(invalid)} invalid and reported), "
        f"{sum(len(c.members) for c in generated)} pods sent "
        f"({tally.stored_pods} stored, {unreadable} unreadable by gang), "
        f"{checked} pods bound, answers {dict(sorted(tally.answers.items()))}, "
        f"{len(crashes) + (crashed is not None)} crashes, {tally.server_errors()} API 5xx"
    )
    assert crashed is None, crashed
    assert not crashes, [r.getMessage() for r in crashes]
    assert tally.server_errors() == 0
