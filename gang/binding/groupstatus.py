"""The status each gang API's users and operators read, written in that API's own words.

An operator reads the status of the object it created, in the shapes its API defines: the
Kubeflow Training Operator v1 creates no pod until its Volcano PodGroup leaves ``Pending``, and
native tooling waits for ``PodGroupScheduled`` (1.36) or ``PodGroupInitiallyScheduled`` (1.37).
So the gang's one state is rendered per API here: Coscheduling's phases and counts (shared by
its older ``scheduling.sigs.k8s.io`` release), Volcano's phases and conditions, and the native
API's conditions, which never go back from True.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from gang.models.groupapis import NATIVE, NATIVE_CONDITION, VOLCANO
from gang.models.podgroup import RESERVED_CONDITION, PodGroupInfo, held_nodes_text
from gang.scheduling.gang import Gang
from gang.scheduling.plugins import unsupported_message

#: Volcano's reasons and its "ready" reason (which Volcano writes as a sentence)
VOLCANO_NOT_ENOUGH = "NotEnoughResources"
#: the reason of a gang that cannot fit the cluster even empty, distinct from "not now"
NEVER_FITS_REASON = "NeverFits"
#: the condition type of a gang that will not run as things are (Volcano's word for it)
UNSCHEDULABLE_CONDITION = "Unschedulable"
VOLCANO_READY = "tasks in gang are ready to be scheduled"

Status = dict[str, Any]
#: does the cluster's allocatable hold these requests at all (canonical units)?
FitsCluster = Callable[[Mapping[str, int]], bool | None]


def rfc3339_now() -> str:
    """The current time as the API writes it (RFC 3339, whole seconds, UTC); formatted once a
    second (every Event carries it)."""
    return rfc3339_second(int(time.time()))


@functools.lru_cache(maxsize=1)
def rfc3339_second(second: int) -> str:
    """``rfc3339`` of a whole epoch second, remembered for the last one asked."""
    return rfc3339(second)


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    previous: Mapping[str, Any], kind: str, state: str, reason: str, message: str
) -> Status:
    """A condition keeping its lastTransitionTime while its status does not change."""
    old = previous_condition(previous, kind)
    since = old.get("lastTransitionTime") if old and old.get("status") == state else rfc3339_now()
    return {
        "type": kind,
        "status": state,
        "reason": reason,
        "message": message[:1024],
        "lastTransitionTime": since,
    }


def previous_condition(previous: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next(
        (
            c
            for c in previous.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == kind
        ),
        None,
    )


def reserved_condition(gang: Gang, previous: Mapping[str, Any]) -> Status | None:
    """``Reserved``: True while capacity is held for the gang (which nodes, expected start);
    False after a reservation expired, until the gang places or may reserve again."""
    res = gang.reservation
    if res is not None:
        return condition(
            previous,
            RESERVED_CONDITION,
            "True",
            "CapacityReserved",
            f"{held_nodes_text(res.nodes)}; expected start {rfc3339(res.start)}, once "
            f"{res.waiting_for} running pod(s) there finish; expires {rfc3339(res.expires)}",
        )
    if gang.reservation_expired is not None and time.time() < gang.reserve_after:
        return condition(
            previous, RESERVED_CONDITION, "False", "ReservationExpired", gang.reservation_expired
        )
    return None


def _by_type(previous: Mapping[str, Any]) -> dict[str, Status]:
    """The conditions already written, by type (any writer's: an API that merges conditions by
    type keeps the ones gang does not own); one without a type is not carried over."""
    return {
        c["type"]: dict(c)
        for c in previous.get("conditions") or []
        if isinstance(c, Mapping) and isinstance(c.get("type"), str)
    }


def _set_reserved(conditions: dict[str, Status], gang: Gang, previous: Mapping[str, Any]) -> None:
    """Put gang's ``Reserved`` condition in, or take it out when the gang holds nothing."""
    reserved = reserved_condition(gang, previous)
    if reserved is not None:
        conditions[RESERVED_CONDITION] = reserved
    else:
        conditions.pop(RESERVED_CONDITION, None)


class _Counts:
    """How many members are bound, running, done."""

    def __init__(self, gang: Gang | None) -> None:
        members = list(gang.members.values()) if gang is not None else []
        self.total = len(members)
        self.scheduled = sum(1 for p in members if p.assigned)
        self.running = sum(1 for p in members if p.assigned and p.phase == "Running")
        self.succeeded = sum(1 for p in members if p.phase == "Succeeded")
        self.failed = sum(1 for p in members if p.phase == "Failed")


def coscheduling_status(gang: Gang, previous: Mapping[str, Any]) -> Status:
    """Coscheduling's fields and phases (``kubectl get pg`` shows them)."""
    n = _Counts(gang)
    need = gang.min_member
    if n.failed and n.running + n.succeeded < need:
        phase = "Failed"
    elif n.succeeded >= need and n.running == 0:
        phase = "Finished"
    elif n.running + n.succeeded >= need:
        phase = "Running"
    elif n.scheduled >= need:
        phase = "Scheduled"
    elif gang.reserved or gang.last_failure is not None:
        phase = "Scheduling"
    else:
        phase = "Pending"
    status: Status = {
        "phase": phase,
        "scheduled": n.scheduled,
        "running": n.running,
        "succeeded": n.succeeded,
        "failed": n.failed,
    }
    start = previous.get("scheduleStartTime")
    if start is None and phase != "Pending":
        start = rfc3339_now()
    if start is not None:
        status["scheduleStartTime"] = start
    conditions = []
    if gang.podgroup is not None and gang.podgroup.error is not None:
        conditions.append(condition(previous, "Valid", "False", "InvalidSpec", gang.podgroup.error))
    refused = unsupported_message(gang)
    if refused is not None:
        conditions.append(condition(previous, "Supported", "False", "UnsupportedField", refused))
    if gang.preempted_by is not None:
        conditions.append(_disruption(gang, gang.preempted_by, previous))
    reserved = reserved_condition(gang, previous)
    if reserved is not None:
        conditions.append(reserved)
    if phase in ("Pending", "Scheduling"):
        message = gang.last_failure or f"{gang.placed()}/{need} members placed"
        reason = NEVER_FITS_REASON if gang.never_fits is not None else "Unschedulable"
        conditions.append(condition(previous, "Scheduled", "False", reason, message))
        if gang.never_fits is not None:
            conditions.append(never_fits_condition(gang, previous))
    elif phase != "Failed":
        conditions.append(
            condition(
                previous,
                "Scheduled",
                "True",
                "GangScheduled",
                f"{n.scheduled} member(s) bound, minMember {need}",
            )
        )
    status["conditions"] = conditions
    return status


def never_fits_condition(gang: Gang, previous: Mapping[str, Any]) -> Status:
    """``Unschedulable`` True, reason ``NeverFits``: the gang cannot run on the cluster as it is,
    not even with every node empty, so waiting alone will not place it. Coscheduling's phases
    have no word for that (its ``Scheduling`` reads as "in progress", ``Failed`` means failed
    members and makes operators fail the job), so the phase stays and this condition says it,
    in the type Volcano users know; it goes once the cluster or the gang changes so it fits."""
    return condition(
        previous,
        UNSCHEDULABLE_CONDITION,
        "True",
        NEVER_FITS_REASON,
        "will not run on the cluster as it is, not even with every node empty (it is placed "
        f"once nodes are added or the gang asks for less): {gang.never_fits}",
    )


def _disruption(gang: Gang, by: str, previous: Mapping[str, Any]) -> Status:
    if gang.reclaimed:
        return condition(
            previous, "DisruptionTarget", "True", "Reclaimed", f"members reclaimed: {by}"
        )
    return condition(
        previous, "DisruptionTarget", "True", "PreemptionByScheduler", f"members preempted by {by}"
    )


def volcano_status(
    group: PodGroupInfo, gang: Gang | None, previous: Mapping[str, Any], fits: FitsCluster
) -> Status:
    """Volcano's phases: Pending → Inqueue (its pods may be created: the Training Operator v1
    waits for this) → Running (minMember bound) → Completed; its ``Unschedulable`` and
    ``Scheduled`` conditions, each kept once written (as Volcano does)."""
    n = _Counts(gang)
    need = gang.min_member if gang is not None else group.min_member
    was = previous.get("phase")
    fit = fits(group.min_resources) if group.error is None else False
    unschedulable: str | None = None
    reason = VOLCANO_NOT_ENOUGH
    if group.error is not None:
        unschedulable = f"invalid PodGroup: {group.error}"
    elif fit is False:
        reason = NEVER_FITS_REASON
        unschedulable = (
            "minResources do not fit the cluster's allocatable capacity: it can never run here"
        )
    elif gang is not None and gang.last_failure is not None and n.scheduled < need:
        if gang.never_fits is not None:
            reason = NEVER_FITS_REASON
        unschedulable = (
            f"{need - min(gang.placed(), need)}/{n.total} tasks in gang unschedulable: "
            f"{gang.last_failure}"
        )
    if n.total and n.succeeded + n.failed >= n.total and n.succeeded + n.failed >= need:
        phase = "Completed"
    elif n.scheduled >= need and n.total:
        phase = "Running"
    elif was in ("Inqueue", "Running", "Unknown") or (fit and group.error is None):
        phase = "Inqueue"
    else:
        phase = "Pending"
    conditions = _by_type(previous)
    if unschedulable is not None:
        conditions[UNSCHEDULABLE_CONDITION] = _volcano_condition(
            previous, UNSCHEDULABLE_CONDITION, reason, unschedulable
        )
    if phase in ("Running", "Completed"):
        conditions["Scheduled"] = _volcano_condition(previous, "Scheduled", VOLCANO_READY, "")
    if gang is not None:
        _set_reserved(conditions, gang, previous)
        if gang.preempted_by is not None:
            conditions["DisruptionTarget"] = _disruption(gang, gang.preempted_by, previous)
    return {
        "phase": phase,
        "running": n.running,
        "succeeded": n.succeeded,
        "failed": n.failed,
        "conditions": list(conditions.values()),
    }


def _volcano_condition(previous: Mapping[str, Any], kind: str, reason: str, message: str) -> Status:
    made = condition(previous, kind, "True", reason, message)
    old = previous_condition(previous, kind)
    same = old is not None and old.get("status") == "True" and old.get("reason") == reason
    made["transitionID"] = str(old.get("transitionID")) if same and old else str(uuid.uuid4())
    return made


def native_status(group: PodGroupInfo, gang: Gang, previous: Mapping[str, Any]) -> Status:
    """The native ``PodGroupScheduled`` / ``PodGroupInitiallyScheduled`` condition (True once
    minCount is bound, and never False again), ``DisruptionTarget`` while preempted, and
    gang's ``Reserved``; other writers' conditions are kept."""
    kind = NATIVE_CONDITION.get(group.version, "PodGroupScheduled")
    conditions = _by_type(previous)
    n = _Counts(gang)
    old = conditions.get(kind)
    if old is None or old.get("status") != "True":
        if n.scheduled >= gang.min_member:
            conditions[kind] = condition(
                previous,
                kind,
                "True",
                "Scheduled",
                f"{n.scheduled} pod(s) scheduled, minCount {gang.min_member}",
            )
        elif group.error is not None or gang.last_failure is not None:
            message = group.error or gang.last_failure or ""
            conditions[kind] = condition(previous, kind, "False", "Unschedulable", message)
    if gang.preempted_by is not None:
        conditions["DisruptionTarget"] = _disruption(gang, gang.preempted_by, previous)
    _set_reserved(conditions, gang, previous)
    return {**previous, "conditions": list(conditions.values())}


def group_status(
    group: PodGroupInfo, gang: Gang | None, previous: Mapping[str, Any], fits: FitsCluster
) -> Status | None:
    """The status to write for ``group`` in its own API, or None when there is none to write
    (no pods yet, except for Volcano, whose operators wait for ``Inqueue`` before making them)."""
    if group.api == VOLCANO:
        return volcano_status(group, gang, previous, fits)
    if gang is None:
        return None
    if group.api == NATIVE:
        return native_status(group, gang, previous)
    return coscheduling_status(gang, previous)
