"""Test table for a structured DRA allocator, ported from Kubernetes.

Source: ``kubernetes/kubernetes``,
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/
allocator_testing.go`` (see ``README.md`` next to this file for the commit).

The builders below mirror the Go helpers of that file (same names in snake_case;
``class`` becomes :func:`device_class` and ``slice`` becomes :func:`resource_slice`).
Chained Go methods (``device(...).withTaints(...)``) become nested calls
(``with_taints(device(...), ...)``). Every builder returns plain dicts in the
``resource.k8s.io/v1`` JSON shape (camelCase keys, quantities as strings, empty or
zero ``omitempty`` fields left out). Go closures that mutate a freshly built object
are expressed with :func:`patched`.

``CASES`` holds one dict per Go test case, in source order. See ``README.md`` for the
keys and for the semantics of the Go runner that a Python runner has to reproduce.
"""

from __future__ import annotations

import copy
from typing import Any

JSON = dict[str, Any]

# --------------------------------------------------------------------------- constants

REGION1 = "region-1"
REGION2 = "region-2"
NODE1 = "node-1"
NODE2 = "node-2"
CLASS_A = "class-a"
CLASS_B = "class-b"
DRIVER_A = "driver-a"
DRIVER_B = "driver-b"
POOL1 = "pool-1"
POOL2 = "pool-2"
POOL3 = "pool-3"
POOL4 = "pool-4"
REQ0 = "req-0"
REQ1 = "req-1"
REQ2 = "req-2"
REQ3 = "req-3"
SUB_REQ0 = "subReq-0"
SUB_REQ1 = "subReq-1"
REQ0_SUB_REQ0 = "req-0/subReq-0"
REQ0_SUB_REQ1 = "req-0/subReq-1"
REQ1_SUB_REQ0 = "req-1/subReq-0"
REQ1_SUB_REQ1 = "req-1/subReq-1"
REQ2_SUB_REQ0 = "req-2/subReq-0"
REQ2_SUB_REQ1 = "req-2/subReq-1"
CLAIM0 = "claim-0"
CLAIM1 = "claim-1"
SLICE1 = "slice-1"
SLICE2 = "slice-2"
SLICE3 = "slice-3"
SLICE4 = "slice-4"
DEVICE0 = "device-0"
DEVICE1 = "device-1"
DEVICE2 = "device-2"
DEVICE3 = "device-3"
DEVICE4 = "device-4"
COUNTER_SET1 = "counter-set-1"
COUNTER_SET2 = "counter-set-2"
CAPACITY0 = "capacity-0"
CAPACITY1 = "capacity-1"

# The Go runner replaces every non-nil shareID in the results with this value.
FIXED_SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"

# resource.NewQuantity(n, resource.BinarySI), serialized.
ZERO = "0"
ONE = "1"
TWO = "2"
THREE = "3"
FOUR = "4"

FIELD_NAME_KEY = "metadata.name"
REGION_KEY = "region"
PLANET_KEY = "planet"
PLANET_VALUE_EARTH = "earth"

# Special values for the node_selection argument of the slice builders.
NODE_SELECTION_ALL = "nodeSelectionAll"
NODE_SELECTION_PER_DEVICE = "nodeSelectionPerDevice"

# Special value for the capacity argument of device().
FROM_COUNTERS = "fromCounters"

# resourceapi.AllocationResultsMaxSize
ALLOCATION_RESULTS_MAX_SIZE = 32

# Values that the Go test function defines before its table.
NON_EXISTENT_ATTRIBUTE = "driver-a/NonExistentAttribute"
BOOL_ATTRIBUTE = "driver-a/boolAttribute"
STRING_ATTRIBUTE = "driver-a/stringAttribute"
VERSION_ATTRIBUTE = "driver-a/driverVersion"
INT_ATTRIBUTE = "driver-a/numa"
TAINT_KEY = "taint-key"
TAINT_VALUE = "taint-value"
TAINT_VALUE2 = "taint-value-2"
TAINT_NONE: JSON = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "None"}
TAINT_NO_SCHEDULE: JSON = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "NoSchedule"}
TAINT_NO_EXECUTE: JSON = {"key": TAINT_KEY, "value": TAINT_VALUE2, "effect": "NoExecute"}
TOLERATION_NO_SCHEDULE: JSON = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
TOLERATION_NO_EXECUTE: JSON = {
    "key": TAINT_KEY,
    "operator": "Equal",
    "value": TAINT_VALUE2,
    "effect": "NoExecute",
}
TOLERATION_NO_SCHEDULE_KEY1: JSON = {"key": "key1", "operator": "Exists", "effect": "NoSchedule"}


# --------------------------------------------------------------------------- helpers


def _plain(obj: Any) -> Any:
    """Deep copy that also turns dict subclasses (see _FromCounters) into plain dicts."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return copy.deepcopy(obj)


def _prune(obj: JSON) -> JSON:
    """Drop None and empty list/dict values (Go omitempty)."""
    return {k: v for k, v in obj.items() if v is not None and v != [] and v != {}}


def patched(obj: JSON, changes: dict[str, Any]) -> JSON:
    """Copy of obj with dotted paths set (list indices are numbers); None deletes a key.

    Stands in for the Go closures that build an object and then assign fields.
    """
    out = _plain(obj)
    for path, value in changes.items():
        keys = path.split(".")
        target: Any = out
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target.setdefault(key, {})
        last = keys[-1]
        if isinstance(target, list):
            target[int(last)] = _plain(value)
        elif value is None:
            target.pop(last, None)
        else:
            target[last] = _plain(value)
    return out


def _cel(expression: str) -> JSON:
    return {"cel": {"expression": expression}}


# --------------------------------------------------------------------------- nodes


def node(name: str, region: str) -> JSON:
    return {
        "metadata": {
            "name": name,
            "labels": {REGION_KEY: region, PLANET_KEY: PLANET_VALUE_EARTH},
        }
    }


def node_label_selector(key: str, *values: str) -> JSON:
    """v1 NodeSelector with one term: label key In values."""
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
        ]
    }


def local_node_selector(node_name: str) -> JSON:
    """v1 NodeSelector with one term: field metadata.name In [node_name]."""
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": FIELD_NAME_KEY, "operator": "In", "values": [node_name]}]}
        ]
    }


# --------------------------------------------------------------------------- classes


def device_class(name: str, driver: str) -> JSON:
    """Go ``class``: a DeviceClass selecting devices of one driver."""
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [_cel(f'device.driver == "{driver}"')]},
    }


def class_with_allow_multiple_allocations(name: str, driver: str, multialloc: bool) -> JSON:
    expression = (
        f'device.driver == "{driver}" && '
        f"device.allowMultipleAllocations == {str(multialloc).lower()}"
    )
    return {"metadata": {"name": name}, "spec": {"selectors": [_cel(expression)]}}


def device_configuration(driver: str, attribute: str) -> JSON:
    """Opaque config whose parameters are ``{attribute: attribute + "Value"}``."""
    return {"opaque": {"driver": driver, "parameters": {attribute: attribute + "Value"}}}


def class_with_config(name: str, driver: str, attribute: str) -> JSON:
    out = device_class(name, driver)
    out["spec"]["config"] = [device_configuration(driver, attribute)]
    return out


# --------------------------------------------------------------------------- claims


def request(name: str, class_name: str, count: int, *selectors: JSON) -> JSON:
    """DeviceRequest with ``exactly`` (ExactCount); count 0 is left out (omitempty)."""
    exactly = _prune(
        {
            "deviceClassName": class_name,
            "selectors": _plain(list(selectors)),
            "allocationMode": "ExactCount",
            "count": count or None,
        }
    )
    return {"name": name, "exactly": exactly}


def device_request(name: str, class_name: str, count: int) -> JSON:
    return request(name, class_name, count)


def all_device_request(name: str, class_name: str) -> JSON:
    return {"name": name, "exactly": {"deviceClassName": class_name, "allocationMode": "All"}}


def sub_request(name: str, class_name: str, count: int, *fields: JSON) -> JSON:
    """DeviceSubRequest; fields are selectors ({"cel": ...} or {}) or tolerations."""
    selectors = [f for f in fields if not f or "cel" in f]
    tolerations = [f for f in fields if f and "cel" not in f]
    return _prune(
        {
            "name": name,
            "deviceClassName": class_name,
            "selectors": _plain(selectors),
            "allocationMode": "ExactCount",
            "count": count or None,
            "tolerations": _plain(tolerations),
        }
    )


def capacity_requests(quantity: str | None) -> JSON:
    return {"requests": requirements(quantity)}


def requirements(quantity: str | None) -> dict[str, str]:
    return {} if quantity is None else {CAPACITY0: quantity}


def with_capacity_request(req: JSON, quantity: str | None) -> JSON:
    """Works on a DeviceRequest (sets exactly.capacity) and on a DeviceSubRequest."""
    out = _plain(req)
    target = out.get("exactly", out)
    target["capacity"] = capacity_requests(quantity)
    return out


def with_selectors(req: JSON, *selectors: JSON) -> JSON:
    out = _plain(req)
    out["exactly"]["selectors"] = _plain(list(selectors))
    if not selectors:
        del out["exactly"]["selectors"]
    return out


def with_allocation_mode(sub_req: JSON, mode: str) -> JSON:
    out = _plain(sub_req)
    out["allocationMode"] = mode
    return out


def request_with_prioritized_list(name: str, *sub_requests: JSON) -> JSON:
    return {"name": name, "firstAvailable": _plain(list(sub_requests))}


def claim(name: str) -> JSON:
    return {"metadata": {"name": name}, "spec": {"devices": {}}}


def claim_with_requests(name: str, constraints: list[JSON] | None, *requests: JSON) -> JSON:
    devices = _prune({"requests": _plain(list(requests)), "constraints": _plain(constraints)})
    return {"metadata": {"name": name}, "spec": {"devices": devices}}


def claim_with_request(name: str, req: str, class_name: str, *constraints: JSON) -> JSON:
    return claim_with_requests(name, list(constraints), request(req, class_name, 1))


def claim_with_device_config(
    name: str, req: str, class_name: str, driver: str, attribute: str
) -> JSON:
    out = claim_with_request(name, req, class_name)
    out["spec"]["devices"]["config"] = [device_configuration(driver, attribute)]
    return out


def device_claim_config(requests: list[str], device_config: JSON) -> JSON:
    return {"requests": list(requests), **_plain(device_config)}


def with_tolerations(claim_obj: JSON, *tolerations: JSON) -> JSON:
    out = _plain(claim_obj)
    for req in out["spec"]["devices"]["requests"]:
        req["exactly"].setdefault("tolerations", []).extend(_plain(list(tolerations)))
    return out


def with_requests(claim_obj: JSON, *requests: JSON) -> JSON:
    out = _plain(claim_obj)
    out["spec"]["devices"]["requests"] = _plain(list(requests))
    return out


def with_constraints(claim_obj: JSON, *constraints: JSON) -> JSON:
    out = _plain(claim_obj)
    out["spec"]["devices"]["constraints"] = _plain(list(constraints))
    return out


def with_configs(claim_obj: JSON, configs: list[JSON]) -> JSON:
    out = _plain(claim_obj)
    out["spec"]["devices"]["config"] = _plain(configs)
    return out


# --------------------------------------------------------------------------- devices


class _FromCounters(dict[str, Any]):
    """A device built with capacity=FROM_COUNTERS.

    Like the Go wrapper's flag, this survives only until the next with_* call:
    with_device_counter_consumption() then derives the capacity from the counters.
    """


def to_device_capacity(capacity: dict[str, str] | None) -> JSON:
    return {name: {"value": quantity} for name, quantity in (capacity or {}).items()}


def to_counters(counters: dict[str, str] | None) -> JSON:
    return {name: {"value": quantity} for name, quantity in (counters or {}).items()}


def device(
    name: str,
    capacity: dict[str, str] | str | None = None,
    attributes: dict[str, JSON] | None = None,
) -> JSON:
    """Device; attributes use the v1 value keys (int, bool, string, version, ints, ...)."""
    out: JSON = _prune({"name": name, "attributes": _plain(attributes)})
    if capacity == FROM_COUNTERS:
        return _FromCounters(out)
    if isinstance(capacity, dict) and capacity:
        out["capacity"] = to_device_capacity(capacity)
    elif capacity is not None and not isinstance(capacity, dict):
        raise ValueError(f"unexpected capacity value {capacity!r}")
    return out


def with_taints(dev: JSON, *taints: JSON) -> JSON:
    out = _plain(dev)
    out.setdefault("taints", []).extend(_plain(list(taints)))
    return out


def device_counter_consumption(counter_set: str, counters: dict[str, str] | None) -> JSON:
    return {"counterSet": counter_set, "counters": to_counters(counters)}


def with_device_counter_consumption(dev: JSON, *consumptions: JSON) -> JSON:
    out = _plain(dev)
    out.setdefault("consumesCounters", []).extend(_plain(list(consumptions)))
    if isinstance(dev, _FromCounters):
        out["capacity"] = {
            name: {"value": counter["value"]}
            for consumption in out["consumesCounters"]
            for name, counter in consumption["counters"].items()
        }
    return out


def with_node_selection(dev: JSON, node_selection: JSON | str) -> JSON:
    out = _plain(dev)
    if isinstance(node_selection, dict):
        out["nodeSelector"] = _plain(node_selection)
    elif node_selection == NODE_SELECTION_ALL:
        out["allNodes"] = True
    elif node_selection == NODE_SELECTION_PER_DEVICE:
        raise ValueError("nodeSelectionPerDevice is not supported for devices")
    else:
        out["nodeName"] = node_selection
    return out


def with_binding_conditions(
    dev: JSON, binding_conditions: list[str] | None, binding_failure_conditions: list[str] | None
) -> JSON:
    out = _plain(dev)
    out.pop("bindingConditions", None)
    out.pop("bindingFailureConditions", None)
    if binding_conditions:
        out["bindingConditions"] = list(binding_conditions)
    if binding_failure_conditions:
        out["bindingFailureConditions"] = list(binding_failure_conditions)
    return out


def with_binds_to_node(dev: JSON, binds_to_node: bool) -> JSON:
    out = _plain(dev)
    out["bindsToNode"] = binds_to_node
    return out


def with_allow_multiple_allocations(dev: JSON) -> JSON:
    out = _plain(dev)
    out["allowMultipleAllocations"] = True
    return out


def with_capacity_request_policy_range(dev: JSON, capacity: dict[str, str]) -> JSON:
    """Capacity entries with requestPolicy default 2, validRange min 2, step 2, max 4."""
    out = _plain(dev)
    caps = out.setdefault("capacity", {})
    for name, quantity in capacity.items():
        caps[name] = {
            "value": quantity,
            "requestPolicy": {
                "default": TWO,
                "validRange": {"min": TWO, "max": FOUR, "step": TWO},
            },
        }
    return out


def with_capacity_request_policy_valid_values(
    dev: JSON,
    default_value: str,
    capacity: dict[str, str],
    additional_valid_values: list[str] | None,
) -> JSON:
    """Capacity entries whose validValues are [default_value, *additional_valid_values]."""
    out = _plain(dev)
    caps = out.setdefault("capacity", {})
    for name, quantity in capacity.items():
        caps[name] = {
            "value": quantity,
            "requestPolicy": {
                "default": default_value,
                "validValues": [default_value, *(additional_valid_values or [])],
            },
        }
    return out


# --------------------------------------------------------------------------- slices


def resource_pool(name: str, count: int) -> JSON:
    return {"name": name, "generation": 1, "resourceSliceCount": count}


def resource_slice(name: str, node_selection: JSON | str, pool: JSON | str, driver: str) -> JSON:
    """Go ``slice``. node_selection: node name, NodeSelector dict, NODE_SELECTION_ALL or
    NODE_SELECTION_PER_DEVICE; pool: name (generation 1, one slice) or resource_pool()."""
    pool_obj = _plain(pool) if isinstance(pool, dict) else resource_pool(pool, 1)
    spec: JSON = {"driver": driver, "pool": pool_obj}
    if isinstance(node_selection, dict):
        spec["nodeSelector"] = _plain(node_selection)
    elif node_selection == NODE_SELECTION_ALL:
        spec["allNodes"] = True
    elif node_selection == NODE_SELECTION_PER_DEVICE:
        spec["perDeviceNodeSelection"] = True
    else:
        spec["nodeName"] = node_selection
    return {"metadata": {"name": name}, "spec": spec}


def slice_with_devices(
    name: str, node_selection: JSON | str, pool: JSON | str, driver: str, *devices: JSON
) -> JSON:
    out = resource_slice(name, node_selection, pool, driver)
    if devices:
        out["spec"]["devices"] = _plain(list(devices))
    return out


def slice_with_no_devices(
    name: str, node_selection: JSON | str, pool: JSON | str, driver: str
) -> JSON:
    return slice_with_devices(name, node_selection, pool, driver)


def slice_with_one_device(
    name: str, node_selection: JSON | str, pool: JSON | str, driver: str
) -> JSON:
    return slice_with_devices(name, node_selection, pool, driver, device(DEVICE1))


def slice_with_multiple_devices(
    name: str, node_selection: JSON | str, pool: JSON | str, driver: str, count: int
) -> JSON:
    devices = [device(f"device-{i}") for i in range(count)]
    return slice_with_devices(name, node_selection, pool, driver, *devices)


def counter_set(name: str, counters: dict[str, str] | None) -> JSON:
    return {"name": name, "counters": to_counters(counters)}


def slice_with_counter_sets(
    name: str, node_selection: JSON | str, pool: JSON | str, driver: str, *counter_sets: JSON
) -> JSON:
    out = resource_slice(name, node_selection, pool, driver)
    if counter_sets:
        out["spec"]["sharedCounters"] = _plain(list(counter_sets))
    return out


# --------------------------------------------------------------------------- results


def device_id(driver: str, pool: str, device_name: str) -> list[str]:
    """Go MakeDeviceID, as [driver, pool, device]."""
    return [driver, pool, device_name]


def device_allocation_result(
    req: str, driver: str, pool: str, device_name: str, admin_access: bool, *tolerations: JSON
) -> JSON:
    out: JSON = {"request": req, "driver": driver, "pool": pool, "device": device_name}
    if admin_access:
        out["adminAccess"] = True
    if tolerations:
        out["tolerations"] = _plain(list(tolerations))
    return out


def device_request_allocation_result(req: str, driver: str, pool: str, device_name: str) -> JSON:
    return {"request": req, "driver": driver, "pool": pool, "device": device_name}


def with_consumed_capacity(
    result: JSON, share_id: str | None, consumed_capacity: dict[str, str] | None
) -> JSON:
    out = _plain(result)
    if share_id is not None:
        out["shareID"] = share_id
    if consumed_capacity:
        out["consumedCapacity"] = dict(consumed_capacity)
    return out


def device_request_allocation_result_with_binding_conditions(
    req: str,
    driver: str,
    pool: str,
    device_name: str,
    binding_conditions: list[str] | None,
    binding_failure_conditions: list[str] | None,
    *tolerations: JSON,
) -> JSON:
    out = device_allocation_result(req, driver, pool, device_name, False, *tolerations)
    if binding_conditions:
        out["bindingConditions"] = list(binding_conditions)
    if binding_failure_conditions:
        out["bindingFailureConditions"] = list(binding_failure_conditions)
    return out


def multiple_device_allocation_results(
    req: str, driver: str, pool: str, count: int, start_index: int
) -> list[JSON]:
    return [
        device_allocation_result(req, driver, pool, f"device-{i}", False)
        for i in range(start_index, start_index + count)
    ]


def allocation_result(selector: JSON | None, *results: JSON) -> JSON:
    """Go ``allocationResult``: a matcher there (result order, node selector term,
    requirement and value order are irrelevant; config and allocationTimestamp must be
    unset). Here the expected AllocationResult."""
    out: JSON = {"devices": {"results": _plain(list(results))}}
    if selector is not None:
        out["nodeSelector"] = _plain(selector)
    return out


def allocation_result_with_config(
    selector: JSON | None, driver: str, source: str, attribute: str, *results: JSON
) -> JSON:
    config = {"source": source, **device_configuration(driver, attribute)}
    return allocation_result_with_configs(selector, list(results), [config])


def allocation_result_with_configs(
    selector: JSON | None, results: list[JSON], configs: list[JSON]
) -> JSON:
    out: JSON = {"devices": _prune({"results": _plain(results), "config": _plain(configs)})}
    if selector is not None:
        out["nodeSelector"] = _plain(selector)
    return out


# --------------------------------------------------------------------------- cases


def _case(
    name: str,
    go_line: int,
    *,
    features: list[str] | None = None,
    uses: list[str] | None = None,
    claims: list[JSON] | None = None,
    allocated_devices: list[list[str]] | None = None,
    allocated_shared: list[JSON] | None = None,
    allocated_capacity: list[JSON] | None = None,
    classes: list[JSON] | None = None,
    slices: list[JSON] | None = None,
    node: JSON | None = None,
    expect_results: list[JSON] | None = None,
    expect_error: str | None = None,
    notes: str = "",
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "go_line": go_line,
        "features": sorted(features or []),
        "uses": sorted(uses or []),
        "claims": _plain(claims or []),
        "allocated_devices": _plain(allocated_devices or []),
    }
    if allocated_shared is not None:
        out["allocated_shared"] = _plain(allocated_shared)
    if allocated_capacity is not None:
        out["allocated_capacity"] = _plain(allocated_capacity)
    out.update(
        {
            "classes": _plain(classes or []),
            "slices": _plain(slices or []),
            "node": _plain(node),
            "expect_results": _plain(expect_results) if expect_results else None,
            "expect_error": expect_error,
            "notes": notes,
        }
    )
    return out


CASES: list[dict[str, Any]] = [
    _case("empty", 978, uses=[]),
    _case(
        "simple",
        979,
        uses=["count"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "other-node",
        990,
        uses=["count", "multiplePools", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
            slice_with_one_device(SLICE2, NODE2, POOL2, DRIVER_A),
        ],
        node=node(NODE2, REGION2),
        expect_results=[
            allocation_result(
                local_node_selector(NODE2),
                device_allocation_result(REQ0, DRIVER_A, POOL2, DEVICE1, False),
            )
        ],
    ),
    _case(
        "small-and-large",
        1004,
        uses=["cel", "count"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                request(
                    REQ0,
                    CLASS_A,
                    1,
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0'
                            )
                        }
                    },
                ),
                request(
                    REQ1,
                    CLASS_A,
                    1,
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0'
                            )
                        }
                    },
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, {"memory": "1Gi"}),
                device(DEVICE2, {"memory": "2Gi"}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "small-and-large-backtrack-requests",
        1034,
        uses=["cel", "count"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                request(
                    REQ0,
                    CLASS_A,
                    1,
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0'
                            )
                        }
                    },
                ),
                request(
                    REQ1,
                    CLASS_A,
                    1,
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0'
                            )
                        }
                    },
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE2, {"memory": "2Gi"}),
                device(DEVICE1, {"memory": "1Gi"}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "small-and-large-backtrack-claims",
        1067,
        uses=["cel", "count", "multipleClaims"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                request(
                    REQ0,
                    CLASS_A,
                    1,
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0'
                            )
                        }
                    },
                ),
            ),
            claim_with_requests(
                CLAIM1,
                None,
                request(
                    REQ1,
                    CLASS_A,
                    1,
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0'
                            )
                        }
                    },
                ),
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE2, {"memory": "2Gi"}),
                device(DEVICE1, {"memory": "1Gi"}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            ),
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2, False),
            ),
        ],
    ),
    _case(
        "devices-split-across-different-slices",
        1103,
        uses=["count", "multiplePools"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {
                    "name": REQ0,
                    "exactly": {
                        "count": 2,
                        "allocationMode": "ExactCount",
                        "deviceClassName": CLASS_A,
                    },
                },
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
            slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_A),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL2, DEVICE1, False),
            )
        ],
    ),
    _case(
        "obsolete-slice",
        1125,
        uses=["count", "incompletePool"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                "slice-1-obsolete", NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1)
            ),
            patched(
                slice_with_devices(
                    "slice-1-obsolete", NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE2)
                ),
                {"spec.pool.generation": 2},
            ),
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "duplicate-slice",
        1145,
        uses=["count", "errors"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            patched(
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
                {"spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
                {"spec.pool.resourceSliceCount": 2, "metadata.name": "slice-1-2"},
            ),
        ],
        node=node(NODE1, REGION1),
        expect_error="invalid resource pools were encountered",
        notes=(
            "The second slice is a deep copy of the first "
            "(resourceSliceCount 2) renamed to slice-1-2, as the Go "
            "closure builds it."
        ),
    ),
    _case(
        "no-slices",
        1167,
        uses=["count"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=None,
        node=node(NODE1, REGION1),
    ),
    _case(
        "not-enough-suitable-devices",
        1175,
        uses=["count", "multipleClaims"],
        claims=[
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            claim_with_request(CLAIM0, REQ1, CLASS_A),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
    ),
    _case(
        "no-classes",
        1184,
        uses=["count", "errors"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=None,
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error="could not retrieve device class class-a",
    ),
    _case(
        "unknown-class",
        1193,
        uses=["count", "errors"],
        claims=[claim_with_request(CLAIM0, REQ0, "unknown-class")],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error="could not retrieve device class unknown-class",
    ),
    _case(
        "empty-class",
        1202,
        uses=["count", "errors"],
        claims=[claim_with_request(CLAIM0, REQ0, "")],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error=(
            "claim claim-0, request req-0: missing device class name (unsupported request type?)"
        ),
    ),
    _case(
        "no-claims-to-allocate",
        1211,
        uses=[],
        claims=None,
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
    ),
    _case(
        "all-devices-single",
        1219,
        uses=["all"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "all-devices-many",
        1236,
        uses=["all", "multiplePools"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
            slice_with_one_device(SLICE1, NODE1, POOL2, DRIVER_A),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL2, DEVICE1, False),
            )
        ],
    ),
    _case(
        "all-devices-of-the-incomplete-pool",
        1257,
        uses=["all", "errors", "incompletePool"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {
                    "name": REQ0,
                    "exactly": {"allocationMode": "All", "count": 1, "deviceClassName": CLASS_A},
                },
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            patched(
                slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
                {"spec.pool.resourceSliceCount": 2},
            )
        ],
        node=node(NODE1, REGION1),
        expect_error=(
            "claim claim-0, request req-0: asks for all devices, but "
            "resource pool driver-a/pool-1 is currently being updated"
        ),
    ),
    _case(
        "all-devices-plus-another",
        1280,
        uses=["all", "count", "multipleClaims", "multiplePools"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            ),
            claim_with_requests(
                CLAIM1,
                None,
                {
                    "name": REQ0,
                    "exactly": {
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "deviceClassName": CLASS_B,
                    },
                },
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            ),
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_B, POOL1, DEVICE1, False),
            ),
        ],
    ),
    _case(
        "all-devices-plus-another-reversed",
        1319,
        uses=["all", "count", "multipleClaims", "multiplePools"],
        claims=[
            claim_with_requests(
                CLAIM1,
                None,
                {
                    "name": REQ0,
                    "exactly": {
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "deviceClassName": CLASS_B,
                    },
                },
            ),
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_B, POOL1, DEVICE1, False),
            ),
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            ),
        ],
    ),
    _case(
        "all-devices-many-plus-another",
        1358,
        uses=["all", "count", "multipleClaims", "multiplePools"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            ),
            claim_with_requests(
                CLAIM1,
                None,
                {
                    "name": REQ0,
                    "exactly": {
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "deviceClassName": CLASS_B,
                    },
                },
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2)),
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            ),
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_B, POOL1, DEVICE1, False),
            ),
        ],
    ),
    _case(
        "all-devices-many-plus-another-reversed",
        1401,
        uses=["all", "count", "multipleClaims", "multiplePools"],
        claims=[
            claim_with_requests(
                CLAIM1,
                None,
                {
                    "name": REQ0,
                    "exactly": {
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "deviceClassName": CLASS_B,
                    },
                },
            ),
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2)),
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_B, POOL1, DEVICE1, False),
            ),
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            ),
        ],
    ),
    _case(
        "all-devices-no-solution",
        1444,
        uses=["all", "count", "multipleClaims"],
        claims=[
            claim_with_requests(
                CLAIM1,
                None,
                {
                    "name": REQ0,
                    "exactly": {
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "deviceClassName": CLASS_A,
                    },
                },
            ),
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
    ),
    _case(
        "all-devices-no-solution-reversed",
        1471,
        uses=["all", "count", "multipleClaims"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            ),
            claim_with_requests(
                CLAIM1,
                None,
                {
                    "name": REQ0,
                    "exactly": {
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "deviceClassName": CLASS_A,
                    },
                },
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
    ),
    _case(
        "all-devices-slice-without-devices",
        1498,
        uses=["all"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_no_devices(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
    ),
    _case(
        "all-devices-no-slices",
        1511,
        uses=["all"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=None,
        node=node(NODE1, REGION1),
    ),
    _case(
        "all-devices-some-allocated",
        1524,
        uses=["all", "allocatedDevices"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            )
        ],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE1)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "all-devices-some-allocated-admin-access",
        1542,
        features=["AdminAccess"],
        uses=["adminAccess", "all", "allocatedDevices"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {
                    "spec.devices.requests.0.exactly.adminAccess": True,
                    "spec.devices.requests.0.exactly.allocationMode": "All",
                },
            )
        ],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE1)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, True),
            )
        ],
    ),
    _case(
        "all-devices-some-allocating-admin-access",
        1566,
        features=["AdminAccess"],
        uses=["adminAccess", "all", "count"],
        claims=[
            patched(
                claim_with_requests(
                    CLAIM0, None, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)
                ),
                {
                    "spec.devices.requests.0.exactly.adminAccess": True,
                    "spec.devices.requests.1.exactly.adminAccess": True,
                    "spec.devices.requests.1.exactly.allocationMode": "All",
                },
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "count-devices-some-allocated-admin-access",
        1586,
        features=["AdminAccess"],
        uses=["adminAccess", "allocatedDevices", "count"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {
                    "spec.devices.requests.0.exactly.adminAccess": True,
                    "spec.devices.requests.0.exactly.allocationMode": "ExactCount",
                    "spec.devices.requests.0.exactly.count": 2,
                },
            )
        ],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE1)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, True),
            )
        ],
    ),
    _case(
        "separate-claims-share-device-admin-access",
        1611,
        features=["AdminAccess"],
        uses=["adminAccess", "count", "multipleClaims"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.adminAccess": True},
            ),
            patched(
                claim_with_request(CLAIM1, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.adminAccess": True},
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
            ),
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
            ),
        ],
    ),
    _case(
        "admin-access-claims-device-allocating-for-non-admin-access",
        1639,
        features=["AdminAccess"],
        uses=["adminAccess", "count", "multipleClaims"],
        claims=[
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            patched(
                claim_with_request(CLAIM1, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.adminAccess": True},
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            ),
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
            ),
        ],
    ),
    _case(
        "all-devices-slice-without-devices-prioritized-list",
        1664,
        features=["PrioritizedList"],
        uses=["all", "count", "firstAvailable", "multiplePools"],
        claims=[
            patched(
                with_requests(
                    claim(CLAIM0),
                    request_with_prioritized_list(
                        REQ0, sub_request(SUB_REQ0, CLASS_A, 1), sub_request(SUB_REQ1, CLASS_B, 1)
                    ),
                ),
                {
                    "spec.devices.requests.0.firstAvailable.0.allocationMode": "All",
                    "spec.devices.requests.0.firstAvailable.0.count": None,
                },
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_no_devices(SLICE1, NODE1, POOL1, DRIVER_A),
            slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, False),
            )
        ],
    ),
    _case(
        "all-devices-no-slices-prioritized-list",
        1692,
        features=["PrioritizedList"],
        uses=["all", "count", "firstAvailable"],
        claims=[
            patched(
                with_requests(
                    claim(CLAIM0),
                    request_with_prioritized_list(
                        REQ0, sub_request(SUB_REQ0, CLASS_A, 1), sub_request(SUB_REQ1, CLASS_B, 1)
                    ),
                ),
                {
                    "spec.devices.requests.0.firstAvailable.0.allocationMode": "All",
                    "spec.devices.requests.0.firstAvailable.0.count": None,
                },
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_B)],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, False),
            )
        ],
    ),
    _case(
        "all-devices-some-allocated-prioritized-list",
        1719,
        features=["PrioritizedList"],
        uses=["all", "allocatedDevices", "count", "firstAvailable", "multiplePools"],
        claims=[
            patched(
                with_requests(
                    claim(CLAIM0),
                    request_with_prioritized_list(
                        REQ0, sub_request(SUB_REQ0, CLASS_A, 1), sub_request(SUB_REQ1, CLASS_B, 1)
                    ),
                ),
                {
                    "spec.devices.requests.0.firstAvailable.0.allocationMode": "All",
                    "spec.devices.requests.0.firstAvailable.0.count": None,
                },
            )
        ],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE1)],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2)),
            slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, False),
            )
        ],
    ),
    _case(
        "network-attached-device",
        1750,
        uses=["count", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_one_device(SLICE1, node_label_selector(REGION_KEY, REGION1), POOL1, DRIVER_A)
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                node_label_selector(REGION_KEY, REGION1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "unsuccessful-allocation-network-attached-device",
        1761,
        uses=["count", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_one_device(SLICE1, node_label_selector(REGION_KEY, REGION1), POOL1, DRIVER_A)
        ],
        node=node(NODE2, REGION2),
    ),
    _case(
        "many-network-attached-devices",
        1770,
        uses=["count", "multiplePools", "nodeSelection"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 4))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_one_device(
                SLICE1, node_label_selector(REGION_KEY, REGION1), POOL1, DRIVER_A
            ),
            slice_with_one_device(SLICE1, NODE_SELECTION_ALL, POOL2, DRIVER_A),
            slice_with_one_device(
                SLICE1, node_label_selector(PLANET_KEY, PLANET_VALUE_EARTH), POOL3, DRIVER_A
            ),
            slice_with_one_device(SLICE1, local_node_selector(NODE1), POOL4, DRIVER_A),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": REGION_KEY, "operator": "In", "values": [REGION1]},
                                {
                                    "key": PLANET_KEY,
                                    "operator": "In",
                                    "values": [PLANET_VALUE_EARTH],
                                },
                            ],
                            "matchFields": [
                                {"key": FIELD_NAME_KEY, "operator": "In", "values": [NODE1]}
                            ],
                        }
                    ]
                },
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL2, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL3, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL4, DEVICE1, False),
            )
        ],
    ),
    _case(
        "local-and-network-attached-devices",
        1800,
        uses=["count", "multiplePools", "nodeSelection"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 2))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_one_device(
                SLICE1, node_label_selector(REGION_KEY, REGION1), POOL1, DRIVER_A
            ),
            slice_with_one_device(SLICE1, NODE1, POOL2, DRIVER_A),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL2, DEVICE1, False),
            )
        ],
    ),
    _case(
        "several-different-drivers",
        1816,
        uses=["count", "multipleClaims", "multiplePools"],
        claims=[
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            claim_with_request(CLAIM0, REQ0, CLASS_B),
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2)),
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            ),
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_B, POOL1, DEVICE1, False),
            ),
        ],
    ),
    _case(
        "already-allocated-devices",
        1833,
        uses=["allocatedDevices", "count"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        allocated_devices=[
            device_id(DRIVER_A, POOL1, DEVICE1),
            device_id(DRIVER_A, POOL1, DEVICE2),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
    ),
    _case(
        "admin-access-disabled",
        1845,
        uses=["adminAccess", "count", "errors"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.adminAccess": True},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error=(
            "claim claim-0, request req-0: admin access is requested, but the feature is disabled"
        ),
    ),
    _case(
        "admin-access-enabled",
        1861,
        features=["AdminAccess"],
        uses=["adminAccess", "allocatedDevices", "count"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.adminAccess": True},
            )
        ],
        allocated_devices=[
            device_id(DRIVER_A, POOL1, DEVICE1),
            device_id(DRIVER_A, POOL1, DEVICE2),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
            )
        ],
    ),
    _case(
        "with-constraint",
        1882,
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0,
                [
                    {"matchAttribute": INT_ATTRIBUTE},
                    {"matchAttribute": VERSION_ATTRIBUTE},
                    {"matchAttribute": STRING_ATTRIBUTE},
                    {"matchAttribute": BOOL_ATTRIBUTE},
                ],
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(
                    DEVICE1,
                    None,
                    {
                        "driverVersion": {"version": "1.0.0"},
                        "numa": {"int": 1},
                        "stringAttribute": {"string": "stringAttributeValue"},
                        "boolAttribute": {"bool": True},
                    },
                ),
                device(
                    DEVICE2,
                    None,
                    {
                        "driverVersion": {"version": "1.0.0"},
                        "numa": {"int": 1},
                        "stringAttribute": {"string": "stringAttributeValue"},
                        "boolAttribute": {"bool": True},
                    },
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "with-constraint-non-existent-attribute",
        1918,
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_request(CLAIM0, REQ0, CLASS_A, {"matchAttribute": NON_EXISTENT_ATTRIBUTE})
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
    ),
    _case(
        "with-constraint-not-matching-int-attribute",
        1928,
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": INT_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"numa": {"int": 1}}),
                device(DEVICE2, None, {"numa": {"int": 2}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "with-constraint-not-matching-int-attribute-all-devices",
        1947,
        uses=["all", "errors", "matchAttribute"],
        claims=[
            patched(
                claim_with_requests(
                    CLAIM0, [{"matchAttribute": INT_ATTRIBUTE}], request(REQ0, CLASS_A, 0)
                ),
                {"spec.devices.requests.0.exactly.allocationMode": "All"},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"numa": {"int": 1}}),
                device(DEVICE2, None, {"numa": {"int": 2}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_error=(
            "claim claim-0, request req-0: cannot add device "
            "driver-a/pool-1/device-2 because a claim constraint would "
            "not be satisfied"
        ),
    ),
    _case(
        "with-constraint-not-matching-string-attribute",
        1972,
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "stringAttributeValue"}}),
                device(DEVICE2, None, {"stringAttribute": {"string": "stringAttributeValue2"}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "with-constraint-not-matching-bool-attribute",
        1991,
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": BOOL_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"boolAttribute": {"bool": True}}),
                device(DEVICE2, None, {"boolAttribute": {"bool": False}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "with-constraint-not-matching-version-attribute",
        2010,
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": VERSION_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"driverVersion": {"version": "1.0.0"}}),
                device(DEVICE2, None, {"driverVersion": {"version": "2.0.0"}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "with-constraint-for-request",
        2029,
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0,
                [{"requests": [REQ0], "matchAttribute": VERSION_ATTRIBUTE}],
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"driverVersion": {"version": "1.0.0"}}),
                device(DEVICE2, None, {"driverVersion": {"version": "2.0.0"}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "with-constraint-for-request-retry",
        2058,
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0,
                [
                    {"requests": [REQ0], "matchAttribute": VERSION_ATTRIBUTE},
                    {"matchAttribute": STRING_ATTRIBUTE},
                ],
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(
                    DEVICE1,
                    None,
                    {"driverVersion": {"version": "1.0.0"}, "stringAttribute": {"string": "a"}},
                ),
                device(
                    DEVICE2,
                    None,
                    {"driverVersion": {"version": "2.0.0"}, "stringAttribute": {"string": "b"}},
                ),
                device(
                    DEVICE3,
                    None,
                    {"driverVersion": {"version": "3.0.0"}, "stringAttribute": {"string": "b"}},
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "with-class-device-config",
        2099,
        uses=["config", "count"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result_with_configs(
                local_node_selector(NODE1),
                [device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False)],
                [
                    {
                        "source": "FromClass",
                        "requests": [REQ0],
                        **device_configuration(DRIVER_A, "classAttribute"),
                    }
                ],
            )
        ],
    ),
    _case(
        "with-class-device-config-with-multiple-request-and-configs",
        2119,
        uses=["config", "count", "multiplePools"],
        claims=[
            claim_with_requests(
                CLAIM0,
                [],
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                request(REQ2, CLASS_B, 1),
            )
        ],
        classes=[
            class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
            class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
        ],
        slices=[
            slice_with_multiple_devices(SLICE1, NODE1, POOL1, DRIVER_A, 2),
            slice_with_one_device(SLICE2, NODE1, POOL1, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result_with_configs(
                local_node_selector(NODE1),
                [
                    device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE0, False),
                    device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE1, False),
                    device_allocation_result(REQ2, DRIVER_B, POOL1, DEVICE1, False),
                ],
                [
                    {
                        "source": "FromClass",
                        "requests": [REQ0, REQ1],
                        **device_configuration(DRIVER_A, "classAttribute-A"),
                    },
                    {
                        "source": "FromClass",
                        "requests": [REQ2],
                        **device_configuration(DRIVER_B, "classAttribute-B"),
                    },
                ],
            )
        ],
    ),
    _case(
        "claim-with-device-config",
        2154,
        uses=["config", "count"],
        claims=[claim_with_device_config(CLAIM0, REQ0, CLASS_A, DRIVER_A, "deviceAttribute")],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result_with_config(
                local_node_selector(NODE1),
                DRIVER_A,
                "FromClaim",
                "deviceAttribute",
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "unknown-selector",
        2170,
        uses=["cel", "count", "errors"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.selectors": [{}]},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error="CEL expression empty (unsupported selector type?)",
    ),
    _case(
        "unknown-allocation-mode",
        2186,
        uses=["errors"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.allocationMode": "future-mode"},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error="unsupported count mode future-mode",
    ),
    _case(
        "unknown-constraint",
        2200,
        uses=["count", "errors"],
        claims=[
            patched(claim_with_request(CLAIM0, REQ0, CLASS_A), {"spec.devices.constraints": [{}]})
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error="empty constraint (unsupported constraint type?)",
    ),
    _case(
        "invalid-CEL-one-device",
        2216,
        uses=["cel", "count", "errors"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {
                    "spec.devices.requests.0.exactly.selectors": [
                        {"cel": {"expression": "noSuchVar"}}
                    ]
                },
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error="undeclared reference",
    ),
    _case(
        "invalid-CEL-one-device-class",
        2232,
        uses=["cel", "count", "errors"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[
            patched(
                device_class(CLASS_A, DRIVER_A), {"spec.selectors.0.cel.expression": "noSuchVar"}
            )
        ],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error="undeclared reference",
    ),
    _case(
        "invalid-CEL-all-devices",
        2246,
        uses=["all", "cel", "errors"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {
                    "spec.devices.requests.0.exactly.selectors": [
                        {"cel": {"expression": "noSuchVar"}}
                    ],
                    "spec.devices.requests.0.exactly.allocationMode": "All",
                },
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error="undeclared reference",
    ),
    _case(
        "too-many-devices-single-request",
        2263,
        uses=["count", "errors"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 500))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        expect_error="exceeds the claim limit",
    ),
    _case(
        "many-devices-okay",
        2269,
        uses=["count"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, ALLOCATION_RESULTS_MAX_SIZE))
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
    ),
    _case(
        "too-many-devices-total",
        2273,
        uses=["count", "errors"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                request(REQ0, CLASS_A, ALLOCATION_RESULTS_MAX_SIZE),
                request(REQ1, CLASS_A, 1),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_multiple_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, ALLOCATION_RESULTS_MAX_SIZE + 1
            )
        ],
        node=node(NODE1, REGION1),
        expect_error="exceeds the claim limit",
    ),
    _case(
        "all-devices-invalid-CEL",
        2286,
        uses=["count", "errors"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 500))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        expect_error="exceeds the claim limit",
    ),
    _case(
        "prioritized-list-first-unavailable",
        2292,
        features=["PrioritizedList"],
        uses=["count", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0, sub_request(SUB_REQ0, CLASS_B, 1), sub_request(SUB_REQ1, CLASS_A, 1)
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "prioritized-list-non-available",
        2311,
        features=["PrioritizedList"],
        uses=["count", "firstAvailable", "multiplePools"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0, sub_request(SUB_REQ0, CLASS_B, 2), sub_request(SUB_REQ1, CLASS_A, 2)
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A),
            slice_with_one_device(SLICE2, NODE1, POOL2, DRIVER_B),
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "prioritized-list-device-config",
        2330,
        features=["PrioritizedList"],
        uses=["config", "count", "firstAvailable"],
        claims=[
            with_configs(
                with_requests(
                    claim(CLAIM0),
                    request_with_prioritized_list(
                        REQ0, sub_request(SUB_REQ0, CLASS_A, 1), sub_request(SUB_REQ1, CLASS_B, 2)
                    ),
                ),
                [
                    device_claim_config([REQ0_SUB_REQ0], device_configuration(DRIVER_A, "foo")),
                    device_claim_config([REQ0_SUB_REQ1], device_configuration(DRIVER_B, "bar")),
                ],
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_B, device(DEVICE1, None, {}), device(DEVICE2, None, {})
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result_with_configs(
                local_node_selector(NODE1),
                [
                    device_allocation_result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE1, False),
                    device_allocation_result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE2, False),
                ],
                [
                    {
                        "source": "FromClaim",
                        "requests": [REQ0_SUB_REQ1],
                        **device_configuration(DRIVER_B, "bar"),
                    }
                ],
            )
        ],
    ),
    _case(
        "prioritized-list-class-config",
        2371,
        features=["PrioritizedList"],
        uses=["config", "count", "firstAvailable", "multiplePools"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0, sub_request(SUB_REQ0, CLASS_A, 2), sub_request(SUB_REQ1, CLASS_B, 2)
                ),
            )
        ],
        classes=[
            class_with_config(CLASS_A, DRIVER_A, "foo"),
            class_with_config(CLASS_B, DRIVER_B, "bar"),
        ],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_B, device(DEVICE1), device(DEVICE2)),
            slice_with_devices(SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE3)),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result_with_configs(
                local_node_selector(NODE1),
                [
                    device_allocation_result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE1, False),
                    device_allocation_result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE2, False),
                ],
                [
                    {
                        "source": "FromClass",
                        "requests": [REQ0_SUB_REQ1],
                        **device_configuration(DRIVER_B, "bar"),
                    }
                ],
            )
        ],
    ),
    _case(
        "prioritized-list-subrequests-with-expressions",
        2411,
        features=["PrioritizedList"],
        uses=["cel", "count", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                with_selectors(
                    device_request(REQ0, CLASS_A, 1),
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0'
                            )
                        }
                    },
                ),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        2,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, {"memory": "2Gi"}),
                device(DEVICE2, {"memory": "2Gi"}),
                device(DEVICE3, {"memory": "1Gi"}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "prioritized-list-subrequests-with-constraints-ref-parent-request",
        2457,
        features=["PrioritizedList"],
        uses=["cel", "count", "firstAvailable", "matchAttribute", "multiplePools"],
        claims=[
            with_requests(
                with_constraints(
                    claim(CLAIM0), {"requests": [REQ0, REQ1], "matchAttribute": VERSION_ATTRIBUTE}
                ),
                with_selectors(
                    device_request(REQ0, CLASS_A, 1),
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("8Gi")) >= 0'
                            )
                        }
                    },
                ),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, {"memory": "8Gi"}, {"driverVersion": {"version": "1.0.0"}}),
            ),
            slice_with_devices(
                SLICE2,
                NODE1,
                POOL2,
                DRIVER_A,
                device(DEVICE2, {"memory": "2Gi"}, {"driverVersion": {"version": "2.0.0"}}),
                device(DEVICE3, {"memory": "1Gi"}, {"driverVersion": {"version": "1.0.0"}}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL2, DEVICE3, False),
            )
        ],
    ),
    _case(
        "prioritized-list-subrequests-with-constraints-ref-sub-request",
        2526,
        features=["PrioritizedList"],
        uses=["cel", "count", "firstAvailable", "matchAttribute", "multiplePools"],
        claims=[
            with_requests(
                with_constraints(
                    claim(CLAIM0),
                    {"requests": [REQ0, REQ1_SUB_REQ0], "matchAttribute": VERSION_ATTRIBUTE},
                ),
                with_selectors(
                    device_request(REQ0, CLASS_A, 1),
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("8Gi")) >= 0'
                            )
                        }
                    },
                ),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, {"memory": "8Gi"}, {"driverVersion": {"version": "1.0.0"}}),
            ),
            slice_with_devices(
                SLICE2,
                NODE1,
                POOL2,
                DRIVER_A,
                device(DEVICE2, {"memory": "2Gi"}, {"driverVersion": {"version": "2.0.0"}}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, False),
            )
        ],
    ),
    _case(
        "prioritized-list-subrequests-with-allocation-mode-all",
        2587,
        features=["PrioritizedList"],
        uses=["all", "allocatedDevices", "count", "firstAvailable"],
        claims=[
            patched(
                with_requests(
                    claim(CLAIM0),
                    request_with_prioritized_list(
                        REQ0, sub_request(SUB_REQ0, CLASS_A, 1), sub_request(SUB_REQ1, CLASS_A, 1)
                    ),
                ),
                {
                    "spec.devices.requests.0.firstAvailable.0.allocationMode": "All",
                    "spec.devices.requests.0.firstAvailable.0.count": None,
                },
            )
        ],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE1)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "prioritized-list-allocation-mode-all-multiple-requests",
        2621,
        features=["PrioritizedList"],
        uses=["all", "count", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                device_request(REQ0, CLASS_A, 1),
                request_with_prioritized_list(
                    REQ1,
                    with_allocation_mode(sub_request(SUB_REQ0, CLASS_A, 0), "All"),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "prioritized-list-disabled",
        2649,
        uses=["count", "errors", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(REQ0, sub_request(SUB_REQ0, CLASS_A, 1)),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error=(
            "claim claim-0, request req-0: has subrequests, but the "
            "DRAPrioritizedList feature is disabled"
        ),
    ),
    _case(
        "prioritized-list-multi-request",
        2670,
        features=["PrioritizedList"],
        uses=["cel", "count", "firstAvailable", "multiplePools"],
        claims=[
            with_requests(
                claim(CLAIM0),
                with_selectors(
                    device_request(REQ1, CLASS_A, 1),
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("8Gi")) >= 0'
                            )
                        }
                    },
                ),
                request_with_prioritized_list(
                    REQ0,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("8Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, {"memory": "8Gi"}, {})
            ),
            slice_with_devices(
                SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE2, {"memory": "4Gi"}, {})
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, False),
            )
        ],
    ),
    _case(
        "prioritized-list-with-backtracking",
        2722,
        features=["PrioritizedList"],
        uses=["cel", "count", "firstAvailable", "multiplePools"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("8Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
                with_selectors(
                    device_request(REQ1, CLASS_A, 1),
                    {
                        "cel": {
                            "expression": (
                                'device.capacity["driver-a"].memory.compareTo(quantity("8Gi")) >= 0'
                            )
                        }
                    },
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, {"memory": "8Gi"}, {})
            ),
            slice_with_devices(
                SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE2, {"memory": "4Gi"}, {})
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "prioritized-list-too-many-in-first-subrequest",
        2774,
        features=["PrioritizedList"],
        uses=["count", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0, sub_request(SUB_REQ0, CLASS_B, 500), sub_request(SUB_REQ1, CLASS_A, 1)
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-single-device",
        2792,
        features=["PartitionableDevices"],
        uses=["count", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1), device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"})
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-prioritized-list",
        2824,
        features=["PartitionableDevices", "PrioritizedList"],
        uses=["cel", "count", "firstAvailable", "sharedCounters"],
        claims=[
            with_requests(
                claim(CLAIM0),
                device_request(REQ0, CLASS_A, 1),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("6Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "6Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE3, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-multiple-devices",
        2886,
        features=["PartitionableDevices"],
        uses=["count", "sharedCounters"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "6Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE3, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-multiple-capacity-pools",
        2936,
        features=["PartitionableDevices", "PrioritizedList"],
        uses=["cel", "count", "firstAvailable", "sharedCounters"],
        claims=[
            with_requests(
                claim(CLAIM0),
                device_request(REQ0, CLASS_A, 1),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("6Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    device_counter_consumption(COUNTER_SET2, {"cpus": "4"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "6Gi"}),
                    device_counter_consumption(COUNTER_SET2, {"cpus": "6"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE3, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    device_counter_consumption(COUNTER_SET2, {"cpus": "4"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "18Gi"}),
                counter_set(COUNTER_SET2, {"cpus": "8"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-multiple-counters",
        3018,
        features=["PartitionableDevices"],
        uses=["count", "sharedCounters"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi", "cpus": "6"}),
                    device_counter_consumption(COUNTER_SET2, {"cpus": "4", "memory": "2Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "6Gi", "cpus": "4"}),
                    device_counter_consumption(COUNTER_SET2, {"cpus": "6", "memory": "6Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE3, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi", "cpus": "4"}),
                    device_counter_consumption(COUNTER_SET2, {"cpus": "4", "memory": "4Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"cpus": "8", "memory": "18Gi"}),
                counter_set(COUNTER_SET2, {"cpus": "12", "memory": "18Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-multiple-pools",
        3096,
        features=["PartitionableDevices"],
        uses=["allocatedDevices", "count", "multiplePools", "sharedCounters"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))
        ],
        allocated_devices=[
            device_id(DRIVER_A, POOL1, DEVICE2),
            device_id(DRIVER_A, POOL1, DEVICE3),
            device_id(DRIVER_A, POOL2, DEVICE1),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"cpus": "6", "memory": "4Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"cpus": "4", "memory": "6Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE3, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"cpus": "4", "memory": "4Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"cpus": "8", "memory": "18Gi"}),
            ),
            slice_with_devices(
                SLICE3,
                NODE1,
                resource_pool(POOL2, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"cpus": "6", "memory": "4Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"cpus": "1", "memory": "7Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE3, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"cpus": "1", "memory": "7Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE4,
                NODE1,
                resource_pool(POOL2, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"cpus": "8", "memory": "18Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL2, DEVICE2, False),
                device_allocation_result(REQ1, DRIVER_A, POOL2, DEVICE3, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-unused-counters-in-counter-set",
        3189,
        features=["PartitionableDevices"],
        uses=["count", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 2))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1), device_counter_consumption(COUNTER_SET1, {"memory": "5Gi"})
                ),
                with_device_counter_consumption(
                    device(DEVICE2), device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"})
                ),
                with_device_counter_consumption(
                    device(DEVICE3), device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"})
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi", "unused": "1Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-no-capacity-available",
        3237,
        features=["PartitionableDevices"],
        uses=["allocatedDevices", "count", "incompletePool", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE2)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "16Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2, NODE1, POOL1, DRIVER_A, counter_set(COUNTER_SET1, {"memory": "18Gi"})
            ),
        ],
        node=node(NODE1, REGION1),
        notes=(
            "Both slices of pool-1 declare resourceSliceCount 1 (Go "
            "passes the pool by name), so the pool is formally "
            "incomplete; kept as in Go."
        ),
    ),
    _case(
        "partitionable-devices-overallocated-capacity-pool",
        3278,
        features=["PartitionableDevices"],
        uses=["allocatedDevices", "count", "incompletePool", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE2)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "20Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2, NODE1, POOL1, DRIVER_A, counter_set(COUNTER_SET1, {"memory": "18Gi"})
            ),
        ],
        node=node(NODE1, REGION1),
        notes=(
            "Both slices of pool-1 declare resourceSliceCount 1 (Go "
            "passes the pool by name), so the pool is formally "
            "incomplete; kept as in Go."
        ),
    ),
    _case(
        "partitionable-devices-disabled-device-consumes-counters",
        3319,
        uses=["count", "incompletePool", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1), device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"})
                ),
            ),
            slice_with_counter_sets(
                SLICE2, NODE1, POOL1, DRIVER_A, counter_set(COUNTER_SET1, {"memory": "18Gi"})
            ),
        ],
        node=node(NODE1, REGION1),
        notes=(
            "Both slices of pool-1 declare resourceSliceCount 1 (Go "
            "passes the pool by name), so the pool is formally "
            "incomplete; kept as in Go."
        ),
    ),
    _case(
        "partitionable-devices-disabled-other-device-do-not-consume-counters",
        3350,
        uses=["count", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1), device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"})
                ),
                device(DEVICE2),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "18Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-disabled-per-device-node-selection",
        3385,
        uses=["count", "nodeSelection"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE_SELECTION_PER_DEVICE,
                POOL1,
                DRIVER_A,
                with_node_selection(device(DEVICE2), NODE1),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "partitionable-devices-per-device-node-selection-nodename",
        3403,
        features=["PartitionableDevices", "PrioritizedList"],
        uses=["cel", "count", "firstAvailable", "nodeSelection", "sharedCounters"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("6Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE_SELECTION_PER_DEVICE,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_node_selection(
                    with_device_counter_consumption(
                        device(DEVICE1, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    NODE1,
                ),
                with_node_selection(
                    with_device_counter_consumption(
                        device(DEVICE2, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "6Gi"}),
                    ),
                    NODE2,
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE_SELECTION_PER_DEVICE,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "18Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-per-device-node-selection-node-selector",
        3456,
        features=["PartitionableDevices", "PrioritizedList"],
        uses=["count", "firstAvailable", "nodeSelection", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE_SELECTION_PER_DEVICE,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_node_selection(
                    with_device_counter_consumption(
                        device(DEVICE1, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    node_label_selector(REGION_KEY, REGION1),
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE_SELECTION_PER_DEVICE,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "18Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": REGION_KEY, "operator": "In", "values": [REGION1]}
                            ]
                        }
                    ]
                },
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-per-device-node-selection-node-selector-multiple-devices",
        3495,
        features=["PartitionableDevices", "PrioritizedList"],
        uses=["count", "firstAvailable", "multiplePools", "nodeSelection", "sharedCounters"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 3), request(REQ1, CLASS_B, 3))
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE_SELECTION_PER_DEVICE,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_node_selection(
                    with_device_counter_consumption(
                        device(DEVICE1, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    node_label_selector(REGION_KEY, REGION1),
                ),
                with_node_selection(
                    with_device_counter_consumption(
                        device(DEVICE2, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    NODE1,
                ),
                with_node_selection(
                    with_device_counter_consumption(
                        device(DEVICE3, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    NODE_SELECTION_ALL,
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE_SELECTION_PER_DEVICE,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "18Gi"}),
            ),
            slice_with_devices(
                SLICE3,
                NODE1,
                resource_pool(POOL2, 2),
                DRIVER_B,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET2, {"memory": "4Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET2, {"memory": "4Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE3, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET2, {"memory": "4Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE4,
                NODE1,
                resource_pool(POOL2, 2),
                DRIVER_B,
                counter_set(COUNTER_SET2, {"memory": "12Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": FIELD_NAME_KEY, "operator": "In", "values": [NODE1]}
                            ]
                        }
                    ]
                },
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
                device_allocation_result(REQ1, DRIVER_B, POOL2, DEVICE1, False),
                device_allocation_result(REQ1, DRIVER_B, POOL2, DEVICE2, False),
                device_allocation_result(REQ1, DRIVER_B, POOL2, DEVICE3, False),
            )
        ],
    ),
    _case(
        "tainted-two-devices",
        3586,
        features=["DeviceTaints"],
        uses=["count", "taints"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_taints(device(DEVICE1), TAINT_NO_SCHEDULE),
                with_taints(device(DEVICE2), TAINT_NO_EXECUTE),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "tainted-one-device-two-taints",
        3598,
        features=["DeviceTaints"],
        uses=["count", "taints"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_taints(device(DEVICE1), TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "tainted-two-devices-tolerated",
        3609,
        features=["DeviceTaints"],
        uses=["count", "taints"],
        claims=[with_tolerations(claim_with_request(CLAIM0, REQ0, CLASS_A), TOLERATION_NO_EXECUTE)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_taints(device(DEVICE1), TAINT_NO_SCHEDULE),
                with_taints(device(DEVICE2), TAINT_NO_EXECUTE),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(
                    REQ0, DRIVER_A, POOL1, DEVICE2, False, TOLERATION_NO_EXECUTE
                ),
            )
        ],
    ),
    _case(
        "tainted-two-devices-prioritized-list-tolerated",
        3625,
        features=["DeviceTaints", "PrioritizedList"],
        uses=["count", "firstAvailable", "taints"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    sub_request(SUB_REQ0, CLASS_A, 1),
                    sub_request(SUB_REQ1, CLASS_A, 1, TOLERATION_NO_EXECUTE),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_taints(device(DEVICE1), TAINT_NO_SCHEDULE),
                with_taints(device(DEVICE2), TAINT_NO_EXECUTE),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(
                    REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, False, TOLERATION_NO_EXECUTE
                ),
            )
        ],
    ),
    _case(
        "tainted-no-effect",
        3646,
        features=["DeviceTaints"],
        uses=["count", "taints"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_taints(device(DEVICE1), TAINT_NONE)
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "tainted-one-device-two-taints-both-tolerated",
        3661,
        features=["DeviceTaints"],
        uses=["count", "taints"],
        claims=[
            with_tolerations(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                TOLERATION_NO_SCHEDULE,
                TOLERATION_NO_EXECUTE,
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_taints(device(DEVICE1), TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    False,
                    TOLERATION_NO_SCHEDULE,
                    TOLERATION_NO_EXECUTE,
                ),
            )
        ],
    ),
    _case(
        "tainted-disabled",
        3676,
        uses=["count", "taints"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_taints(device(DEVICE1), TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "tainted-prioritized-list",
        3691,
        features=["DeviceTaints", "PrioritizedList"],
        uses=["count", "firstAvailable", "taints"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0, sub_request(SUB_REQ0, CLASS_B, 1), sub_request(SUB_REQ1, CLASS_A, 1)
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_taints(device(DEVICE1), TAINT_NO_SCHEDULE)
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "tainted-prioritized-list-disabled",
        3708,
        features=["PrioritizedList"],
        uses=["count", "firstAvailable", "taints"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0, sub_request(SUB_REQ0, CLASS_B, 1), sub_request(SUB_REQ1, CLASS_A, 1)
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_taints(device(DEVICE1), TAINT_NO_SCHEDULE)
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "tainted-admin-access",
        3730,
        features=["AdminAccess", "DeviceTaints"],
        uses=["adminAccess", "allocatedDevices", "count", "taints"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.adminAccess": True},
            )
        ],
        allocated_devices=[
            device_id(DRIVER_A, POOL1, DEVICE1),
            device_id(DRIVER_A, POOL1, DEVICE2),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_taints(device(DEVICE1), TAINT_NO_SCHEDULE)
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "tainted-admin-access-disabled",
        3750,
        features=["AdminAccess"],
        uses=["adminAccess", "allocatedDevices", "count", "taints"],
        claims=[
            patched(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                {"spec.devices.requests.0.exactly.adminAccess": True},
            )
        ],
        allocated_devices=[
            device_id(DRIVER_A, POOL1, DEVICE1),
            device_id(DRIVER_A, POOL1, DEVICE2),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_taints(device(DEVICE1), TAINT_NO_SCHEDULE)
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, True),
            )
        ],
    ),
    _case(
        "tainted-all-devices-single",
        3775,
        features=["DeviceTaints"],
        uses=["all", "taints"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_taints(device(DEVICE1), TAINT_NO_SCHEDULE)
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "tainted-all-devices-single-disabled",
        3792,
        uses=["all", "taints"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_taints(device(DEVICE1), TAINT_NO_SCHEDULE)
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "prioritized-list-allocation-mode-all",
        3814,
        features=["PrioritizedList"],
        uses=["all", "allocatedDevices", "count", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    with_allocation_mode(sub_request(SUB_REQ0, CLASS_A, 0), "All"),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ),
            )
        ],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE2)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "prioritized-list-allocation-mode-all-with-selectors",
        3840,
        features=["PrioritizedList"],
        uses=["all", "cel", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    with_allocation_mode(
                        sub_request(
                            SUB_REQ0,
                            CLASS_A,
                            0,
                            {
                                "cel": {
                                    "expression": 'device.attributes["driver-a"].generation == "v6"'
                                }
                            },
                        ),
                        "All",
                    ),
                    with_allocation_mode(
                        sub_request(
                            SUB_REQ1,
                            CLASS_A,
                            0,
                            {
                                "cel": {
                                    "expression": 'device.attributes["driver-a"].generation == "v5"'
                                }
                            },
                        ),
                        "All",
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"generation": {"string": "v5"}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
        3877,
        features=["PrioritizedList"],
        uses=["all", "cel", "firstAvailable", "multiplePools"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    with_allocation_mode(
                        sub_request(
                            SUB_REQ0,
                            CLASS_A,
                            0,
                            {
                                "cel": {
                                    "expression": 'device.attributes["driver-a"].generation == "v6"'
                                }
                            },
                        ),
                        "All",
                    ),
                    with_allocation_mode(
                        sub_request(
                            SUB_REQ1,
                            CLASS_A,
                            0,
                            {
                                "cel": {
                                    "expression": 'device.attributes["driver-a"].generation == "v5"'
                                }
                            },
                        ),
                        "All",
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"generation": {"string": "v5"}}),
            ),
            slice_with_devices(
                SLICE2,
                NODE1,
                POOL2,
                DRIVER_A,
                device(DEVICE1, None, {"generation": {"string": "v5"}}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE1, False),
            )
        ],
    ),
    _case(
        "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
        3922,
        features=["PrioritizedList"],
        uses=["all", "cel", "firstAvailable", "multiplePools", "nodeSelection"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    with_allocation_mode(
                        sub_request(
                            SUB_REQ0,
                            CLASS_A,
                            0,
                            {
                                "cel": {
                                    "expression": 'device.attributes["driver-a"].generation == "v6"'
                                }
                            },
                        ),
                        "All",
                    ),
                    with_allocation_mode(
                        sub_request(
                            SUB_REQ1,
                            CLASS_A,
                            0,
                            {
                                "cel": {
                                    "expression": 'device.attributes["driver-a"].generation == "v5"'
                                }
                            },
                        ),
                        "All",
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"generation": {"string": "v5"}}),
            ),
            slice_with_devices(
                SLICE2,
                NODE2,
                POOL2,
                DRIVER_A,
                device(DEVICE1, None, {"generation": {"string": "v5"}}),
                device(DEVICE2, None, {"generation": {"string": "v6"}}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
        3970,
        features=["PrioritizedList"],
        uses=["all", "cel", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    with_allocation_mode(
                        sub_request(
                            SUB_REQ0,
                            CLASS_A,
                            0,
                            {
                                "cel": {
                                    "expression": 'device.attributes["driver-a"].generation == "v6"'
                                }
                            },
                        ),
                        "All",
                    ),
                    with_allocation_mode(
                        sub_request(
                            SUB_REQ1,
                            CLASS_A,
                            0,
                            {
                                "cel": {
                                    "expression": 'device.attributes["driver-a"].generation == "v5"'
                                }
                            },
                        ),
                        "All",
                    ),
                ),
            )
        ],
        classes=[
            {
                "metadata": {"name": CLASS_A},
                "spec": {
                    "selectors": [
                        {
                            "cel": {
                                "expression": (
                                    'device.driver == "driver-a" && '
                                    'device.attributes["driver-a"].selected'
                                )
                            }
                        }
                    ]
                },
            }
        ],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(
                    DEVICE1, None, {"generation": {"string": "v6"}, "selected": {"bool": False}}
                ),
                device(
                    DEVICE2, None, {"generation": {"string": "v5"}, "selected": {"bool": False}}
                ),
                device(DEVICE3, None, {"generation": {"string": "v5"}, "selected": {"bool": True}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "max-number-devices",
        4032,
        uses=["count"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, ALLOCATION_RESULTS_MAX_SIZE))
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_multiple_devices(SLICE1, NODE1, POOL1, DRIVER_A, ALLOCATION_RESULTS_MAX_SIZE)
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                *multiple_device_allocation_results(
                    REQ0, DRIVER_A, POOL1, ALLOCATION_RESULTS_MAX_SIZE, 0
                ),
            )
        ],
    ),
    _case(
        "partitionable-devices-with-attribute-selector",
        4047,
        features=["PartitionableDevices"],
        uses=["cel", "count", "sharedCounters"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                request(REQ0, CLASS_A, 2),
                request(
                    REQ1,
                    CLASS_A,
                    1,
                    {"cel": {"expression": 'device.attributes["driver-a"].special'}},
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, None, {"special": {"bool": True}}),
                    device_counter_consumption(COUNTER_SET1, {"cpu1": "1"}),
                    device_counter_consumption(COUNTER_SET2, {"mem": "10Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, None, {"special": {"bool": False}}),
                    device_counter_consumption(COUNTER_SET1, {"cpu2": "1"}),
                    device_counter_consumption(COUNTER_SET2, {"mem": "10Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE3, None, {"special": {"bool": False}}),
                    device_counter_consumption(COUNTER_SET1, {"cpu3": "1"}),
                    device_counter_consumption(COUNTER_SET2, {"mem": "10Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"cpu1": "1", "cpu2": "1", "cpu3": "1"}),
                counter_set(COUNTER_SET2, {"mem": "30Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "prioritized-list-max-allocation-limit-request",
        4142,
        features=["PrioritizedList"],
        uses=["count", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    sub_request(SUB_REQ0, CLASS_A, ALLOCATION_RESULTS_MAX_SIZE),
                    sub_request(SUB_REQ1, CLASS_A, ALLOCATION_RESULTS_MAX_SIZE // 2),
                ),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(SUB_REQ0, CLASS_A, ALLOCATION_RESULTS_MAX_SIZE),
                    sub_request(SUB_REQ1, CLASS_A, ALLOCATION_RESULTS_MAX_SIZE // 2),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_multiple_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, ALLOCATION_RESULTS_MAX_SIZE * 2
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                *multiple_device_allocation_results(
                    REQ0_SUB_REQ1, DRIVER_A, POOL1, ALLOCATION_RESULTS_MAX_SIZE // 2, 0
                ),
                *multiple_device_allocation_results(
                    REQ1_SUB_REQ1,
                    DRIVER_A,
                    POOL1,
                    ALLOCATION_RESULTS_MAX_SIZE // 2,
                    ALLOCATION_RESULTS_MAX_SIZE // 2,
                ),
            )
        ],
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=75 "
            "(allocator-internal search statistics; not ported, needs "
            "stats API)."
        ),
    ),
    _case(
        "prioritized-list-max-allocation-allocation-mode-all",
        4171,
        features=["PrioritizedList"],
        uses=["all", "count", "firstAvailable", "multiplePools"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    with_allocation_mode(sub_request(SUB_REQ0, CLASS_A, 0), "All"),
                    sub_request(SUB_REQ1, CLASS_A, 2),
                ),
                device_request(REQ1, CLASS_B, 2),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        slices=[
            slice_with_multiple_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, ALLOCATION_RESULTS_MAX_SIZE - 1
            ),
            slice_with_multiple_devices(SLICE2, NODE1, POOL2, DRIVER_B, 2),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, "device-0", False),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, "device-1", False),
                device_allocation_result(REQ1, DRIVER_B, POOL2, "device-0", False),
                device_allocation_result(REQ1, DRIVER_B, POOL2, "device-1", False),
            )
        ],
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=42 "
            "(allocator-internal search statistics; not ported, needs "
            "stats API)."
        ),
    ),
    _case(
        "device-binding-conditions",
        4199,
        features=["DeviceBindingAndStatus"],
        uses=["bindingConditions", "count"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_binding_conditions(device(DEVICE1), ["IsPrepare"], ["BindingFailed"]),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            {
                "devices": {
                    "results": [
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE1, ["IsPrepare"], ["BindingFailed"]
                        )
                    ]
                },
                "nodeSelector": local_node_selector(NODE1),
            }
        ],
    ),
    _case(
        "binding-conditions-multiple-devices",
        4221,
        features=["DeviceBindingAndStatus"],
        uses=["bindingConditions", "count"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 2), request(REQ1, CLASS_A, 1))
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_binding_conditions(device(DEVICE1), ["IsPrepare"], ["BindingFailed"]),
                with_binding_conditions(device(DEVICE2), ["IsPrepare2"], ["BindingFailed2"]),
                with_binding_conditions(device(DEVICE3), ["IsPrepare3"], ["BindingFailed3"]),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            {
                "devices": {
                    "results": [
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE1, ["IsPrepare"], ["BindingFailed"]
                        ),
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE2, ["IsPrepare2"], ["BindingFailed2"]
                        ),
                        device_request_allocation_result_with_binding_conditions(
                            REQ1, DRIVER_A, POOL1, DEVICE3, ["IsPrepare3"], ["BindingFailed3"]
                        ),
                    ]
                },
                "nodeSelector": local_node_selector(NODE1),
            }
        ],
    ),
    _case(
        "binding-conditions-with-and-without",
        4249,
        features=["DeviceBindingAndStatus"],
        uses=["bindingConditions", "count"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1),
                with_binding_conditions(device(DEVICE2), ["IsPrepare"], ["BindingFailed"]),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            {
                "devices": {
                    "results": [
                        device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                        device_request_allocation_result_with_binding_conditions(
                            REQ1, DRIVER_A, POOL1, DEVICE2, ["IsPrepare"], ["BindingFailed"]
                        ),
                    ]
                },
                "nodeSelector": local_node_selector(NODE1),
            }
        ],
    ),
    _case(
        "binding-conditions-without-feature-gate",
        4275,
        uses=["bindingConditions", "count"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_binding_conditions(device(DEVICE1), ["IsPrepare"], ["BindingFailed"]),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "node-restriction",
        4287,
        features=["DeviceBindingAndStatus"],
        uses=["bindingConditions", "count", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                node_label_selector(PLANET_KEY, PLANET_VALUE_EARTH),
                POOL1,
                DRIVER_A,
                with_binds_to_node(device(DEVICE1), True),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-with-binding-conditions",
        4301,
        features=["DeviceBindingAndStatus", "PartitionableDevices"],
        uses=["bindingConditions", "count", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_binding_conditions(
                    with_device_counter_consumption(
                        device(DEVICE1, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    ["IsPrepare"],
                    ["BindingFailed"],
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            {
                "devices": {
                    "results": [
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE1, ["IsPrepare"], ["BindingFailed"]
                        )
                    ]
                },
                "nodeSelector": local_node_selector(NODE1),
            }
        ],
    ),
    _case(
        "partitionable-devices-with-binding-conditions-multiple",
        4338,
        features=["DeviceBindingAndStatus", "PartitionableDevices"],
        uses=["bindingConditions", "count", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 2))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_binding_conditions(
                    with_device_counter_consumption(
                        device(DEVICE1, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    ["IsPrepare"],
                    ["BindingFailed"],
                ),
                with_binding_conditions(
                    with_device_counter_consumption(
                        device(DEVICE2, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    ["IsPrepare2"],
                    ["BindingFailed2"],
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            {
                "devices": {
                    "results": [
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE1, ["IsPrepare"], ["BindingFailed"]
                        ),
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE2, ["IsPrepare2"], ["BindingFailed2"]
                        ),
                    ]
                },
                "nodeSelector": local_node_selector(NODE1),
            }
        ],
    ),
    _case(
        "partitionable-devices-with-binding-conditions-some-devices-no-conditions",
        4385,
        features=["DeviceBindingAndStatus", "PartitionableDevices"],
        uses=["bindingConditions", "count", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 3))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_binding_conditions(
                    with_device_counter_consumption(
                        device(DEVICE1, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "2Gi"}),
                    ),
                    ["IsPrepare"],
                    ["BindingFailed"],
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "2Gi"}),
                ),
                with_binding_conditions(
                    with_device_counter_consumption(
                        device(DEVICE3, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    ["IsReady"],
                    ["BindingTimeout"],
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            {
                "devices": {
                    "results": [
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE1, ["IsPrepare"], ["BindingFailed"]
                        ),
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE2, None, None
                        ),
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE3, ["IsReady"], ["BindingTimeout"]
                        ),
                    ]
                },
                "nodeSelector": local_node_selector(NODE1),
            }
        ],
    ),
    _case(
        "partitionable-devices-with-binding-conditions-multi-slices",
        4439,
        features=["DeviceBindingAndStatus", "PartitionableDevices"],
        uses=["bindingConditions", "count", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 2))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE4,
                NODE1,
                resource_pool(POOL1, 4),
                DRIVER_A,
                with_binding_conditions(
                    with_device_counter_consumption(
                        device(DEVICE1, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    ),
                    ["IsPrepare"],
                    ["BindingFailed"],
                ),
            ),
            slice_with_counter_sets(
                SLICE3,
                NODE1,
                resource_pool(POOL1, 4),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
            slice_with_devices(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 4),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET2, {"memory": "4Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 4),
                DRIVER_A,
                counter_set(COUNTER_SET2, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            {
                "devices": {
                    "results": [
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE2, None, None
                        ),
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE1, ["IsPrepare"], ["BindingFailed"]
                        ),
                    ]
                },
                "nodeSelector": local_node_selector(NODE1),
            }
        ],
    ),
    _case(
        "partitionable-devices-with-binding-conditions-and-taints",
        4490,
        features=["DeviceBindingAndStatus", "DeviceTaints", "PartitionableDevices"],
        uses=["bindingConditions", "count", "incompletePool", "sharedCounters", "taints"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 2))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_taints(
                    with_binding_conditions(
                        with_device_counter_consumption(
                            device(DEVICE1, FROM_COUNTERS),
                            device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                        ),
                        ["IsPrepare"],
                        ["BindingFailed"],
                    ),
                    {"key": "key1", "value": "value1", "effect": "NoSchedule"},
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2, NODE1, POOL1, DRIVER_A, counter_set(COUNTER_SET1, {"memory": "8Gi"})
            ),
        ],
        node=node(NODE1, REGION1),
        notes=(
            "Both slices of pool-1 declare resourceSliceCount 1 (Go "
            "passes the pool by name), so the pool is formally "
            "incomplete; kept as in Go."
        ),
    ),
    _case(
        "partitionable-devices-with-binding-conditions-and-taints-tolerated",
        4530,
        features=["DeviceBindingAndStatus", "DeviceTaints", "PartitionableDevices"],
        uses=["bindingConditions", "count", "sharedCounters", "taints"],
        claims=[
            with_tolerations(
                claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 2)),
                TOLERATION_NO_SCHEDULE_KEY1,
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_taints(
                    with_binding_conditions(
                        with_device_counter_consumption(
                            device(DEVICE1, FROM_COUNTERS),
                            device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                        ),
                        ["IsPrepare"],
                        ["BindingFailed"],
                    ),
                    {"key": "key1", "value": "value1", "effect": "NoSchedule"},
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            {
                "devices": {
                    "results": [
                        device_request_allocation_result_with_binding_conditions(
                            REQ0,
                            DRIVER_A,
                            POOL1,
                            DEVICE1,
                            ["IsPrepare"],
                            ["BindingFailed"],
                            TOLERATION_NO_SCHEDULE_KEY1,
                        ),
                        device_request_allocation_result_with_binding_conditions(
                            REQ0, DRIVER_A, POOL1, DEVICE2, None, None, TOLERATION_NO_SCHEDULE_KEY1
                        ),
                    ]
                },
                "nodeSelector": local_node_selector(NODE1),
            }
        ],
    ),
    _case(
        "consumable-capacity-disabled-feature",
        4580,
        features=["DeviceBindingAndStatus"],
        uses=["bindingConditions", "consumableCapacity", "count", "errors"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error=(
            "claim claim-0, request req-0: has capacity requests, but "
            "the DRAConsumableCapacity feature is disabled"
        ),
        notes=(
            "Go enables DeviceBindingAndStatus here only to force the "
            "experimental allocator implementation; the scenario itself "
            "does not need it."
        ),
    ),
    _case(
        "consumable-capacity-disabled-feature-with-prioritized-list",
        4593,
        features=["DeviceBindingAndStatus", "PrioritizedList"],
        uses=["bindingConditions", "consumableCapacity", "count", "errors", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    with_capacity_request(sub_request(SUB_REQ0, CLASS_A, 1), ONE),
                    with_capacity_request(sub_request(SUB_REQ1, CLASS_A, 1), ONE),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[slice_with_one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        node=node(NODE1, REGION1),
        expect_error=(
            "claim claim-0, subrequest subReq-0: has capacity requests, "
            "but the DRAConsumableCapacity feature is disabled"
        ),
        notes=(
            "Go enables DeviceBindingAndStatus here only to force the "
            "experimental allocator implementation; the scenario itself "
            "does not need it."
        ),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
        4613,
        features=["ConsumableCapacity"],
        uses=["consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY1: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
        4629,
        features=["ConsumableCapacity"],
        uses=["all", "cel", "consumableCapacity"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(all_device_request(REQ0, CLASS_A), ONE)
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY1: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
        4645,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            with_requests(claim(CLAIM0), device_request(REQ0, CLASS_A, 1)),
            with_requests(claim(CLAIM1), device_request(REQ0, CLASS_A, 1)),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_allow_multiple_allocations(device(DEVICE1))
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    None,
                ),
            ),
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    None,
                ),
            ),
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
        4671,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            with_requests(claim(CLAIM0), device_request(REQ0, CLASS_A, 1)),
            with_requests(claim(CLAIM1), device_request(REQ0, CLASS_A, 1)),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: ONE})),
                with_allow_multiple_allocations(device(DEVICE2, {CAPACITY0: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
            ),
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
            ),
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
        4698,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            with_requests(claim(CLAIM0), device_request(REQ0, CLASS_A, 1)),
            with_requests(claim(CLAIM1), device_request(REQ0, CLASS_A, 1)),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: TWO})),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
        4715,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            ),
            with_requests(
                claim(CLAIM1), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            ),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: TWO})),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
            ),
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
            ),
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
        4741,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1)),
            claim_with_requests(CLAIM1, None, request(REQ0, CLASS_A, 1)),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: FOUR}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            ),
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            ),
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-zero-request-policy",
        4768,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1)),
            claim_with_requests(CLAIM1, None, request(REQ0, CLASS_A, 1)),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_valid_values(
                    with_allow_multiple_allocations(device(DEVICE1)), ZERO, {CAPACITY0: ONE}, None
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ZERO},
                ),
            ),
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ZERO},
                ),
            ),
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
        4795,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_valid_values(
                    with_allow_multiple_allocations(device(DEVICE1)), ZERO, {CAPACITY0: ONE}, None
                ),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
        4812,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            ),
            with_requests(
                claim(CLAIM1), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            ),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: FOUR}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            ),
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            ),
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-range-policy-step",
        4840,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), "3")
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: FOUR}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: FOUR},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-valid-values-policy",
        4862,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), "2")
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_valid_values(
                    with_allow_multiple_allocations(device(DEVICE1)), ONE, {CAPACITY0: FOUR}, [TWO]
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
        4884,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), "2")
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_valid_values(
                    with_allow_multiple_allocations(device(DEVICE1)),
                    ONE,
                    {CAPACITY0: THREE},
                    [THREE],
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: THREE},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
        4906,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            ),
            with_requests(
                claim(CLAIM1), with_capacity_request(device_request(REQ0, CLASS_A, 1), TWO)
            ),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: TWO}
                ),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
        4924,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), "6")
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: "10"}
                ),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
        4941,
        features=["ConsumableCapacity"],
        uses=["allocatedDevices", "cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), TWO)
            )
        ],
        allocated_capacity=[
            {"device": device_id(DRIVER_A, POOL1, DEVICE1), "consumedCapacity": {CAPACITY0: TWO}}
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: FOUR}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
        4968,
        features=["ConsumableCapacity"],
        uses=["allocatedDevices", "cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), TWO)
            )
        ],
        allocated_capacity=[
            {"device": device_id(DRIVER_A, POOL1, DEVICE1), "consumedCapacity": {CAPACITY0: TWO}}
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: TWO}
                ),
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE2)), {CAPACITY0: TWO}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-with-multi-allocatable-device-backtrack",
        4996,
        features=["ConsumableCapacity"],
        uses=["consumableCapacity", "count", "matchAttribute", "multipleClaims"],
        claims=[
            with_requests(
                with_constraints(claim(CLAIM0), {"matchAttribute": STRING_ATTRIBUTE}),
                with_capacity_request(device_request(REQ0, CLASS_A, 1), TWO),
                with_capacity_request(device_request(REQ1, CLASS_A, 1), TWO),
            ),
            with_requests(
                claim(CLAIM1), with_capacity_request(device_request(REQ0, CLASS_A, 1), TWO)
            ),
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(
                        device(
                            DEVICE2, None, {"stringAttribute": {"string": "stringAttributeValue1"}}
                        )
                    ),
                    {CAPACITY0: TWO},
                ),
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(
                        device(
                            DEVICE1, None, {"stringAttribute": {"string": "stringAttributeValue2"}}
                        )
                    ),
                    {CAPACITY0: FOUR},
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            ),
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            ),
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-subrequest",
        5030,
        features=["ConsumableCapacity", "PrioritizedList"],
        uses=["cel", "consumableCapacity", "count", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    with_capacity_request(sub_request(SUB_REQ0, CLASS_A, 1), FOUR),
                    with_capacity_request(sub_request(SUB_REQ1, CLASS_A, 1), TWO),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ),
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: TWO}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
        5058,
        features=["ConsumableCapacity"],
        uses=["allocatedDevices", "cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), TWO)
            )
        ],
        allocated_capacity=[
            {"device": device_id(DRIVER_A, POOL1, DEVICE1), "consumedCapacity": {CAPACITY0: TWO}}
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: TWO}
                ),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
        5080,
        features=["ConsumableCapacity"],
        uses=["all", "cel", "consumableCapacity"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(all_device_request(REQ0, CLASS_A), TWO)
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: TWO})),
                with_allow_multiple_allocations(device(DEVICE2)),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
        5102,
        features=["ConsumableCapacity"],
        uses=["all", "cel", "consumableCapacity"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(all_device_request(REQ0, CLASS_A), TWO)
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: TWO})),
                with_allow_multiple_allocations(device(DEVICE2, {CAPACITY0: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
        5124,
        features=["ConsumableCapacity"],
        uses=["all", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0),
                with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE),
                with_capacity_request(all_device_request(REQ1, CLASS_A), ONE),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: TWO})),
                with_allow_multiple_allocations(device(DEVICE2, {CAPACITY0: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
        5151,
        features=["ConsumableCapacity"],
        uses=["all", "allocatedDevices", "consumableCapacity"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(all_device_request(REQ0, CLASS_A), ONE)
            )
        ],
        allocated_capacity=[
            {"device": device_id(DRIVER_A, POOL1, DEVICE1), "consumedCapacity": {CAPACITY0: ONE}}
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: TWO})),
                with_allow_multiple_allocations(device(DEVICE2, {CAPACITY0: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
        5181,
        features=["ConsumableCapacity"],
        uses=["all", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0),
                with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE),
                with_capacity_request(all_device_request(REQ1, CLASS_A), ONE),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: ONE})),
                with_allow_multiple_allocations(device(DEVICE2, {CAPACITY0: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
        5201,
        features=["ConsumableCapacity"],
        uses=["all", "allocatedDevices", "consumableCapacity"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(all_device_request(REQ0, CLASS_A), ONE)
            )
        ],
        allocated_capacity=[
            {"device": device_id(DRIVER_A, POOL1, DEVICE1), "consumedCapacity": {CAPACITY0: ONE}}
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: ONE})),
                with_allow_multiple_allocations(device(DEVICE2, {CAPACITY0: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-dedicated-device-with-consumable-capacity-request",
        5230,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, False)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, {CAPACITY0: ONE}))
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
        5252,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "multipleClaims"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            ),
            with_requests(
                claim(CLAIM1), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            ),
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, False)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(device(DEVICE1), {CAPACITY0: TWO}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
        5269,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, False)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, {CAPACITY0: ONE})),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
        5286,
        features=["ConsumableCapacity"],
        uses=["allocatedDevices", "cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            )
        ],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE1)],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(device(DEVICE1)), {CAPACITY0: TWO}
                ),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
        5306,
        features=["ConsumableCapacity"],
        uses=["allocatedDevices", "cel", "consumableCapacity", "count"],
        claims=[
            with_requests(
                claim(CLAIM0), with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE)
            )
        ],
        allocated_capacity=[
            {"device": device_id(DRIVER_A, POOL1, DEVICE1), "consumedCapacity": {CAPACITY0: ONE}}
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(device(DEVICE1), {CAPACITY0: TWO}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "allow-multiple-allocations-with-partitionable-device",
        5328,
        features=["ConsumableCapacity", "PartitionableDevices", "PrioritizedList"],
        uses=["cel", "consumableCapacity", "count", "firstAvailable", "sharedCounters"],
        claims=[
            with_requests(
                claim(CLAIM0),
                device_request(REQ0, CLASS_A, 1),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("6Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_allow_multiple_allocations(
                    with_device_counter_consumption(
                        device(DEVICE1, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    )
                ),
                with_allow_multiple_allocations(
                    with_device_counter_consumption(
                        device(DEVICE2, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "6Gi"}),
                    )
                ),
                with_allow_multiple_allocations(
                    with_device_counter_consumption(
                        device(DEVICE3, FROM_COUNTERS),
                        device_counter_consumption(COUNTER_SET1, {"memory": "4Gi"}),
                    )
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {"memory": "4Gi"},
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3),
                    FIXED_SHARE_ID,
                    {"memory": "4Gi"},
                ),
            )
        ],
    ),
    _case(
        "consumable-capacity-with-partitionable-device-multiple-capacity-pools",
        5391,
        features=["ConsumableCapacity", "PartitionableDevices", "PrioritizedList"],
        uses=["cel", "consumableCapacity", "count", "firstAvailable", "sharedCounters"],
        claims=[
            with_requests(
                claim(CLAIM0),
                with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE),
                with_capacity_request(device_request(REQ2, CLASS_A, 1), TWO),
                request_with_prioritized_list(
                    REQ1,
                    with_capacity_request(
                        sub_request(
                            SUB_REQ0,
                            CLASS_A,
                            1,
                            {
                                "cel": {
                                    "expression": (
                                        'device.capacity["driver-a"]["capacity-0"].compareTo(quantity("4")) '
                                        ">= 0"
                                    )
                                }
                            },
                        ),
                        ONE,
                    ),
                    with_capacity_request(
                        sub_request(
                            SUB_REQ1,
                            CLASS_A,
                            1,
                            {
                                "cel": {
                                    "expression": (
                                        'device.capacity["driver-a"]["capacity-0"].compareTo(quantity("2")) '
                                        ">= 0"
                                    )
                                }
                            },
                        ),
                        ONE,
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(
                        with_device_counter_consumption(
                            device(DEVICE1, FROM_COUNTERS),
                            device_counter_consumption(COUNTER_SET1, {CAPACITY0: TWO}),
                            device_counter_consumption(COUNTER_SET2, {CAPACITY1: FOUR}),
                        )
                    ),
                    {CAPACITY1: FOUR},
                ),
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(
                        with_device_counter_consumption(
                            device(DEVICE2, FROM_COUNTERS),
                            device_counter_consumption(COUNTER_SET1, {CAPACITY0: FOUR}),
                            device_counter_consumption(COUNTER_SET2, {CAPACITY1: FOUR}),
                        )
                    ),
                    {CAPACITY1: FOUR},
                ),
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(
                        with_device_counter_consumption(
                            device(DEVICE3, FROM_COUNTERS),
                            device_counter_consumption(COUNTER_SET1, {CAPACITY0: TWO}),
                            device_counter_consumption(COUNTER_SET2, {CAPACITY1: FOUR}),
                        )
                    ),
                    {CAPACITY1: FOUR},
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {CAPACITY0: FOUR}),
                counter_set(COUNTER_SET2, {CAPACITY1: "8"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE, CAPACITY1: TWO},
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ2, DRIVER_A, POOL1, DEVICE3),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO, CAPACITY1: TWO},
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: ONE, CAPACITY1: TWO},
                ),
            )
        ],
    ),
    _case(
        "with-distinct-constraints",
        5493,
        features=["ConsumableCapacity"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            with_requests(
                with_constraints(
                    claim(CLAIM0),
                    {"distinctAttribute": BOOL_ATTRIBUTE, "requests": [REQ0, REQ1]},
                    {"distinctAttribute": VERSION_ATTRIBUTE, "requests": [REQ0, REQ1, REQ2]},
                    {"distinctAttribute": INT_ATTRIBUTE, "requests": [REQ0, REQ1, REQ2, REQ3]},
                ),
                device_request(REQ0, CLASS_A, 1),
                device_request(REQ1, CLASS_A, 1),
                device_request(REQ2, CLASS_A, 1),
                device_request(REQ3, CLASS_A, 1),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(
                    device(
                        DEVICE1,
                        None,
                        {
                            "driverVersion": {"version": "1.0.0"},
                            "numa": {"int": 0},
                            "boolAttribute": {"bool": True},
                        },
                    )
                ),
                with_allow_multiple_allocations(
                    device(
                        DEVICE2,
                        None,
                        {
                            "driverVersion": {"version": "1.0.1"},
                            "numa": {"int": 1},
                            "boolAttribute": {"bool": False},
                        },
                    )
                ),
                with_allow_multiple_allocations(
                    device(
                        DEVICE3,
                        None,
                        {
                            "driverVersion": {"version": "1.0.2"},
                            "numa": {"int": 2},
                            "boolAttribute": {"bool": True},
                        },
                    )
                ),
                with_allow_multiple_allocations(
                    device(
                        DEVICE4,
                        None,
                        {
                            "driverVersion": {"version": "1.0.0"},
                            "numa": {"int": 3},
                            "boolAttribute": {"bool": True},
                        },
                    )
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    None,
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    None,
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ2, DRIVER_A, POOL1, DEVICE3),
                    FIXED_SHARE_ID,
                    None,
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ3, DRIVER_A, POOL1, DEVICE4),
                    FIXED_SHARE_ID,
                    None,
                ),
            )
        ],
    ),
    _case(
        "with-distinct-constraints-attribute-not-set",
        5544,
        features=["ConsumableCapacity"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            with_requests(
                with_constraints(
                    claim(CLAIM0), {"distinctAttribute": BOOL_ATTRIBUTE, "requests": [REQ0]}
                ),
                device_request(REQ0, CLASS_A, 1),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, POOL1, DRIVER_A, with_allow_multiple_allocations(device(DEVICE1))
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "with-distinct-constraints-unknown-type-attribute",
        5565,
        features=["ConsumableCapacity"],
        uses=["consumableCapacity", "count", "distinctAttribute", "errors"],
        claims=[
            with_requests(
                with_constraints(
                    claim(CLAIM0), {"distinctAttribute": BOOL_ATTRIBUTE, "requests": [REQ0]}
                ),
                device_request(REQ0, CLASS_A, 1),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(device(DEVICE1, None, {"boolAttribute": {}})),
            )
        ],
        node=node(NODE1, REGION1),
        expect_error="unsupported attribute value",
    ),
    _case(
        "with-distinct-constraints-with-subrequests",
        5586,
        features=["ConsumableCapacity", "PrioritizedList"],
        uses=["cel", "consumableCapacity", "count", "distinctAttribute", "firstAvailable"],
        claims=[
            with_requests(
                with_constraints(
                    claim(CLAIM0), {"distinctAttribute": BOOL_ATTRIBUTE, "requests": [REQ0, REQ1]}
                ),
                request_with_prioritized_list(
                    REQ0,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {"cel": {"expression": 'device.attributes["driver-a"].boolAttribute'}},
                    ),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {"cel": {"expression": 'device.attributes["driver-a"].boolAttribute'}},
                    ),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ),
                request_with_prioritized_list(
                    REQ2,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {"cel": {"expression": 'device.attributes["driver-a"].boolAttribute'}},
                    ),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_allow_multiple_allocations(
                    device(DEVICE1, None, {"boolAttribute": {"bool": True}})
                ),
                with_allow_multiple_allocations(
                    device(DEVICE2, None, {"boolAttribute": {"bool": False}})
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0_SUB_REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    None,
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    None,
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ2_SUB_REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    None,
                ),
            )
        ],
    ),
    _case(
        "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
        5642,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "distinctAttribute"],
        claims=[
            with_requests(
                with_constraints(claim(CLAIM0), {"distinctAttribute": STRING_ATTRIBUTE}),
                with_capacity_request(device_request(REQ0, CLASS_A, 1), ONE),
                with_capacity_request(device_request(REQ1, CLASS_A, 1), ONE),
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(
                        device(
                            DEVICE1, None, {"stringAttribute": {"string": "stringAttributeValue"}}
                        )
                    ),
                    {CAPACITY0: TWO},
                ),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
        5662,
        features=["ConsumableCapacity"],
        uses=["cel", "consumableCapacity", "count", "distinctAttribute"],
        claims=[
            with_requests(
                with_constraints(claim(CLAIM0), {"distinctAttribute": STRING_ATTRIBUTE}),
                with_capacity_request(device_request(REQ0, CLASS_A, 1), TWO),
                with_capacity_request(device_request(REQ1, CLASS_A, 1), TWO),
            )
        ],
        classes=[class_with_allow_multiple_allocations(CLASS_A, DRIVER_A, True)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(
                        device(
                            DEVICE1, None, {"stringAttribute": {"string": "stringAttributeValue1"}}
                        )
                    ),
                    {CAPACITY0: FOUR},
                ),
            ),
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_capacity_request_policy_range(
                    with_allow_multiple_allocations(
                        device(
                            DEVICE2, None, {"stringAttribute": {"string": "stringAttributeValue2"}}
                        )
                    ),
                    {CAPACITY0: FOUR},
                ),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                with_consumed_capacity(
                    device_request_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
                with_consumed_capacity(
                    device_request_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2),
                    FIXED_SHARE_ID,
                    {CAPACITY0: TWO},
                ),
            )
        ],
    ),
    _case(
        "list-attributes-match-constaint-scalar-string-values",
        5697,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "value1"}}),
                device(DEVICE2, None, {"stringAttribute": {"string": "value1"}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "list-attributes-match-constaint-list-of-string-values-with-common-elements",
        5723,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(
                    DEVICE1, None, {"stringAttribute": {"strings": ["value1", "value2", "value3"]}}
                ),
                device(
                    DEVICE2, None, {"stringAttribute": {"strings": ["value2", "value3", "value4"]}}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "list-attributes-match-constaint-list-of-string-values-with-partially-common-elements",
        5749,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 3)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"strings": ["value1", "value2"]}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["value2", "value3"]}}),
                device(DEVICE3, None, {"stringAttribute": {"strings": ["value3", "value1"]}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "list-attributes-match-constaint-list-of-string-values-without-common-elements",
        5774,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0,
                [{"matchAttribute": STRING_ATTRIBUTE}],
                request(REQ0, CLASS_A, 1),
                request(REQ0, CLASS_A, 1),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"strings": ["value1", "value2"]}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["value3", "value4"]}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-common-elements",
        5797,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "value1"}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["value1", "value2"]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-partially-common-elements",
        5823,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 3)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "value1"}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["value1", "value2"]}}),
                device(DEVICE3, None, {"stringAttribute": {"strings": ["value2", "value3"]}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-without-common-elements",
        5848,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "value1"}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["value2", "value3"]}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "list-attributes-match-constaint-list-of-int-values-with-common-elements",
        5870,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": INT_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"numa": {"ints": [0, 1, 2]}}),
                device(DEVICE2, None, {"numa": {"ints": [1, 2, 3]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "list-attributes-match-constaint-list-of-bool-values-with-common-elements",
        5896,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": BOOL_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"boolAttribute": {"bools": [True, False]}}),
                device(DEVICE2, None, {"boolAttribute": {"bools": [True]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "list-attributes-match-constaint-list-of-version-values-with-common-elements",
        5922,
        features=["ListTypeAttributes"],
        uses=["count", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": VERSION_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"driverVersion": {"versions": ["1.0.0", "1.1.0", "2.0.0"]}}),
                device(DEVICE2, None, {"driverVersion": {"versions": ["1.1.0", "2.0.0", "2.1.0"]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "list-attributes-match-constaint-with-empty-or-unknown-type",
        5948,
        features=["ListTypeAttributes"],
        uses=["count", "errors", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": []}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_error="unsupported attribute value",
        notes=(
            'device-2\'s attribute is {"strings": []} as in Go '
            "(StringValues: []string{}); served JSON would drop the "
            "empty list, leaving {} like device-1."
        ),
    ),
    _case(
        "list-attributes-disabled-match-constraint-with-lists",
        5970,
        uses=["count", "errors", "matchAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"matchAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(
                    DEVICE1, None, {"stringAttribute": {"strings": ["value1", "value2", "value3"]}}
                ),
                device(
                    DEVICE2, None, {"stringAttribute": {"strings": ["value2", "value3", "value4"]}}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_error="unsupported attribute value",
    ),
    _case(
        "list-attributes-distinct-constraint-scalar-string-values-all-distinct",
        5993,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "value1"}}),
                device(DEVICE2, None, {"stringAttribute": {"string": "value2"}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "list-attributes-distinct-constraint-scalar-string-values-not-distinct",
        6020,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "value1"}}),
                device(DEVICE2, None, {"stringAttribute": {"string": "value1"}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "list-attributes-distinct-constraint-list-of-string-values-all-distinct",
        6043,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"strings": ["value1", "value2"]}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["value2", "value3"]}}),
                device(DEVICE3, None, {"stringAttribute": {"strings": ["value3", "value4"]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "list-attributes-distinct-constraint-list-of-string-values-with-common-elements",
        6073,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(
                    DEVICE1, None, {"stringAttribute": {"strings": ["value1", "value2", "value3"]}}
                ),
                device(
                    DEVICE2, None, {"stringAttribute": {"strings": ["value2", "value4", "value5"]}}
                ),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "list-attributes-distinct-constraint-mixed-scalar-and-list-all-distinct",
        6096,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "value1"}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["value1", "value2"]}}),
                device(DEVICE3, None, {"stringAttribute": {"strings": ["value2", "value3"]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "list-attributes-distinct-constraint-mixed-scalar-and-list-with-common-elements",
        6126,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"stringAttribute": {"string": "value1"}}),
                device(DEVICE2, None, {"stringAttribute": {"strings": ["value1", "value2"]}}),
            )
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "list-attributes-distinct-constraint-list-of-int-values-all-distinct",
        6149,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": INT_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"numa": {"ints": [0, 1]}}),
                device(DEVICE2, None, {"numa": {"ints": [1, 2]}}),
                device(DEVICE3, None, {"numa": {"ints": [2, 3]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "list-attributes-distinct-constraint-list-of-bool-values-all-distinct",
        6179,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": BOOL_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"boolAttribute": {"bools": [True]}}),
                device(DEVICE2, None, {"boolAttribute": {"bools": [True, False]}}),
                device(DEVICE3, None, {"boolAttribute": {"bools": [False]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "list-attributes-distinct-constraint-list-of-version-values-all-distinct",
        6209,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": VERSION_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"driverVersion": {"versions": ["1.0.0", "1.1.0"]}}),
                device(DEVICE2, None, {"driverVersion": {"versions": ["1.1.0", "2.0.0"]}}),
                device(DEVICE3, None, {"driverVersion": {"versions": ["2.0.0", "2.1.0"]}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE3, False),
            )
        ],
    ),
    _case(
        "list-attributes-distinct-constaint-with-empty-or-unknown-type",
        6239,
        features=["ConsumableCapacity", "ListTypeAttributes"],
        uses=["consumableCapacity", "count", "distinctAttribute", "errors"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": VERSION_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"driverVersion": {"versions": []}}),
                device(DEVICE2, None, {"driverVersion": {"versions": None}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_error="unsupported attribute value",
    ),
    _case(
        "list-attributes-disabled-distinct-constraint-with-lists",
        6263,
        features=["ConsumableCapacity"],
        uses=["consumableCapacity", "count", "distinctAttribute", "errors"],
        claims=[
            claim_with_requests(
                CLAIM0, [{"distinctAttribute": STRING_ATTRIBUTE}], request(REQ0, CLASS_A, 2)
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(
                    DEVICE1, None, {"stringAttribute": {"strings": ["value1", "value2", "value3"]}}
                ),
                device(
                    DEVICE2, None, {"stringAttribute": {"strings": ["value2", "value3", "value4"]}}
                ),
            )
        ],
        node=node(NODE1, REGION1),
        expect_error="unsupported attribute value",
    ),
    _case(
        "allocation-mode-all-with-multi-host-resource-pool",
        6288,
        uses=["all", "nodeSelection"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                {"name": REQ0, "exactly": {"allocationMode": "All", "deviceClassName": CLASS_A}},
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
            slice_with_devices(SLICE2, NODE2, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE2)),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "multi-host-resource-pool-with-stale-slice-for-current-node",
        6314,
        uses=["count", "incompletePool", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            patched(
                slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE2, NODE2, POOL1, DRIVER_A, device(DEVICE2)),
                {"spec.pool.generation": 2, "spec.pool.resourceSliceCount": 2},
            ),
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "multi-host-resource-pool-complete-update-from-node-1-to-node-2",
        6352,
        uses=["count", "incompletePool", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            patched(
                slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE2)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE2, NODE2, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 2, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE2, NODE2, POOL1, DRIVER_A, device(DEVICE2)),
                {"spec.pool.generation": 2, "spec.pool.resourceSliceCount": 2},
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
        notes=(
            "The expectation documents current upstream behaviour (the "
            "stale generation-1 slices are still used); upstream says it "
            "would prefer no allocation here."
        ),
    ),
    _case(
        "multi-host-resource-pool-complete-update-from-node-2-to-node-1",
        6405,
        uses=["count", "incompletePool", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            patched(
                slice_with_devices(SLICE1, NODE2, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE1, NODE2, POOL1, DRIVER_A, device(DEVICE2)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE2, NODE1, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 2, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE2, NODE1, POOL1, DRIVER_A, device(DEVICE2)),
                {"spec.pool.generation": 2, "spec.pool.resourceSliceCount": 2},
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
    ),
    _case(
        "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",
        6454,
        uses=["count", "incompletePool", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            patched(
                slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE2)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE2, NODE2, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 2, "spec.pool.resourceSliceCount": 2},
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
        notes=(
            "The expectation documents current upstream behaviour (the "
            "stale generation-1 slices are still used); upstream says it "
            "would prefer no allocation here."
        ),
    ),
    _case(
        "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1",
        6499,
        uses=["count", "incompletePool", "nodeSelection"],
        claims=[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            patched(
                slice_with_devices(SLICE1, NODE2, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE1, NODE2, POOL1, DRIVER_A, device(DEVICE2)),
                {"spec.pool.generation": 1, "spec.pool.resourceSliceCount": 2},
            ),
            patched(
                slice_with_devices(SLICE2, NODE1, POOL1, DRIVER_A, device(DEVICE1)),
                {"spec.pool.generation": 2, "spec.pool.resourceSliceCount": 2},
            ),
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "partitionable-devices-same-counter-set-name-in-different-resource-slices",
        6533,
        features=["PartitionableDevices"],
        uses=["count", "errors", "sharedCounters"],
        claims=[with_requests(claim(CLAIM0), device_request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, resource_pool(POOL1, 4), DRIVER_A, device(DEVICE1)),
            slice_with_counter_sets(
                SLICE2, NODE1, resource_pool(POOL1, 4), DRIVER_A, counter_set(COUNTER_SET1, None)
            ),
            slice_with_devices(SLICE3, NODE1, resource_pool(POOL1, 4), DRIVER_A, device(DEVICE2)),
            slice_with_counter_sets(
                SLICE4, NODE1, resource_pool(POOL1, 4), DRIVER_A, counter_set(COUNTER_SET1, None)
            ),
        ],
        node=node(NODE1, REGION1),
        expect_error="invalid resource pools were encountered",
    ),
    _case(
        "partitionable-devices-device-counter-consumption-references-unknown-counter-set",
        6560,
        features=["PartitionableDevices"],
        uses=["count", "errors", "sharedCounters"],
        claims=[with_requests(claim(CLAIM0), device_request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1), device_counter_consumption(COUNTER_SET2, None)
                ),
            ),
            slice_with_counter_sets(
                SLICE2, NODE1, resource_pool(POOL1, 2), DRIVER_A, counter_set(COUNTER_SET1, None)
            ),
        ],
        node=node(NODE1, REGION1),
        expect_error="invalid resource pools were encountered",
    ),
    _case(
        "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
        6583,
        features=["PartitionableDevices"],
        uses=["count", "errors", "sharedCounters"],
        claims=[with_requests(claim(CLAIM0), device_request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1), device_counter_consumption(COUNTER_SET1, {"memory": "8Gi"})
                ),
            ),
            slice_with_counter_sets(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"other-memory": "8Gi"}),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_error="invalid resource pools were encountered",
    ),
    _case(
        "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
        6610,
        features=["PartitionableDevices"],
        uses=["count", "errors", "multiplePools", "sharedCounters"],
        claims=[with_requests(claim(CLAIM0), device_request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1), device_counter_consumption(COUNTER_SET1, {"memory": "8Gi"})
                ),
            ),
            slice_with_counter_sets(
                SLICE2, NODE1, POOL2, DRIVER_A, counter_set(COUNTER_SET1, {"memory": "8Gi"})
            ),
        ],
        node=node(NODE1, REGION1),
        expect_error="invalid resource pools were encountered",
    ),
    _case(
        "partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
        6637,
        features=["PartitionableDevices", "PrioritizedList"],
        uses=[
            "allocatedDevices",
            "cel",
            "count",
            "firstAvailable",
            "nodeSelection",
            "sharedCounters",
        ],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ0,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("6Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {
                            "cel": {
                                "expression": (
                                    'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) '
                                    ">= 0"
                                )
                            }
                        },
                    ),
                ),
            )
        ],
        allocated_devices=[device_id(DRIVER_A, POOL1, DEVICE3)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_counter_sets(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 3),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
            slice_with_devices(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 3),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "6Gi"}),
                ),
                with_device_counter_consumption(
                    device(DEVICE2, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "2Gi"}),
                ),
            ),
            slice_with_devices(
                SLICE3,
                NODE2,
                resource_pool(POOL1, 3),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE3), device_counter_consumption(COUNTER_SET1, {"memory": "6Gi"})
                ),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "partitionable-devices-validation-error-on-non-targeting-slice",
        6694,
        features=["PartitionableDevices"],
        uses=["count", "errors", "nodeSelection", "sharedCounters"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_counter_sets(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 3),
                DRIVER_A,
                counter_set(COUNTER_SET1, {"memory": "8Gi"}),
            ),
            slice_with_devices(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 3),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE1, FROM_COUNTERS),
                    device_counter_consumption(COUNTER_SET1, {"memory": "6Gi"}),
                ),
            ),
            slice_with_devices(
                SLICE3,
                NODE2,
                resource_pool(POOL1, 3),
                DRIVER_A,
                with_device_counter_consumption(
                    device(DEVICE3), device_counter_consumption(COUNTER_SET2, {"memory": "6Gi"})
                ),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_error="invalid resource pools were encountered",
    ),
    _case(
        "different-resourceslices-in-pool-can-target-different-nodes",
        6728,
        uses=["count", "nodeSelection"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE2, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
            slice_with_devices(SLICE2, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE2)),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL1, DEVICE2, False),
            )
        ],
    ),
    _case(
        "invalid-pool-is-ok-if-devices-can-be-allocated-from-other",
        6749,
        uses=["count", "multiplePools"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
            slice_with_devices(SLICE2, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
            slice_with_devices(SLICE3, NODE1, resource_pool(POOL2, 1), DRIVER_A, device(DEVICE2)),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ0, DRIVER_A, POOL2, DEVICE2, False),
            )
        ],
    ),
    _case(
        "invalid-pool-is-error-if-no-other-device-can-be-allocated",
        6773,
        uses=["allocatedDevices", "count", "errors", "multiplePools"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        allocated_devices=[device_id(DRIVER_A, POOL2, DEVICE2)],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
            slice_with_devices(SLICE2, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
            slice_with_devices(SLICE3, NODE1, resource_pool(POOL2, 1), DRIVER_A, device(DEVICE2)),
        ],
        node=node(NODE1, REGION1),
        expect_error="invalid resource pools were encountered",
    ),
    _case(
        "no-allocation-from-incomplete-pools",
        6797,
        uses=["count", "incompletePool"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 1))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1))
        ],
        node=node(NODE1, REGION1),
    ),
    _case(
        "check-combinations-within-single-request-single-pool-single-slice",
        6811,
        uses=["count"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 5))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1),
                device(DEVICE2),
                device(DEVICE3),
                device(DEVICE4),
            )
        ],
        node=node(NODE1, REGION1),
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=16 "
            "(stable=65) (allocator-internal search statistics; not "
            "ported, needs stats API)."
        ),
    ),
    _case(
        "check-combinations-within-single-request-single-pool-multiple-slices",
        6829,
        uses=["count"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 5))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1), device(DEVICE2)
            ),
            slice_with_devices(
                SLICE2, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE3), device(DEVICE4)
            ),
        ],
        node=node(NODE1, REGION1),
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=16 "
            "(stable=65) (allocator-internal search statistics; not "
            "ported, needs stats API)."
        ),
    ),
    _case(
        "check-combinations-within-single-request-multiple-pools-multiple-slices",
        6851,
        uses=["count", "multiplePools"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 5))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE1)),
            slice_with_devices(SLICE2, NODE1, resource_pool(POOL1, 2), DRIVER_A, device(DEVICE2)),
            slice_with_devices(SLICE3, NODE1, POOL2, DRIVER_A, device(DEVICE3), device(DEVICE4)),
        ],
        node=node(NODE1, REGION1),
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=16 "
            "(stable=65) (allocator-internal search statistics; not "
            "ported, needs stats API)."
        ),
    ),
    _case(
        "check-combinations-within-single-request-many-pools",
        6875,
        uses=["count", "multiplePools"],
        claims=[claim_with_requests(CLAIM0, None, request(REQ0, CLASS_A, 5))],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1)),
            slice_with_devices(SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE2)),
            slice_with_devices(SLICE3, NODE1, POOL3, DRIVER_A, device(DEVICE3)),
            slice_with_devices(SLICE4, NODE1, POOL4, DRIVER_A, device(DEVICE4)),
        ],
        node=node(NODE1, REGION1),
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=16 "
            "(stable=65) (allocator-internal search statistics; not "
            "ported, needs stats API)."
        ),
    ),
    _case(
        "check-combinations-with-backtracking",
        6901,
        uses=["cel", "count"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                request(REQ1, CLASS_A, 2),
                request(
                    REQ2,
                    CLASS_A,
                    1,
                    {"cel": {"expression": 'device.attributes["driver-a"].type == "X"'}},
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"type": {"string": "X"}}),
                device(DEVICE2, None, {"type": {"string": "Y"}}),
                device(DEVICE3, None, {"type": {"string": "Y"}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2, False),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE3, False),
                device_allocation_result(REQ2, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=12 "
            "(stable=14) (allocator-internal search statistics; not "
            "ported, needs stats API)."
        ),
    ),
    _case(
        "check-combinations-with-backtracking-across-slices-and-pools",
        6945,
        features=["DeviceBindingAndStatus"],
        uses=["bindingConditions", "cel", "count", "multiplePools"],
        claims=[
            claim_with_requests(
                CLAIM0,
                None,
                request(REQ1, CLASS_A, 2),
                request(
                    REQ2,
                    CLASS_A,
                    1,
                    {"cel": {"expression": 'device.attributes["driver-a"].type == "X"'}},
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                device(DEVICE1, None, {"type": {"string": "X"}}),
            ),
            slice_with_devices(
                SLICE2,
                NODE1,
                resource_pool(POOL1, 2),
                DRIVER_A,
                device(DEVICE2, None, {"type": {"string": "Y"}}),
            ),
            slice_with_devices(
                SLICE3,
                NODE1,
                POOL2,
                DRIVER_A,
                with_binding_conditions(
                    device(DEVICE3, None, {"type": {"string": "Y"}}), ["IsPrepare"], []
                ),
            ),
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ1, DRIVER_A, POOL1, DEVICE2, False),
                device_request_allocation_result_with_binding_conditions(
                    REQ1, DRIVER_A, POOL2, DEVICE3, ["IsPrepare"], []
                ),
                device_allocation_result(REQ2, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=12 "
            "(stable=14) (allocator-internal search statistics; not "
            "ported, needs stats API). device-3 carries a binding "
            "condition only so that Go's allocator searches pool-2 after "
            "pool-1 (search-order detail); the expected result depends "
            "on that order."
        ),
    ),
    _case(
        "check-combinations-with-prioritized-list",
        7000,
        features=["PrioritizedList"],
        uses=["cel", "count", "firstAvailable"],
        claims=[
            with_requests(
                claim(CLAIM0),
                request_with_prioritized_list(
                    REQ1,
                    sub_request(
                        SUB_REQ0,
                        CLASS_A,
                        3,
                        {"cel": {"expression": 'device.attributes["driver-a"].type == "Y"'}},
                    ),
                    sub_request(SUB_REQ1, CLASS_A, 2),
                ),
                request_with_prioritized_list(
                    REQ2,
                    sub_request(SUB_REQ0, CLASS_A, 2),
                    sub_request(
                        SUB_REQ1,
                        CLASS_A,
                        1,
                        {"cel": {"expression": 'device.attributes["driver-a"].type == "X"'}},
                    ),
                ),
            )
        ],
        classes=[device_class(CLASS_A, DRIVER_A)],
        slices=[
            slice_with_devices(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"type": {"string": "X"}}),
                device(DEVICE2, None, {"type": {"string": "Y"}}),
                device(DEVICE3, None, {"type": {"string": "Y"}}),
            )
        ],
        node=node(NODE1, REGION1),
        expect_results=[
            allocation_result(
                local_node_selector(NODE1),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, False),
                device_allocation_result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, False),
                device_allocation_result(REQ2_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, False),
            )
        ],
        notes=(
            "Go also asserts expectNumAllocateOneInvocations=26 "
            "(stable=32) (allocator-internal search statistics; not "
            "ported, needs stats API)."
        ),
    ),
]
