"""Tests for gang.models.podgroup (PodGroup validation) and gang.models.settings (configuration)."""

from __future__ import annotations

import calendar
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gang.models.podgroup import (
    MAX_MIN_MEMBER,
    MAX_SCHEDULE_TIMEOUT_SECONDS,
    PodGroupInfo,
    parse_podgroup,
    parse_timestamp,
)
from gang.models.settings import SchedulerConfig, ScoreWeights

GIB = 1024**3
JsonValue = Any


def podgroup(spec: JsonValue = None, *, omit_spec: bool = False, **meta: Any) -> dict[str, Any]:
    """A raw PodGroup as the apiserver serves it."""
    raw: dict[str, Any] = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "uid": "uid-train",
            "resourceVersion": "42",
            "creationTimestamp": "2026-11-21T14:39:41Z",
            **meta,
        },
    }
    if not omit_spec:
        raw["spec"] = spec
    return raw


def parse_spec(spec: JsonValue) -> PodGroupInfo:
    return parse_podgroup(podgroup(spec))


def assert_invalid(info: PodGroupInfo, *fragments: str) -> None:
    """An invalid group: an error naming the field, and no usable spec values."""
    assert info.error is not None
    for fragment in fragments:
        assert fragment in info.error, info.error
    assert info.min_member == 1
    assert info.min_resources == {}
    assert info.schedule_timeout_seconds is None
    # metadata is still read: the group can be reported by name
    assert info.key == ("ml", "train")


# --------------------------------------------------------------------------------------------
# Valid specs


def test_valid_spec() -> None:
    info = parse_podgroup(
        podgroup(
            {
                "minMember": 4,
                "minResources": {"cpu": "3500m", "memory": "8Gi", "nvidia.com/gpu": 4},
                "scheduleTimeoutSeconds": 120,
            }
        )
        | {"status": {"phase": "Pending", "running": 0}}
    )
    assert info.error is None
    assert info.key == ("ml", "train")
    assert (info.namespace, info.name, info.uid) == ("ml", "train", "uid-train")
    assert info.resource_version == 42
    assert info.creation_timestamp == calendar.timegm((2026, 11, 21, 14, 39, 41))
    assert info.min_member == 4
    assert info.min_resources == {"cpu": 3500, "memory": 8 * GIB, "nvidia.com/gpu": 4}
    assert info.schedule_timeout_seconds == 120.0
    assert isinstance(info.schedule_timeout_seconds, float)
    assert info.status == {"phase": "Pending", "running": 0}


def test_minimal_spec_takes_defaults() -> None:
    info = parse_spec({"minMember": 1})
    assert info.error is None
    assert info.min_member == 1
    assert info.min_resources == {}
    assert info.schedule_timeout_seconds is None


@pytest.mark.parametrize(
    ("quantities", "expected"),
    [
        ({"cpu": "500m"}, {"cpu": 500}),
        ({"cpu": "2"}, {"cpu": 2000}),
        ({"cpu": 2}, {"cpu": 2000}),
        ({"cpu": "0.1"}, {"cpu": 100}),
        ({"cpu": "1n"}, {"cpu": 1}),  # rounded up to a whole millicore
        ({"memory": "1Gi"}, {"memory": GIB}),
        ({"memory": "1G"}, {"memory": 10**9}),
        ({"memory": "1.5"}, {"memory": 2}),  # whole units, rounded up
        ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": 8}),
        ({"ephemeral-storage": "1e3"}, {"ephemeral-storage": 1000}),
        ({"pods": 0}, {"pods": 0}),
    ],
)
def test_min_resources_in_canonical_units(
    quantities: dict[str, Any], expected: dict[str, int]
) -> None:
    info = parse_spec({"minMember": 2, "minResources": quantities})
    assert info.error is None
    assert info.min_resources == expected


def test_unknown_fields_are_ignored() -> None:
    info = parse_spec({"minMember": 3, "minMembers": "x", "priorityClassName": 7, "future": {}})
    assert info.error is None
    assert info.min_member == 3


def test_snake_case_names_are_unknown_fields_too() -> None:
    info = parse_spec({"minMember": 2, "schedule_timeout_seconds": 0})
    assert info.error is None
    assert info.schedule_timeout_seconds is None
    info = parse_spec({"min_member": 3})
    assert info.error is not None and "minMember" in info.error


def test_bounds_are_inclusive() -> None:
    info = parse_spec(
        {"minMember": MAX_MIN_MEMBER, "scheduleTimeoutSeconds": MAX_SCHEDULE_TIMEOUT_SECONDS}
    )
    assert info.error is None
    assert info.min_member == MAX_MIN_MEMBER
    assert info.schedule_timeout_seconds == float(MAX_SCHEDULE_TIMEOUT_SECONDS)
    assert parse_spec({"minMember": 1, "scheduleTimeoutSeconds": 1}).schedule_timeout_seconds == 1
    assert parse_spec({"minMember": 1, "scheduleTimeoutSeconds": None}).error is None


# --------------------------------------------------------------------------------------------
# Invalid specs


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "greater than or equal to 1"),
        (-3, "greater than or equal to 1"),
        (2.5, "valid integer"),
        (2.0, "valid integer"),
        ("3", "valid integer"),
        (True, "valid integer"),
        (None, "valid integer"),
        ([3], "valid integer"),
        (MAX_MIN_MEMBER + 1, f"less than or equal to {MAX_MIN_MEMBER}"),
    ],
    ids=repr,
)
def test_invalid_min_member(value: JsonValue, message: str) -> None:
    assert_invalid(parse_spec({"minMember": value}), "spec.minMember", message)


def test_missing_min_member() -> None:
    assert_invalid(parse_spec({"minResources": {"cpu": "1"}}), "spec.minMember", "required")
    assert_invalid(parse_spec({}), "spec.minMember", "required")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-60, "greater than or equal to 0"),
        (-1, "greater than or equal to 0"),
        (MAX_SCHEDULE_TIMEOUT_SECONDS + 1, f"less than or equal to {MAX_SCHEDULE_TIMEOUT_SECONDS}"),
        (365 * 24 * 3600, "less than or equal to"),  # a year: surely a unit mistake
        (30.5, "valid integer"),
        ("30", "valid integer"),
        (False, "valid integer"),
    ],
    ids=repr,
)
def test_invalid_schedule_timeout(value: JsonValue, message: str) -> None:
    info = parse_spec({"minMember": 2, "scheduleTimeoutSeconds": value})
    assert_invalid(info, "spec.scheduleTimeoutSeconds", message)


def test_zero_schedule_timeout_means_the_default() -> None:
    """The MPI Operator writes ``scheduleTimeoutSeconds: 0`` when an MPIJob names no timeout."""
    info = parse_spec({"minMember": 3, "scheduleTimeoutSeconds": 0})
    assert info.error is None
    assert info.schedule_timeout_seconds is None


@pytest.mark.parametrize(
    ("quantities", "fragments"),
    [
        ({"cpu": "lots"}, ("cpu:", "quantities must match the regular expression")),
        ({"memory": "1GiB"}, ("memory:", "regular expression")),
        ({"memory": ""}, ("memory:", "regular expression")),
        ({"cpu": "-1"}, ("cpu: must not be negative", "'-1'")),
        ({"memory": "-1Gi"}, ("memory: must not be negative",)),
        ({"cpu": "-1n"}, ("cpu: must not be negative",)),  # would round up to 0
        ({"nvidia.com/gpu": -2}, ("nvidia.com/gpu: must not be negative",)),
        ({"cpu": True}, ("spec.minResources.cpu",)),
        ({"cpu": 1.5}, ("spec.minResources.cpu",)),
        ({"cpu": None}, ("spec.minResources.cpu",)),
        ({"cpu": {"value": 1}}, ("spec.minResources.cpu",)),
    ],
    ids=repr,
)
def test_invalid_min_resources(quantities: dict[str, Any], fragments: tuple[str, ...]) -> None:
    info = parse_spec({"minMember": 2, "minResources": quantities})
    assert_invalid(info, "spec.minResources", *fragments)


@pytest.mark.parametrize("value", ["cpu=1", ["cpu", "1"], 4])
def test_min_resources_must_be_an_object(value: JsonValue) -> None:
    assert_invalid(parse_spec({"minMember": 2, "minResources": value}), "spec.minResources")


def test_every_problem_is_reported_at_once() -> None:
    info = parse_spec({"minMember": 0, "scheduleTimeoutSeconds": -1})
    assert_invalid(info, "spec.minMember", "spec.scheduleTimeoutSeconds", "; ")


@pytest.mark.parametrize("spec", [None, [], "minMember: 2", 3, True], ids=repr)
def test_spec_must_be_an_object(spec: JsonValue) -> None:
    assert_invalid(parse_spec(spec), "spec: required")


def test_missing_spec() -> None:
    assert_invalid(parse_podgroup(podgroup(omit_spec=True)), "spec: required", "minMember")


def test_malformed_metadata_and_status_fall_back_to_defaults() -> None:
    info = parse_podgroup(
        podgroup({"minMember": 2}, resourceVersion="not-a-number", creationTimestamp="yesterday")
        | {"status": ["not", "an", "object"]}
    )
    assert info.error is None
    assert info.resource_version == 0
    assert info.creation_timestamp == 0.0
    assert info.status == {}
    bare = parse_podgroup({"spec": {"minMember": 1}})
    assert (bare.namespace, bare.name, bare.uid, bare.resource_version) == ("", "", "", 0)
    assert bare.error is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-21T14:39:41Z", float(calendar.timegm((2026, 11, 21, 14, 39, 41)))),
        ("2026-11-21T14:39:41.5Z", calendar.timegm((2026, 11, 21, 14, 39, 41)) + 0.5),
        ("2026-11-21T16:39:41+02:00", float(calendar.timegm((2026, 11, 21, 14, 39, 41)))),
        ("", 0.0),
        ("not a time", 0.0),
        (None, 0.0),
        (1700000000, 0.0),
    ],
)
def test_parse_timestamp(value: JsonValue, expected: float) -> None:
    assert parse_timestamp(value) == expected


# --------------------------------------------------------------------------------------------
# Property: no input raises

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
quantity_like = st.from_regex(
    r"[+-]?[0-9]{0,24}(\.[0-9]{0,6})?([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,12})?",
    fullmatch=True,
)
resource_names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", ""]) | st.text(
    max_size=8
)
good_quantities = st.sampled_from(["0", "1", "500m", "2Gi", "1.5", "1e3", "8"]) | st.integers(0, 64)
spec_fields = st.fixed_dictionaries(
    {},
    optional={
        "minMember": st.integers(1, 8) | st.integers(-5, MAX_MIN_MEMBER + 5) | json_values,
        "minResources": st.dictionaries(resource_names, good_quantities, max_size=3)
        | st.dictionaries(
            resource_names,
            quantity_like | st.integers(-(2**70), 2**70) | json_values,
            max_size=4,
        )
        | json_values,
        "scheduleTimeoutSeconds": st.integers(-5, MAX_SCHEDULE_TIMEOUT_SECONDS + 5) | json_values,
    },
)
#: mostly well-formed specs, so the valid branch is exercised as well
plausible_specs = st.fixed_dictionaries(
    {"minMember": st.integers(1, 8)},
    optional={
        "minResources": st.dictionaries(resource_names, good_quantities | quantity_like),
        "scheduleTimeoutSeconds": st.none() | st.integers(1, 3600),
    },
)
specs = st.one_of(
    json_values,
    plausible_specs,
    st.builds(
        lambda known, extra: {**extra, **known},
        spec_fields,
        st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    spec=specs,
    metadata=st.dictionaries(st.text(max_size=20), json_values, max_size=4),
    status=json_values,
)
def test_arbitrary_specs_never_raise(
    spec: JsonValue, metadata: dict[str, Any], status: JsonValue
) -> None:
    raw = podgroup(spec) | {"status": status}
    raw["metadata"].update(metadata)
    info = parse_podgroup(raw)
    assert isinstance(info, PodGroupInfo)
    assert isinstance(info.resource_version, int)
    assert isinstance(info.creation_timestamp, float)
    event("invalid" if info.error is not None else "valid")
    if info.error is not None:
        assert info.error.startswith("spec")
        assert (info.min_member, dict(info.min_resources)) == (1, {})
        assert info.schedule_timeout_seconds is None
        return
    assert 1 <= info.min_member <= MAX_MIN_MEMBER
    assert all(isinstance(v, int) and v >= 0 for v in info.min_resources.values())
    timeout = info.schedule_timeout_seconds
    assert timeout is None or 1 <= timeout <= MAX_SCHEDULE_TIMEOUT_SECONDS


# --------------------------------------------------------------------------------------------
# SchedulerConfig


def test_defaults_are_valid() -> None:
    config = SchedulerConfig()
    assert config.scheduler_name == "gang-scheduler"
    assert config.topology_key == "topology.kubernetes.io/zone"
    assert config.weights == ScoreWeights()
    assert config.backoff_initial_seconds <= config.backoff_max_seconds


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("scheduler_name", ""),
        ("default_schedule_timeout_seconds", 0),
        ("default_schedule_timeout_seconds", 7 * 24 * 3600 + 1),
        ("backoff_initial_seconds", 0),
        ("backoff_initial_seconds", -1.0),
        ("backoff_max_seconds", 0),
        ("unschedulable_flush_seconds", -5),
        ("topology_key", ""),
        ("bind_concurrency", 0),
        ("bind_concurrency", 1025),
        ("bind_concurrency", 2.5),
        ("qps", 0),
        ("qps", float("nan")),
        ("burst", 0),
        ("event_qps", -1),
        ("event_burst", 0),
        ("resync_period_seconds", 0),
        ("watch_timeout_seconds", 0),
        ("qps", "fast"),
    ],
    ids=lambda v: repr(v) if not isinstance(v, str) else v,
)
def test_invalid_values_are_rejected_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        SchedulerConfig.model_validate({field: value})
    locations = [problem["loc"] for problem in caught.value.errors()]
    assert locations == [(field,)]
    assert field in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("most_allocated", -1),
        ("least_allocated", 101),
        ("balanced_allocation", "a lot"),
        ("gang_packing", 1.5),
    ],
)
def test_invalid_weights_are_rejected_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        SchedulerConfig.model_validate({"weights": {field: value}})
    assert [problem["loc"] for problem in caught.value.errors()] == [("weights", field)]
    assert f"weights.{field}" in str(caught.value)


def test_unknown_settings_are_rejected_by_name() -> None:
    with pytest.raises(ValidationError) as caught:
        SchedulerConfig.model_validate({"qsp": 10})
    assert [problem["loc"] for problem in caught.value.errors()] == [("qsp",)]
    assert "Extra inputs are not permitted" in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        SchedulerConfig.model_validate({"weights": {"spread": 1}})
    assert [problem["loc"] for problem in caught.value.errors()] == [("weights", "spread")]


def test_valid_values_are_kept() -> None:
    config = SchedulerConfig.model_validate(
        {
            "scheduler_name": "mine",
            "backoff_initial_seconds": 0.05,
            "backoff_max_seconds": 2,
            "bind_concurrency": 1024,
            "weights": {"most_allocated": 0, "least_allocated": 100, "gang_packing": 0},
        }
    )
    assert config.scheduler_name == "mine"
    assert config.backoff_initial_seconds == 0.05
    assert config.bind_concurrency == 1024
    assert config.weights == ScoreWeights(
        most_allocated=0, least_allocated=100, balanced_allocation=1, gang_packing=0
    )
