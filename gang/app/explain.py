"""Why is this gang pending, and what would unblock it: the scheduler's own knowledge, as data.

A pending gang is when users need a scheduler most, and the answer is spread over the
scheduler's memory: its queue (what is ahead), the last cycle's placement failure (which rule
stopped which member on how many nodes), the never-fits judgement, the reservation it holds
and the preemption it waits on. ``explain`` reads all of it, changes nothing, and returns one
JSON-able answer: a state (one word a script can branch on), a sentence, the details, and
suggestions that would unblock the gang. ``/debug/explain/NS/NAME`` serves it, ``gang explain``
and ``kubectl gang explain`` print it, and ``gang fit`` classifies its dry runs by it.

States, in the order they are judged:

- ``placed``: at least minMember members are bound or reserved (bound once Permit allows);
- ``invalid``: the group object is invalid (its error says why);
- ``queue-blocked``: its queue cannot take it now: the queue is unusable (invalid, closed,
  missing, not a leaf, or named twice), or the gang would take it past its limit;
- ``waiting-for-members``: fewer members exist than the gang needs;
- ``never``: it cannot fit this cluster even with every node empty;
- ``waiting-for-victims``: a preemption is evicting lower-priority gangs for it;
- ``reserved``: capacity is held for it until running pods finish (expected start given);
- ``rule-blocked``: no node passes a placement rule (affinity, spread, taints, volumes, ...)
  for some member, though the empty cluster would take it;
- ``capacity``: not enough free capacity now;
- ``queued``: not tried yet, or nothing recorded.
"""

from __future__ import annotations

import time
from functools import cmp_to_key
from typing import Any

from gang.app.scheduler import GangScheduler
from gang.models.quantity import units_text
from gang.queue.tree import display_name
from gang.scheduling.gang import Gang
from gang.scheduling.reservation import sorts_before
from gang.state.podinfo import PodInfo

PLACED, INVALID, MEMBERS, NEVER = "placed", "invalid", "waiting-for-members", "never"
QUEUE_BLOCKED = "queue-blocked"
VICTIMS, RESERVED, RULE, CAPACITY, QUEUED = (
    "waiting-for-victims",
    "reserved",
    "rule-blocked",
    "capacity",
    "queued",
)
#: Filter reasons about capacity (NodeResourcesFit's words); any other reason is a rule
CAPACITY_REASONS = ("Insufficient ", "Too many pods")
#: gangs ahead of it listed at most
AHEAD_SHOWN = 10


def find_gang(scheduler: GangScheduler, namespace: str, name: str) -> Gang | None:
    """The gang named ``name`` in ``namespace``: a group (``train`` or ``volcano:train``) or a
    lone pod; an unqualified name matching one gang of another API finds it too."""
    gangs = [g for g in scheduler.state.gangs.values() if g.key.namespace == namespace]
    exact = [g for g in gangs if (g.key.group or g.key.pod) == name]
    if exact:
        return exact[0]
    loose = [g for g in gangs if g.key.group.partition(":")[2] == name]
    return loose[0] if len(loose) == 1 else None


def explain(scheduler: GangScheduler, gang: Gang) -> dict[str, Any]:
    """Everything the scheduler knows about why ``gang`` is (not) placed, and what would help."""
    members = list(gang.members.values())
    bound = gang.bound()
    answer: dict[str, Any] = {
        "gang": str(gang.key),
        "api": gang.podgroup.api if gang.podgroup is not None else None,
        "min_member": gang.min_member,
        "members": len(members),
        "bound": len(bound),
        "reserved": len(gang.reserved),
        "pending": len(gang.pending()),
        "nodes": sorted({p.node_name for p in bound} | set(gang.reserved.values())),
        "queue": _queue(scheduler, gang),
        "why": gang.last_failure,
    }
    share = queue_share(scheduler, gang)
    if share is not None:
        answer["queue_share"] = share
    if gang.topology is not None:
        answer["topology"] = {
            "topology": gang.topology.topology,
            "asks": gang.topology.describe(),
            "levels": list(gang.topology.levels),
        }
    state, summary, unblock = _judge(scheduler, gang)
    answer.update(state=state, summary=summary, unblock=unblock)
    failure = gang.last_unplaceable
    if failure is not None and state not in (PLACED, NEVER, INVALID):
        member = failure.member[1] if failure.member is not None else None
        answer["blocked_member"] = {
            "pod": member,
            "placed_before_it": failure.placed,
            "needed": failure.needed,
            "nodes_rejecting": dict(sorted(failure.reasons.items(), key=lambda kv: -kv[1])),
        }
    if gang.never_fits is not None:
        answer["never"] = {"why": gang.never_fits, "members_that_fit_empty": gang.never_placed}
    res = gang.reservation
    if res is not None:
        now = time.time()
        answer["reservation"] = {
            "nodes": res.nodes,
            "expected_start": round(res.start, 3),
            "starts_in_seconds": round(max(0.0, res.start - now), 1),
            "waiting_for_pods": res.waiting_for,
        }
    elif gang.reservation_refused is not None and state not in (PLACED, NEVER):
        answer["not_reserved_because"] = gang.reservation_refused
    if gang.preempting is not None:
        answer["preemption"] = {
            "kind": "reclaim" if gang.preempting.reclaim else "preemption",
            "evicting": gang.preempting.summary,
            "victim_pods": len(gang.preempting.victims),
        }
    if gang.preempted_by is not None:  # a victim: who took its members, and why
        answer["disrupted"] = {
            "kind": "reclaimed" if gang.reclaimed else "preempted",
            "by": gang.preempted_by,
        }
    return answer


def _judge(scheduler: GangScheduler, gang: Gang) -> tuple[str, str, list[str]]:
    need = gang.min_member
    placed = gang.placed()
    missing = need - len(gang.members)
    if gang.podgroup is not None and gang.podgroup.error is not None:
        return INVALID, f"its group object is invalid: {gang.podgroup.error}", ["fix the spec"]
    if placed >= need and not gang.any_pending():
        return PLACED, f"{placed} member(s) placed (minMember {need})", []
    blocked = _queue_blocked(scheduler, gang)
    if blocked is not None and placed < need:
        return QUEUE_BLOCKED, blocked, _queue_help(blocked)
    if placed >= need:
        return PLACED, f"{placed} member(s) placed, {len(gang.pending())} more wait", []
    waiting = gang.last_failure is not None and "waiting for members" in gang.last_failure
    if missing > 0 and (gang.placeholders or waiting):
        held = " (capacity held for the rest)" if gang.placeholders else ""
        return (
            MEMBERS,
            f"{len(gang.members)} of {need} members exist{held}: nothing is bound before "
            "minMember are there",
            [f"create {missing} more member(s), or lower minMember to {len(gang.members)}"],
        )
    if gang.never_fits is not None:
        return NEVER, f"it can never fit this cluster: {gang.never_fits}", _never_help(gang)
    if gang.preempting is not None:
        return (
            VICTIMS,
            f"evicting {gang.preempting.summary}; placed once they terminate",
            [],
        )
    res = gang.reservation
    if res is not None:
        wait = max(0.0, res.start - time.time())
        return (
            RESERVED,
            f"{len(res.nodes)} node(s) held for it; expected to start in {wait:.0f}s, once "
            f"{res.waiting_for} running pod(s) there finish",
            [],
        )
    failure = gang.last_unplaceable
    if failure is not None:
        rules = {r: n for r, n in failure.reasons.items() if not r.startswith(CAPACITY_REASONS)}
        capacity = {r: n for r, n in failure.reasons.items() if r.startswith(CAPACITY_REASONS)}
        if rules and not capacity:
            worst = max(rules, key=lambda r: rules[r])
            return (
                RULE,
                f"no node passes the rules for member {failure.member[1] if failure.member else ''}"
                f" ({worst} on {rules[worst]} node(s))",
                [f"relax the rule: {worst}", *_lower_min(gang, failure.placed)],
            )
        return CAPACITY, _capacity_summary(gang), _capacity_help(scheduler, gang, capacity)
    if gang.last_failure is not None:
        return CAPACITY, gang.last_failure, []
    return QUEUED, "not tried yet", []


def _queue_blocked(scheduler: GangScheduler, gang: Gang) -> str | None:
    """Why the gang's queue refuses it now, if it does: the cycle's own admission check, on
    its waiting members."""
    if gang.membership.error is not None:
        return gang.membership.error
    return scheduler.state.ledger.admit(gang, gang.pending())


def _queue_help(why: str) -> list[str]:
    if " at its limit" in why:
        return ["wait for the queue's running gangs to finish, or raise the queue's limit"]
    if "does not exist" in why:
        return ["create the queue, or name an existing one"]
    if "two queues" in why or "different queues" in why:
        return ["name one queue in all of the gang's objects"]
    return ["fix the queue (its Events say what is wrong)"]


def queue_share(scheduler: GangScheduler, gang: Gang) -> dict[str, Any] | None:
    """The gang's queue and where it stands against its fair share (None: no queues in use)."""
    ledger = scheduler.state.ledger
    queue = gang.membership.queue
    if not ledger.in_use() or queue is None:
        return None
    return {
        "name": display_name(queue),
        "key": queue,
        "fair_share": {r: _amount(r, v) for r, v in sorted(ledger.fair(queue).items()) if v},
        "holds": {r: _amount(r, v) for r, v in sorted(ledger.held(queue).items())},
        "standing": round(ledger.standing(queue), 3),
        "note": ledger.waiting_note(gang),
    }


def _amount(resource: str, value: float) -> str:
    return units_text(resource, int(value))


def _never_help(gang: Gang) -> list[str]:
    help_ = _lower_min(gang, gang.never_placed)
    text = gang.never_fits or ""
    resources = sorted(
        {
            part.split("Insufficient ", 1)[1].strip().rstrip(".")
            for part in text.replace(";", ",").split(",")
            if "Insufficient " in part
        }
    )
    if "minResources" in text:
        help_.append("lower minResources to what the cluster's nodes can ever offer")
    elif resources and gang.never_placed > 0:
        short = gang.min_member - gang.never_placed
        help_.append(
            f"add nodes with room for {short} more member(s) ({', '.join(resources)}), "
            "or request less per member"
        )
    elif resources:
        help_.append(
            f"no node can hold one member: add nodes with more allocatable "
            f"{', '.join(resources)}, or request less per member"
        )
    return help_ or ["change the rule no node can meet, or add nodes that meet it"]


def _lower_min(gang: Gang, fit: int) -> list[str]:
    if 0 < fit < gang.min_member:
        return [f"lower minMember to {fit} ({fit} member(s) fit)"]
    return []


def _capacity_summary(gang: Gang) -> str:
    failure = gang.last_unplaceable
    if failure is None:
        return gang.last_failure or "not enough free capacity"
    return (
        f"not enough free capacity now: {failure.placed} of {failure.needed} member(s) fit "
        "together; running pods finishing, or lower-priority gangs preempted, would make room"
    )


def _capacity_help(scheduler: GangScheduler, gang: Gang, capacity: dict[str, int]) -> list[str]:
    """How much to free: what the members still to place request, beyond the free total."""
    failure = gang.last_unplaceable
    help_: list[str] = []
    cache = scheduler.state.cache
    free = cache.index.describe((cache.allocatable - cache.requested)[cache.valid].sum(axis=0))
    wants: dict[str, int] = {}
    pods = _still_to_place(gang)
    for pod in pods:
        for res, amount in pod.requests.items():
            wants[res] = wants.get(res, 0) + amount
    for reason in capacity:
        res = "pods" if reason.startswith("Too many pods") else reason.removeprefix("Insufficient ")
        short = wants.get(res, 0) - max(0, free.get(res, 0))
        if short > 0:
            help_.append(
                f"free {units_text(res, short)} {res} (free now: {units_text(res, max(0, free.get(res, 0)))})"
            )
        elif res in wants:
            per_pod = max((p.requests.get(res, 0) for p in pods), default=0)
            help_.append(
                f"free {units_text(res, per_pod)} {res} on each of more nodes: enough is free "
                "in total, but not on few enough nodes"
            )
    if failure is not None:
        help_ += _lower_min(gang, failure.placed)
    return help_


def _still_to_place(gang: Gang) -> list[PodInfo]:
    """The waiting members the gang cannot start without: the members each task still needs
    (a Volcano task's minimum), then others up to minMember, as placement takes them."""
    pending = gang.pending()
    required = gang.task_minimums(pending)
    chosen = {pod.key for pod in required}
    rest = [pod for pod in pending if pod.key not in chosen]
    need = max(0, gang.min_member - gang.placed())
    return [*required, *rest][: max(need, len(required))]


def _queue(scheduler: GangScheduler, gang: Gang) -> dict[str, Any]:
    """Where the gang stands: the queue it is in, and the unplaced gangs ahead of it."""
    state = scheduler.state
    sort_key = state.queue_sort.sort_key
    mine = sort_key(gang)
    same_queue = state.ledger.in_use()  # with queues, what is ahead is in the gang's queue
    ahead = [
        other
        for other in state.gangs.values()
        if other is not gang
        and other.any_pending()
        and sorts_before(sort_key(other), mine)
        and (not same_queue or other.membership.queue == gang.membership.queue)
    ]
    ahead.sort(key=cmp_to_key(lambda a, b: -1 if sorts_before(sort_key(a), sort_key(b)) else 1))
    return {
        "where": scheduler.queue.where(gang.key),
        "position": len(ahead) + 1,
        "ahead": [
            {
                "gang": str(other.key),
                "pending": len(other.pending()),
                "priority": other.priority,
                "why": other.last_failure,
            }
            for other in ahead[:AHEAD_SHOWN]
        ],
    }


def render(answer: dict[str, Any]) -> str:
    """The answer as people read it (``gang explain``'s default output)."""
    lines = [
        f"gang {answer['gang']}: {answer['state'].upper()}",
        f"  {answer['summary']}",
        f"  members {answer['members']} (minMember {answer['min_member']}): "
        f"{answer['bound']} bound, {answer['reserved']} reserved, {answer['pending']} pending",
    ]
    queue = answer["queue"]
    lines.append(f"  queue: position {queue['position']} ({queue['where'] or 'in flight'})")
    share = answer.get("queue_share")
    if share:
        held, fair = share["holds"], share["fair_share"]
        shown = ", ".join(f"{r} {held.get(r, '0')}/{fair[r]}" for r in fair) or "nothing"
        lines.append(f"  queue {share['name']}: holds/fair share {shown}")
        if share["note"]:
            lines.append(f"    {share['note']}")
    for other in queue["ahead"]:
        lines.append(f"    ahead: {other['gang']} ({other['pending']} pending)")
    if "topology" in answer:
        topology = answer["topology"]
        lines.append(f"  topology {topology['topology']}: {topology['asks']}")
    blocked = answer.get("blocked_member")
    if blocked:
        lines.append(
            f"  member {blocked['pod']} does not fit "
            f"({blocked['placed_before_it']} of {blocked['needed']} placed before it):"
        )
        for reason, count in blocked["nodes_rejecting"].items():
            lines.append(f"    {count} node(s): {reason}")
    if "reservation" in answer:
        res = answer["reservation"]
        lines.append(
            f"  reservation: {len(res['nodes'])} node(s), starts in {res['starts_in_seconds']}s "
            f"(waiting for {res['waiting_for_pods']} pod(s))"
        )
    if "preemption" in answer:
        preemption = answer["preemption"]
        lines.append(f"  {preemption['kind']}: evicting {preemption['evicting']}")
    if "disrupted" in answer:
        lines.append(f"  {answer['disrupted']['kind']} by {answer['disrupted']['by']}")
    if answer.get("not_reserved_because"):
        lines.append(f"  no reservation: {answer['not_reserved_because']}")
    if answer["nodes"]:
        lines.append(f"  nodes: {', '.join(answer['nodes'])}")
    for suggestion in answer["unblock"]:
        lines.append(f"  to unblock: {suggestion}")
    return "\n".join(lines)
