"""gang's built-in behaviours, each a small plugin at its extension point.

Each class does one thing and is named after the kube-scheduler or Coscheduling plugin whose
behaviour it reproduces, so an operator who knows those knows these. ``BUILTIN`` maps each name
to its class, for profiles to enable, disable and weigh by name; ``default_filters`` and
``default_scores`` give the default set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from gang.models.settings import ScoreWeights
from gang.scheduling import predicates
from gang.scheduling.dra.plugin import DynamicResources
from gang.scheduling.framework import (
    MAX_NODE_SCORE,
    Allow,
    Mask,
    NodeFilterInput,
    NodeFilterPlugin,
    PermitDecision,
    Placed,
    ScoreInput,
    ScorePlugin,
    Scores,
    StaticFilterPlugin,
    Wait,
    reads_no_labels,
    rejected_by,
)
from gang.scheduling.gang import Gang
from gang.scheduling.interpodaffinity import InterPodAffinity
from gang.scheduling.topologyspread import PodTopologySpread
from gang.scheduling.volumes import NodeVolumeLimits, VolumeBinding, VolumeZone
from gang.state.cache import Snapshot
from gang.state.nodefacts import NodeFacts
from gang.state.podinfo import QOS_RANK, Constraints, PodInfo
from gang.state.resources import ResourceIndex, rows_fitting

# --- QueueSort ----------------------------------------------------------------------------


class PrioritySort:
    """Half-bound gangs first (their bound members idle until the rest arrive, e.g. after a
    restart), then priority (high first) → QoS (Guaranteed first) → PodGroup age → name."""

    name = "PrioritySort"

    def sort_key(self, gang: Gang) -> tuple[int, int, int, float, str, str]:
        members = gang.members  # (its counts: no pass over a big gang per member added)
        qos = members.best_qos(default=QOS_RANK["BestEffort"])
        group = gang.podgroup
        created = group.creation_timestamp if group is not None else members.earliest()
        half_bound = 0 if members.bound_count and gang.any_pending() else 1
        return (
            half_bound,
            -gang.priority,
            -qos,
            created,
            gang.key.namespace,
            gang.key.group or gang.key.pod,
        )


# --- PreFilter ----------------------------------------------------------------------------


class PodGroupReady:
    """A gang's PodGroup must exist and be valid before any member is placed."""

    name = "PodGroupReady"

    def pre_filter(self, gang: Gang, snap: Snapshot) -> str | None:
        if gang.single:
            return None
        ns, name = gang.key.namespace, gang.key.group
        if gang.podgroup is None:
            return f"PodGroup {ns}/{name} not found; the pods wait until it is created"
        if gang.podgroup.error is not None:
            return f"PodGroup {ns}/{name} is invalid: {gang.podgroup.error}"
        return None


class UnsupportedFields:
    """A gang with a member using a field gang cannot honour yet (e.g. ``spec.resourceClaims``)
    is not placed: placing it would break a rule its users wrote without saying so."""

    name = "UnsupportedFields"

    def pre_filter(self, gang: Gang, snap: Snapshot) -> str | None:
        return unsupported_message(gang)


def unsupported_message(gang: Gang) -> str | None:
    """Why the gang is refused, naming each field and the pods using it; None if nothing is."""
    found = gang.unsupported()
    if not found:
        return None
    parts = []
    for what, pods in sorted(found.items()):
        shown = ", ".join(sorted(pods)[:3]) + (
            f" and {len(pods) - 3} more" if len(pods) > 3 else ""
        )
        parts.append(f"{what} (pod {shown})")
    return "gang does not support " + "; ".join(parts) + " yet: the pods are not placed"


@dataclass(slots=True)
class MinResources:
    """Coscheduling's check: the cluster's total free capacity (plus what the gang already
    holds) must cover the PodGroup's ``minResources``."""

    index: ResourceIndex
    name: str = "MinResources"
    #: a rejection is about free capacity: running pods finishing may cure it (reservation)
    about_capacity: bool = True

    def pre_filter(self, gang: Gang, snap: Snapshot) -> str | None:
        if gang.podgroup is None or not gang.podgroup.min_resources:
            return None
        held: dict[str, int] = {}
        for pod in gang.bound() + [gang.members[k] for k in gang.reserved if k in gang.members]:
            for res, amount in pod.requests.items():
                held[res] = held.get(res, 0) + amount
        free = snap.free[snap.valid].clip(min=0).sum(axis=0)
        short = []
        for res, wanted in sorted(gang.podgroup.min_resources.items()):
            col = self.index.column(res) if self.index.has(res) else len(free)
            have = (int(free[col]) if col < len(free) else 0) + held.get(res, 0)
            if have < wanted:
                short.append(f"{res} (wants {wanted}, {have} available)")
        if short:
            return "the cluster cannot cover the PodGroup's minResources: " + ", ".join(short)
        return None


# --- Filter ----------------------------------------------------------------------------------


class NodeUnschedulable:
    """Cordoned nodes take only pods tolerating ``node.kubernetes.io/unschedulable``."""

    name = "NodeUnschedulable"

    def filter(self, constraints: Constraints, node: NodeFacts) -> str | None:
        return predicates.check_unschedulable(constraints, node)


class _NodeLabelScore:
    """A score that depends on a node's labels or taints and the pod's template only: computed
    once per template and node-set version for every row, then read per candidate."""

    relevance_by_template: ClassVar[bool] = True
    relevance_label_keys = reads_no_labels  # the template and the nodes only

    def __init__(self) -> None:
        self._rows: dict[tuple[object, int], Scores] = {}
        #: per template and node-set version: do live nodes score differently at all?
        self._varies: dict[tuple[object, int], bool] = {}

    def _row_scores(self, pod: PodInfo, snap: Snapshot) -> Scores:
        key = (self._template(pod), snap.version)
        found = self._rows.get(key)
        if found is None:
            if len(self._rows) > 1024:
                self._rows.clear()
            found = self._rows[key] = _floats(
                [0.0 if f is None else self._node_score(pod, f) for f in snap.facts]
            )
        return found

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        key = (self._template(pod), snap.version)
        varies = self._varies.get(key)
        if varies is None:
            if len(self._varies) > 1024:
                self._varies.clear()
            rows = self._row_scores(pod, snap)[snap.valid]
            varies = self._varies[key] = bool(len(rows)) and bool(rows.max() != rows.min())
        return varies

    def score(self, s: ScoreInput) -> Scores:
        if s.pod is None or s.snap is None:
            return np.zeros(len(s.candidates))
        return self._row_scores(s.pod, s.snap)[s.candidates]

    def _template(self, pod: PodInfo) -> object:
        raise NotImplementedError

    def _node_score(self, pod: PodInfo, node: NodeFacts) -> float:
        raise NotImplementedError


def _default_normalize(scores: Scores, reverse: bool) -> Scores:
    """kube-scheduler's ``DefaultNormalizeScore``: ``100 * score / max`` (integer division),
    reversed on demand; all 0 (reversed: all 100) when the maximum is 0."""
    if not len(scores):
        return scores
    high = scores.max()
    if high <= 0:
        return np.full_like(scores, MAX_NODE_SCORE if reverse else 0.0)
    out: Scores = np.floor(MAX_NODE_SCORE * scores / high)
    return MAX_NODE_SCORE - out if reverse else out


class TaintToleration(_NodeLabelScore):
    """Filter: NoSchedule and NoExecute taints the pod does not tolerate reject the node.
    Score: fewer untolerated PreferNoSchedule taints is better."""

    name = "TaintToleration"

    def filter(self, constraints: Constraints, node: NodeFacts) -> str | None:
        return predicates.check_taints(constraints, node)

    def _template(self, pod: PodInfo) -> object:
        return pod.constraints.tolerations

    def _node_score(self, pod: PodInfo, node: NodeFacts) -> float:
        return float(predicates.untolerated_prefer_no_schedule(pod.constraints, node))

    def normalize(self, scores: Scores) -> Scores:
        return _default_normalize(scores, reverse=True)


class NodeAffinity(_NodeLabelScore):
    """Filter: nodeSelector and required node affinity (In, NotIn, Exists, DoesNotExist, Gt,
    Lt). Score: the summed weights of the preferred node affinity terms a node matches."""

    name = "NodeAffinity"

    def filter(self, constraints: Constraints, node: NodeFacts) -> str | None:
        return predicates.check_node_affinity(constraints, node)

    def _template(self, pod: PodInfo) -> object:
        return pod.rules.preferred_nodes

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        return bool(pod.rules.preferred_nodes) and super().relevant(pod, snap, placed)

    def _node_score(self, pod: PodInfo, node: NodeFacts) -> float:
        return float(predicates.preferred_node_weight(pod.rules.preferred_nodes, node))

    def normalize(self, scores: Scores) -> Scores:
        return _default_normalize(scores, reverse=False)


class NodePorts:
    """A host port the pod wants must be free on the node (counting this cycle's placements)."""

    name = "NodePorts"

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        ok = np.ones(len(s.snap.names), dtype=np.bool_)
        wanted = [
            k
            for k in (predicates.host_port_key(p) for p in s.pod.constraints.host_ports)
            if k is not None
        ]
        if not wanted:
            return ok
        for row, name in enumerate(s.snap.names):
            used = set(s.snap.used_ports.get(name, ())) | set(s.claimed_ports.get(row, ()))
            if used and _ports_conflict(wanted, used):
                ok[row] = False
        return ok

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        return [predicates.REASON_HOST_PORTS]


class NodeResourcesFit:
    """Every resource the pod requests (cpu, memory, pods, GPUs, ...) must fit what is left."""

    name = "NodeResourcesFit"

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        return rows_fitting(s.free, s.vector)

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        return [
            predicates.insufficient(s.index.names[col])
            for col in np.flatnonzero(s.free[row] < s.vector)
        ]

    def reason_counts(self, s: NodeFilterInput, rows: npt.NDArray[np.intp]) -> Counter[str]:
        """``reasons`` for every row at once: a row's reasons are its short resources, one
        each, so the histogram is the count of short rows per resource."""
        found: Counter[str] = Counter()
        short = s.free[rows] < s.vector
        per_resource = short.sum(axis=0)
        for col in np.flatnonzero(per_resource):
            found[predicates.insufficient(s.index.names[col])] += int(per_resource[col])
        unexplained = rows.size - int(np.count_nonzero(short.any(axis=1)))
        if unexplained:
            found[rejected_by(self)] += unexplained
        return found


def _ports_conflict(wanted: list[tuple[str, str, int]], used: set[tuple[str, str, int]]) -> bool:
    for ip, protocol, number in wanted:
        for used_ip, used_protocol, used_number in used:
            if (
                used_protocol == protocol
                and used_number == number
                and (ip == used_ip or "0.0.0.0" in (ip, used_ip))
            ):
                return True
    return False


def default_filters() -> list[StaticFilterPlugin]:
    """kube-scheduler's default order: NodeUnschedulable, TaintToleration, NodeAffinity."""
    return [NodeUnschedulable(), TaintToleration(), NodeAffinity()]


def default_node_filters() -> list[NodeFilterPlugin]:
    """Then NodePorts, NodeResourcesFit, the volume rules, PodTopologySpread and
    InterPodAffinity, against the live snapshot (kube-scheduler's order)."""
    return [
        NodePorts(),
        NodeResourcesFit(),
        NodeVolumeLimits(),
        VolumeBinding(),
        VolumeZone(),
        PodTopologySpread(),
        InterPodAffinity(),
    ]


# --- Score --------------------------------------------------------------------------------


def _floats(values: object) -> Scores:
    return np.asarray(values, dtype=np.float64)


class _Bounded:
    """Scores already on 0..100 need no normalization."""

    def normalize(self, scores: Scores) -> Scores:
        return np.clip(scores, 0.0, MAX_NODE_SCORE)


class LeastAllocated(_Bounded):
    """Prefer emptier nodes (spreads load)."""

    name = "LeastAllocated"

    def score(self, s: ScoreInput) -> Scores:
        return _floats((1.0 - s.utilization.mean(axis=1)) * MAX_NODE_SCORE)


class MostAllocated(_Bounded):
    """Prefer fuller nodes (bin-packing keeps whole nodes free for big gangs)."""

    name = "MostAllocated"

    def score(self, s: ScoreInput) -> Scores:
        return _floats(s.utilization.mean(axis=1) * MAX_NODE_SCORE)


#: what kube-scheduler's NodeResourcesBalancedAllocation balances unless told otherwise
BALANCED_RESOURCES: tuple[str, ...] = ("cpu", "memory")


class BalancedAllocation(_Bounded):
    """Prefer nodes whose CPU and memory stay evenly used, after the member: 100 x (1 - the
    standard deviation of the used fractions), as kube-scheduler's NodeResourcesBalancedAllocation
    scores. ``resources`` names what it balances (its args' ``resources``); one beyond CPU and
    memory (an accelerator) counts only for a pod that asks for it, and a resource counts only
    on a node that has it, as there.

    Accelerators are left out by default, as kube-scheduler leaves them: counted, a one-GPU
    member's eighth of a node's GPUs beside its sliver of CPU unbalances a node more than
    MostAllocated gains by filling it, and a gang of such members lands one per node, the
    fragmentation packing is there to prevent."""

    name = "BalancedAllocation"

    def __init__(self, resources: Sequence[str] = BALANCED_RESOURCES) -> None:
        self.resources = tuple(dict.fromkeys(resources))
        #: per tuple of considered resource names: the positions among them it balances
        self._positions: dict[tuple[str, ...], npt.NDArray[np.intp]] = {}

    def score(self, s: ScoreInput) -> Scores:
        positions = self._positions.get(s.resources)
        if positions is None:
            wanted = [i for i, name in enumerate(s.resources) if name in self.resources]
            positions = self._positions[s.resources] = np.array(wanted, dtype=np.intp)
        if len(positions) < 2:
            return np.full(len(s.candidates), MAX_NODE_SCORE)
        allocatable = s.allocatable[:, positions]
        has = allocatable > 0
        fractions = np.zeros(allocatable.shape, dtype=np.float64)
        np.divide(allocatable - s.free_after[:, positions], allocatable, out=fractions, where=has)
        np.minimum(fractions, 1.0, out=fractions)
        return _floats((1.0 - _std_where(fractions, has)) * MAX_NODE_SCORE)


def _std_where(values: npt.NDArray[np.float64], counted: Mask) -> npt.NDArray[np.float64]:
    """Per row: the population standard deviation of the ``counted`` values (0 for fewer than
    two); two values give half their difference, as kube-scheduler computes it."""
    if values.shape[1] == 2 and counted.all():  # the common case (cpu and memory), directly
        return _floats(np.abs(values[:, 0] - values[:, 1]) / 2)
    n = counted.sum(axis=1)
    total = np.where(counted, values, 0.0).sum(axis=1)
    mean = np.divide(total, n, out=np.zeros(len(n)), where=n > 0)
    squares = np.where(counted, (values - mean[:, None]) ** 2, 0.0).sum(axis=1)
    spread = np.sqrt(np.divide(squares, n, out=np.zeros(len(n)), where=n > 0))
    two = n == 2
    if two.any():
        high = np.where(counted, values, -np.inf).max(axis=1)
        low = np.where(counted, values, np.inf).min(axis=1)
        spread[two] = (high[two] - low[two]) / 2
    spread[n < 2] = 0.0
    return _floats(spread)


class GangPacking(_Bounded):
    """Prefer nodes in topology domains that already hold members of this gang."""

    name = "GangPacking"

    def score(self, s: ScoreInput) -> Scores:
        if not s.gang_domains:
            return np.zeros(len(s.candidates))
        # a lookup table over domain ids (the last slot stands for -1, "no domain")
        inside = np.zeros(
            max(max(s.gang_domains), int(s.domains.max(initial=-1))) + 2, dtype=np.float64
        )
        inside[list(s.gang_domains)] = MAX_NODE_SCORE
        return inside[s.domains]


# --- Permit --------------------------------------------------------------------------------


@dataclass(slots=True)
class GangPermit:
    """Coscheduling's Permit: allow once bound + reserved members reach minMember; until then
    wait, at most the PodGroup's scheduleTimeoutSeconds (else ``default_timeout``)."""

    default_timeout: float = 60.0
    name: str = "GangPermit"

    def permit(self, gang: Gang) -> PermitDecision:
        if gang.has_quorum():
            return Allow()
        return Wait(
            gang.timeout or self.default_timeout,
            f"waiting for quorum: {gang.placed()}/{gang.min_member} members placed, "
            f"{len(gang.members)} exist",
        )


def default_scores(
    weights: ScoreWeights, filters: Sequence[object] = ()
) -> list[tuple[ScorePlugin, int]]:
    """The Score plugins with a non-zero weight. A plugin that also filters is taken from
    ``filters`` when there, so one instance serves both points (as in a profile) and its
    per-pod work is done once."""
    shared: dict[type, Any] = {type(f): f for f in filters}

    def one(cls: type) -> ScorePlugin:
        found: ScorePlugin = shared.get(cls) or cls()
        return found

    table: list[tuple[ScorePlugin, int]] = [
        (LeastAllocated(), weights.least_allocated),
        (MostAllocated(), weights.most_allocated),
        (BalancedAllocation(), weights.balanced_allocation),
        (GangPacking(), weights.gang_packing),
        (one(TaintToleration), weights.taint_toleration),
        (one(NodeAffinity), weights.node_affinity),
        (one(PodTopologySpread), weights.pod_topology_spread),
        (one(InterPodAffinity), weights.inter_pod_affinity),
    ]
    return [(plugin, weight) for plugin, weight in table if weight > 0]


#: every built-in plugin by name (the binder's DefaultBinder lives with the binding cycle)
BUILTIN: dict[str, type] = {
    cls.name if isinstance(getattr(cls, "name", None), str) else cls.__name__: cls
    for cls in (
        PrioritySort,
        PodGroupReady,
        UnsupportedFields,
        NodeUnschedulable,
        TaintToleration,
        NodeAffinity,
        NodePorts,
        NodeResourcesFit,
        LeastAllocated,
        MostAllocated,
        BalancedAllocation,
        GangPacking,
    )
}
BUILTIN["InterPodAffinity"] = InterPodAffinity
BUILTIN["PodTopologySpread"] = PodTopologySpread
BUILTIN["NodeVolumeLimits"] = NodeVolumeLimits
BUILTIN["VolumeBinding"] = VolumeBinding
BUILTIN["VolumeZone"] = VolumeZone
BUILTIN["DynamicResources"] = DynamicResources
BUILTIN["MinResources"] = MinResources
BUILTIN["GangPermit"] = GangPermit

#: built-ins whose verdict on a node depends on that node's own state only (GangPacking also on
#: the set of domains the gang uses, which the placer tracks)
LOCAL_NODE_FILTERS: frozenset[type] = frozenset({NodePorts, NodeResourcesFit})
LOCAL_SCORES: frozenset[type] = frozenset(
    {LeastAllocated, MostAllocated, BalancedAllocation, GangPacking}
)
