"""The scheduler's promises, checked on what the API holds — nothing taken from the scheduler.

After any run (a benchmark, a chaos run, a test) the objects in the cluster must show:
- all or nothing: every gang has no member bound, or at least ``minMember`` bound;
- no node over-committed: the requests of its non-terminal pods (anyone's) fit its allocatable;
- no gang starved with room: no gang short of its quorum would fit in the capacity left free
  (outside nodes a reservation holds for another gang, by its PodGroup's ``Reserved`` condition,
  or for a lone pod, by its ``PodScheduled`` condition's note).

Members beyond a quorum that is already bound are reported apart (``stranded_members``): the
gang is whole by its own definition, so leaving them Pending breaks no all-or-nothing promise,
but a scheduler should still place them once they fit.

The fit check is deliberately simple: it packs the gang's members (shaped like its first pending
member) onto the schedulable, untainted nodes by resources alone, so it holds for workloads
without selectors, affinities or host ports — the chaos workload's shape. A gang whose
PodGroup does not exist is never expected to be scheduled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gang.models.podgroup import (
    HELD_MARKER,
    POD_GROUP_LABEL,
    RESERVED_CONDITION,
    held_nodes_of,
)
from gang.models.quantity import resource_units
from gang.state.podinfo import PodInfo, PodParseError, parse_pod

Obj = dict[str, Any]
Resources = Mapping[str, int]


@dataclass(slots=True)
class _Gang:
    name: str
    min_member: int
    has_podgroup: bool
    bound: int = 0
    pending: list[PodInfo] = field(default_factory=list)


@dataclass(slots=True)
class Verdict:
    gangs: int = 0
    gangs_complete: int = 0
    pods: int = 0
    pods_bound: int = 0
    partial_gangs: list[str] = field(default_factory=list)
    overcommitted_nodes: list[str] = field(default_factory=list)
    #: gangs short of their quorum that would fit the free capacity
    fitting_unbound: list[str] = field(default_factory=list)
    #: gangs with their quorum bound and members beyond it pending that would fit
    stranded_members: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.partial_gangs or self.overcommitted_nodes or self.fitting_unbound)


def _schedulable(node: Obj) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    return not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or [])


def parse_pods(raws: Iterable[Obj]) -> list[PodInfo]:
    """The pods gang can read (an unparsable one requests nothing it could count)."""
    parsed: list[PodInfo] = []
    for raw in raws:
        try:
            parsed.append(parse_pod(raw))
        except PodParseError:
            continue
    return parsed


def overcommitted(free: Mapping[str, Resources], among: Iterable[str] | None = None) -> list[str]:
    """The nodes (of ``among``, or any a pod is bound to) whose free capacity, as
    ``free_capacity`` gives it, went below zero somewhere; sorted."""
    names = sorted(free if among is None else among)
    return [name for name in names if any(v < 0 for v in free.get(name, {}).values())]


def free_capacity(nodes: Iterable[Obj], pods: Iterable[PodInfo]) -> dict[str, dict[str, int]]:
    """Allocatable minus the requests of every non-terminal bound pod, per node (may go < 0)."""
    free: dict[str, dict[str, int]] = {}
    for node in nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        free[node["metadata"]["name"]] = {k: resource_units(k, v) for k, v in allocatable.items()}
    for pod in pods:
        if pod.assigned and not pod.terminal:
            left = free.setdefault(pod.node_name, {})
            for res, amount in pod.requests.items():
                left[res] = left.get(res, 0) - amount
    return free


def _members_fitting(free: Resources, requests: Resources) -> int:
    counts = [free.get(res, 0) // amount for res, amount in requests.items() if amount > 0]
    return max(0, min(counts)) if counts else 1 << 30


def _reserved(podgroups: Iterable[Obj], pods: Iterable[PodInfo]) -> dict[tuple[str, str], set[str]]:
    """Nodes held for gangs by a reservation, per gang: a PodGroup's by its ``Reserved``
    condition, a lone pod's by its ``PodScheduled`` note; ``{"*"}`` when the condition does not
    name them all. Capacity held for a gang is not room for the gangs behind it, so they are
    not "starved with room" when only it would fit them."""
    held: dict[tuple[str, str], set[str]] = {}
    for pod in pods:
        if not pod.group and not pod.assigned and pod.unschedulable_message:
            nodes = held_nodes_of(pod.unschedulable_message)
            if nodes is not None or HELD_MARKER in pod.unschedulable_message:
                held[(pod.namespace, f"pod/{pod.name}")] = nodes or {"*"}
    for group in podgroups:
        for cond in (group.get("status") or {}).get("conditions") or []:
            if cond.get("type") == RESERVED_CONDITION and cond.get("status") == "True":
                key = (group["metadata"].get("namespace", ""), group["metadata"]["name"])
                held[key] = held_nodes_of(str(cond.get("message") or "")) or {"*"}
    return held


def judge(
    pods: Iterable[Obj],
    nodes: Iterable[Obj],
    podgroups: Iterable[Obj],
    scheduler_name: str = "gang-scheduler",
) -> Verdict:
    """Check the invariants on raw API objects (as listed: pods, nodes, PodGroups)."""
    nodes, podgroups = list(nodes), list(podgroups)
    min_members = {
        (g["metadata"].get("namespace", ""), g["metadata"]["name"]): int(
            (g.get("spec") or {}).get("minMember") or 1
        )
        for g in podgroups
    }
    parsed = parse_pods(pods)
    verdict = Verdict()
    gangs: dict[tuple[str, str], _Gang] = {}
    for pod in parsed:
        if pod.scheduler_name != scheduler_name:
            continue
        group = pod.labels.get(POD_GROUP_LABEL, "")
        key = (pod.namespace, group) if group else (pod.namespace, f"pod/{pod.name}")
        gang = gangs.get(key)
        if gang is None:
            known = key in min_members or not group
            gang = _Gang(f"{key[0]}/{key[1]}", min_members.get(key, 1), known)
            gangs[key] = gang
        verdict.pods += 1
        if pod.assigned:
            gang.bound += 1
            verdict.pods_bound += 1
        elif not pod.deleting and not pod.terminal:
            gang.pending.append(pod)
    free = free_capacity(nodes, parsed)
    verdict.overcommitted_nodes = overcommitted(free)
    held = _reserved(podgroups, parsed)
    verdict.gangs = len(gangs)
    for key, gang in gangs.items():
        if 0 < gang.bound < gang.min_member:
            verdict.partial_gangs.append(f"{gang.name} ({gang.bound}/{gang.min_member} bound)")
        if gang.bound >= gang.min_member:
            verdict.gangs_complete += 1
        if not gang.pending or not gang.has_podgroup:
            continue
        need = max(1, gang.min_member - gang.bound)
        if need > len(gang.pending):
            continue  # the quorum does not exist (yet): nothing to schedule
        shape = gang.pending[0].requests
        others = {n for group, names in held.items() if group != key for n in names}
        room = [
            free.get(n["metadata"]["name"], {})
            for n in nodes
            if _schedulable(n) and "*" not in others and n["metadata"]["name"] not in others
        ]
        if sum(_members_fitting(left, shape) for left in room) < need:
            continue
        if gang.bound >= gang.min_member:
            verdict.stranded_members.append(f"{gang.name} (a member beyond its quorum would fit)")
        else:
            verdict.fitting_unbound.append(f"{gang.name} ({need} more would fit)")
    return verdict
