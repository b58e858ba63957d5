"""Every gang API job operators emit, read into the one ``PodGroupInfo`` the scheduler knows.

A user switching to gang should change nothing but ``schedulerName``. The operators that create
training and inference jobs describe their gangs in five ways: the Coscheduling PodGroup
(``scheduling.x-k8s.io``), its older ``scheduling.sigs.k8s.io`` release, Volcano's PodGroup, and
the native Kubernetes Workload API (a ``PodGroup`` object from 1.36, the ``Workload`` with
embedded pod groups in 1.35). Each API is one row of :data:`GROUP_APIS`: where it lives, how
its objects parse, and the prefix that keeps its gang names apart from the others' (a Volcano
group ``train`` and a Coscheduling group ``train`` in one namespace are two gangs). How a *pod*
names its group is read in ``gang.state.podinfo``; how status is written back per API lives
with the status writer. Everything past this boundary sees only ``PodGroupInfo``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from gang.models.podgroup import (
    MAX_MIN_MEMBER,
    POD_GROUP_GROUP,
    POD_GROUP_VERSION,
    PodGroupInfo,
    PodGroupSpec,
    describe_errors,
    parse_podgroup,
    podgroup_base,
)
from gang.models.quantity import resource_units
from gang.models.topologyapis import native_ask, volcano_ask

COSCHEDULING = "coscheduling"
SIGS_LEGACY = "scheduler-plugins-legacy"
VOLCANO = "volcano"
NATIVE = "native"
WORKLOAD = "workload"

#: the native API's "scheduled" condition, per version (renamed in 1.37)
NATIVE_CONDITION = {
    "v1alpha2": "PodGroupScheduled",
    "v1alpha3": "PodGroupInitiallyScheduled",
    "v1beta1": "PodGroupInitiallyScheduled",
}


@dataclass(frozen=True, slots=True)
class GroupApi:
    """One gang API: the resource to watch and how its objects become ``PodGroupInfo``s."""

    name: str
    group: str
    plural: str
    kind: str
    #: versions gang understands, preferred first: it watches the first the server serves
    versions: tuple[str, ...]
    #: how its gangs' names start (none for Coscheduling, so existing names stay as they were)
    prefix: str
    #: raw object (and the version it was read in) → the pod groups it describes
    parse: Callable[[Mapping[str, Any], str], list[PodGroupInfo]]
    #: gang writes the object's status (the 1.35 Workload has none)
    has_status: bool = True
    #: ...through the ``status`` subresource (Volcano's CRD has none: the object is patched)
    status_subresource: bool = True

    def qualify(self, name: str) -> str:
        return self.prefix + name


# --- Coscheduling, and its older release ----------------------------------------------------


def _coscheduling(raw: Mapping[str, Any], version: str) -> list[PodGroupInfo]:
    info = parse_podgroup(raw)
    return [replace(info, version=version, group=info.name)]


def _sigs_legacy(raw: Mapping[str, Any], version: str) -> list[PodGroupInfo]:
    """scheduler-plugins up to 0.24: the same fields (``minResources`` may be null)."""
    spec = raw.get("spec")
    if isinstance(spec, Mapping) and spec.get("minResources") is None:
        raw = {**raw, "spec": {k: v for k, v in spec.items() if k != "minResources"}}
    info = parse_podgroup(raw)
    return [replace(info, api=SIGS_LEGACY, version=version, group="sigs:" + info.name)]


# --- Volcano ---------------------------------------------------------------------------------


class VolcanoSpec(BaseModel):
    """``scheduling.volcano.sh/v1beta1`` PodGroup spec (unknown fields ignored)."""

    model_config = ConfigDict(extra="ignore")

    min_member: StrictInt = Field(default=1, alias="minMember", ge=0, le=MAX_MIN_MEMBER)
    min_task_member: dict[str, StrictInt] = Field(default_factory=dict, alias="minTaskMember")
    min_resources: dict[str, str | StrictInt] | None = Field(default=None, alias="minResources")
    queue: str = ""
    priority_class_name: str = Field(default="", alias="priorityClassName")
    #: read by ``gang.models.topologyapis.volcano_ask`` (its errors are the gang's, not the
    #: group's: a bad ask refuses placement, the group stays valid)
    network_topology: Any = Field(default=None, alias="networkTopology")

    @field_validator("min_task_member")
    @classmethod
    def _counts(cls, value: dict[str, int]) -> dict[str, int]:
        for task, count in value.items():
            if count < 0:
                raise ValueError(f"{task}: must not be negative, got {count}")
        return value

    @field_validator("min_resources")
    @classmethod
    def _quantities(cls, value: dict[str, str | int] | None) -> dict[str, str | int] | None:
        return PodGroupSpec._quantities(value) if value else value


def _volcano(raw: Mapping[str, Any], version: str) -> list[PodGroupInfo]:
    base = replace(podgroup_base(raw), api=VOLCANO, version=version)
    base = replace(base, group="volcano:" + base.name)
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        spec = {}
    try:
        parsed = VolcanoSpec.model_validate(spec)
    except ValidationError as err:
        return [replace(base, error=describe_errors(err))]
    ask = volcano_ask(spec)
    return [
        replace(
            base,
            topology=base.topology + ((ask,) if ask is not None else ()),
            # Volcano treats minMember 0 as "no gang": one member is enough
            min_member=max(1, parsed.min_member),
            min_resources={
                k: resource_units(k, v) for k, v in (parsed.min_resources or {}).items()
            },
            min_task_member={k: v for k, v in parsed.min_task_member.items() if v > 0},
            queue=parsed.queue,
            priority_class_name=parsed.priority_class_name,
        )
    ]


# --- native Kubernetes: PodGroup (1.36+) and Workload (1.35) --------------------------------


class _Gang(BaseModel):
    model_config = ConfigDict(extra="ignore")
    min_count: StrictInt = Field(alias="minCount", ge=1, le=MAX_MIN_MEMBER)


class SchedulingPolicy(BaseModel):
    """``basic: {}`` (pods placed one by one) or ``gang: {minCount}``: exactly one."""

    model_config = ConfigDict(extra="ignore")
    basic: dict[str, Any] | None = None
    gang: _Gang | None = None

    def min_count(self) -> int:
        if (self.basic is None) == (self.gang is None):
            raise ValueError("must specify exactly one of: `basic`, `gang`")
        return self.gang.min_count if self.gang is not None else 1


class NativeSpec(BaseModel):
    """``scheduling.k8s.io`` PodGroup spec (v1alpha2, v1alpha3, v1beta1)."""

    model_config = ConfigDict(extra="ignore")
    scheduling_policy: SchedulingPolicy = Field(alias="schedulingPolicy")
    priority_class_name: str = Field(default="", alias="priorityClassName")
    priority: StrictInt | None = Field(default=None, le=1_000_000_000)
    #: v1alpha2: "Pod" | "PodGroup"; v1alpha3 and v1beta1: {single: {}} | {all: {}}
    disruption_mode: str | dict[str, Any] | None = Field(default=None, alias="disruptionMode")

    def single(self) -> bool:
        mode = self.disruption_mode
        if isinstance(mode, dict):
            return "all" not in mode
        return mode != "PodGroup"  # the default is "Pod" / single


def _native(raw: Mapping[str, Any], version: str) -> list[PodGroupInfo]:
    base = replace(podgroup_base(raw), api=NATIVE, version=version)
    base = replace(base, group="k8s:" + base.name)
    spec = raw.get("spec")
    try:
        parsed = NativeSpec.model_validate(spec if isinstance(spec, Mapping) else {})
        min_count = parsed.scheduling_policy.min_count()
    except ValidationError as err:
        return [replace(base, error=describe_errors(err))]
    except ValueError as err:
        return [replace(base, error=f"spec.schedulingPolicy: {err}")]
    native = native_ask(spec) if isinstance(spec, Mapping) else None
    return [
        replace(
            base,
            min_member=min_count,
            topology=base.topology + ((native,) if native is not None else ()),
            priority=parsed.priority,
            priority_class_name=parsed.priority_class_name,
            disrupt_single=parsed.single(),
        )
    ]


def workload_group(workload: str, pod_group: str, replica_key: str = "") -> str:
    """The gang name of a 1.35 pod's ``spec.workloadRef``: one gang per replica key."""
    name = f"workload:{workload}/{pod_group}"
    return f"{name}/{replica_key}" if replica_key else name


def _workload(raw: Mapping[str, Any], version: str) -> list[PodGroupInfo]:
    """1.35 ``Workload``: one PodGroupInfo per ``spec.podGroups[]`` entry (replica keys of it
    are separate gangs with the same spec, found through :func:`for_replica`)."""
    base = replace(podgroup_base(raw), api=WORKLOAD, version=version)
    spec = raw.get("spec")
    groups = spec.get("podGroups") if isinstance(spec, Mapping) else None
    if not isinstance(groups, list) or not groups:
        return [
            replace(
                base,
                group=workload_group(base.name, ""),
                error="spec.podGroups: Required value: must have at least one item",
            )
        ]
    out = []
    for i, entry in enumerate(groups):
        entry = entry if isinstance(entry, Mapping) else {}
        name = str(entry.get("name") or "")
        info = replace(base, group=workload_group(base.name, name))
        try:
            min_count = SchedulingPolicy.model_validate(entry.get("policy") or {}).min_count()
        except ValidationError as err:
            out.append(replace(info, error=f"spec.podGroups[{i}].policy: {describe_errors(err)}"))
            continue
        except ValueError as err:
            out.append(replace(info, error=f"spec.podGroups[{i}].policy: {err}"))
            continue
        out.append(replace(info, min_member=min_count))
    return out


def for_replica(
    groups: Mapping[tuple[str, str], PodGroupInfo], key: tuple[str, str]
) -> PodGroupInfo | None:
    """The pod group of ``key``: its own entry, or for a 1.35 replica key its pod group's."""
    found = groups.get(key)
    if found is not None or not key[1].startswith("workload:"):
        return found
    parts = key[1].split("/")
    if len(parts) != 3:
        return None
    base = groups.get((key[0], "/".join(parts[:2])))
    return replace(base, group=key[1]) if base is not None else None


GROUP_APIS: tuple[GroupApi, ...] = (
    GroupApi(
        COSCHEDULING,
        POD_GROUP_GROUP,
        "podgroups",
        "PodGroup",
        (POD_GROUP_VERSION,),
        "",
        _coscheduling,
    ),
    GroupApi(
        SIGS_LEGACY,
        "scheduling.sigs.k8s.io",
        "podgroups",
        "PodGroup",
        ("v1alpha1",),
        "sigs:",
        _sigs_legacy,
    ),
    GroupApi(
        VOLCANO,
        "scheduling.volcano.sh",
        "podgroups",
        "PodGroup",
        ("v1beta1",),
        "volcano:",
        _volcano,
        status_subresource=False,
    ),
    GroupApi(
        NATIVE,
        "scheduling.k8s.io",
        "podgroups",
        "PodGroup",
        ("v1beta1", "v1alpha3", "v1alpha2"),
        "k8s:",
        _native,
    ),
    GroupApi(
        WORKLOAD,
        "scheduling.k8s.io",
        "workloads",
        "Workload",
        ("v1alpha1",),
        "workload:",
        _workload,
        has_status=False,
    ),
)
API_BY_NAME = {api.name: api for api in GROUP_APIS}


def api_of_group(group: str) -> GroupApi:
    """The API a gang name belongs to, by its prefix."""
    for api in GROUP_APIS[1:]:
        if group.startswith(api.prefix):
            return api
    return GROUP_APIS[0]
