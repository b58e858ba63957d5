"""Dynamic Resource Allocation objects (``resource.k8s.io/v1``), read once into typed values.

Why this exists: a GPU asked for through a ResourceClaim is described by four kinds of object —
DeviceClasses, ResourceSlices (what each driver publishes per node), ResourceClaims and their
templates — and the allocator walks devices thousands of times per gang. Reading the JSON once,
at the boundary, into frozen values keeps the allocator free of ``dict.get`` chains and makes a
malformed object an error with its field path (:class:`DraParseError`) instead of a crash deep in
a scheduling cycle. Field names follow the v1 API (1.34+); defaults are the API server's
(``allocationMode`` ExactCount, ``count`` 1).

Attribute values keep their API type: ``int``, ``bool``, ``str``, :class:`Version` (the
``version`` kind, compared by semantic-version precedence), or a tuple of those for the list
kinds. Capacities are exact :class:`~decimal.Decimal` values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from gang.models.quantity import QuantityError, parse_quantity

__all__ = [
    "ADMIN_ACCESS_LABEL",
    "DELETE_PROTECTION_FINALIZER",
    "DRA_GROUP",
    "DRA_VERSION",
    "MAX_DEVICES_PER_CLAIM",
    "MAX_RESERVED_FOR",
    "POD_CLAIM_NAME_ANNOTATION",
    "AttributeValue",
    "ClaimRequest",
    "ConfigEntry",
    "Constraint",
    "Device",
    "DeviceClass",
    "DeviceTaint",
    "DraParseError",
    "ResourceClaim",
    "ResourceSlice",
    "SubRequest",
    "Toleration",
    "Version",
    "parse_claim",
    "parse_class",
    "parse_slice",
]

DRA_GROUP: Final = "resource.k8s.io"
DRA_VERSION: Final = "v1"
#: kube-scheduler's finalizer on a claim it allocated (removed once deallocated)
DELETE_PROTECTION_FINALIZER: Final = "resource.kubernetes.io/delete-protection"
#: the annotation of a claim made from a template: the pod's name for the claim
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
#: the namespace label that allows ``adminAccess`` requests
ADMIN_ACCESS_LABEL: Final = "resource.kubernetes.io/admin-access"
#: the API's limits: devices one claim may be allocated, consumers one claim may be reserved for
MAX_DEVICES_PER_CLAIM: Final = 32
MAX_RESERVED_FOR: Final = 256

_SEMVER: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)


class DraParseError(ValueError):
    """A DRA object that cannot be read; the message names the field."""


@dataclass(frozen=True, slots=True, order=False)
class Version:
    """A semantic version (the ``version`` attribute kind): precedence as semver 2.0 orders it,
    build metadata ignored."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()
    text: str = ""

    @staticmethod
    def parse(text: str, normalize: bool = False) -> Version:
        candidate = text
        if normalize:
            candidate = candidate.removeprefix("v")
            parts = candidate.split("-", 1)[0].split("+", 1)[0].split(".")
            if 1 <= len(parts) < 3:
                core = ".".join(
                    [str(int(p)) if p.isdigit() else p for p in parts] + ["0"] * (3 - len(parts))
                )
                candidate = core + candidate[len(".".join(parts)) :]
        match = _SEMVER.fullmatch(candidate)
        if match is None:
            raise DraParseError(f"invalid semantic version {text!r}")
        pre = tuple(int(p) if p.isdigit() else p for p in (match[4] or "").split(".") if p)
        return Version(int(match[1]), int(match[2]), int(match[3]), pre, text)

    def _key(self) -> tuple[Any, ...]:
        # a release sorts after its pre-releases; numeric identifiers before alphanumeric ones
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 1 if not pre else 0, pre)

    def compare(self, other: Version) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __str__(self) -> str:
        return self.text or f"{self.major}.{self.minor}.{self.patch}"


AttributeValue = int | bool | str | Version | tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str
    raw: Mapping[str, Any]

    def tolerates(self, taint: DeviceTaint) -> bool:
        """core/v1 toleration matching, as DRA applies it to device taints."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class Device:
    """One device a slice publishes. ``attributes``/``capacity`` keys are fully qualified
    (``domain/name``; an unqualified name belongs to the slice's driver)."""

    name: str
    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, Decimal]
    taints: tuple[DeviceTaint, ...] = ()
    #: partitionable devices: counter set → counter → amount consumed
    consumes_counters: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    #: per-device node selection (the slice's ``perDeviceNodeSelection``)
    node_name: str | None = None
    node_selector: Mapping[str, Any] | None = None
    all_nodes: bool = False
    allow_multiple_allocations: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str | None
    node_selector: Mapping[str, Any] | None
    all_nodes: bool
    per_device_node_selection: bool
    devices: tuple[Device, ...]
    #: counter set → counter → amount (partitionable devices draw on these)
    shared_counters: Mapping[str, Mapping[str, Decimal]]


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    #: the class's ``spec.config`` entries (opaque driver parameters), as served
    config: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class SubRequest:
    """What one request (or one ``firstAvailable`` alternative) asks for."""

    name: str
    class_name: str
    selectors: tuple[str, ...]
    mode: str  # "ExactCount" | "All"
    count: int
    tolerations: tuple[Toleration, ...]
    admin_access: bool = False
    #: consumable capacity: name → amount requested from each device
    capacity: Mapping[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    name: str
    #: ``exactly``: one alternative named like the request; ``firstAvailable``: in order
    alternatives: tuple[SubRequest, ...]
    first_available: bool


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    requests: tuple[str, ...]
    raw: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    resource_version: str
    requests: tuple[ClaimRequest, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[ConfigEntry, ...]
    #: ``status.allocation`` as served (None: not allocated)
    allocation: Mapping[str, Any] | None
    #: ``status.reservedFor`` consumers' uids
    reserved_for: tuple[str, ...]
    deleting: bool
    finalizers: tuple[str, ...]
    #: the owning pod (controller reference of kind Pod): (name, uid)
    owner_pod: tuple[str, str] | None
    #: ``resource.kubernetes.io/pod-claim-name``: the pod claim it was made for
    pod_claim_name: str | None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


# --------------------------------------------------------------------------------------------
# readers


def _map(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DraParseError(f"{where}: must be an object")
    return value


def _list(value: Any, where: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DraParseError(f"{where}: must be a list")
    return value


def _str(value: Any, where: str, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            raise DraParseError(f"{where}: Required value")
        return ""
    if not isinstance(value, str):
        raise DraParseError(f"{where}: must be a string")
    return value


def _int(value: Any, where: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise DraParseError(f"{where}: must be an integer")
    return value


def _quantity(value: Any, where: str) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError as err:
        raise DraParseError(f"{where}: {err}") from None


def qualify(name: str, driver: str) -> str:
    """An attribute or capacity name as ``domain/id`` (unqualified names are the driver's)."""
    return name if "/" in name else f"{driver}/{name}"


def _attribute(value: Any, where: str) -> AttributeValue:
    spec = _map(value, where)
    kinds = [
        k
        for k in ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")
        if k in spec
    ]
    if len(kinds) != 1:
        raise DraParseError(f"{where}: exactly one value kind is required")
    kind = kinds[0]
    raw = spec[kind]
    if kind == "int":
        return _int(raw, f"{where}.int", 0)
    if kind == "bool":
        if not isinstance(raw, bool):
            raise DraParseError(f"{where}.bool: must be a boolean")
        return raw
    if kind == "string":
        return _str(raw, f"{where}.string")
    if kind == "version":
        return Version.parse(_str(raw, f"{where}.version", required=True))
    items = _list(raw, f"{where}.{kind}")
    single = kind[:-1]
    return tuple(_attribute({single: item}, f"{where}.{kind}[{i}]") for i, item in enumerate(items))


def _counters(value: Any, where: str) -> dict[str, Decimal]:
    return {
        str(name): _quantity(
            _map(counter, f"{where}[{name}]").get("value"), f"{where}[{name}].value"
        )
        for name, counter in _map(value, where).items()
    }


def _taint(value: Any, where: str) -> DeviceTaint:
    spec = _map(value, where)
    return DeviceTaint(
        _str(spec.get("key"), f"{where}.key", required=True),
        _str(spec.get("value"), f"{where}.value"),
        _str(spec.get("effect"), f"{where}.effect", required=True),
    )


def _toleration(value: Any, where: str) -> Toleration:
    spec = _map(value, where)
    return Toleration(
        _str(spec.get("key"), f"{where}.key"),
        _str(spec.get("operator"), f"{where}.operator") or "Equal",
        _str(spec.get("value"), f"{where}.value"),
        _str(spec.get("effect"), f"{where}.effect"),
        dict(spec),
    )


def _device(value: Any, where: str, driver: str) -> Device:
    spec = _map(value, where)
    name = _str(spec.get("name"), f"{where}.name", required=True)
    attributes = {
        qualify(str(k), driver): _attribute(v, f"{where}.attributes[{k}]")
        for k, v in _map(spec.get("attributes"), f"{where}.attributes").items()
    }
    capacity = {
        qualify(str(k), driver): _quantity(
            _map(v, f"{where}.capacity[{k}]").get("value"), f"{where}.capacity[{k}].value"
        )
        for k, v in _map(spec.get("capacity"), f"{where}.capacity").items()
    }
    consumes: dict[str, dict[str, Decimal]] = {}
    for i, entry in enumerate(_list(spec.get("consumesCounters"), f"{where}.consumesCounters")):
        entry_map = _map(entry, f"{where}.consumesCounters[{i}]")
        counter_set = _str(entry_map.get("counterSet"), f"{where}.consumesCounters[{i}].counterSet")
        consumes[counter_set] = _counters(
            entry_map.get("counters"), f"{where}.consumesCounters[{i}].counters"
        )
    node_selector = spec.get("nodeSelector")
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        taints=tuple(
            _taint(t, f"{where}.taints[{i}]")
            for i, t in enumerate(_list(spec.get("taints"), f"{where}.taints"))
        ),
        consumes_counters=consumes,
        node_name=_str(spec.get("nodeName"), f"{where}.nodeName") or None,
        node_selector=_map(node_selector, f"{where}.nodeSelector") if node_selector else None,
        all_nodes=spec.get("allNodes") is True,
        allow_multiple_allocations=spec.get("allowMultipleAllocations") is True,
        binding_conditions=tuple(
            str(c) for c in _list(spec.get("bindingConditions"), f"{where}.bindingConditions")
        ),
        binding_failure_conditions=tuple(
            str(c)
            for c in _list(
                spec.get("bindingFailureConditions"), f"{where}.bindingFailureConditions"
            )
        ),
        binds_to_node=spec.get("bindsToNode") is True,
    )


def parse_slice(raw: Mapping[str, Any]) -> ResourceSlice:
    meta = _map(raw.get("metadata"), "metadata")
    spec = _map(raw.get("spec"), "spec")
    driver = _str(spec.get("driver"), "spec.driver", required=True)
    pool = _map(spec.get("pool"), "spec.pool")
    shared = {}
    for i, entry in enumerate(_list(spec.get("sharedCounters"), "spec.sharedCounters")):
        entry_map = _map(entry, f"spec.sharedCounters[{i}]")
        shared[_str(entry_map.get("name"), f"spec.sharedCounters[{i}].name", required=True)] = (
            _counters(entry_map.get("counters"), f"spec.sharedCounters[{i}].counters")
        )
    node_selector = spec.get("nodeSelector")
    return ResourceSlice(
        name=_str(meta.get("name"), "metadata.name"),
        driver=driver,
        pool=_str(pool.get("name"), "spec.pool.name", required=True),
        generation=_int(pool.get("generation"), "spec.pool.generation", 0),
        slice_count=_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1),
        node_name=_str(spec.get("nodeName"), "spec.nodeName") or None,
        node_selector=_map(node_selector, "spec.nodeSelector") if node_selector else None,
        all_nodes=spec.get("allNodes") is True,
        per_device_node_selection=spec.get("perDeviceNodeSelection") is True,
        devices=tuple(
            _device(d, f"spec.devices[{i}]", driver)
            for i, d in enumerate(_list(spec.get("devices"), "spec.devices"))
        ),
        shared_counters=shared,
    )


def _selectors(value: Any, where: str) -> tuple[str, ...]:
    out = []
    for i, selector in enumerate(_list(value, where)):
        cel = _map(_map(selector, f"{where}[{i}]").get("cel"), f"{where}[{i}].cel")
        if not cel.get("expression"):
            raise DraParseError(f"{where}[{i}]: CEL expression empty (unsupported selector type?)")
        out.append(_str(cel.get("expression"), f"{where}[{i}].cel.expression", required=True))
    return tuple(out)


def parse_class(raw: Mapping[str, Any]) -> DeviceClass:
    meta = _map(raw.get("metadata"), "metadata")
    spec = _map(raw.get("spec"), "spec")
    return DeviceClass(
        name=_str(meta.get("name"), "metadata.name", required=True),
        selectors=_selectors(spec.get("selectors"), "spec.selectors"),
        config=tuple(
            _map(c, f"spec.config[{i}]")
            for i, c in enumerate(_list(spec.get("config"), "spec.config"))
        ),
    )


def _sub_request(spec: Mapping[str, Any], name: str, where: str, admin: bool) -> SubRequest:
    mode = _str(spec.get("allocationMode"), f"{where}.allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise DraParseError(f"request {name}: unsupported count mode {mode}")
    if not spec.get("deviceClassName"):
        raise DraParseError(
            f"request {name}: missing device class name (unsupported request type?)"
        )
    count = _int(spec.get("count"), f"{where}.count", 1 if mode == "ExactCount" else 0)
    if mode == "ExactCount" and count <= 0:
        raise DraParseError(f"{where}.count: Invalid value: {count}: must be greater than zero")
    capacity = _map(spec.get("capacity"), f"{where}.capacity")
    return SubRequest(
        name=name,
        class_name=_str(spec.get("deviceClassName"), f"{where}.deviceClassName", required=True),
        selectors=_selectors(spec.get("selectors"), f"{where}.selectors"),
        mode=mode,
        count=count,
        tolerations=tuple(
            _toleration(t, f"{where}.tolerations[{i}]")
            for i, t in enumerate(_list(spec.get("tolerations"), f"{where}.tolerations"))
        ),
        admin_access=admin and spec.get("adminAccess") is True,
        capacity={
            str(k): _quantity(v, f"{where}.capacity.requests[{k}]")
            for k, v in _map(capacity.get("requests"), f"{where}.capacity.requests").items()
        },
    )


def _request(value: Any, where: str) -> ClaimRequest:
    spec = _map(value, where)
    name = _str(spec.get("name"), f"{where}.name", required=True)
    exactly, first = spec.get("exactly"), spec.get("firstAvailable")
    if (exactly is None) == (not first):
        raise DraParseError(f"{where}: exactly one of `exactly` or `firstAvailable` is required")
    if exactly is not None:
        sub = _sub_request(_map(exactly, f"{where}.exactly"), name, f"{where}.exactly", admin=True)
        return ClaimRequest(name, (sub,), first_available=False)
    alternatives = []
    for i, item in enumerate(_list(first, f"{where}.firstAvailable")):
        item_map = _map(item, f"{where}.firstAvailable[{i}]")
        sub_name = _str(item_map.get("name"), f"{where}.firstAvailable[{i}].name", required=True)
        alternatives.append(
            _sub_request(
                item_map, f"{name}/{sub_name}", f"{where}.firstAvailable[{i}]", admin=False
            )
        )
    return ClaimRequest(name, tuple(alternatives), first_available=True)


def _requests(value: Any, claim_name: str) -> tuple[ClaimRequest, ...]:
    out = []
    for i, raw in enumerate(_list(value, "spec.devices.requests")):
        try:
            out.append(_request(raw, f"spec.devices.requests[{i}]"))
        except DraParseError as err:
            raise DraParseError(f"claim {claim_name}, {err}") from None
    return tuple(out)


def parse_claim(raw: Mapping[str, Any]) -> ResourceClaim:
    meta = _map(raw.get("metadata"), "metadata")
    spec = _map(raw.get("spec"), "spec")
    devices = _map(spec.get("devices"), "spec.devices")
    status = _map(raw.get("status"), "status")
    constraints = []
    for i, c in enumerate(_list(devices.get("constraints"), "spec.devices.constraints")):
        c_map = _map(c, f"spec.devices.constraints[{i}]")
        if not c_map.get("matchAttribute") and not c_map.get("distinctAttribute"):
            raise DraParseError(
                f"claim {meta.get('name')}, constraint #{i}: empty constraint (unsupported constraint type?)"
            )
        constraints.append(
            Constraint(
                tuple(
                    str(r)
                    for r in _list(c_map.get("requests"), f"spec.devices.constraints[{i}].requests")
                ),
                _str(c_map.get("matchAttribute"), f"spec.devices.constraints[{i}].matchAttribute")
                or None,
                _str(
                    c_map.get("distinctAttribute"),
                    f"spec.devices.constraints[{i}].distinctAttribute",
                )
                or None,
            )
        )
    config = tuple(
        ConfigEntry(
            tuple(
                str(r)
                for r in _list(
                    _map(c, "config").get("requests"), f"spec.devices.config[{i}].requests"
                )
            ),
            _map(c, f"spec.devices.config[{i}]"),
        )
        for i, c in enumerate(_list(devices.get("config"), "spec.devices.config"))
    )
    owner = None
    for ref in _list(meta.get("ownerReferences"), "metadata.ownerReferences"):
        if isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("kind") == "Pod":
            owner = (str(ref.get("name") or ""), str(ref.get("uid") or ""))
    annotations = _map(meta.get("annotations"), "metadata.annotations")
    allocation = status.get("allocation")
    return ResourceClaim(
        namespace=_str(meta.get("namespace"), "metadata.namespace"),
        name=_str(meta.get("name"), "metadata.name"),
        uid=_str(meta.get("uid"), "metadata.uid"),
        resource_version=_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        requests=_requests(devices.get("requests"), str(meta.get("name") or "")),
        constraints=tuple(constraints),
        config=config,
        allocation=_map(allocation, "status.allocation") if allocation else None,
        reserved_for=tuple(
            str(_map(r, "status.reservedFor").get("uid") or "")
            for r in _list(status.get("reservedFor"), "status.reservedFor")
        ),
        deleting=meta.get("deletionTimestamp") is not None,
        finalizers=tuple(str(f) for f in _list(meta.get("finalizers"), "metadata.finalizers")),
        owner_pod=owner,
        pod_claim_name=str(annotations.get(POD_CLAIM_NAME_ANNOTATION) or "") or None,
    )
