"""What a kube-apiserver does to ``resource.k8s.io/v1`` objects on the way in.

Why: a scheduler that allocates devices writes a ResourceClaim's ``status`` (the allocation, the
pods it is reserved for) and relies on the server to refuse what would corrupt it: a second
allocation over the first, a reservation for a claim nobody allocated, the same pod twice, more
than 256 consumers. A simulator that stored anything would let exactly those scheduler bugs
pass, so the rules of ``pkg/registry/resource/resourceclaim/strategy.go`` and
``pkg/apis/resource/validation`` are reproduced here, with upstream's field paths and messages:

- a claim's status is dropped on create and kept by a main-resource write; a ``status`` write
  keeps the spec and the metadata (``ResetObjectMetaForStatus``: labels, annotations,
  finalizers, owners);
- ``status.reservedFor``: at most 256 entries (``Too many``), unique by uid (``Duplicate
  value``), each naming resource, name and uid, and only on an allocated claim
  (``Forbidden: may not be specified when `allocated` is not set``); a deleted claim may lose
  entries but gain none;
- ``status.allocation`` is immutable once set; it may be removed (with ``reservedFor`` empty,
  since the rule above then applies); a new allocation's results name requests of the claim;
- a claim's and a template's spec are immutable; a slice's driver, pool name and node name are;
- the v1 defaults (``allocationMode: ExactCount``, ``count: 1``, a toleration's ``operator:
  Equal``) and the create-time checks users hit: one of ``exactly`` / ``firstAvailable`` per
  request, a device class name, a positive count, unique request names; a slice's driver, pool
  and exactly one of its node fields.

Where upstream prints a Go struct as the bad value (``field is immutable`` on a whole spec or
allocation, printed with ``%#v``), the value is written here as compact JSON; field, type and
detail are upstream's. Not reproduced: CEL selector compilation, opaque parameter checks,
``status.devices`` validation, admin-access namespace checks, the remaining name-format rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gang.models.dra import DELETE_PROTECTION_FINALIZER
from gang.sim.workloads import WorkloadRejected

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

#: the finalizer the scheduler puts on a claim it allocates (removed once deallocated)
DELETE_PROTECTION = DELETE_PROTECTION_FINALIZER
#: ResourceClaimReservedForMaxSize, AllocationResultsMaxSize, DeviceRequestsMaxSize
RESERVED_FOR_MAX = 256
RESULTS_MAX = 32
REQUESTS_MAX = 32
ALLOCATION_MODES = ("All", "ExactCount")
IMMUTABLE = "field is immutable"
REQUEST_REF = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)
NODE_FIELDS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
NODE_FIELDS_TEXT = (
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
)


def _value(value: Any) -> str:
    """A bad value as field.Error prints it: numbers and bools bare, strings quoted, nil
    ``null``; structs (Go's ``%#v``) as compact JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _invalid(value: Any, detail: str) -> str:
    return f"Invalid value: {_value(value)}: {detail}"


def _too_many(count: int, limit: int) -> str:
    return f"Too many: {count}: must have at most {limit} items"


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# --- defaults ----------------------------------------------------------------------------------


def _default_request(request: Obj) -> Obj:
    """SetDefaults_ExactDeviceRequest / SetDefaults_DeviceSubRequest / DeviceToleration."""
    out = dict(request)
    out.setdefault("allocationMode", "ExactCount")
    if out["allocationMode"] == "ExactCount" and not out.get("count"):
        out["count"] = 1
    if isinstance(out.get("tolerations"), list):
        out["tolerations"] = [
            {**t, "operator": t.get("operator") or "Equal"} if isinstance(t, dict) else t
            for t in out["tolerations"]
        ]
    return out


def default_claim_spec(spec: Any) -> Any:
    """A ResourceClaimSpec with the v1 defaults set (anything but an object unchanged)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("devices"), dict):
        return spec
    devices = dict(spec["devices"])
    requests = []
    for request in devices.get("requests") or []:
        if isinstance(request, dict):
            request = dict(request)
            if isinstance(request.get("exactly"), dict):
                request["exactly"] = _default_request(request["exactly"])
            if isinstance(request.get("firstAvailable"), list):
                request["firstAvailable"] = [
                    _default_request(s) if isinstance(s, dict) else s
                    for s in request["firstAvailable"]
                ]
        requests.append(request)
    if "requests" in devices:
        devices["requests"] = requests
    return {**spec, "devices": devices}


# --- create-time validation --------------------------------------------------------------------


def _mode_causes(where: str, request: Obj) -> Causes:
    """validateDeviceAllocationMode (after defaulting)."""
    mode, count = request.get("allocationMode"), request.get("count", 0)
    if mode == "All":
        if count:
            return [
                (
                    f"{where}.count",
                    _invalid(count, "must not be specified when allocationMode is 'All'"),
                )
            ]
        return []
    if mode == "ExactCount":
        if not isinstance(count, int) or count <= 0:
            return [(f"{where}.count", _invalid(count, "must be greater than zero"))]
        return []
    listed = ", ".join(f'"{m}"' for m in ALLOCATION_MODES)
    return [
        (
            f"{where}.allocationMode",
            f"Unsupported value: {_value(mode)}: supported values: {listed}",
        )
    ]


def _sub_request_causes(where: str, request: Obj) -> Causes:
    causes: Causes = []
    if not request.get("deviceClassName"):
        causes.append((f"{where}.deviceClassName", "Required value"))
    return causes + _mode_causes(where, request)


def _names(where: str, items: list[Obj]) -> Causes:
    """Names required and unique (validateSet by name)."""
    causes: Causes = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        name = item.get("name")
        if not name:
            causes.append((f"{where}[{i}].name", "Required value"))
        elif name in seen:
            causes.append((f"{where}[{i}]", f"Duplicate value: {_value(name)}"))
        else:
            seen.add(str(name))
    return causes


def _request_causes(where: str, request: Obj) -> Causes:
    exactly, first = request.get("exactly"), request.get("firstAvailable")
    if exactly is None and not first:
        return [(where, "Required value: exactly one of `exactly` or `firstAvailable` is required")]
    if exactly is not None and first:
        detail = (
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
        )
        return [(where, _invalid(None, detail))]
    if isinstance(exactly, dict):
        return _sub_request_causes(f"{where}.exactly", exactly)
    subs = _dicts(first)
    causes = _names(f"{where}.firstAvailable", subs)
    for j, sub in enumerate(subs):
        causes += _sub_request_causes(f"{where}.firstAvailable[{j}]", sub)
    return causes


def claim_spec_causes(spec: Any, where: str = "spec") -> Causes:
    """validateResourceClaimSpec, for the checks a user meets first."""
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = _dicts((devices or {}).get("requests") if isinstance(devices, dict) else None)
    path = f"{where}.devices.requests"
    if len(requests) > REQUESTS_MAX:
        return [(path, _too_many(len(requests), REQUESTS_MAX))]
    causes = _names(path, requests)
    for i, request in enumerate(requests):
        causes += _request_causes(f"{path}[{i}]", request)
    return causes


def slice_spec_causes(spec: Any) -> Causes:
    """validateResourceSliceSpec: driver, pool, exactly one of the node fields."""
    spec = spec if isinstance(spec, dict) else {}
    causes: Causes = []
    if not spec.get("driver"):
        causes.append(("spec.driver", "Required value"))
    pool = spec.get("pool") if isinstance(spec.get("pool"), dict) else {}
    if not pool.get("name"):
        causes.append(("spec.pool.name", "Required value"))
    count = pool.get("resourceSliceCount", 0)
    if not isinstance(count, int) or count <= 0:
        causes.append(
            ("spec.pool.resourceSliceCount", _invalid(count, "must be greater than zero"))
        )
    present = [f"`{f}`" for f in NODE_FIELDS if spec.get(f) not in (None, "", False)]
    if not present:
        causes.append(("spec", f"Required value: {NODE_FIELDS_TEXT}"))
    elif len(present) > 1:
        fields = "{" + ", ".join(present) + "}"
        causes.append(
            ("spec", _invalid(fields, f"{NODE_FIELDS_TEXT}, but multiple fields are set"))
        )
    return causes


def _reject(causes: Causes) -> None:
    if causes:
        raise WorkloadRejected(causes)


def admit_claim(claim: Obj) -> Obj:
    """PrepareForCreate (status dropped), defaults, ValidateResourceClaim."""
    out = {k: v for k, v in claim.items() if k != "status"}
    out["spec"] = default_claim_spec(claim.get("spec") or {})
    _reject(claim_spec_causes(out["spec"]))
    return out


def admit_template(template: Obj) -> Obj:
    spec = dict(template.get("spec") or {})
    spec["spec"] = default_claim_spec(spec.get("spec") or {})
    _reject(claim_spec_causes(spec["spec"], "spec.spec"))
    return {**template, "spec": spec}


def admit_slice(resource_slice: Obj) -> Obj:
    _reject(slice_spec_causes(resource_slice.get("spec")))
    return resource_slice


def admit_class(device_class: Obj) -> Obj:
    return device_class


ADMISSION: dict[str, Callable[[Obj], Obj]] = {
    "DeviceClass": admit_class,
    "ResourceClaim": admit_claim,
    "ResourceClaimTemplate": admit_template,
    "ResourceSlice": admit_slice,
}


# --- updates -----------------------------------------------------------------------------------


def _immutable(path: str, new: Any, old: Any) -> Causes:
    return [] if new == old else [(path, _invalid(new, IMMUTABLE))]


def _consumer(ref: Obj) -> tuple[str, str, str, str]:
    return (
        str(ref.get("apiGroup") or ""),
        str(ref.get("resource") or ""),
        str(ref.get("name") or ""),
        str(ref.get("uid") or ""),
    )


def _reserved_for_causes(reserved: list[Obj]) -> Causes:
    """validateSet(reservedFor, 256, validateResourceClaimUserReference, by uid)."""
    path = "status.reservedFor"
    if len(reserved) > RESERVED_FOR_MAX:
        return [(path, _too_many(len(reserved), RESERVED_FOR_MAX))]
    causes: Causes = []
    for i, ref in enumerate(reserved):
        causes += [
            (f"{path}[{i}].{f}", "Required value")
            for f in ("resource", "name", "uid")
            if not ref.get(f)
        ]
    seen: set[str] = set()
    for i, ref in enumerate(reserved):
        uid = str(ref.get("uid") or "")
        if uid in seen:
            causes.append((f"{path}[{i}]", f"Duplicate value: {_value(uid)}"))
        seen.add(uid)
    return causes


def _request_names(spec: Any) -> set[str]:
    """Every name a result may give: ``request`` or ``request/subrequest``."""
    devices = spec.get("devices") if isinstance(spec, dict) else None
    names: set[str] = set()
    for request in _dicts((devices or {}).get("requests") if isinstance(devices, dict) else None):
        name = str(request.get("name") or "")
        subs = _dicts(request.get("firstAvailable"))
        if subs:
            names.update(f"{name}/{s.get('name')}" for s in subs)
        else:
            names.add(name)
    return names


def _allocation_causes(allocation: Any, spec: Any) -> Causes:
    """validateAllocationResult for a new allocation: results name the claim's requests."""
    path = "status.allocation.devices.results"
    devices = allocation.get("devices") if isinstance(allocation, dict) else None
    results = _dicts((devices or {}).get("results") if isinstance(devices, dict) else None)
    if len(results) > RESULTS_MAX:
        return [(path, _too_many(len(results), RESULTS_MAX))]
    names = _request_names(spec)
    causes: Causes = []
    for i, result in enumerate(results):
        request = str(result.get("request") or "")
        if request not in names:
            causes.append((f"{path}[{i}].request", _invalid(request, REQUEST_REF)))
        causes += [
            (f"{path}[{i}].{f}", "Required value")
            for f in ("driver", "pool", "device")
            if not result.get(f)
        ]
    return causes


def _status(obj: Obj) -> Obj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def claim_status_causes(new: Obj, old: Obj) -> Causes:
    """validateResourceClaimStatusUpdate, in upstream's order."""
    status, old_status = _status(new), _status(old)
    reserved = _dicts(status.get("reservedFor"))
    causes = _reserved_for_causes(reserved)
    allocation, old_allocation = status.get("allocation"), old_status.get("allocation")
    if reserved:
        if allocation is None:
            causes.append(
                (
                    "status.reservedFor",
                    "Forbidden: may not be specified when `allocated` is not set",
                )
            )
        elif new["metadata"].get("deletionTimestamp"):
            before = {_consumer(r) for r in _dicts(old_status.get("reservedFor"))}
            if any(_consumer(r) not in before for r in reserved):
                causes.append(
                    (
                        "status.reservedFor",
                        "Forbidden: new entries may not be added while `deallocationRequested` or "
                        "`deletionTimestamp` are set",
                    )
                )
    if old_allocation is not None and allocation is not None:
        causes += _immutable("status.allocation", allocation, old_allocation)
    elif allocation is not None:
        causes += _allocation_causes(allocation, new.get("spec"))
    return causes


def update_causes(kind: str, new: Obj, old: Obj) -> Causes:
    """ValidateUpdate of a main-resource write: what may not change."""
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        return _immutable("spec", new.get("spec"), old.get("spec"))
    if kind == "ResourceSlice":
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        causes = slice_spec_causes(spec)
        causes += _immutable(
            "spec.pool.name",
            (spec.get("pool") or {}).get("name"),
            (old_spec.get("pool") or {}).get("name"),
        )
        causes += _immutable("spec.driver", spec.get("driver"), old_spec.get("driver"))
        causes += _immutable("spec.nodeName", spec.get("nodeName"), old_spec.get("nodeName"))
        return causes
    return []


def default_on_update(kind: str, obj: Obj) -> None:
    """The v1 defaults every decoded write gets (claims and templates)."""
    if kind == "ResourceClaim":
        obj["spec"] = default_claim_spec(obj.get("spec") or {})
    elif kind == "ResourceClaimTemplate":
        spec = dict(obj.get("spec") or {})
        spec["spec"] = default_claim_spec(spec.get("spec") or {})
        obj["spec"] = spec
