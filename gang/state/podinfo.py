"""One raw pod, parsed once into the scheduler's own compact, immutable shape.

Why this exists: the informers hand the scheduler every pod event as a raw JSON dict, exactly as
the kube-apiserver serialised it. The hot path (the cache's capacity accounting, filters, the gang
queue's ordering) looks at a pod many times per event and per scheduling cycle; walking nested
JSON there, or building the generated kubernetes client models, is what makes a scheduler slow at
50,000 pods. So each pod is read here exactly once, into slotted frozen dataclasses holding only
what scheduling needs, with quantities already converted to integers:

* ``requests`` follows Kubernetes' own ``PodRequests`` (``pkg/api/v1/resource``), sidecars
  (KEP-753) included, so what the scheduler reserves is what the kubelet will admit;
* ``constraints`` gathers everything besides resources that decides *which* nodes fit, as one
  hashable value, so pods stamped from the same template share one feasibility computation.

Anything the parser cannot make sense of raises :class:`PodParseError` naming the field, never
another exception type: a malformed object from the wire must not crash an informer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import orjson

from gang.models.groupapis import api_of_group, workload_group
from gang.models.quantity import QuantityError, parse_quantity, quantity_to_int, quantity_to_milli
from gang.models.topologyapis import TOPOLOGY_ANNOTATIONS, TopologyAsk, asks_in_annotations
from gang.state.labels import NodeSelectorRequirement, NodeSelectorTerm
from gang.state.podrules import (
    NO_RULES,
    PodRules,
    RuleError,
    parse_claims,
    parse_device_claims,
    parse_pod_affinity,
    parse_spread,
)

__all__ = [
    "EXPECTED_RUN_ANNOTATION",
    "NODE_SELECTOR_OPERATORS",
    "NO_CONSTRAINTS",
    "POD_GROUP_LABEL",
    "QOS_RANK",
    "TOLERATION_OPERATORS",
    "Constraints",
    "HostPort",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodInfo",
    "PodParseError",
    "Toleration",
    "group_claims",
    "node_selector_terms",
    "parse_pod",
    "pod_requests",
]

POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
#: how a pod names its group in the other gang APIs (see ``gang.models.groupapis``)
SIGS_LEGACY_LABELS: Final = ("pod-group.scheduling.sigs.k8s.io", "scheduling.sigs.k8s.io/pod-group")
VOLCANO_TASK_ANNOTATION: Final = "volcano.sh/task-spec"
VOLCANO_ANNOTATIONS: Final = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
#: the pod condition a scheduler writes before it evicts a pod to make room (kube-scheduler's)
DISRUPTION_TARGET: Final = "DisruptionTarget"
PREEMPTION_REASON: Final = "PreemptionByScheduler"
#: the condition a scheduler sets False with reason ``Unschedulable`` on a pod it could not
#: place (kube-scheduler's; cluster autoscalers scale up for pods that carry it)
POD_SCHEDULED: Final = "PodScheduled"
UNSCHEDULABLE_REASON: Final = "Unschedulable"
#: a pod's expected run time in seconds, declared by its owner: reservations estimate when its
#: node frees up from it, and a gang whose every member declares one may backfill
EXPECTED_RUN_ANNOTATION: Final = "gang.scheduling/expected-run-seconds"
QOS_RANK: Final[Mapping[str, int]] = {"Guaranteed": 2, "Burstable": 1, "BestEffort": 0}

NODE_SELECTOR_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
TOLERATION_OPERATORS: Final = frozenset({"Equal", "Exists"})

_DEFAULT_SCHEDULER: Final = "default-scheduler"
_TERMINAL_PHASES: Final = ("Succeeded", "Failed")
_QOS_RESOURCES: Final = ("cpu", "memory")
_MAX_SHOWN: Final = 64  # longest offending value quoted in an error message


class PodParseError(ValueError):
    """A raw pod cannot be read; the message starts with the offending field's path."""


# --------------------------------------------------------------------------------------------
# The parsed shapes


@dataclass(frozen=True, slots=True)
class Toleration:
    """``spec.tolerations[*]`` with defaults applied; ``tolerationSeconds`` is not kept.

    ``operator`` is ``"Equal"`` or ``"Exists"``; ``effect == ""`` tolerates every effect; an
    empty ``key`` with ``Exists`` tolerates every taint.
    """

    key: str
    operator: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class HostPort:
    """A ``hostPort`` a container binds on its node: ``protocol`` defaults to TCP, ``ip`` to all."""

    port: int
    protocol: str
    ip: str


@dataclass(frozen=True, slots=True)
class Constraints:
    """Everything that decides which nodes a pod may go to, apart from resources.

    Hashable: pods with equal Constraints share a feasibility mask.
    """

    #: sorted items of ``spec.nodeSelector``
    node_selector: tuple[tuple[str, str], ...]
    #: ``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    #: .nodeSelectorTerms``, ORed; ``()`` means no requirement
    required_terms: tuple[NodeSelectorTerm, ...]
    tolerations: tuple[Toleration, ...]
    #: ``containers[*].ports[*]`` then ``initContainers[*].ports[*]`` with ``hostPort > 0``
    host_ports: tuple[HostPort, ...]


#: The constraints of a pod that asks for nothing; shared rather than rebuilt.
NO_CONSTRAINTS: Final = Constraints((), (), (), ())


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the scheduler knows about one pod. Immutable; a new event yields a new PodInfo.

    ``labels`` is the dict decoded from JSON and ``requests`` a plain dict: treat both as
    read-only. Because of them a PodInfo compares by value but is not hashable; index pods by
    :attr:`key` or :attr:`uid`.
    """

    uid: str
    namespace: str
    name: str
    resource_version: int
    labels: Mapping[str, str]
    scheduler_name: str
    #: ``""`` while unassigned
    node_name: str
    #: ``"Pending"`` when the status has none yet
    phase: str
    priority: int
    #: :data:`QOS_RANK` of ``status.qosClass``, computed from the containers if absent
    qos_rank: int
    #: cpu in millicores, everything else in whole units; zero entries omitted; ``"pods": 1``
    requests: Mapping[str, int]
    constraints: Constraints
    #: the gang it belongs to (see :func:`group_claims`): the :data:`POD_GROUP_LABEL` value,
    #: or another gang API's name with its prefix; ``""`` for a pod outside any group
    group: str
    #: epoch seconds of ``metadata.creationTimestamp``, ``0.0`` if absent
    creation_timestamp: float
    #: ``metadata.deletionTimestamp`` is set
    deleting: bool
    #: ``spec.schedulingGates`` is non-empty
    scheduling_gated: bool
    #: pod (anti-)affinity, topology spread, preferred node affinity, volumes, refused fields
    rules: PodRules = NO_RULES
    #: the controlling owner (``ownerReferences`` with ``controller: true``): (kind, name)
    controller: tuple[str, str] | None = None
    #: ``spec.preemptionPolicy: Never``: the pod waits rather than evict anyone
    preempt_never: bool = False
    #: epoch seconds of ``status.startTime`` (else of creation): how much work eviction loses
    start_time: float = 0.0
    #: a scheduler has committed to preempting the pod: its ``DisruptionTarget`` condition is
    #: True with reason :data:`PREEMPTION_REASON` (the intent survives a scheduler restart)
    preemption_marked: bool = False
    #: the message of its ``PodScheduled`` condition when that says False / ``Unschedulable``
    #: (what a scheduler last told the pod's owner; None when it says nothing of the kind)
    unschedulable_message: str | None = None
    #: how long the pod is expected to run, in seconds: :data:`EXPECTED_RUN_ANNOTATION` or
    #: ``spec.activeDeadlineSeconds``, the smaller when both are set; None when neither is
    declared_run: float | None = None
    #: why :data:`EXPECTED_RUN_ANNOTATION` was ignored ("" when it was not)
    declared_run_error: str = ""
    #: the pod names groups of two gang APIs (or two groups of one): it is not scheduled, and
    #: this says which ("" when it names at most one)
    group_conflict: str = ""
    #: the Volcano task it plays (annotation :data:`VOLCANO_TASK_ANNOTATION`): a PodGroup's
    #: ``minTaskMember`` counts members per task
    task: str = ""
    #: what the pod asks of the topology (Kueue's pod-template annotations, KAI's)
    topology: tuple[TopologyAsk, ...] = ()
    #: ``status.resourceClaimStatuses``: the ResourceClaim the resourceclaim controller made for
    #: each of the pod's template claims (pod claim name → claim name; None: none is needed)
    claim_statuses: tuple[tuple[str, str | None], ...] = ()
    #: ``(namespace, name)``: how every map of pods is keyed. Built once here, not per read
    #: (read about 140 times per gang of 8 on its way from the queue to its binding)
    key: tuple[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.namespace, self.name))

    @property
    def terminal(self) -> bool:
        return self.phase in _TERMINAL_PHASES

    @property
    def assigned(self) -> bool:
        return self.node_name != ""


#: every field of a PodInfo in order
_FIELDS: Final = tuple(f.name for f in fields(PodInfo))


class _Writable(PodInfo):
    """A PodInfo under construction: the same slots, without the frozen ``__setattr__`` (and
    ``__delattr__``: the two share one type slot), so each field is a plain slot store that the
    interpreter specialises. ``_compiled`` functions fill one, then make it a PodInfo
    (``__class__``: the layouts are the same, no slot is added here)."""

    __slots__ = ()
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


def _compiled(signature: str, given: Mapping[str, str]) -> Callable[..., PodInfo]:
    """A function ``(signature)`` returning the PodInfo whose fields are the expressions
    ``given`` (source over the parameters), written out one slot store a line: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, and a loop over
    the fields calls a setter apiece, about eight times the instructions (cachegrind: 36,000
    against 4,200 for ``bound_copy``). Generated, as ``dataclasses`` writes ``__init__``:
    the fields are known only here, and a field added to PodInfo is written by both (one
    that ``given`` does not name stops the import with a KeyError). ``__post_init__`` is not
    called: ``given`` says what it would set (``key``); ``tests/unit/test_podinfo.py``
    checks the result against the dataclass's own ``__init__``."""
    body = "".join(f"    made.{name} = {given[name]}\n" for name in _FIELDS)
    source = (
        f"def compiled({signature}):\n"
        "    made = new(Writable)\n"
        f"{body}"
        "    made.__class__ = PodInfo\n"
        "    return made\n"
    )
    scope: dict[str, Any] = {"new": object.__new__, "Writable": _Writable, "PodInfo": PodInfo}
    exec(source, scope)
    compiled: Callable[..., PodInfo] = scope["compiled"]
    return compiled


_INIT_FIELDS: Final = tuple(f.name for f in fields(PodInfo) if f.init)

#: ``PodInfo(**fields)`` for every field ``parse_pod`` gives (all of them, by keyword), at a
#: fraction of the frozen ``__init__``'s cost: once per pod the informers parse
_new_podinfo: Final = _compiled(
    "*, " + ", ".join(_INIT_FIELDS),
    {name: name for name in _INIT_FIELDS} | {"key": "(namespace, name)"},
)

#: ``info`` as the confirmation of its binding shows it: on ``node``, at ``version``, in
#: ``phase``, no longer Unschedulable; every other field the same object. What
#: ``dataclasses.replace`` gives (``tests/unit/test_podinfo.py``), once per bound pod.
bound_copy: Final[Callable[[PodInfo, str, int, str], PodInfo]] = _compiled(
    "info, node, version, phase",
    {name: f"info.{name}" for name in _FIELDS}
    | {
        "node_name": "node",
        "resource_version": "version",
        "phase": "phase",
        "unschedulable_message": "None",
    },
)


# --------------------------------------------------------------------------------------------
# Small readers: each either returns the typed value or raises PodParseError naming the field.


def _show(value: Any) -> str:
    text = f'"{value}"' if isinstance(value, str) else repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else type(value).__name__


def _expected(where: str, what: str, value: Any) -> PodParseError:
    return PodParseError(f"{where}: expected {what}, got {_kind(value)}")


def _map(value: Any, where: str) -> Mapping[str, Any] | None:
    """An optional JSON object: ``None`` when absent or null."""
    if value is None or type(value) is dict or isinstance(value, Mapping):
        return value
    raise _expected(where, "an object", value)


def _seq(value: Any, where: str) -> list[Any] | tuple[Any, ...]:
    """An optional JSON array: ``()`` when absent or null."""
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return value
    raise _expected(where, "a list", value)


def _str(value: Any, where: str, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, str):
        return value
    raise _expected(where, "a string", value)


def _int(value: Any, where: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _expected(where, "an integer", value)


def _amount(name: Any, raw: Any, where: str) -> int:
    """One quantity of a resource list, in the scheduler's unit; negative values are refused."""
    if not isinstance(name, str):
        raise PodParseError(f"{where}: resource name must be a string, got {_show(name)}")
    try:
        value = quantity_to_milli(raw) if name == "cpu" else quantity_to_int(raw)
        # Rounding is towards +inf, so a tiny negative amount ("-1n") rounds to 0: look again.
        negative = value < 0 or (value == 0 and parse_quantity(raw) < 0)
    except QuantityError:
        raise PodParseError(f"{where}[{name}]: invalid quantity {_show(raw)}") from None
    if negative:
        raise PodParseError(
            f"{where}[{name}]: must be greater than or equal to 0, got {_show(raw)}"
        )
    return value


def _resource_list(values: Any, where: str, field: str) -> dict[str, int]:
    """A ``ResourceList`` (``requests``, ``limits``, ``overhead``) with zero entries dropped.

    The field's path is ``where + field``, joined only if there is an error to report.
    """
    if values is None:
        return {}
    if type(values) is not dict and not isinstance(values, Mapping):
        raise _expected(where + field, "an object", values)
    parsed: dict[str, int] = {}
    for name, raw in values.items():
        # fast path: a well-formed string (the converters cache them); anything odd, negative
        # or a "-1n" that rounds up to 0 is decided, and explained, by _amount
        if type(raw) is str and type(name) is str:
            try:
                amount = quantity_to_milli(raw) if name == "cpu" else quantity_to_int(raw)
            except QuantityError:
                amount = -1
            if amount == 0 and raw[:1] == "-":
                amount = -1
        else:
            amount = -1
        if amount < 0:  # not a plain valid string: decide and explain the slow way
            amount = _amount(name, raw, where + field)
        if amount:
            parsed[name] = amount
    return parsed


def _container(value: Any, where: str) -> Mapping[str, Any]:
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise _expected(where, "an object", value)


def _container_resources(
    container: Mapping[str, Any], where: str
) -> tuple[dict[str, int], dict[str, int]]:
    """A container's (requests, limits); a missing request defaults to its limit, as the
    apiserver does. Every quantity is checked, limits included, even where a request hides it."""
    resources = container.get("resources")
    if not resources:
        if resources is None or type(resources) is dict:
            return {}, {}
        raise _expected(f"{where}.resources", "an object", resources)
    if type(resources) is not dict and not isinstance(resources, Mapping):
        raise _expected(f"{where}.resources", "an object", resources)
    given = resources.get("requests")
    requests = _resource_list(given, where, ".resources.requests")
    limits = _resource_list(resources.get("limits"), where, ".resources.limits")
    for name, amount in limits.items():
        if not given or name not in given:
            requests[name] = amount
    return requests, limits


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _max_into(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount


# --------------------------------------------------------------------------------------------
# Requests and QoS


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """The resources a pod occupies on its node, by the rules of Go's ``PodRequests``.

    For every resource: the sum over ``containers`` and sidecars (init containers with
    ``restartPolicy: Always``), raised to the largest need of any init container while it runs
    (its own request plus the sidecars started before it; a sidecar's need is all sidecars up to
    and including itself), plus ``spec.overhead``. ``cpu`` is in millicores, every other resource
    in whole units (rounded up); zero entries are omitted and ``"pods"`` is always 1.
    """
    if not isinstance(spec, Mapping):
        raise _expected("spec", "an object", spec)
    requests: dict[str, int] = {}
    for i, raw in enumerate(_seq(spec.get("containers"), "spec.containers")):
        where = f"spec.containers[{i}]"
        own = _container_resources(_container(raw, where), where)[0]
        if requests:
            _add(requests, own)
        else:
            requests = own  # a fresh dict: the usual single container costs no copy

    init_containers = _seq(spec.get("initContainers"), "spec.initContainers")
    if init_containers:
        sidecars: dict[str, int] = {}
        init_need: dict[str, int] = {}
        for i, raw in enumerate(init_containers):
            where = f"spec.initContainers[{i}]"
            container = _container(raw, where)
            own = _container_resources(container, where)[0]
            policy = _str(container.get("restartPolicy"), f"{where}.restartPolicy")
            if policy == "Always":
                # a sidecar keeps running beside everything started after it
                _add(requests, own)
                _add(sidecars, own)
                _max_into(init_need, sidecars)
            else:
                _add(own, sidecars)
                _max_into(init_need, own)
        _max_into(requests, init_need)

    overhead = spec.get("overhead")
    if overhead is not None:
        _add(requests, _resource_list(overhead, "spec", ".overhead"))
    requests["pods"] = 1
    return requests


def _qos_rank(spec: Mapping[str, Any]) -> int:
    """``ComputePodQOS`` (``pkg/apis/core/helper/qos``) over cpu and memory, in scheduler units.

    Requests are defaulted from limits first, as the apiserver stores them. Guaranteed needs a
    positive cpu and memory limit on every container and the pod's summed requests equal to its
    summed limits; no positive request or limit at all is BestEffort; anything else Burstable.
    """
    request_total: dict[str, int] = {}
    limit_total: dict[str, int] = {}
    guaranteed = True
    for list_name in ("containers", "initContainers"):
        for i, raw in enumerate(_seq(spec.get(list_name), f"spec.{list_name}")):
            where = f"spec.{list_name}[{i}]"
            requests, limits = _container_resources(_container(raw, where), where)
            for name in _QOS_RESOURCES:
                if name in requests:
                    request_total[name] = request_total.get(name, 0) + requests[name]
                if name in limits:
                    limit_total[name] = limit_total.get(name, 0) + limits[name]
                else:
                    guaranteed = False
    if not request_total and not limit_total:
        return QOS_RANK["BestEffort"]
    if guaranteed and request_total == limit_total:
        return QOS_RANK["Guaranteed"]
    return QOS_RANK["Burstable"]


# --------------------------------------------------------------------------------------------
# Constraints


def _node_selector(value: Any) -> tuple[tuple[str, str], ...]:
    mapping = _map(value, "spec.nodeSelector")
    if not mapping:
        return ()
    for key, label in mapping.items():
        if not isinstance(key, str) or not isinstance(label, str):
            raise PodParseError(
                f"spec.nodeSelector[{key}]: expected a string value, got {_kind(label)}"
            )
    return tuple(sorted(mapping.items()))


def _requirements(value: Any, where: str) -> tuple[NodeSelectorRequirement, ...]:
    parsed: list[NodeSelectorRequirement] = []
    for i, raw in enumerate(_seq(value, where)):
        at = f"{where}[{i}]"
        requirement = _map(raw, at)
        if requirement is None:
            raise _expected(at, "an object", raw)
        operator = _str(requirement.get("operator"), f"{at}.operator")
        if operator not in NODE_SELECTOR_OPERATORS:
            raise PodParseError(f"{at}.operator: unsupported operator {_show(operator)}")
        values = tuple(_seq(requirement.get("values"), f"{at}.values"))
        for j, item in enumerate(values):
            if not isinstance(item, str):
                raise _expected(f"{at}.values[{j}]", "a string", item)
        parsed.append(
            NodeSelectorRequirement(_str(requirement.get("key"), f"{at}.key"), operator, values)
        )
    return tuple(parsed)


def _term(raw: Any, at: str) -> NodeSelectorTerm:
    term = _map(raw, at)
    if term is None:
        raise _expected(at, "an object", raw)
    return NodeSelectorTerm(
        _requirements(term.get("matchExpressions"), f"{at}.matchExpressions"),
        _requirements(term.get("matchFields"), f"{at}.matchFields"),
    )


def node_selector_terms(selector: Any, where: str) -> tuple[NodeSelectorTerm, ...]:
    """The terms of a core/v1 ``NodeSelector`` object (as ResourceSlices and DRA allocations
    carry them); :class:`PodParseError` naming the field when malformed."""
    body = _map(selector, where)
    if body is None:
        raise _expected(where, "an object", selector)
    at = f"{where}.nodeSelectorTerms"
    return tuple(
        _term(raw, f"{at}[{i}]") for i, raw in enumerate(_seq(body.get("nodeSelectorTerms"), at))
    )


def _preferred_terms(affinity_raw: Any) -> tuple[tuple[int, NodeSelectorTerm], ...]:
    """``nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution``: (weight, term)."""
    affinity = _map(affinity_raw, "spec.affinity")
    node_affinity = (
        _map(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity") if affinity else None
    )
    if not node_affinity:
        return ()
    where = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    terms: list[tuple[int, NodeSelectorTerm]] = []
    for i, raw in enumerate(
        _seq(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), where)
    ):
        at = f"{where}[{i}]"
        entry = _map(raw, at)
        if entry is None:
            raise _expected(at, "an object", raw)
        weight = _int(entry.get("weight"), f"{at}.weight")
        if not 1 <= weight <= 100:
            raise PodParseError(f"{at}.weight: must be in the range 1-100")
        terms.append((weight, _term(entry.get("preference"), f"{at}.preference")))
    return tuple(terms)


def _required_terms(affinity_raw: Any) -> tuple[NodeSelectorTerm, ...]:
    affinity = _map(affinity_raw, "spec.affinity")
    if not affinity:
        return ()
    where = "spec.affinity.nodeAffinity"
    node_affinity = _map(affinity.get("nodeAffinity"), where)
    if not node_affinity:
        return ()
    where += ".requiredDuringSchedulingIgnoredDuringExecution"
    selector = _map(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), where)
    if not selector:
        return ()
    return node_selector_terms(selector, where)


@functools.lru_cache(maxsize=1024)
def _toleration(key: str, operator: str, value: str, effect: str) -> Toleration:
    """One shared object per distinct toleration: nearly every pod carries the same few."""
    return Toleration(key, operator, value, effect)


def _tolerations(value: Any) -> tuple[Toleration, ...]:
    parsed: list[Toleration] = []
    for i, raw in enumerate(_seq(value, "spec.tolerations")):
        if type(raw) is dict:
            key = raw.get("key", "")
            operator = raw.get("operator", "Equal")
            toleration_value = raw.get("value", "")
            effect = raw.get("effect", "")
            if (
                type(key) is str
                and type(operator) is str
                and type(toleration_value) is str
                and type(effect) is str
                and operator in TOLERATION_OPERATORS
            ):
                parsed.append(_toleration(key, operator, toleration_value, effect))
                continue
        # the slow path, only to say precisely what is wrong
        at = f"spec.tolerations[{i}]"
        toleration = _map(raw, at)
        if toleration is None:
            raise _expected(at, "an object", raw)
        operator = _str(toleration.get("operator"), f"{at}.operator") or "Equal"
        if operator not in TOLERATION_OPERATORS:
            raise PodParseError(f"{at}.operator: unsupported operator {_show(operator)}")
        parsed.append(
            _toleration(
                _str(toleration.get("key"), f"{at}.key"),
                operator,
                _str(toleration.get("value"), f"{at}.value"),
                _str(toleration.get("effect"), f"{at}.effect"),
            )
        )
    return tuple(parsed)


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    parsed: list[HostPort] = []
    for list_name in ("containers", "initContainers"):
        for i, raw in enumerate(_seq(spec.get(list_name), f"spec.{list_name}")):
            container = raw if type(raw) is dict else _container(raw, f"spec.{list_name}[{i}]")
            ports = container.get("ports")
            if ports is None:
                continue
            where = f"spec.{list_name}[{i}]"
            for j, raw_port in enumerate(_seq(ports, f"{where}.ports")):
                at = f"{where}.ports[{j}]"
                port = _map(raw_port, at)
                if port is None:
                    raise _expected(at, "an object", raw_port)
                host_port = _int(port.get("hostPort"), f"{at}.hostPort")
                if host_port > 0:
                    parsed.append(
                        HostPort(
                            host_port,
                            _str(port.get("protocol"), f"{at}.protocol") or "TCP",
                            _str(port.get("hostIP"), f"{at}.hostIP") or "0.0.0.0",
                        )
                    )
    return tuple(parsed)


def _constraints(spec: Mapping[str, Any]) -> Constraints:
    node_selector = _node_selector(spec.get("nodeSelector"))
    required_terms = _required_terms(spec.get("affinity"))
    tolerations = _tolerations(spec.get("tolerations"))
    host_ports = _host_ports(spec)
    if not (node_selector or required_terms or tolerations or host_ports):
        return NO_CONSTRAINTS
    constraints = Constraints(node_selector, required_terms, tolerations, host_ports)
    # one shared object per distinct set, as for rules: every pod has some (the API server
    # adds the not-ready/unreachable tolerations to each), and the placer's same-template
    # test is an identity check
    return _interned(_INTERNED_CONSTRAINTS, constraints, constraints)


def _rules(
    spec: Mapping[str, Any], namespace: str, name: str, labels: Mapping[str, str]
) -> PodRules:
    """The pod's rules about other pods, volumes and preferred nodes (``gang.state.podrules``)."""
    affinity = spec.get("affinity")
    spread = spec.get("topologySpreadConstraints")
    if not (affinity or spread or spec.get("volumes") or spec.get("resourceClaims")):
        return NO_RULES
    try:
        claims, refused_volumes = parse_claims(spec, name)
        rules = PodRules(
            parse_pod_affinity(affinity, namespace, labels),
            parse_spread(spread, labels),
            _preferred_terms(affinity),
            claims,
            refused_volumes,
            parse_device_claims(spec),
        )
    except RuleError as err:
        raise PodParseError(str(err)) from None
    if not rules:
        return NO_RULES
    # the members of a gang state the same rules: one shared object each (memory, and the
    # placer's same-template test becomes an identity check)
    return _interned(_INTERNED_RULES, rules, rules)


#: what a pod's node-facing fields parsed to, by those fields' JSON (see ``_placement_fields``)
_PARSED_FIELDS: dict[bytes, tuple[dict[str, int], Constraints]] = {}


def _placement_fields(spec: Mapping[str, Any]) -> tuple[dict[str, int], Constraints]:
    """``pod_requests`` (interned) and ``_constraints`` of ``spec``, remembered by the JSON of
    every field the two read: the containers' resources, ports and restart policies, the
    overhead, the node selector, the affinity and the tolerations. The pods of one template
    (every member of a job) state them alike, while whole specs differ (a projected token
    volume per pod): parsed once, the rest cost a key (counted: see docs/performance.md).
    A spec the key cannot be made of, or whose fields do not parse, takes the full path,
    which reports it; nothing is remembered of a spec that fails."""
    key: bytes | None
    try:
        key = orjson.dumps(
            (
                [(c.get("resources"), c.get("ports")) for c in spec.get("containers") or ()],
                [
                    (c.get("resources"), c.get("ports"), c.get("restartPolicy"))
                    for c in spec.get("initContainers") or ()
                ],
                spec.get("overhead"),
                spec.get("nodeSelector"),
                spec.get("affinity"),
                spec.get("tolerations"),
            )
        )
    except (AttributeError, TypeError, orjson.JSONEncodeError):
        key = None  # malformed: the parse below says how, and nothing is kept
    parsed = None if key is None else _PARSED_FIELDS.get(key)
    if parsed is None:
        parsed = _interned_requests(pod_requests(spec)), _constraints(spec)
        if key is not None:
            _interned(_PARSED_FIELDS, key, parsed)
    return parsed


_INTERN_LIMIT: Final = 8192
T = TypeVar("T")
_INTERNED_RULES: dict[PodRules, PodRules] = {}
_INTERNED_CONSTRAINTS: dict[Constraints, Constraints] = {}
_INTERNED_REQUESTS: dict[frozenset[tuple[str, int]], dict[str, int]] = {}


def _interned_requests(requests: dict[str, int]) -> dict[str, int]:
    """One shared request map per distinct request (the members of a template ask alike), so
    its resource vector is built once (``ResourceIndex.requests_vector``). Never mutated."""
    return _interned(_INTERNED_REQUESTS, frozenset(requests.items()), requests)


def _interned(table: dict[Any, T], key: Any, value: T) -> T:
    """The value already kept for ``key``, else ``value``, kept (the table is emptied when it
    reaches ``_INTERN_LIMIT``: interning saves memory and work, it is never needed)."""
    if len(table) >= _INTERN_LIMIT:
        table.clear()
    return table.setdefault(key, value)


def _claim_statuses(status: Mapping[str, Any]) -> tuple[tuple[str, str | None], ...]:
    found: list[tuple[str, str | None]] = []
    for i, entry in enumerate(
        _seq(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses")
    ):
        where = f"status.resourceClaimStatuses[{i}]"
        item = _map(entry, where) or {}
        name = _str(item.get("name"), f"{where}.name")
        if not name:
            raise PodParseError(f"{where}.name: Required value")
        found.append(
            (name, _str(item.get("resourceClaimName"), f"{where}.resourceClaimName") or None)
        )
    return tuple(found)


# --------------------------------------------------------------------------------------------
# Metadata


@functools.lru_cache(maxsize=4096)
def _epoch(text: str) -> float:
    """RFC 3339 (``2026-11-21T14:39:41Z``, fractions allowed) to epoch seconds; naive means UTC."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _timestamp(value: Any, where: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            return _epoch(value)
        except ValueError:
            pass
    raise PodParseError(f"{where}: invalid timestamp {_show(value)}")


def _resource_version(value: Any) -> int:
    if value is None or value == "":
        return 0
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise PodParseError(f"metadata.resourceVersion: expected a decimal integer, got {_show(value)}")


def _labels(value: Any) -> Mapping[str, str]:
    labels = _map(value, "metadata.labels")
    if not labels:
        return {}
    for key, label in labels.items():
        if not isinstance(label, str) or not isinstance(key, str):
            raise PodParseError(
                f"metadata.labels[{key}]: expected a string value, got {_kind(label)}"
            )
    return labels


def _controller(value: Any) -> tuple[str, str] | None:
    """The owner reference marked ``controller: true`` as (kind, name); malformed ones are
    ignored (they only feed default spreading)."""
    for ref in value if isinstance(value, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            kind, name = ref.get("kind"), ref.get("name")
            if isinstance(kind, str) and isinstance(name, str):
                return (kind, name)
    return None


# --------------------------------------------------------------------------------------------
# The entry point


def _condition(status: Mapping[str, Any], kind: str, value: str, reason: str) -> Any:
    """The pod's condition of ``kind`` saying ``value`` for ``reason``, or None."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    for c in conditions:
        if (
            isinstance(c, Mapping)
            and c.get("type") == kind
            and c.get("status") == value
            and c.get("reason") == reason
        ):
            return c
    return None


def _preemption_marked(status: Mapping[str, Any]) -> bool:
    return _condition(status, DISRUPTION_TARGET, "True", PREEMPTION_REASON) is not None


def _unschedulable_message(status: Mapping[str, Any]) -> str | None:
    found = _condition(status, POD_SCHEDULED, "False", UNSCHEDULABLE_REASON)
    return None if found is None else str(found.get("message") or "")


def group_claims(
    labels: Mapping[str, str], annotations: Any, spec: Mapping[str, Any]
) -> dict[str, str]:
    """Every group the pod names, by where it names it: gang name (API prefix + name)."""
    found: dict[str, str] = {}
    if labels.get(POD_GROUP_LABEL):
        found[f"label {POD_GROUP_LABEL}"] = labels[POD_GROUP_LABEL]
    for label in SIGS_LEGACY_LABELS:
        if labels.get(label):
            found[f"label {label}"] = "sigs:" + labels[label]
    if isinstance(annotations, Mapping):
        for key in VOLCANO_ANNOTATIONS:
            value = annotations.get(key)
            if isinstance(value, str) and value:
                found[f"annotation {key}"] = "volcano:" + value
    group = _map(spec.get("schedulingGroup"), "spec.schedulingGroup") or {}
    name = group.get("podGroupName")
    if isinstance(name, str) and name:
        found["spec.schedulingGroup"] = "k8s:" + name
    ref = _map(spec.get("workloadRef"), "spec.workloadRef") or {}
    if isinstance(ref.get("name"), str) and isinstance(ref.get("podGroup"), str):
        replica = ref.get("podGroupReplicaKey")
        found["spec.workloadRef"] = workload_group(
            ref["name"], ref["podGroup"], replica if isinstance(replica, str) else ""
        )
    return found


NO_ASKS: tuple[TopologyAsk, ...] = ()


def _topology(annotations: Any) -> tuple[TopologyAsk, ...]:
    if not isinstance(annotations, Mapping) or TOPOLOGY_ANNOTATIONS.isdisjoint(annotations):
        return NO_ASKS  # the common case, without building anything
    return tuple(asks_in_annotations(annotations))


def _task(annotations: Any) -> str:
    task = annotations.get(VOLCANO_TASK_ANNOTATION) if isinstance(annotations, Mapping) else None
    return task if isinstance(task, str) else ""


def _group(claims: Mapping[str, str]) -> tuple[str, str]:
    """The pod's gang, and why it has none when it names more than one."""
    names = set(claims.values())
    if len(names) <= 1:
        return next(iter(names), ""), ""
    said = ", ".join(
        f"{where} names {api_of_group(g).name} group {g}" for where, g in claims.items()
    )
    return "", f"it names more than one pod group ({said}); a pod must name exactly one"


def _declared_run(annotations: Any, spec: Mapping[str, Any]) -> tuple[float | None, str]:
    """The declared run time and, for a malformed annotation, why it was ignored (a hint must
    not make a pod unschedulable; the scheduler reports it instead)."""
    deadline = spec.get("activeDeadlineSeconds")
    declared: float | None = None
    if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0:
        declared = float(deadline)
    text = annotations.get(EXPECTED_RUN_ANNOTATION) if isinstance(annotations, Mapping) else None
    if text is None:
        return declared, ""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = -1.0
    if not (0 < value < 10**9):  # (NaN fails too)
        return declared, (
            f"metadata.annotations[{EXPECTED_RUN_ANNOTATION}]: expected a positive number of "
            f"seconds, got {_show(text)}; ignored"
        )
    return (value if declared is None else min(value, declared)), ""


def parse_pod(raw: Mapping[str, Any]) -> PodInfo:
    """Read one pod as the apiserver serialises it; raise :class:`PodParseError` if malformed.

    Nothing is copied: ``labels`` is the decoded dict itself, so callers must not mutate the raw
    object afterwards (informers replace, never edit, the objects they receive).
    """
    if not isinstance(raw, Mapping):
        raise _expected("pod", "an object", raw)
    metadata = _map(raw.get("metadata"), "metadata")
    if metadata is None:
        raise PodParseError("metadata: required")
    spec = _map(raw.get("spec"), "spec")
    if spec is None:
        raise PodParseError("spec: required")
    status = _map(raw.get("status"), "status") or {}

    name = _str(metadata.get("name"), "metadata.name")
    if not name:
        raise PodParseError("metadata.name: required")
    namespace = _str(metadata.get("namespace"), "metadata.namespace")
    if not namespace:
        raise PodParseError("metadata.namespace: required")
    labels = _labels(metadata.get("labels"))

    qos_class = status.get("qosClass")
    if qos_class is None:
        qos_rank = _qos_rank(spec)
    elif isinstance(qos_class, str) and qos_class in QOS_RANK:
        qos_rank = QOS_RANK[qos_class]
    else:
        raise PodParseError(f"status.qosClass: unknown QoS class {_show(qos_class)}")

    created = _timestamp(metadata.get("creationTimestamp"), "metadata.creationTimestamp")
    declared, declared_error = _declared_run(metadata.get("annotations"), spec)
    group, conflict = _group(group_claims(labels, metadata.get("annotations"), spec))
    return _new_podinfo(
        uid=_str(metadata.get("uid"), "metadata.uid"),
        namespace=namespace,
        name=name,
        resource_version=_resource_version(metadata.get("resourceVersion")),
        labels=labels,
        scheduler_name=_str(spec.get("schedulerName"), "spec.schedulerName") or _DEFAULT_SCHEDULER,
        node_name=_str(spec.get("nodeName"), "spec.nodeName"),
        phase=_str(status.get("phase"), "status.phase") or "Pending",
        priority=_int(spec.get("priority"), "spec.priority"),
        qos_rank=qos_rank,
        # (read where they were before: a pod wrong in several fields is told the same one)
        requests=(placement := _placement_fields(spec))[0],
        constraints=placement[1],
        group=group,
        creation_timestamp=created,
        deleting=metadata.get("deletionTimestamp") is not None,
        scheduling_gated=bool(_seq(spec.get("schedulingGates"), "spec.schedulingGates")),
        rules=_rules(spec, namespace, name, labels),
        controller=_controller(metadata.get("ownerReferences")),
        preempt_never=spec.get("preemptionPolicy") == "Never",
        start_time=_timestamp(status.get("startTime"), "status.startTime") or created,
        preemption_marked=_preemption_marked(status),
        unschedulable_message=_unschedulable_message(status),
        claim_statuses=_claim_statuses(status),
        declared_run=declared,
        declared_run_error=declared_error,
        group_conflict=conflict,
        task=_task(metadata.get("annotations")),
        topology=_topology(metadata.get("annotations")),
    )
