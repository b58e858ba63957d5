"""Server-side printed tables, so ``kubectl get`` against the simulator reads like a real cluster.

kubectl does not format objects itself any more: ``kubectl get`` sends
``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`` and prints whatever ``Table`` the
server answers with. A server that ignores the header makes kubectl fall back to a bare NAME/AGE
listing, which hides exactly what an operator looks at while a gang is being scheduled: which pods
are bound (NODE), which nodes are cordoned, how far a PodGroup got. So the simulator answers the
table request the way kube-apiserver does, with the columns of its built-in printers
(``pkg/printers/internalversion/printers.go``) and the ages of ``duration.HumanDuration``.

Like kube-apiserver, the table always carries the ``-o wide`` columns (priority 1); kubectl drops
them unless asked. Everything here is a pure function of plain dicts, so the HTTP layer only
decides *whether* to answer with a table (:func:`wants_table`) and hands over the objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

__all__ = [
    "TABLE_V1",
    "TABLE_V1BETA1",
    "build_table",
    "human_duration",
    "table_api_version",
    "translate_timestamp_since",
    "wants_table",
]

TABLE_V1: Final = "meta.k8s.io/v1"
TABLE_V1BETA1: Final = "meta.k8s.io/v1beta1"
_TABLE_VERSIONS: Final = {"v1": TABLE_V1, "v1beta1": TABLE_V1BETA1}
_INCLUDE_OBJECT: Final = ("None", "Metadata", "Object")

# --------------------------------------------------------------------------------------------
# Content negotiation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _MediaRange:
    type: str
    subtype: str
    params: dict[str, str]
    q: float


def _parse_accept(header: str) -> list[_MediaRange]:
    """Accept clauses, best first: by q (descending), then concrete before wildcard, then order.

    This is the ordering goautoneg gives kube-apiserver; clauses with q=0 are refused outright.
    """
    ranges: list[_MediaRange] = []
    for clause in header.split(","):
        parts = clause.split(";")
        media = parts[0].strip().lower()
        if not media:
            continue
        type_, _, subtype = media.partition("/")
        params: dict[str, str] = {}
        q = 1.0
        for raw in parts[1:]:
            key, sep, value = raw.partition("=")
            if not sep:
                continue
            key, value = key.strip(), value.strip().strip('"')
            if key.lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                params[key] = value
        if q > 0:
            ranges.append(_MediaRange(type_.strip(), subtype.strip() or "*", params, q))
    ranges.sort(key=lambda r: (-r.q, r.type == "*", r.subtype == "*"))
    return ranges


def _negotiated_table_version(accept_header: str | None) -> str | None:
    """The Table apiVersion the client would get from kube-apiserver, or None for a plain object.

    The server walks the clauses best first. A JSON clause without ``as`` means "the object
    itself" and ends the search; a clause asking for a transformation the server cannot do (other
    kinds, other groups, unknown versions) is skipped, as kube-apiserver skips it.
    """
    if not accept_header:
        return None
    for clause in _parse_accept(accept_header):
        if clause.type not in ("application", "*") or clause.subtype not in ("json", "*"):
            continue
        if clause.type == "*" and clause.subtype != "*":
            continue
        as_kind = clause.params.get("as")
        if as_kind is None:
            return None
        if as_kind == "Table" and clause.params.get("g") == "meta.k8s.io":
            version = _TABLE_VERSIONS.get(clause.params.get("v", ""))
            if version is not None:
                return version
    return None


def wants_table(accept_header: str | None) -> bool:
    """True if the Accept header asks for a ``meta.k8s.io`` Table (v1 or v1beta1) in JSON."""
    return _negotiated_table_version(accept_header) is not None


def table_api_version(accept_header: str) -> str:
    """``meta.k8s.io/v1`` or ``meta.k8s.io/v1beta1``, whichever the client prefers.

    Without any table clause the answer is ``meta.k8s.io/v1``, the version current servers use.
    """
    return _negotiated_table_version(accept_header) or TABLE_V1


# --------------------------------------------------------------------------------------------
# Ages
# --------------------------------------------------------------------------------------------


def human_duration(delta: timedelta) -> str:
    """Go's ``k8s.io/apimachinery/pkg/util/duration.HumanDuration``, digit for digit.

    About two significant figures: seconds below 2 minutes, ``XmYs`` below 10 minutes, minutes
    below 3 hours, ``XhYm`` below 8 hours, hours below 2 days, ``XdYh`` below 8 days, days below
    2 years, ``XyYd`` below 8 years, then years. A clock skew of up to 2 s reads as ``0s``.
    """
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    # Go's int(d.Seconds()) truncates toward zero.
    seconds = micros // 1_000_000 if micros >= 0 else -(-micros // 1_000_000)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years = hours // 24 // 365
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{years}y" if rest == 0 else f"{years}y{rest}d"
    return f"{years}y"


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def translate_timestamp_since(timestamp: Any, now: datetime) -> str:
    """The printers' age cell: ``<unknown>`` for a missing timestamp, else HumanDuration."""
    return _since(_parse_time(timestamp), now)


def _since(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "<unknown>"
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return human_duration(now - moment)


# --------------------------------------------------------------------------------------------
# Small accessors over decoded JSON (any field may be missing, null or of the wrong type)
# --------------------------------------------------------------------------------------------

_EMPTY: Final[Mapping[str, Any]] = {}


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else _EMPTY


def _maps(obj: Any, key: str) -> list[Mapping[str, Any]]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _int(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _name(obj: Mapping[str, Any]) -> str:
    return _str(_map(obj, "metadata"), "name")


def _age(obj: Mapping[str, Any], now: datetime) -> str:
    return translate_timestamp_since(_map(obj, "metadata").get("creationTimestamp"), now)


def _or_none(value: str) -> str:
    return value or "<none>"


# --------------------------------------------------------------------------------------------
# Column definitions
# --------------------------------------------------------------------------------------------


def _col(
    name: str, description: str, *, type_: str = "string", fmt: str = "", priority: int = 0
) -> dict[str, Any]:
    """A ``TableColumnDefinition``; Go writes every field, empty ones included."""
    return {
        "name": name,
        "type": type_,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


_NAME_COL: Final = _col(
    "Name",
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Cannot be updated.",
    fmt="name",
)
_AGE_COL: Final = _col(
    "Age",
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. Populated by the system. Read-only.",
)

_POD_COLUMNS: Final = (
    _NAME_COL,
    _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "The aggregate status of the containers in this pod."),
    _col(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    _AGE_COL,
    _col(
        "IP", "IP address allocated to the pod, routable at least within the cluster.", priority=1
    ),
    _col("Node", "The name of the node this pod is bound to (spec.nodeName).", priority=1),
    _col(
        "Nominated Node",
        "The node a preempting pod expects to run on once the victims are gone "
        "(status.nominatedNodeName).",
        priority=1,
    ),
    _col(
        "Readiness Gates",
        "If specified, all readiness gates will be evaluated for pod readiness.",
        priority=1,
    ),
)

_NODE_COLUMNS: Final = (
    _NAME_COL,
    _col("Status", "The status of the node"),
    _col("Roles", "The roles of the node"),
    _AGE_COL,
    _col("Version", "Kubelet Version reported by the node."),
    _col("Internal-IP", "The node's first InternalIP address (status.addresses).", priority=1),
    _col("External-IP", "The node's first ExternalIP address (status.addresses).", priority=1),
    _col("OS-Image", "OS Image reported by the node from /etc/os-release.", priority=1),
    _col("Kernel-Version", "Kernel Version reported by the node from 'uname -r'.", priority=1),
    _col(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node through runtime remote API.",
        priority=1,
    ),
)

_PODGROUP_COLUMNS: Final = (
    _NAME_COL,
    _col("Phase", "Current phase of the PodGroup (status.phase)."),
    _col(
        "MinMember",
        "Minimum number of members that must be placed together (spec.minMember).",
        type_="integer",
    ),
    _col("Scheduled", "Members bound to a node (status.scheduled).", type_="integer"),
    _col("Running", "Members running (status.running).", type_="integer"),
    _AGE_COL,
)

#: Volcano's CRD printer columns (``manifests/extra-apis/crd-volcano-podgroups.yaml``)
_VOLCANO_PODGROUP_COLUMNS: Final = (
    _NAME_COL,
    _col("STATUS", ""),
    _col("minMember", "", type_="integer"),
    _col("RUNNINGS", "", type_="integer"),
    _col("AGE", "", type_="date"),
    _col("QUEUE", "", priority=1),
)

_EVENT_COLUMNS: Final = (
    _col("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    _col("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    _col(
        "Reason",
        "This should be a short, machine understandable string that gives the reason "
        "for the transition into the object's current status.",
    ),
    _col("Object", "The object that this event is about."),
    _col("Subobject", "The field of the object this event is about (fieldPath).", priority=1),
    _col("Source", "The component reporting this event.", priority=1),
    _col("Message", "A human-readable description of the status of this operation."),
    _col("First Seen", "The time at which the event was first recorded.", priority=1),
    _col("Count", "The number of times this event has occurred.", priority=1),
    _col("Name", _NAME_COL["description"], fmt="name", priority=1),
)

_LEASE_COLUMNS: Final = (
    _NAME_COL,
    _col("Holder", "holderIdentity contains the identity of the holder of a current lease."),
    _AGE_COL,
)

_NAMESPACE_COLUMNS: Final = (
    _NAME_COL,
    _col("Status", "The status of the namespace"),
    _AGE_COL,
)

_RESOURCE_CLAIM_COLUMNS: Final = (
    _NAME_COL,
    _col("State", "A summary of the current state (allocated, pending, reserved, etc.)."),
    _AGE_COL,
)

_RESOURCE_SLICE_COLUMNS: Final = (
    _NAME_COL,
    _col("Node", "NodeName identifies the node which provides the resources in this pool."),
    _col("Driver", "Driver identifies the DRA driver providing the capacity information."),
    _col("Pool", "Name is used to identify the pool."),
    _AGE_COL,
)

_DEFAULT_COLUMNS: Final = (_NAME_COL, _AGE_COL)


# --------------------------------------------------------------------------------------------
# Row printers: each returns the row without its "object" (cells, and conditions if any)
# --------------------------------------------------------------------------------------------

_POD_SUCCEEDED_CONDITIONS: Final = (
    {
        "type": "Completed",
        "status": "True",
        "reason": "Succeeded",
        "message": "The pod has completed successfully.",
    },
)
_POD_FAILED_CONDITIONS: Final = (
    {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."},
)


def _condition_true(conditions: list[Mapping[str, Any]], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


def _terminated_reason(terminated: Mapping[str, Any], prefix: str = "") -> str:
    """``Reason``, else ``Signal:N``, else ``ExitCode:N`` for a terminated container state."""
    reason = _str(terminated, "reason")
    if reason:
        return prefix + reason
    signal = _int(terminated, "signal") or 0
    if signal:
        return f"{prefix}Signal:{signal}"
    return f"{prefix}ExitCode:{_int(terminated, 'exitCode') or 0}"


class _RestartClock:
    """The latest ``lastState.terminated.finishedAt`` seen, as the printer tracks it."""

    def __init__(self) -> None:
        self.latest: datetime | None = None

    def see(self, status: Mapping[str, Any]) -> None:
        last = _map(_map(status, "lastState"), "terminated")
        finished = _parse_time(last.get("finishedAt"))
        if finished is not None and (self.latest is None or finished > self.latest):
            self.latest = finished


def _pod_row(pod: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """``printPod``: READY, STATUS and RESTARTS exactly as kubectl derives them."""
    spec, status, meta = _map(pod, "spec"), _map(pod, "status"), _map(pod, "metadata")
    conditions = _maps(status, "conditions")
    phase = _str(status, "phase")

    reason = _str(status, "reason") or phase
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    init_specs = _maps(spec, "initContainers")
    sidecars = {_str(c, "name") for c in init_specs if c.get("restartPolicy") == "Always"}
    total = len(_maps(spec, "containers")) + len(sidecars)
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    clock, sidecar_clock = _RestartClock(), _RestartClock()

    initializing = False
    for index, cs in enumerate(_maps(status, "initContainerStatuses")):
        count = _int(cs, "restartCount") or 0
        restarts += count
        clock.see(cs)
        is_sidecar = _str(cs, "name") in sidecars
        if is_sidecar:
            sidecar_restarts += count
            sidecar_clock.see(cs)
        state = _map(cs, "state")
        terminated = state.get("terminated")
        waiting = _map(state, "waiting")
        if isinstance(terminated, Mapping) and (_int(terminated, "exitCode") or 0) == 0:
            continue
        if is_sidecar and cs.get("started") is True:
            if cs.get("ready") is True:
                ready += 1
            continue
        if isinstance(terminated, Mapping):
            reason = _terminated_reason(terminated, "Init:")
        elif _str(waiting, "reason") and _str(waiting, "reason") != "PodInitializing":
            reason = "Init:" + _str(waiting, "reason")
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_true(conditions, "Initialized"):
        restarts = sidecar_restarts
        clock = sidecar_clock
        has_running = False
        for cs in reversed(_maps(status, "containerStatuses")):
            restarts += _int(cs, "restartCount") or 0
            clock.see(cs)
            state = _map(cs, "state")
            terminated = state.get("terminated")
            if _str(_map(state, "waiting"), "reason"):
                reason = _str(_map(state, "waiting"), "reason")
            elif isinstance(terminated, Mapping):
                reason = _terminated_reason(terminated)
            elif cs.get("ready") is True and (
                isinstance(state.get("running"), Mapping) or not state
            ):
                # A real kubelet always reports state.running for a ready container; a
                # simulated one may leave state out entirely, which still means "running".
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"

    if meta.get("deletionTimestamp") is not None:
        if _str(status, "reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts != 0 and clock.latest is not None:
        restarts_cell = f"{restarts} ({_since(clock.latest, now)} ago)"

    pod_ips = _maps(status, "podIPs")
    pod_ip = _str(pod_ips[0], "ip") if pod_ips else _str(status, "podIP")
    gates = _maps(spec, "readinessGates")
    readiness = "<none>"
    if gates:
        passed = 0
        for gate in gates:
            for cond in conditions:
                if cond.get("type") == gate.get("conditionType"):
                    passed += cond.get("status") == "True"
                    break
        readiness = f"{passed}/{len(gates)}"

    row: dict[str, Any] = {
        "cells": [
            _name(pod),
            f"{ready}/{total}",
            reason,
            restarts_cell,
            _age(pod, now),
            _or_none(pod_ip),
            _or_none(_str(spec, "nodeName")),
            _or_none(_str(status, "nominatedNodeName")),
            readiness,
        ]
    }
    if phase == "Succeeded":
        row["conditions"] = [dict(c) for c in _POD_SUCCEEDED_CONDITIONS]
    elif phase == "Failed":
        row["conditions"] = [dict(c) for c in _POD_FAILED_CONDITIONS]
    return row


_ROLE_PREFIX: Final = "node-role.kubernetes.io/"
_ROLE_LABEL: Final = "kubernetes.io/role"


def _node_roles(labels: Mapping[str, Any]) -> list[str]:
    roles: set[str] = set()
    for key, value in labels.items():
        if key.startswith(_ROLE_PREFIX) and key[len(_ROLE_PREFIX) :]:
            roles.add(key[len(_ROLE_PREFIX) :])
        elif key == _ROLE_LABEL and isinstance(value, str) and value:
            roles.add(value)
    return sorted(roles)


def _node_address(status: Mapping[str, Any], type_: str) -> str:
    for address in _maps(status, "addresses"):
        if address.get("type") == type_:
            return _str(address, "address")
    return "<none>"


def _node_row(node: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """``printNode``: Ready/NotReady/Unknown from the Ready condition, then cordon state."""
    spec, status = _map(node, "spec"), _map(node, "status")
    states: list[str] = []
    for cond in _maps(status, "conditions"):
        if cond.get("type") == "Ready":
            states = ["Ready" if cond.get("status") == "True" else "NotReady"]
    if not states:
        states = ["Unknown"]
    if spec.get("unschedulable") is True:
        states.append("SchedulingDisabled")
    info = _map(status, "nodeInfo")
    return {
        "cells": [
            _name(node),
            ",".join(states),
            ",".join(_node_roles(_map(_map(node, "metadata"), "labels"))) or "<none>",
            _age(node, now),
            _str(info, "kubeletVersion"),
            _node_address(status, "InternalIP"),
            _node_address(status, "ExternalIP"),
            _str(info, "osImage") or "<unknown>",
            _str(info, "kernelVersion") or "<unknown>",
            _str(info, "containerRuntimeVersion") or "<unknown>",
        ]
    }


def _podgroup_row(group: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    spec, status = _map(group, "spec"), _map(group, "status")
    return {
        "cells": [
            _name(group),
            _str(status, "phase"),
            _int(spec, "minMember"),  # None (kubectl: <none>) if the spec lacks it
            _int(status, "scheduled") or 0,
            _int(status, "running") or 0,
            _age(group, now),
        ]
    }


def _volcano_podgroup_row(group: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A custom resource's cells: what each column's JSONPath finds, None where it is absent."""
    spec, status = _map(group, "spec"), _map(group, "status")
    return {
        "cells": [
            _name(group),
            status.get("phase"),
            _int(spec, "minMember"),
            _int(status, "running"),
            _age(group, now),
            spec.get("queue"),
        ]
    }


def _first(obj: Mapping[str, Any], *keys: str) -> Any:
    """The first present, non-empty value among keys (core/v1 and events.k8s.io/v1 spellings)."""
    for key in keys:
        value = obj.get(key)
        if value not in (None, "", 0, {}):
            return value
    return None


def _event_row(event: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """``printEvent``; reads both core/v1 fields and their events.k8s.io/v1 names."""
    first_seen = translate_timestamp_since(
        _first(event, "firstTimestamp", "deprecatedFirstTimestamp", "eventTime"), now
    )
    last_time = _first(event, "lastTimestamp", "deprecatedLastTimestamp")
    last_seen = translate_timestamp_since(last_time, now) if last_time else first_seen
    if first_seen == "<unknown>" and not last_time:
        last_seen = _age(event, now)
    count = _first(event, "count", "deprecatedCount")
    series = _map(event, "series")
    if series:
        last_seen = translate_timestamp_since(series.get("lastObservedTime"), now)
        count = series.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count == 0:
        count = 1

    involved = _map(event, "involvedObject") or _map(event, "regarding")
    kind = _str(involved, "kind").lower()
    target = f"{kind}/{_str(involved, 'name')}" if _str(involved, "name") else kind

    source = _map(event, "source") or _map(event, "deprecatedSource")
    component = _str(source, "component") or _str(event, "reportingController")
    instance = _str(source, "host") or _str(event, "reportingInstance")
    source_cell = f"{component}, {instance}" if instance else component

    message = _str(event, "message") or _str(event, "note")
    return {
        "cells": [
            last_seen,
            _str(event, "type"),
            _str(event, "reason"),
            target,
            _str(involved, "fieldPath"),
            source_cell,
            message.strip(),
            first_seen,
            count,
            _name(event),
        ]
    }


def _lease_row(lease: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    return {"cells": [_name(lease), _str(_map(lease, "spec"), "holderIdentity"), _age(lease, now)]}


def _namespace_row(namespace: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    phase = _str(_map(namespace, "status"), "phase") or "Active"
    return {"cells": [_name(namespace), phase, _age(namespace, now)]}


def _resource_claim_state(claim: Mapping[str, Any]) -> str:
    """printers.go's resourceClaimState: deleted / pending / allocated,reserved."""
    deleted = bool(_map(claim, "metadata").get("deletionTimestamp"))
    status = _map(claim, "status")
    states = ["deleted"] if deleted else []
    if not status.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _resource_claim_row(claim: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    return {"cells": [_name(claim), _resource_claim_state(claim), _age(claim, now)]}


def _resource_slice_row(resource_slice: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    spec = _map(resource_slice, "spec")
    return {
        "cells": [
            _name(resource_slice),
            _str(spec, "nodeName"),
            _str(spec, "driver"),
            _str(_map(spec, "pool"), "name"),
            _age(resource_slice, now),
        ]
    }


def _default_row(obj: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    return {"cells": [_name(obj), _age(obj, now)]}


_RowPrinter = Callable[[Mapping[str, Any], datetime], dict[str, Any]]

_PRINTERS: Final[dict[str, tuple[tuple[dict[str, Any], ...], _RowPrinter]]] = {
    "pods": (_POD_COLUMNS, _pod_row),
    "nodes": (_NODE_COLUMNS, _node_row),
    "podgroups": (_PODGROUP_COLUMNS, _podgroup_row),
    "podgroups.scheduling.volcano.sh": (_VOLCANO_PODGROUP_COLUMNS, _volcano_podgroup_row),
    "events": (_EVENT_COLUMNS, _event_row),
    "leases": (_LEASE_COLUMNS, _lease_row),
    "namespaces": (_NAMESPACE_COLUMNS, _namespace_row),
    "resourceclaims": (_RESOURCE_CLAIM_COLUMNS, _resource_claim_row),
    "resourceslices": (_RESOURCE_SLICE_COLUMNS, _resource_slice_row),
}


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


def _row_object(
    obj: Mapping[str, Any], include_object: str, api_version: str
) -> Mapping[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {},
    }


def build_table(
    plural: str,
    objects: Sequence[Mapping[str, Any]],
    *,
    api_version: str,
    resource_version: str,
    include_object: str = "Metadata",
    now: datetime | None = None,
    continue_token: str | None = None,
) -> dict[str, Any]:
    """A ``Table`` of ``objects`` (all of resource ``plural``) as kube-apiserver would print it.

    ``include_object`` is the ``includeObject`` query parameter: ``None`` leaves ``object`` out
    of each row, ``Metadata`` (the default, also for ``""``) gives a ``PartialObjectMetadata``
    in the table's own group version, ``Object`` the whole object. Any other value raises
    ``ValueError`` with kube-apiserver's message; answer it with 400 BadRequest.

    The rows share sub-dicts with ``objects`` (no copies): serialize the table, don't mutate it.
    """
    include = include_object or "Metadata"
    if include not in _INCLUDE_OBJECT:
        raise ValueError(f"unrecognized includeObject value: {json.dumps(include_object)}")
    when = now if now is not None else datetime.now(UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    columns, printer = _PRINTERS.get(plural, (_DEFAULT_COLUMNS, _default_row))

    rows: list[dict[str, Any]] = []
    for obj in objects:
        row = printer(obj, when)
        embedded = _row_object(obj, include, api_version)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)

    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": metadata,
        "columnDefinitions": [dict(c) for c in columns],
        "rows": rows,
    }
