"""Tests for gang.state.podinfo: one raw pod parsed into requests, QoS, constraints and metadata."""

from __future__ import annotations

import calendar
import copy
import dataclasses
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, Self

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gang.state import podinfo
from gang.state.podinfo import (
    NO_CONSTRAINTS,
    POD_GROUP_LABEL,
    QOS_RANK,
    Constraints,
    HostPort,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    PodParseError,
    Toleration,
    bound_copy,
    parse_pod,
    pod_requests,
)

POD_BOUND = Path(__file__).resolve().parent.parent / "fixtures" / "pod-bound.json"
GIB = 1024**3
MIB = 1024**2

# Python-friendly keyword names for resources whose real names are not identifiers.
_RESOURCE_NAMES = {
    "gpu": "nvidia.com/gpu",
    "ephemeral_storage": "ephemeral-storage",
    "hugepages_2mi": "hugepages-2Mi",
}


def _resources(values: dict[str, Any]) -> dict[str, Any]:
    return {_RESOURCE_NAMES.get(name, name): value for name, value in values.items()}


class PodBuilder:
    """A fluent builder of raw pods shaped like kube-apiserver output (compare Coscheduling's
    ``MakePod().Name("p1").Obj()``). Each resource keyword adds a request; ``limits=`` adds
    limits; ``gpu=`` is ``nvidia.com/gpu``."""

    def __init__(self, name: str, namespace: str = "default") -> None:
        self._pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "resourceVersion": "7",
                "creationTimestamp": "2026-11-21T14:39:41Z",
            },
            "spec": {"schedulerName": "gang-scheduler", "containers": []},
            "status": {"phase": "Pending"},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._pod["spec"]
        return spec

    def _add(
        self,
        list_name: str,
        limits: dict[str, Any] | None,
        requests: dict[str, Any],
        **extra: Any,
    ) -> Self:
        containers = self._spec.setdefault(list_name, [])
        container: dict[str, Any] = {"name": f"{list_name}-{len(containers)}", "image": "pause"}
        resources: dict[str, Any] = {}
        if requests:
            resources["requests"] = _resources(requests)
        if limits:
            resources["limits"] = _resources(limits)
        if resources:
            container["resources"] = resources
        container.update(extra)
        containers.append(container)
        return self

    def container(self, *, limits: dict[str, Any] | None = None, **requests: Any) -> Self:
        return self._add("containers", limits, requests)

    def init(self, *, limits: dict[str, Any] | None = None, **requests: Any) -> Self:
        return self._add("initContainers", limits, requests)

    def sidecar(self, *, limits: dict[str, Any] | None = None, **requests: Any) -> Self:
        return self._add("initContainers", limits, requests, restartPolicy="Always")

    def host_port(self, port: int, **fields: Any) -> Self:
        """Add a port to the last container (init or regular, whichever was added last)."""
        last = self._last_container
        last.setdefault("ports", []).append({"containerPort": 8080, "hostPort": port, **fields})
        return self

    def overhead(self, **values: Any) -> Self:
        self._spec["overhead"] = _resources(values)
        return self

    def label(self, key: str, value: str) -> Self:
        self._pod["metadata"].setdefault("labels", {})[key] = value
        return self

    def group(self, name: str) -> Self:
        return self.label(POD_GROUP_LABEL, name)

    def node_selector(self, **labels: str) -> Self:
        self._spec["nodeSelector"] = labels
        return self

    def required_term(
        self,
        expressions: list[dict[str, Any]] | None = None,
        fields: list[dict[str, Any]] | None = None,
    ) -> Self:
        affinity = self._spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        required = affinity.setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []}
        )
        term: dict[str, Any] = {}
        if expressions is not None:
            term["matchExpressions"] = expressions
        if fields is not None:
            term["matchFields"] = fields
        required["nodeSelectorTerms"].append(term)
        return self

    def toleration(self, **fields: Any) -> Self:
        self._spec.setdefault("tolerations", []).append(fields)
        return self

    def spec(self, **fields: Any) -> Self:
        self._spec.update(fields)
        return self

    def meta(self, **fields: Any) -> Self:
        self._pod["metadata"].update(fields)
        return self

    def status(self, **fields: Any) -> Self:
        self._pod["status"].update(fields)
        return self

    @property
    def _last_container(self) -> dict[str, Any]:
        containers = self._spec.get("containers") or []
        inits = self._spec.get("initContainers") or []
        last: dict[str, Any] = (containers or inits)[-1]
        return last

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._pod)

    def info(self) -> PodInfo:
        return parse_pod(self.obj())


def make_pod(name: str = "p", namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


# --------------------------------------------------------------------------------------------
# Requests

REQUEST_CASES: list[tuple[str, PodBuilder, dict[str, int]]] = [
    ("no containers", make_pod(), {"pods": 1}),
    ("no resources at all", make_pod().container(), {"pods": 1}),
    (
        "one container",
        make_pod().container(cpu="1", memory="1Gi"),
        {"cpu": 1000, "memory": GIB, "pods": 1},
    ),
    (
        "containers are summed",
        make_pod().container(cpu="1", memory="1Gi").container(cpu="250m", memory="512Mi"),
        {"cpu": 1250, "memory": GIB + 512 * MIB, "pods": 1},
    ),
    (
        "a larger init container wins",
        make_pod().container(cpu="1").container(cpu="1").init(cpu="3"),
        {"cpu": 3000, "pods": 1},
    ),
    (
        "a smaller init container does not add",
        make_pod().container(cpu="1").container(cpu="1").init(cpu="1500m"),
        {"cpu": 2000, "pods": 1},
    ),
    (
        "init containers take the max, not the sum",
        make_pod().container(cpu="1").init(cpu="2").init(cpu="2"),
        {"cpu": 2000, "pods": 1},
    ),
    (
        "max is per resource",
        make_pod().container(cpu="1", memory="4Gi").init(cpu="4", memory="1Gi"),
        {"cpu": 4000, "memory": 4 * GIB, "pods": 1},
    ),
    (
        "a resource only an init container asks for",
        make_pod().container(cpu="1").init(ephemeral_storage="1Gi"),
        {"cpu": 1000, "ephemeral-storage": GIB, "pods": 1},
    ),
    (
        "a sidecar is summed with the containers",
        make_pod().container(cpu="1").sidecar(cpu="500m"),
        {"cpu": 1500, "pods": 1},
    ),
    (
        "a sidecar started before an init container runs beside it",
        make_pod().container(cpu="1").sidecar(cpu="500m").init(cpu="2"),
        {"cpu": 2500, "pods": 1},
    ),
    (
        "a sidecar started after an init container does not add to it",
        make_pod().container(cpu="1").init(cpu="2").sidecar(cpu="500m"),
        {"cpu": 2000, "pods": 1},
    ),
    (
        "only the sidecars before an init container count for it",
        make_pod().container(cpu="1").sidecar(cpu="1").init(cpu="3").sidecar(cpu="1"),
        {"cpu": 4000, "pods": 1},
    ),
    (
        "a sidecar's own need is every sidecar up to it",
        make_pod().sidecar(memory="1Gi").sidecar(memory="1Gi"),
        {"memory": 2 * GIB, "pods": 1},
    ),
    (
        "the builder example",
        make_pod("p")
        .container(cpu="1", memory="1Gi")
        .init(cpu="2")
        .sidecar(cpu="500m")
        .overhead(cpu="100m"),
        {"cpu": 2100, "memory": GIB, "pods": 1},
    ),
    (
        "overhead is added",
        make_pod().container(cpu="1", memory="1Gi").overhead(cpu="100m", memory="64Mi"),
        {"cpu": 1100, "memory": GIB + 64 * MIB, "pods": 1},
    ),
    (
        "overhead is added after the init max",
        make_pod().container(cpu="1").init(cpu="2").overhead(cpu="100m"),
        {"cpu": 2100, "pods": 1},
    ),
    (
        "limits only: requests default to limits",
        make_pod().container(limits={"cpu": "2", "memory": "1Gi"}),
        {"cpu": 2000, "memory": GIB, "pods": 1},
    ),
    (
        "limits fill only the missing requests",
        make_pod().container(cpu="500m", limits={"cpu": "1", "memory": "2Gi"}),
        {"cpu": 500, "memory": 2 * GIB, "pods": 1},
    ),
    (
        "an explicit zero request is not overridden by the limit",
        make_pod().container(cpu="0", limits={"cpu": "1"}),
        {"pods": 1},
    ),
    (
        "limits only on an init container",
        make_pod().container(cpu="1").init(limits={"cpu": "3"}),
        {"cpu": 3000, "pods": 1},
    ),
    (
        "extended resources are summed in whole units",
        make_pod().container(gpu="2").container(gpu=1, hugepages_2mi="4Mi"),
        {"nvidia.com/gpu": 3, "hugepages-2Mi": 4 * MIB, "pods": 1},
    ),
    (
        "gpu from limits only",
        make_pod().container(cpu="1", limits={"gpu": "4"}),
        {"cpu": 1000, "nvidia.com/gpu": 4, "pods": 1},
    ),
    (
        "cpu rounds up to a millicore, other resources to a unit",
        make_pod().container(cpu="1n", memory="1.5").container(cpu="0.1", memory="1k"),
        {"cpu": 101, "memory": 1002, "pods": 1},
    ),
    (
        "numbers as well as strings",
        make_pod().container(cpu=2, memory=1024).container(cpu=0.5),
        {"cpu": 2500, "memory": 1024, "pods": 1},
    ),
    (
        "zero values are omitted",
        make_pod().container(cpu="0", memory="0Gi", gpu="0"),
        {"pods": 1},
    ),
    (
        "a requested pods count is ignored: a pod is one pod",
        make_pod().container(pods="5"),
        {"pods": 1},
    ),
]


@pytest.mark.parametrize(
    ("builder", "expected"),
    [pytest.param(b, e, id=name) for name, b, e in REQUEST_CASES],
)
def test_requests(builder: PodBuilder, expected: dict[str, int]) -> None:
    pod = builder.obj()
    assert pod_requests(pod["spec"]) == expected
    assert dict(parse_pod(pod).requests) == expected


def test_parse_does_not_modify_the_raw_pod() -> None:
    pod = (
        make_pod()
        .container(limits={"cpu": "1", "memory": "1Gi"})
        .sidecar(cpu="1")
        .init(cpu="3")
        .toleration(key="a", operator="Exists")
        .host_port(80)
        .obj()
    )
    before = copy.deepcopy(pod)
    parse_pod(pod)
    assert pod == before


# --------------------------------------------------------------------------------------------
# The recorded apiserver pod


def test_parse_recorded_bound_pod() -> None:
    raw = orjson.loads(POD_BOUND.read_bytes())
    info = parse_pod(raw)

    assert info.uid == "12e38434-325c-4e81-bedf-ee3be49872a5"
    assert info.key == ("bench", "g0000-000")
    assert info.resource_version == 38876
    assert info.node_name == "bench-node-00029"
    assert info.assigned
    assert info.scheduler_name == "cosched"
    assert info.phase == "Pending"
    assert not info.terminal
    assert info.priority == 0
    assert info.qos_rank == QOS_RANK["Guaranteed"]
    assert info.requests == {"cpu": 1000, "memory": 1073741824, "nvidia.com/gpu": 1, "pods": 1}
    assert info.labels == {"bench": "1", "pod-group.scheduling.sigs.k8s.io": "g0000"}
    # the recording carries the older scheduler-plugins label: a group of that API
    assert info.group == "sigs:g0000" and info.group_conflict == ""
    assert info.creation_timestamp == calendar.timegm((2026, 11, 21, 14, 39, 41))
    assert not info.deleting
    assert not info.scheduling_gated
    assert info.constraints == Constraints(
        node_selector=(),
        required_terms=(),
        tolerations=(
            Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
            Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
        ),
        host_ports=(),
    )


def test_recorded_pod_qos_computed_matches_the_servers() -> None:
    raw = orjson.loads(POD_BOUND.read_bytes())
    del raw["status"]["qosClass"]
    assert parse_pod(raw).qos_rank == QOS_RANK["Guaranteed"]


# --------------------------------------------------------------------------------------------
# Metadata and status


def test_group_label() -> None:
    info = make_pod("worker-0").group("train").label("app", "x").container(cpu="1").info()
    assert info.group == "train"
    assert info.labels == {POD_GROUP_LABEL: "train", "app": "x"}
    assert make_pod().container(cpu="1").info().group == ""


def test_metadata_and_status_fields() -> None:
    info = (
        make_pod("p1", "ns1")
        .meta(
            creationTimestamp="2026-01-02T03:04:05.250000Z",
            deletionTimestamp="2026-01-02T04:00:00Z",
            resourceVersion="123456789",
        )
        .spec(nodeName="n1", priority=1000, schedulingGates=[{"name": "wait"}])
        .status(phase="Succeeded")
        .container(cpu="1")
        .info()
    )
    assert info.key == ("ns1", "p1")
    assert (info.namespace, info.name, info.uid) == ("ns1", "p1", "uid-p1")
    assert info.resource_version == 123456789
    assert info.creation_timestamp == calendar.timegm((2026, 1, 2, 3, 4, 5)) + 0.25
    assert info.deleting
    assert info.scheduling_gated
    assert info.priority == 1000
    assert info.node_name == "n1" and info.assigned
    assert info.phase == "Succeeded" and info.terminal


def test_defaults_for_absent_fields() -> None:
    raw = {"metadata": {"name": "bare", "namespace": "ns"}, "spec": {"containers": []}}
    info = parse_pod(raw)
    assert info.uid == ""
    assert info.resource_version == 0
    assert info.labels == {}
    assert info.scheduler_name == "default-scheduler"
    assert info.node_name == "" and not info.assigned
    assert info.phase == "Pending" and not info.terminal
    assert info.priority == 0
    assert info.qos_rank == QOS_RANK["BestEffort"]
    assert info.requests == {"pods": 1}
    assert info.constraints is NO_CONSTRAINTS
    assert info.group == ""
    assert info.creation_timestamp == 0.0
    assert not info.deleting
    assert not info.scheduling_gated


def test_failed_phase_is_terminal_and_empty_gates_do_not_gate() -> None:
    info = make_pod().status(phase="Failed").spec(schedulingGates=[]).info()
    assert info.terminal
    assert not info.scheduling_gated
    assert not make_pod().status(phase="Running").info().terminal


def test_podinfo_is_immutable() -> None:
    info = make_pod().container(cpu="1").info()
    with pytest.raises(AttributeError):
        info.node_name = "elsewhere"  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# Constraints


def test_node_selector_is_sorted() -> None:
    info = make_pod().node_selector(zone="z1", arch="amd64", gpu="a100").info()
    assert info.constraints.node_selector == (("arch", "amd64"), ("gpu", "a100"), ("zone", "z1"))


def test_required_affinity_terms() -> None:
    info = (
        make_pod()
        .required_term(
            expressions=[
                {"key": "zone", "operator": "In", "values": ["z1", "z2"]},
                {"key": "spot", "operator": "DoesNotExist"},
                {"key": "gpus", "operator": "Gt", "values": ["3"]},
            ]
        )
        .required_term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n7"]}])
        .required_term()
        .info()
    )
    assert info.constraints.required_terms == (
        NodeSelectorTerm(
            match_expressions=(
                NodeSelectorRequirement("zone", "In", ("z1", "z2")),
                NodeSelectorRequirement("spot", "DoesNotExist", ()),
                NodeSelectorRequirement("gpus", "Gt", ("3",)),
            ),
            match_fields=(),
        ),
        NodeSelectorTerm(
            match_expressions=(),
            match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n7",)),),
        ),
        # an empty term is kept: it matches nothing, which is not the same as no term
        NodeSelectorTerm((), ()),
    )


def test_preferred_affinity_only_is_no_requirement() -> None:
    preferred = [
        {
            "weight": 1,
            "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        }
    ]
    info = (
        make_pod()
        .spec(
            affinity={
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred},
                "podAntiAffinity": {},
            }
        )
        .info()
    )
    assert info.constraints.required_terms == ()


def test_tolerations_with_defaults() -> None:
    info = (
        make_pod()
        .toleration(key="dedicated", value="ml")
        .toleration(key="gpu", operator="Exists", effect="NoSchedule")
        .toleration(operator="Exists")
        .toleration(key="x", operator="", value="y", effect="NoExecute", tolerationSeconds=5)
        .info()
    )
    assert info.constraints.tolerations == (
        Toleration("dedicated", "Equal", "ml", ""),
        Toleration("gpu", "Exists", "", "NoSchedule"),
        Toleration("", "Exists", "", ""),
        Toleration("x", "Equal", "y", "NoExecute"),
    )


def test_host_ports_from_containers_and_init_containers() -> None:
    builder = (
        make_pod()
        .container(cpu="1")
        .host_port(80)
        .host_port(53, protocol="UDP", hostIP="10.0.0.1")
        .host_port(0)
        .init(cpu="1")
        .host_port(9090)
    )
    raw = builder.obj()
    raw["spec"]["containers"][0]["ports"].append({"containerPort": 7})  # no hostPort at all
    assert parse_pod(raw).constraints.host_ports == (
        HostPort(80, "TCP", "0.0.0.0"),
        HostPort(53, "UDP", "10.0.0.1"),
        HostPort(9090, "TCP", "0.0.0.0"),
    )


def _template(name: str) -> PodBuilder:
    return (
        make_pod(name)
        .group("g")
        .container(cpu="1", gpu="1")
        .host_port(8080)
        .node_selector(pool="gpu")
        .required_term(expressions=[{"key": "zone", "operator": "In", "values": ["z1"]}])
        .toleration(key="gpu", operator="Exists", effect="NoSchedule")
    )


def test_constraints_hashable_and_shared_by_a_template() -> None:
    a = _template("worker-0").info().constraints
    b = _template("worker-1").info().constraints
    assert a == b
    assert hash(a) == hash(b)
    assert a is not NO_CONSTRAINTS
    masks = {a: "mask"}
    assert masks[b] == "mask"

    assert a is b  # one object: the placer's same-template test compares identities
    other = _template("worker-2").node_selector(pool="cpu").info().constraints
    assert other != a and other is not a
    assert len({a, b, other}) == 2


def test_pod_without_constraints_shares_the_empty_value() -> None:
    first = make_pod("a").container(cpu="1").info().constraints
    second = make_pod("b").container(cpu="2").info().constraints
    assert first is NO_CONSTRAINTS and second is NO_CONSTRAINTS
    assert first == Constraints((), (), (), ())


# --------------------------------------------------------------------------------------------
# QoS


QOS_CASES: list[tuple[str, PodBuilder, str]] = [
    ("nothing set", make_pod().container().container(), "BestEffort"),
    ("only extended resources", make_pod().container(gpu="1", limits={"gpu": "1"}), "BestEffort"),
    ("zero requests count as unset", make_pod().container(cpu="0", memory="0"), "BestEffort"),
    (
        "requests equal limits",
        make_pod().container(cpu="1", memory="1Gi", limits={"cpu": "1", "memory": "1Gi"}),
        "Guaranteed",
    ),
    (
        "limits only (requests default to them)",
        make_pod().container(limits={"cpu": "1", "memory": "1Gi", "gpu": "1"}),
        "Guaranteed",
    ),
    (
        "equal in another notation",
        make_pod().container(cpu="1000m", memory="1024Mi", limits={"cpu": "1", "memory": "1Gi"}),
        "Guaranteed",
    ),
    (
        "init containers too",
        make_pod()
        .container(limits={"cpu": "1", "memory": "1Gi"})
        .init(limits={"cpu": "2", "memory": "1Gi"}),
        "Guaranteed",
    ),
    ("requests only", make_pod().container(cpu="1", memory="1Gi"), "Burstable"),
    (
        "requests below limits",
        make_pod().container(cpu="500m", memory="1Gi", limits={"cpu": "1", "memory": "1Gi"}),
        "Burstable",
    ),
    ("cpu limit only", make_pod().container(limits={"cpu": "1"}), "Burstable"),
    (
        "one container without limits",
        make_pod().container(limits={"cpu": "1", "memory": "1Gi"}).container(),
        "Burstable",
    ),
    (
        "an init container without limits",
        make_pod().container(limits={"cpu": "1", "memory": "1Gi"}).init(cpu="100m"),
        "Burstable",
    ),
]


@pytest.mark.parametrize(
    ("builder", "qos"), [pytest.param(b, q, id=name) for name, b, q in QOS_CASES]
)
def test_qos_computed_when_absent(builder: PodBuilder, qos: str) -> None:
    raw = builder.obj()
    del raw["status"]
    assert parse_pod(raw).qos_rank == QOS_RANK[qos]


@pytest.mark.parametrize("qos", sorted(QOS_RANK))
def test_qos_from_status_is_trusted(qos: str) -> None:
    # the status wins over the containers: the server computed it when the pod was created
    info = make_pod().container(cpu="1").status(qosClass=qos).info()
    assert info.qos_rank == QOS_RANK[qos]


# --------------------------------------------------------------------------------------------
# Malformed input: always PodParseError, always naming the field

Mutation = Callable[[dict[str, Any]], None]


def put(*path: str | int, value: Any) -> Mutation:
    """Set ``value`` at ``path`` inside the raw pod."""

    def mutate(pod: dict[str, Any]) -> None:
        target: Any = pod
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


def drop(*path: str | int) -> Mutation:
    def mutate(pod: dict[str, Any]) -> None:
        target: Any = pod
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return mutate


def required(terms: Any) -> Mutation:
    """Set the pod's required node affinity terms."""
    rule = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    return put("spec", "affinity", value={"nodeAffinity": rule})


C0 = ("spec", "containers", 0)
REQ = (*C0, "resources", "requests")
TERMS = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
)

MALFORMED: list[tuple[Mutation, str]] = [
    (
        put(*REQ, "cpu", value="abc"),
        'spec.containers[0].resources.requests[cpu]: invalid quantity "abc"',
    ),
    (
        put(*REQ, "memory", value="1Zi"),
        'spec.containers[0].resources.requests[memory]: invalid quantity "1Zi"',
    ),
    (
        put(*REQ, "cpu", value=[1]),
        "spec.containers[0].resources.requests[cpu]: invalid quantity [1]",
    ),
    (
        put(*REQ, "cpu", value=True),
        "spec.containers[0].resources.requests[cpu]: invalid quantity True",
    ),
    (
        put(*REQ, "cpu", value=None),
        "spec.containers[0].resources.requests[cpu]: invalid quantity None",
    ),
    (put(*REQ, "cpu", value=float("nan")), "spec.containers[0].resources.requests[cpu]: invalid"),
    (
        put(*REQ, "cpu", value="-1"),
        'spec.containers[0].resources.requests[cpu]: must be greater than or equal to 0, got "-1"',
    ),
    (
        put(*REQ, "cpu", value="-1n"),
        "spec.containers[0].resources.requests[cpu]: must be greater than or equal to 0",
    ),
    (
        put(*REQ, "memory", value=-0.5),
        "spec.containers[0].resources.requests[memory]: must be greater than or equal to 0",
    ),
    (
        put(*REQ, "nvidia.com/gpu", value="-2"),
        "spec.containers[0].resources.requests[nvidia.com/gpu]: must be",
    ),
    (
        put(*C0, "resources", "limits", value={"memory": "lots"}),
        'spec.containers[0].resources.limits[memory]: invalid quantity "lots"',
    ),
    (
        put(*C0, "resources", "limits", value=["1"]),
        "spec.containers[0].resources.limits: expected an object, got a list",
    ),
    (
        put(*REQ, value=["cpu"]),
        "spec.containers[0].resources.requests: expected an object, got a list",
    ),
    (
        put(*REQ, value="1"),
        "spec.containers[0].resources.requests: expected an object, got a string",
    ),
    (
        put(*C0, "resources", value=[]),
        "spec.containers[0].resources: expected an object, got a list",
    ),
    (put(*C0, value="c"), "spec.containers[0]: expected an object, got a string"),
    (
        put("spec", "containers", value={"name": "c"}),
        "spec.containers: expected a list, got an object",
    ),
    (
        put("spec", "initContainers", value=[{"resources": {"requests": {"cpu": "x"}}}]),
        'spec.initContainers[0].resources.requests[cpu]: invalid quantity "x"',
    ),
    (
        put("spec", "initContainers", value=[None]),
        "spec.initContainers[0]: expected an object, got null",
    ),
    (
        put("spec", "initContainers", value=[{"restartPolicy": 1}]),
        "spec.initContainers[0].restartPolicy: expected a string",
    ),
    (put("spec", "overhead", value={"cpu": "1x"}), 'spec.overhead[cpu]: invalid quantity "1x"'),
    (put("spec", "overhead", value=[]), "spec.overhead: expected an object, got a list"),
    (put("spec", value=[]), "spec: expected an object, got a list"),
    (drop("spec"), "spec: required"),
    (put("metadata", value="m"), "metadata: expected an object, got a string"),
    (drop("metadata"), "metadata: required"),
    (drop("metadata", "name"), "metadata.name: required"),
    (put("metadata", "name", value=5), "metadata.name: expected a string, got a number"),
    (drop("metadata", "namespace"), "metadata.namespace: required"),
    (put("metadata", "uid", value={}), "metadata.uid: expected a string, got an object"),
    (put("metadata", "labels", value=["a"]), "metadata.labels: expected an object, got a list"),
    (
        put("metadata", "labels", value={"a": 1}),
        "metadata.labels[a]: expected a string value, got a number",
    ),
    (
        put("metadata", "resourceVersion", value="12a"),
        'metadata.resourceVersion: expected a decimal integer, got "12a"',
    ),
    (
        put("metadata", "resourceVersion", value="-3"),
        "metadata.resourceVersion: expected a decimal integer",
    ),
    (
        put("metadata", "creationTimestamp", value="yesterday"),
        'metadata.creationTimestamp: invalid timestamp "yesterday"',
    ),
    (
        put("metadata", "creationTimestamp", value=1700000000),
        "metadata.creationTimestamp: invalid timestamp 1700000000",
    ),
    (put("spec", "priority", value="high"), "spec.priority: expected an integer, got a string"),
    (put("spec", "priority", value=True), "spec.priority: expected an integer, got a boolean"),
    (put("spec", "priority", value=1.5), "spec.priority: expected an integer, got a number"),
    (put("spec", "nodeName", value=["n"]), "spec.nodeName: expected a string, got a list"),
    (put("spec", "schedulerName", value=0), "spec.schedulerName: expected a string"),
    (put("spec", "schedulingGates", value={"name": "g"}), "spec.schedulingGates: expected a list"),
    (put("spec", "nodeSelector", value=["zone"]), "spec.nodeSelector: expected an object"),
    (
        put("spec", "nodeSelector", value={"zone": 1}),
        "spec.nodeSelector[zone]: expected a string value, got a number",
    ),
    (
        put("spec", "tolerations", value={"key": "a"}),
        "spec.tolerations: expected a list, got an object",
    ),
    (
        put("spec", "tolerations", value=["a"]),
        "spec.tolerations[0]: expected an object, got a string",
    ),
    (
        put("spec", "tolerations", value=[{"operator": "Maybe"}]),
        'spec.tolerations[0].operator: unsupported operator "Maybe"',
    ),
    (
        put("spec", "tolerations", value=[{"key": 3}]),
        "spec.tolerations[0].key: expected a string, got a number",
    ),
    (put("spec", "affinity", value=[]), "spec.affinity: expected an object, got a list"),
    (
        put("spec", "affinity", value={"nodeAffinity": 1}),
        "spec.affinity.nodeAffinity: expected an object, got a number",
    ),
    (required({}), f"{TERMS}: expected a list, got an object"),
    (
        required([{"matchExpressions": [{"key": "a", "operator": "Near"}]}]),
        f'{TERMS}[0].matchExpressions[0].operator: unsupported operator "Near"',
    ),
    (
        required([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": "n"}]}]),
        f"{TERMS}[0].matchFields[0].values: expected a list, got a string",
    ),
    (
        required([{"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}]),
        f"{TERMS}[0].matchExpressions[0].values[0]: expected a string, got a number",
    ),
    (required(["term"]), f"{TERMS}[0]: expected an object, got a string"),
    (
        put(*C0, "ports", value=[{"hostPort": "80"}]),
        "spec.containers[0].ports[0].hostPort: expected an integer, got a string",
    ),
    (
        put(*C0, "ports", value={"hostPort": 80}),
        "spec.containers[0].ports: expected a list, got an object",
    ),
    (
        put(*C0, "ports", value=[{"hostPort": 80, "protocol": 6}]),
        "spec.containers[0].ports[0].protocol: expected a string",
    ),
    (put("status", value=[]), "status: expected an object, got a list"),
    (put("status", "qosClass", value="Premium"), 'status.qosClass: unknown QoS class "Premium"'),
    (put("status", "phase", value=1), "status.phase: expected a string, got a number"),
]


@pytest.mark.parametrize(("mutate", "message"), MALFORMED)
def test_malformed_pod_names_the_field(mutate: Mutation, message: str) -> None:
    raw = (
        make_pod()
        .container(cpu="1", memory="1Gi", gpu="1", limits={"cpu": "1"})
        .status(qosClass="Burstable")
        .obj()
    )
    mutate(raw)
    with pytest.raises(PodParseError) as info:
        parse_pod(raw)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_malformed_quantity_in_computed_qos_is_a_parse_error() -> None:
    raw = make_pod().container(limits={"memory": "1Q"}).obj()
    del raw["status"]
    with pytest.raises(PodParseError, match=r"spec\.containers\[0\]\.resources\.limits\[memory\]"):
        parse_pod(raw)


@pytest.mark.parametrize("raw", [None, [], "pod", 3, b"{}"])
def test_non_object_pod(raw: Any) -> None:
    with pytest.raises(PodParseError, match=r"^pod: expected an object"):
        parse_pod(raw)


@pytest.mark.parametrize("spec", [None, [], "spec", 1])
def test_pod_requests_of_a_non_object_spec(spec: Any) -> None:
    with pytest.raises(PodParseError, match=r"^spec: expected an object"):
        pod_requests(spec)


def test_long_offending_values_are_shortened_in_messages() -> None:
    raw = make_pod().container(cpu="9" * 500 + "x").obj()
    with pytest.raises(PodParseError) as info:
        parse_pod(raw)
    shown = '"' + "9" * 60 + "..."  # 64 characters at most
    assert (
        str(info.value) == f"spec.containers[0].resources.requests[cpu]: invalid quantity {shown}"
    )


# --------------------------------------------------------------------------------------------
# Properties

MILLIS = st.integers(min_value=0, max_value=64_000)


def _cpu_text(draw: st.DrawFn, millis: int) -> str | int:
    """One amount of CPU written in one of the notations Kubernetes accepts."""
    style = draw(st.sampled_from(["milli", "decimal", "int"]))
    if style == "int" and millis % 1000 == 0:
        return millis // 1000
    if style == "decimal":
        return str(Decimal(millis) / 1000)
    return f"{millis}m"


@st.composite
def containers(draw: st.DrawFn, max_size: int = 5) -> list[tuple[int, int]]:
    """(cpu millis, memory MiB) per container."""
    return draw(st.lists(st.tuples(MILLIS, st.integers(0, 4096)), max_size=max_size))


@st.composite
def plain_pods(draw: st.DrawFn) -> tuple[dict[str, Any], list[int], list[int]]:
    regular = draw(containers())
    inits = draw(containers(max_size=4))
    builder = make_pod()
    for millis, mib in regular:
        builder.container(cpu=_cpu_text(draw, millis), memory=f"{mib}Mi")
    for millis, mib in inits:
        builder.init(cpu=_cpu_text(draw, millis), memory=f"{mib}Mi")
    return builder.obj(), [m for m, _ in regular], [m for m, _ in inits]


@given(plain_pods())
@settings(max_examples=300)
def test_property_cpu_is_max_of_sum_and_largest_init(
    case: tuple[dict[str, Any], list[int], list[int]],
) -> None:
    raw, regular, inits = case
    requests = parse_pod(raw).requests
    assert all(amount >= 0 for amount in requests.values())
    assert requests["pods"] == 1
    assert requests.get("cpu", 0) == max(sum(regular), max(inits, default=0))


@st.composite
def pods_with_sidecars(
    draw: st.DrawFn,
) -> tuple[dict[str, Any], list[int], list[tuple[bool, int]]]:
    regular = [m for m, _ in draw(containers())]
    inits = draw(st.lists(st.tuples(st.booleans(), MILLIS), max_size=6))
    builder = make_pod()
    for millis in regular:
        builder.container(cpu=_cpu_text(draw, millis))
    for is_sidecar, millis in inits:
        (builder.sidecar if is_sidecar else builder.init)(cpu=_cpu_text(draw, millis))
    overhead = draw(st.one_of(st.none(), MILLIS))
    if overhead is not None:
        builder.overhead(cpu=f"{overhead}m")
    return builder.obj(), regular, inits


@given(pods_with_sidecars())
@settings(max_examples=300)
def test_property_sidecars_match_a_simulated_startup(
    case: tuple[dict[str, Any], list[int], list[tuple[bool, int]]],
) -> None:
    """Replay the pod's start: init containers one by one (sidecars stay up), then the rest.

    The request must be the peak of what runs at once, plus the overhead.
    """
    raw, regular, inits = case
    running_sidecars = 0
    peak = 0
    for is_sidecar, millis in inits:
        if is_sidecar:
            running_sidecars += millis
            peak = max(peak, running_sidecars)
        else:
            peak = max(peak, running_sidecars + millis)
    peak = max(peak, running_sidecars + sum(regular))
    overhead = raw["spec"].get("overhead", {}).get("cpu", "0m")
    expected = peak + int(overhead.removesuffix("m"))

    requests = parse_pod(raw).requests
    assert all(amount >= 0 for amount in requests.values())
    assert requests.get("cpu", 0) == expected


def test_the_bound_copy_of_a_pending_pod_is_the_recorded_bound_pod_parsed() -> None:
    """The confirmation of a binding reuses the pending pod's PodInfo (``bound_copy``) instead
    of parsing the pod again: it must be what parsing the bound pod gives, field for field."""
    raw = orjson.loads(POD_BOUND.read_bytes())
    pending = copy.deepcopy(raw)
    del pending["spec"]["nodeName"]
    pending["metadata"]["resourceVersion"] = "38001"
    pending["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3"}
    ]
    before = parse_pod(pending)
    assert not before.assigned and before.unschedulable_message == "0/3"
    after = bound_copy(before, "bench-node-00029", 38876, "Pending")
    assert after == parse_pod(raw)
    assert after == dataclasses.replace(
        before,
        node_name="bench-node-00029",
        resource_version=38876,
        phase="Pending",
        unschedulable_message=None,
    )
    assert before.node_name == ""  # the pending one is left as it was


def _fields_of(info: PodInfo) -> dict[str, Any]:
    return {f.name: getattr(info, f.name) for f in dataclasses.fields(PodInfo)}


def test_what_parse_pod_and_bound_copy_build_are_frozen_pod_infos_like_the_constructors() -> None:
    """Both write the slots of a writable twin class and then make it a PodInfo: what comes
    out is a PodInfo (not the twin) that refuses changes like any other, and equals, field for
    field (``key`` included), what the dataclass's own ``__init__`` and ``replace`` give."""
    raw = orjson.loads(POD_BOUND.read_bytes())
    parsed = parse_pod(raw)
    built = PodInfo(
        **{f.name: getattr(parsed, f.name) for f in dataclasses.fields(PodInfo) if f.init}
    )
    assert type(parsed) is PodInfo
    assert _fields_of(parsed) == _fields_of(built)
    assert parsed.key == (raw["metadata"]["namespace"], raw["metadata"]["name"])
    copied = bound_copy(parsed, "elsewhere", 7, "Running")
    assert type(copied) is PodInfo
    assert _fields_of(copied) == _fields_of(
        dataclasses.replace(
            parsed,
            node_name="elsewhere",
            resource_version=7,
            phase="Running",
            unschedulable_message=None,
        )
    )
    for info in (parsed, copied):
        with pytest.raises(dataclasses.FrozenInstanceError):
            info.node_name = "changed"  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            del info.phase
    assert parsed.node_name == raw["spec"]["nodeName"]  # the copy left the original as it was


# --------------------------------------------------------------------------------------------
# The node-facing fields parsed once per template


def _with_token_volume(builder: PodBuilder, suffix: str) -> dict[str, Any]:
    """The pod as the API server admits it: a projected token volume of its own, mounted."""
    raw = builder.obj()
    volume = f"kube-api-access-{suffix}"
    raw["spec"]["volumes"] = [{"name": volume, "projected": {"sources": []}}]
    for container in raw["spec"]["containers"]:
        container["volumeMounts"] = [{"name": volume, "mountPath": "/var/run/secrets"}]
    return raw


def test_the_members_of_a_template_are_parsed_for_placement_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Their whole specs differ (each its own token volume), what placement reads does not."""
    calls: list[int] = []
    parse_requests = podinfo.pod_requests

    def counted(spec: Any) -> dict[str, int]:
        calls.append(1)
        return parse_requests(spec)

    monkeypatch.setattr(podinfo, "pod_requests", counted)
    podinfo._PARSED_FIELDS.clear()
    first = parse_pod(_with_token_volume(_template("worker-0"), "a1b2c"))
    second = parse_pod(_with_token_volume(_template("worker-1"), "x9y8z"))
    assert len(calls) == 1
    assert second.requests is first.requests and second.constraints is first.constraints
    other = parse_pod(_with_token_volume(_template("worker-2").container(cpu="2"), "q1"))
    assert len(calls) == 2 and other.requests != first.requests


@pytest.mark.parametrize(
    "builder", [pytest.param(b, id=name) for name, b, _ in REQUEST_CASES] + [_template("t")]
)
def test_remembered_placement_fields_are_a_fresh_parse(builder: PodBuilder) -> None:
    podinfo._PARSED_FIELDS.clear()
    fresh = parse_pod(builder.obj())
    assert parse_pod(builder.obj()) == fresh  # (the second from what the first left)
    assert len(podinfo._PARSED_FIELDS) == 1


@pytest.mark.parametrize(("mutate", "message"), MALFORMED)
def test_a_malformed_pod_is_reported_after_its_well_formed_twin(
    mutate: Mutation, message: str
) -> None:
    valid = make_pod().container(cpu="1", memory="1Gi", gpu="1", limits={"cpu": "1"})
    parse_pod(valid.status(qosClass="Burstable").obj())
    raw = valid.obj()
    mutate(raw)
    for _ in range(2):  # nothing of a failed parse is remembered
        with pytest.raises(PodParseError) as info:
            parse_pod(raw)
        assert message in str(info.value)


def test_a_pod_wrong_in_several_fields_is_told_the_same_one_as_before() -> None:
    """The remembered placement fields are read where parsing read them: a wrong phase is
    still reported before a wrong quantity further on."""
    raw = make_pod().container(cpu="lots").status(qosClass="Burstable", phase=1).obj()
    with pytest.raises(PodParseError, match=r"status\.phase: expected a string"):
        parse_pod(raw)
