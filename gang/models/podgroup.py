"""PodGroups as the scheduler sees them: validated once at the boundary, then plain values.

A PodGroup is user input (``kubectl apply``), so anything can arrive: ``minMember: 0``,
``"three"``, negative quantities in ``minResources``, a timeout of a year. The scheduler must
report such a group clearly and keep serving everyone else, never crash or guess. So raw JSON
goes through a pydantic model here — the one place that knows the rules — and comes out either
as a ``PodGroupInfo`` with canonical integer resource units, or as a ``PodGroupInfo`` carrying
``error`` (the message shown in Events and the status condition) and no spec.

The field names and semantics are those of the Coscheduling plugin's
``scheduling.x-k8s.io/v1alpha1`` PodGroup, so existing objects keep working.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from gang.models.quantity import QuantityError, parse_quantity, resource_units
from gang.models.topologyapis import TopologyAsk, asks_in_annotations

POD_GROUP_GROUP = "scheduling.x-k8s.io"
POD_GROUP_VERSION = "v1alpha1"
POD_GROUP_PLURAL = "podgroups"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: the longest wait for a quorum we accept; longer values are surely a unit mistake.
#: the PodGroup condition saying capacity is held for the gang (reservation), and how its
#: message names the nodes: "N node(s) held: a, b, c; ..." or, when too many to name, "N node(s)
#: held: a, b, ... (and K more); ..."
RESERVED_CONDITION = "Reserved"
_NODES_NAMED = 24
MAX_SCHEDULE_TIMEOUT_SECONDS = 7 * 24 * 3600
#: no gang is bigger than the largest clusters' pod count; above this is a typo.
MAX_MIN_MEMBER = 100_000


class PodGroupSpec(BaseModel):
    """The validated spec; unknown fields are ignored (forward compatibility)."""

    model_config = ConfigDict(extra="ignore")

    min_member: StrictInt = Field(alias="minMember", ge=1, le=MAX_MIN_MEMBER)
    min_resources: dict[str, str | StrictInt] = Field(default_factory=dict, alias="minResources")
    #: 0 means "the scheduler's default", as unset does: the MPI Operator writes 0 when its
    #: MPIJob names no timeout, and Kubeflow Trainer documents 0 as the default
    schedule_timeout_seconds: StrictInt | None = Field(
        default=None, alias="scheduleTimeoutSeconds", ge=0, le=MAX_SCHEDULE_TIMEOUT_SECONDS
    )

    @field_validator("min_resources")
    @classmethod
    def _quantities(cls, value: dict[str, str | int]) -> dict[str, str | int]:
        for name, quantity in value.items():
            try:
                parsed = parse_quantity(quantity)
            except QuantityError as err:
                raise ValueError(f"{name}: {err}") from None
            if parsed < 0:
                raise ValueError(f"{name}: must not be negative, got {quantity!r}")
        return value


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    namespace: str
    name: str
    uid: str
    resource_version: int
    creation_timestamp: float
    min_member: int = 1
    #: canonical integer units (cpu in millicores, everything else whole units)
    min_resources: Mapping[str, int] = field(default_factory=dict)
    schedule_timeout_seconds: float | None = None
    #: why the spec is unusable, or None; a group with an error is never scheduled
    error: str | None = None
    status: Mapping[str, Any] = field(default_factory=dict)
    #: the API it was read from (see ``gang.models.groupapis``) and in which version
    api: str = "coscheduling"
    version: str = POD_GROUP_VERSION
    #: the gang's name among all APIs: ``name`` with the API's prefix ("" for Coscheduling)
    group: str = ""
    #: the group's own priority (native ``spec.priority``): the gang's, when set
    priority: int | None = None
    priority_class_name: str = ""
    #: Volcano: the queue it names (``spec.queue``) and per-task minimums
    queue: str = ""
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    #: its pods may be preempted one by one (native ``disruptionMode: Pod`` / ``single``)
    disrupt_single: bool = False
    #: the object's labels (a KAI queue label names the gang's queue, whatever its API)
    labels: Mapping[str, str] = field(default_factory=dict)
    #: what the group asks of the topology (Kueue/KAI annotations on it, the native spec)
    topology: tuple[TopologyAsk, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.group or self.name


def _datetime(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as Kubernetes writes it, or None when absent or malformed."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_timestamp(value: Any) -> float:
    """RFC 3339 ``creationTimestamp`` to epoch seconds; 0.0 when absent or malformed."""
    moment = _datetime(value)
    return moment.timestamp() if moment is not None else 0.0


def describe_errors(err: ValidationError) -> str:
    parts = []
    for problem in err.errors():
        where = ".".join(str(p) for p in problem["loc"])
        parts.append(f"spec.{where}: {problem['msg']}")
    return "; ".join(parts)


_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def _is_rfc3339(value: Any) -> bool:
    """A date-time the apiserver's ``format: date-time`` check accepts."""
    return (
        isinstance(value, str) and bool(_RFC3339.fullmatch(value)) and _datetime(value) is not None
    )


def _status(value: Any) -> Mapping[str, Any]:
    """The stored status, reduced to the shapes the status writer reads back and merges.

    Anyone with ``podgroups/status`` rights can write anything there (and a CRD without a typed
    status schema stores it as sent). A ``conditions`` that is not a list of objects must not
    take the status writer down, and a malformed timestamp must not be carried into the status
    it writes (the CRD would refuse that write, and every later one).
    """
    if not isinstance(value, Mapping):
        return {}
    status = dict(value)
    conditions = status.pop("conditions", None)
    if isinstance(conditions, list):
        # a condition's lastTransitionTime is carried over while its status stays the same
        status["conditions"] = [
            c
            for c in conditions
            if isinstance(c, Mapping) and _is_rfc3339(c.get("lastTransitionTime"))
        ]
    if "scheduleStartTime" in status and not _is_rfc3339(status["scheduleStartTime"]):
        del status["scheduleStartTime"]
    return status


def podgroup_base(raw: Mapping[str, Any]) -> PodGroupInfo:
    """What every gang API's object shares: identity, version, age, the status it carries."""
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    try:
        rv = int(meta.get("resourceVersion") or 0)
    except (TypeError, ValueError):
        rv = 0
    return PodGroupInfo(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=rv,
        creation_timestamp=parse_timestamp(meta.get("creationTimestamp")),
        status=_status(raw.get("status")),
        labels=_labels(meta.get("labels")),
        topology=tuple(asks_in_annotations(meta.get("annotations"))),
    )


def _labels(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def parse_podgroup(raw: Mapping[str, Any]) -> PodGroupInfo:
    """Raw PodGroup JSON → PodGroupInfo; an invalid spec yields ``error``, never an exception."""
    base = podgroup_base(raw)
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        return replace(base, error="spec: required, with spec.minMember")
    try:
        parsed = PodGroupSpec.model_validate(spec)
    except ValidationError as err:
        return replace(base, error=describe_errors(err))
    timeout = parsed.schedule_timeout_seconds
    return replace(
        base,
        min_member=parsed.min_member,
        min_resources={k: resource_units(k, v) for k, v in parsed.min_resources.items()},
        schedule_timeout_seconds=float(timeout) if timeout else None,
    )


#: what separates a hold's node count from the nodes' names in a ``Reserved`` message
HELD_MARKER: Final = " node(s) held: "


def held_nodes_text(nodes: Sequence[str]) -> str:
    """The start of a ``Reserved`` condition's message: how many nodes, and which."""
    shown = ", ".join(nodes[:_NODES_NAMED])
    if len(nodes) > _NODES_NAMED:
        shown += f", ... (and {len(nodes) - _NODES_NAMED} more)"
    return f"{len(nodes)}{HELD_MARKER}{shown}"


def held_nodes_of(message: str) -> set[str] | None:
    """The nodes a ``Reserved`` condition's message names; None when it does not name all."""
    _, found, rest = message.partition(HELD_MARKER)
    if not found:
        return None
    names = rest.split(";", 1)[0]
    if "(and " in names:
        return None
    return {n.strip() for n in names.split(",") if n.strip()}
