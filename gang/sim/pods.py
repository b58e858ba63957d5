"""What a kube-apiserver does to a Pod on the way in: defaulting, admission, validation.

A scheduler reads the pod as the server stored it, not as the user wrote it: requests defaulted
from limits, ``spec.priority`` resolved from the PriorityClass, ``status.qosClass`` computed,
``schedulerName`` defaulted, the not-ready/unreachable tolerations added. A simulator that skipped
these would let scheduler bugs pass that a real cluster exposes, so they are reproduced here for
the fields a scheduler reads. Validation is limited to what protects the store's consistency and
what users hit in practice (bad quantities, missing containers, pod spec immutability).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from gang.models.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]

DEFAULT_SCHEDULER = "default-scheduler"
QOS_RESOURCES = ("cpu", "memory")
DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)
CONTAINER_LISTS = ("initContainers", "containers")

# fields of a running pod's spec that an update may change (apimachinery ValidatePodUpdate)
_MUTABLE_SPEC_FIELDS = ("activeDeadlineSeconds", "tolerations", "schedulingGates")


class PodRejected(Exception):
    """A pod the apiserver would refuse; ``code`` says how (400 decode, 403 admission, 422)."""

    def __init__(self, code: int, causes: list[tuple[str, str]] | str) -> None:
        super().__init__(str(causes))
        self.code = code
        self.causes = causes


def _default_container(container: Obj) -> Obj:
    out = dict(container)
    image = str(out.get("image", ""))
    if "imagePullPolicy" not in out:
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        latest = image.endswith(":latest") or not tagged
        out["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    out.setdefault("terminationMessagePath", "/dev/termination-log")
    out.setdefault("terminationMessagePolicy", "File")
    resources = out.get("resources")
    if isinstance(resources, dict):
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        if isinstance(limits, dict) and isinstance(requests, dict) and limits:
            # requests default to limits, resource by resource
            out["resources"] = {**resources, "requests": {**limits, **requests}}
    else:
        out["resources"] = {}
    return out


def default_pod(pod: Obj) -> Obj:
    """Return the pod with server-side defaults applied (spec only; status is reset apart)."""
    spec = dict(pod.get("spec") or {})
    for list_name in CONTAINER_LISTS:
        if isinstance(spec.get(list_name), list):
            spec[list_name] = [
                _default_container(c) if isinstance(c, dict) else c for c in spec[list_name]
            ]
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("enableServiceLinks", True)
    tolerations = list(spec.get("tolerations") or [])
    for default in DEFAULT_TOLERATIONS:
        # DefaultTolerationSeconds: an empty key (or effect) tolerates every key (or effect)
        if not any(
            isinstance(t, dict)
            and t.get("key") in (None, "", default["key"])
            and t.get("effect") in (None, "", "NoExecute")
            for t in tolerations
        ):
            tolerations.append(dict(default))
    spec["tolerations"] = tolerations
    return {**pod, "spec": spec}


def admit_priority(
    pod: Obj, find_class: Callable[[str], Obj | None], default_class: Obj | None
) -> Obj:
    """The Priority admission plugin: resolve priorityClassName into spec.priority."""
    spec = dict(pod["spec"])
    name = spec.get("priorityClassName")
    if name:
        pc = find_class(str(name))
        if pc is None:
            raise PodRejected(403, f"no PriorityClass with name {name} was found")
    else:
        pc = default_class
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    value = int(pc.get("value", 0)) if pc is not None else 0
    given = spec.get("priority")
    if given is not None and given != value:
        raise PodRejected(
            403,
            f"the integer value of priority ({given}) must not be provided in pod spec; "
            f"priority admission controller computed {value} from the given PriorityClass name",
        )
    spec["priority"] = value
    policy = pc.get("preemptionPolicy") if pc is not None else None
    spec.setdefault("preemptionPolicy", policy or "PreemptLowerPriority")
    return {**pod, "spec": spec}


def _quantities(path: str, values: Any, causes: list[tuple[str, str]]) -> dict[str, Decimal]:
    parsed: dict[str, Decimal] = {}
    if values is None:
        return parsed
    if not isinstance(values, dict):
        raise PodRejected(400, f"{path}: expected a map of resource names to quantities")
    for name, raw in values.items():
        try:
            value = parse_quantity(raw)
        except QuantityError as err:
            raise PodRejected(400, str(err)) from None
        if value < 0:
            causes.append(
                (f"{path}[{name}]", f'Invalid value: "{raw}": must be greater than or equal to 0')
            )
        parsed[str(name)] = value
    return parsed


def validate_pod(pod: Obj) -> None:
    """Raise PodRejected for what a real apiserver refuses; quantities are parsed exactly."""
    spec = pod.get("spec")
    causes: list[tuple[str, str]] = []
    if not isinstance(spec, dict):
        raise PodRejected(422, [("spec.containers", "Required value")])
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(("spec.containers", "Required value"))
    seen: set[str] = set()
    for list_name in CONTAINER_LISTS:
        for i, c in enumerate(spec.get(list_name) or []):
            where = f"spec.{list_name}[{i}]"
            if not isinstance(c, dict):
                raise PodRejected(400, f"{where}: expected an object")
            name = c.get("name")
            if not name:
                causes.append((f"{where}.name", "Required value"))
            elif name in seen:
                causes.append((f"{where}.name", f'Duplicate value: "{name}"'))
            else:
                seen.add(str(name))
            if not c.get("image"):
                causes.append((f"{where}.image", "Required value"))
            resources = c.get("resources") or {}
            if not isinstance(resources, dict):
                raise PodRejected(400, f"{where}.resources: expected an object")
            limits = _quantities(f"{where}.resources.limits", resources.get("limits"), causes)
            requests = _quantities(f"{where}.resources.requests", resources.get("requests"), causes)
            for res, req in requests.items():
                if res in limits and req > limits[res]:
                    causes.append(
                        (
                            f"{where}.resources.requests",
                            f'Invalid value: "{resources["requests"][res]}": '
                            f"must be less than or equal to {res} limit of {resources['limits'][res]}",
                        )
                    )
    _quantities("spec.overhead", spec.get("overhead"), causes)
    if causes:
        raise PodRejected(422, causes)


def qos_class(pod: Obj) -> str:
    """Guaranteed / Burstable / BestEffort, by the rules of pkg/apis/core/helper/qos."""
    spec = pod.get("spec") or {}
    containers = [c for name in CONTAINER_LISTS for c in spec.get(name) or []]
    any_set = False
    guaranteed = True
    for c in containers:
        resources = c.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        for res in QOS_RESOURCES:
            req, lim = requests.get(res), limits.get(res)
            if (req is not None and parse_quantity(req) != 0) or (
                lim is not None and parse_quantity(lim) != 0
            ):
                any_set = True
            if lim is None or req is None or parse_quantity(req) != parse_quantity(lim):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _strip_images(spec: Obj) -> Obj:
    out = {k: v for k, v in spec.items() if k not in _MUTABLE_SPEC_FIELDS}
    for list_name in CONTAINER_LISTS:
        if isinstance(out.get(list_name), list):
            out[list_name] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                for c in out[list_name]
            ]
    return out


def check_spec_update(old: Obj, new: Obj) -> None:
    """Pod specs are immutable but for images, deadlines, added tolerations and gate removal."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if _strip_images(old_spec) != _strip_images(new_spec):
        raise PodRejected(
            422,
            [
                (
                    "spec",
                    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, "
                    "`spec.tolerations` (only additions to existing tolerations), "
                    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                    "previously negative)",
                )
            ],
        )
    old_tol = old_spec.get("tolerations") or []
    new_tol = new_spec.get("tolerations") or []
    if any(t not in new_tol for t in old_tol):
        raise PodRejected(
            422,
            [
                (
                    "spec.tolerations",
                    "Forbidden: existing toleration can not be modified except its tolerationSeconds",
                )
            ],
        )
    old_gates = old_spec.get("schedulingGates") or []
    if any(g not in old_gates for g in new_spec.get("schedulingGates") or []):
        raise PodRejected(
            422,
            [
                (
                    "spec.schedulingGates",
                    "Forbidden: only deletion is allowed, but found new scheduling gate",
                )
            ],
        )


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
