"""Every queue API a shared cluster already has, read into the one ``QueueSpec`` gang knows.

Platform teams describe who owns what share of a cluster in one of three ways, and a user moving
to gang should keep the objects they have: Volcano's ``Queue`` (``scheduling.volcano.sh``),
KAI Scheduler's ``Queue`` (``scheduling.run.ai``) and scheduler-plugins' namespaced
``ElasticQuota`` (``scheduling.x-k8s.io``). Each API is one row of :data:`QUEUE_APIS`; each
object becomes a :class:`QueueSpec` with one semantics (see :class:`QueueSpec`), and how each
API's fields map onto it is written beside its parser. Everything past this boundary — the queue
tree, fair share, ordering, admission — sees only ``QueueSpec``.

Bad input is user input: a negative or unparsable quantity, a quota above its limit. Such a
queue comes out with ``error`` set (the message shown in its Event and condition), never as an
exception, so one bad queue cannot stop the others being served.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from gang.models.duration import DurationError, parse_duration
from gang.models.podgroup import describe_errors, parse_timestamp
from gang.models.quantity import QuantityError, parse_quantity, resource_units, units_text

VOLCANO_QUEUE = "volcano"
KAI_QUEUE = "kai"
ELASTIC_QUOTA = "elasticquota"
#: the queue of a gang that names none (no quota, weight 1, no limit)
DEFAULT_QUEUE = "default"
#: the label that puts a gang (on its pods or its group, whatever its gang API) in a KAI queue
KAI_QUEUE_LABEL = "kai.scheduler/queue"
#: KAI Scheduler's queues count GPUs under this name
GPU = "nvidia.com/gpu"
#: Volcano's queue a PodGroup without ``spec.queue`` belongs to
VOLCANO_DEFAULT_QUEUE = "default"
#: Volcano's hierarchy root: a queue whose parent is ``root`` is a top-level queue
VOLCANO_ROOT = "root"
#: on any queue object: how long a gang of the queue runs before reclaim may take it (a Go
#: duration; KAI's ``spec.reclaimMinRuntime`` says the same and wins where both are set)
RECLAIM_MIN_RUNTIME_ANNOTATION = "gang.scheduling/reclaim-min-runtime"
#: Volcano Queue states in which it takes no new gangs
CLOSED_STATES = frozenset({"Closed", "Closing"})


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One queue, whichever API described it. Amounts are in the scheduler's integer units
    (``gang.models.quantity.resource_units``: cpu in millicores, memory in bytes, GPUs whole).

    The semantics, per resource:
    - ``quota``: what the queue is entitled to; lent to other queues while it does not use it.
      A resource absent from it has quota 0; :data:`ALL` (-1): everything its parent has.
    - ``guarantee``: never reclaimed below (a part of the quota, at most the quota).
    - ``limit``: a hard cap on what the queue holds; a resource absent from it is unlimited.
    - ``weight``: how what is left after quotas is shared among siblings (per resource; a
      resource absent from it has ``default_weight``); 0: the queue gets no part of it.
    - ``priority``: siblings of higher priority are served first from what is left after
      quotas; among equals, by weight.
    Queues form a tree through ``parent`` (any depth); only leaves hold gangs.
    """

    #: gang's name for it: ``API/name`` (``volcano/team-a``, ``kai/team-a``, ``elasticquota/ns``)
    key: str
    #: the name users give it (the object's name; for an ElasticQuota, its namespace)
    name: str
    api: str
    parent: str | None = None
    priority: int = 0
    quota: Mapping[str, int] = field(default_factory=dict)
    guarantee: Mapping[str, int] = field(default_factory=dict)
    limit: Mapping[str, int] = field(default_factory=dict)
    weight: Mapping[str, float] = field(default_factory=dict)
    default_weight: float = 1.0
    #: other queues may take back what it holds above its fair share (Volcano ``reclaimable``)
    reclaimable: bool = True
    #: seconds a gang of this queue runs before reclaim may take it (KAI ``reclaimMinRuntime``)
    reclaim_min_runtime: float = 0.0
    #: it takes new gangs (a Volcano queue can be Closed)
    open: bool = True
    #: why the object is unusable, or None
    error: str | None = None
    #: the object behind it, for Events and status: (namespace, name, uid); empty for default
    object_namespace: str = ""
    object_name: str = ""
    uid: str = ""
    resource_version: int = 0
    creation_timestamp: float = 0.0
    #: the status the object carries (read back to merge what gang writes)
    status: Mapping[str, Any] = field(default_factory=dict)

    def weight_of(self, resource: str) -> float:
        return self.weight.get(resource, self.default_weight)


def default_queue() -> QueueSpec:
    return QueueSpec(key=DEFAULT_QUEUE, name=DEFAULT_QUEUE, api=DEFAULT_QUEUE)


@dataclass(frozen=True, slots=True)
class QueueApi:
    """One queue API: the resource to watch and how its objects become ``QueueSpec``s."""

    name: str
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    parse: Callable[[Mapping[str, Any]], QueueSpec]
    #: gang writes the object's status through the ``status`` subresource (else the object)
    status_subresource: bool = True

    def key(self, name: str) -> str:
        return f"{self.name}/{name}"


def _base(raw: Mapping[str, Any], api: str) -> QueueSpec:
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    try:
        rv = int(meta.get("resourceVersion") or 0)
    except (TypeError, ValueError):
        rv = 0
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "")
    status = raw.get("status")
    annotations = meta.get("annotations")
    min_runtime = (
        annotations.get(RECLAIM_MIN_RUNTIME_ANNOTATION)
        if isinstance(annotations, Mapping)
        else None
    )
    error = None
    try:
        runtime = _min_runtime(
            f"metadata.annotations[{RECLAIM_MIN_RUNTIME_ANNOTATION}]", min_runtime
        )
    except QueueInputError as err:
        runtime, error = 0.0, str(err)
    return QueueSpec(
        key=f"{api}/{namespace if api == ELASTIC_QUOTA else name}",
        name=namespace if api == ELASTIC_QUOTA else name,
        api=api,
        object_namespace=namespace,
        object_name=name,
        uid=str(meta.get("uid") or ""),
        resource_version=rv,
        creation_timestamp=parse_timestamp(meta.get("creationTimestamp")),
        status=dict(status) if isinstance(status, Mapping) else {},
        reclaim_min_runtime=runtime,
        error=error,
    )


def _min_runtime(where: str, value: Any) -> float:
    """A reclaim min runtime in seconds (none: 0)."""
    if value is None or value == "":
        return 0.0
    try:
        seconds = parse_duration(str(value))
    except DurationError as err:
        raise QueueInputError(f"{where}: {err}") from None
    if seconds < 0:
        raise QueueInputError(f"{where}: must not be negative, got {value}")
    return seconds


class QueueInputError(ValueError):
    """A field of a queue object gang cannot use; the message names the field."""


def _amounts(where: str, value: Any) -> dict[str, int]:
    """A ResourceList (``{cpu: "4", nvidia.com/gpu: 8}``) in the scheduler's units."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise QueueInputError(f"{where}: must be a map of resource name to quantity")
    out: dict[str, int] = {}
    for resource, quantity in value.items():
        if not isinstance(quantity, str | int | float) or isinstance(quantity, bool):
            raise QueueInputError(f"{where}.{resource}: not a quantity: {quantity!r}")
        try:
            parsed = parse_quantity(quantity)
            units = resource_units(str(resource), quantity)
        except QuantityError as err:
            raise QueueInputError(f"{where}.{resource}: {err}") from None
        if parsed < 0:
            raise QueueInputError(f"{where}.{resource}: must not be negative, got {quantity!r}")
        out[str(resource)] = units
    return out


def _check_quota_limit(spec: QueueSpec, quota_field: str, limit_field: str) -> QueueSpec:
    """Quota above limit, or a guarantee above the quota, cannot both hold: refused."""
    for resource, amount in spec.quota.items():
        cap = spec.limit.get(resource)
        if cap is not None and amount != ALL and amount > cap:
            raise QueueInputError(
                f"{quota_field}.{resource} ({amount_text(resource, amount)}) is above "
                f"{limit_field}.{resource} ({amount_text(resource, cap)})"
            )
    return spec


def amount_text(resource: str, units: int | float) -> str:
    """An amount as people read it: ``8 GPUs``, ``4 cpu``, ``32Gi memory``."""
    if resource == GPU:
        return f"{units:g} GPUs" if units != 1 else "1 GPU"
    return f"{units_text(resource, int(units))} {resource}"


# --- Volcano ---------------------------------------------------------------------------------


class _VolcanoGuarantee(BaseModel):
    model_config = ConfigDict(extra="ignore")
    resource: dict[str, Any] | None = None


class _VolcanoQueueSpec(BaseModel):
    """``scheduling.volcano.sh/v1beta1`` Queue spec (unknown fields ignored)."""

    model_config = ConfigDict(extra="ignore")

    weight: StrictInt = Field(default=1, ge=0, le=65535)
    capability: dict[str, Any] | None = None
    deserved: dict[str, Any] | None = None
    guarantee: _VolcanoGuarantee | None = None
    reclaimable: StrictBool | None = None
    priority: StrictInt = 0
    parent: str = ""


def parse_volcano_queue(raw: Mapping[str, Any]) -> QueueSpec:
    """Volcano's fields on gang's model: ``deserved`` → quota (at least the guarantee),
    ``guarantee.resource`` → guarantee, ``capability`` → limit, ``weight`` → the weight of every
    resource, ``priority``, ``parent`` (``root`` or none: top level), ``reclaimable`` (default
    true), ``status.state`` Closed/Closing → takes no new gangs."""
    base = _base(raw, VOLCANO_QUEUE)
    spec = raw.get("spec")
    try:
        parsed = _VolcanoQueueSpec.model_validate(spec if isinstance(spec, Mapping) else {})
    except ValidationError as err:
        return replace(base, error=describe_errors(err))
    try:
        guarantee = _amounts(
            "spec.guarantee.resource", parsed.guarantee.resource if parsed.guarantee else None
        )
        deserved = _amounts("spec.deserved", parsed.deserved)
        quota = {r: max(deserved.get(r, 0), guarantee.get(r, 0)) for r in {*deserved, *guarantee}}
        spec_out = replace(
            base,
            parent=None
            if parsed.parent in ("", VOLCANO_ROOT)
            else f"{VOLCANO_QUEUE}/{parsed.parent}",
            priority=parsed.priority,
            quota=quota,
            guarantee=guarantee,
            limit=_amounts("spec.capability", parsed.capability),
            default_weight=float(parsed.weight),
            reclaimable=parsed.reclaimable is not False,
            open=str(base.status.get("state") or "Open") not in CLOSED_STATES,
        )
        return _check_quota_limit(spec_out, "spec.deserved", "spec.capability")
    except QueueInputError as err:
        return replace(base, error=str(err))


# --- KAI Scheduler ---------------------------------------------------------------------------

#: KAI's resource names and units: gpu in GPUs (may be fractional), cpu in millicores, memory in
#: megabytes (10^6 bytes); -1 means "unlimited" (a limit) or "no quota" (a quota)
_KAI_RESOURCES = {"gpu": (GPU, 1), "cpu": ("cpu", 1), "memory": ("memory", 1_000_000)}
UNLIMITED = -1
KAI_DEFAULT_PRIORITY = 100
#: a quota of "all of it" (KAI's quota -1): entitled to everything its parent has
ALL = -1


class _KaiResource(BaseModel):
    model_config = ConfigDict(extra="ignore")
    quota: float = 0
    over_quota_weight: float = Field(default=1, alias="overQuotaWeight")
    limit: float = UNLIMITED


class _KaiResources(BaseModel):
    model_config = ConfigDict(extra="ignore")
    gpu: _KaiResource | None = None
    cpu: _KaiResource | None = None
    memory: _KaiResource | None = None


class _KaiQueueSpec(BaseModel):
    """``scheduling.run.ai/v2`` Queue spec (unknown fields ignored)."""

    model_config = ConfigDict(extra="ignore")

    parent_queue: str = Field(default="", alias="parentQueue")
    #: KAI treats a queue without a priority as 100
    priority: StrictInt = KAI_DEFAULT_PRIORITY
    resources: _KaiResources = Field(default_factory=_KaiResources)
    reclaim_min_runtime: str | None = Field(default=None, alias="reclaimMinRuntime")


def _kai_amount(where: str, value: float, scale: int, resource: str) -> int | None:
    """One KAI amount in gang's units; None for -1 (unlimited / none)."""
    if value == UNLIMITED:
        return None
    if value < 0 or math.isnan(value) or math.isinf(value):
        raise QueueInputError(f"{where}: must be -1 (unlimited) or not negative, got {value:g}")
    units = value * scale
    # GPUs are whole units here: a fractional GPU quota is rounded down (never over-entitled)
    return math.floor(units + 1e-9) if resource == GPU else round(units)


def parse_kai_queue(raw: Mapping[str, Any]) -> QueueSpec:
    """KAI's fields on gang's model: ``resources.R.quota`` → quota (-1: none),
    ``.limit`` → limit (-1: unlimited), ``.overQuotaWeight`` → weight, ``priority`` (unset:
    100, as KAI), ``parentQueue``, ``reclaimMinRuntime``. KAI has no guarantee beyond the quota:
    the quota is the guarantee."""
    base = _base(raw, KAI_QUEUE)
    spec = raw.get("spec")
    try:
        parsed = _KaiQueueSpec.model_validate(spec if isinstance(spec, Mapping) else {})
    except ValidationError as err:
        return replace(base, error=describe_errors(err))
    quota: dict[str, int] = {}
    limit: dict[str, int] = {}
    weight: dict[str, float] = {}
    try:
        for kai_name, (resource, scale) in _KAI_RESOURCES.items():
            entry: _KaiResource | None = getattr(parsed.resources, kai_name)
            if entry is None:
                continue
            where = f"spec.resources.{kai_name}"
            amount = _kai_amount(f"{where}.quota", entry.quota, scale, resource)
            quota[resource] = ALL if amount is None else amount
            cap = _kai_amount(f"{where}.limit", entry.limit, scale, resource)
            if cap is not None:
                limit[resource] = cap
            if entry.over_quota_weight < 0:
                raise QueueInputError(
                    f"{where}.overQuotaWeight: must not be negative, got {entry.over_quota_weight:g}"
                )
            weight[resource] = entry.over_quota_weight
        spec_out = replace(
            base,
            parent=f"{KAI_QUEUE}/{parsed.parent_queue}" if parsed.parent_queue else None,
            priority=parsed.priority,
            quota=quota,
            guarantee={r: v for r, v in quota.items() if v != ALL},
            limit=limit,
            weight=weight,
        )
        if parsed.reclaim_min_runtime is not None:
            spec_out = replace(
                spec_out,
                reclaim_min_runtime=_min_runtime(
                    "spec.reclaimMinRuntime", parsed.reclaim_min_runtime
                ),
            )
        return _check_quota_limit(spec_out, "spec.resources.quota", "spec.resources.limit")
    except QueueInputError as err:
        return replace(base, error=str(err))


# --- scheduler-plugins ElasticQuota ----------------------------------------------------------


class _ElasticQuotaSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")
    min: dict[str, Any] | None = None
    max: dict[str, Any] | None = None


def parse_elastic_quota(raw: Mapping[str, Any]) -> QueueSpec:
    """The CapacityScheduling plugin's fields on gang's model: one queue per namespace, ``min``
    → quota and guarantee (what others borrow of it is given back), ``max`` → limit, weight 1."""
    base = _base(raw, ELASTIC_QUOTA)
    spec = raw.get("spec")
    try:
        parsed = _ElasticQuotaSpec.model_validate(spec if isinstance(spec, Mapping) else {})
    except ValidationError as err:
        return replace(base, error=describe_errors(err))
    try:
        quota = _amounts("spec.min", parsed.min)
        spec_out = replace(
            base, quota=quota, guarantee=dict(quota), limit=_amounts("spec.max", parsed.max)
        )
        return _check_quota_limit(spec_out, "spec.min", "spec.max")
    except QueueInputError as err:
        return replace(base, error=str(err))


QUEUE_APIS: tuple[QueueApi, ...] = (
    QueueApi(
        VOLCANO_QUEUE,
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        "Queue",
        namespaced=False,
        parse=parse_volcano_queue,
    ),
    QueueApi(
        KAI_QUEUE,
        "scheduling.run.ai",
        "v2",
        "queues",
        "Queue",
        namespaced=False,
        parse=parse_kai_queue,
    ),
    QueueApi(
        ELASTIC_QUOTA,
        "scheduling.x-k8s.io",
        "v1alpha1",
        "elasticquotas",
        "ElasticQuota",
        namespaced=True,
        parse=parse_elastic_quota,
    ),
)
QUEUE_API_BY_NAME = {api.name: api for api in QUEUE_APIS}
