"""The Scheduling Framework's extension points as typed Python protocols — gang's plugin API.

kube-scheduler's framework (QueueSort, PreFilter, Filter, PostFilter, PreScore, Score,
NormalizeScore, Reserve/Unreserve, Permit, PreBind, Bind, PostBind) is the vocabulary every
scheduler author knows, so gang speaks it: every built-in behaviour is a plugin
(``gang.scheduling.plugins``), and third-party plugins implement the same protocols. One class
may implement several points; the framework finds them by their methods.

Semantics, as in kube-scheduler:
- Filter stops at the first rejection for a node; the rejection reasons of all nodes are
  aggregated into the "0/N nodes are available: ..." message.
- Score results are normalised to 0..100 (NormalizeScore) and weighted.
- Reserve runs in order; if one fails, Unreserve runs in reverse order on every plugin that had
  reserved (and on any failure after Reserve, e.g. a Permit denial or timeout).
- Permit: Allow, Deny(reason), or Wait(timeout). A gang binds when every Permit plugin allows;
  a Wait holds its reservations until the plugins allow, or the shortest timeout expires.
- Bind plugins run in order until one does not return ``SKIP``.

Differences, both for speed at 5,000 nodes and both deliberate:
- Filters come in two kinds. A ``StaticFilterPlugin`` judges one node's static facts (labels,
  taints, schedulability) for a pod's constraints; its verdicts are cached per pod template and
  node-set version, so they run once for a whole gang. A ``NodeFilterPlugin`` judges every node
  at once against the cycle's live snapshot (resources, host ports), as a numpy mask.
- A Score plugin scores all candidate nodes at once (a numpy vector), not one node per call.

Gang-aware rules: a whole gang is placed in one cycle, so plugins judging a node by the pods
around it (pod affinity, topology spread) see the members placed earlier in the same cycle in
``placed`` and must count them exactly like pods already bound. Such a plugin also implements
``RuleAwarePlugin.relevant``: when it answers False for a pod, the plugin would pass every node
and score them all alike, so the placer skips it and keeps its incremental fast path.

The plugin API is the bottom of the scheduling layer: it imports only the gang model
(``gang.scheduling.gang``) and the cluster state it hands plugins, and defines the values its
points exchange (a Permit decision, a preemption ``PreemptionRequest`` and ``Plan``); placement,
preemption and the built-in plugins build on it, never the other way (``.importlinter`` forbids
import circles inside ``gang.scheduling``).

Containment: a plugin that raises, or that overruns its extension point's time budget, fails
the cycle for that gang only, with an Event naming the plugin (``PluginError``). Synchronous
points are timed (Python cannot safely interrupt them); asynchronous points (PreBind, Bind,
PostBind) are cancelled at their budget.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from gang.scheduling.gang import Gang
from gang.state.cache import ClusterCache, Snapshot
from gang.state.nodefacts import NodeFacts
from gang.state.podinfo import Constraints, PodInfo
from gang.state.resources import ResourceIndex, Vector

Scores = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
Key = tuple[str, str]
#: a member placed earlier in the same cycle, and the row of the node it took
Placed = tuple[PodInfo, int]
MAX_NODE_SCORE = 100.0
T = TypeVar("T")


class PluginError(Exception):
    """A plugin raised or overran its budget; the gang's cycle fails with this message."""

    def __init__(self, plugin: str, point: str, why: str) -> None:
        super().__init__(f"plugin {plugin} failed at {point}: {why}")
        self.plugin = plugin
        self.point = point


@runtime_checkable
class Plugin(Protocol):
    @property
    def name(self) -> str:
        """The plugin's name, as profiles and Events refer to it."""


# --- the cycle's points ----------------------------------------------------------------------


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, gang: Gang) -> tuple[Any, ...]:
        """Smaller keys are scheduled first."""


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, gang: Gang, snap: Snapshot) -> str | None:
        """A reason the whole gang cannot be scheduled now, or None."""


@runtime_checkable
class StaticFilterPlugin(Plugin, Protocol):
    def filter(self, constraints: Constraints, node: NodeFacts) -> str | None:
        """Why ``node`` cannot take a pod with ``constraints`` (kube-scheduler's wording), or None."""


@dataclass(frozen=True, slots=True)
class NodeFilterInput:
    """What a NodeFilterPlugin sees: one pod against every node of the live snapshot."""

    snap: Snapshot
    free: npt.NDArray[np.int64]  # what is left on each node after earlier members of this cycle
    pod: PodInfo
    vector: Vector
    index: ResourceIndex
    claimed_ports: Mapping[int, Mapping[tuple[str, str, int], int]]  # host ports taken this cycle
    placed: Sequence[Placed] = ()  # members placed earlier in this cycle, like bound pods


@runtime_checkable
class NodeFilterPlugin(Plugin, Protocol):
    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        """True for every node that can take the pod."""

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        """Why node ``row`` was rejected (only asked when explaining a failure)."""


def reason_counts(
    plugin: NodeFilterPlugin, s: NodeFilterInput, rows: npt.NDArray[np.intp]
) -> Counter[str]:
    """Why ``plugin`` rejects each of ``rows``, counted (kube-scheduler's FitError histogram):
    from the plugin's optional ``reason_counts(s, rows)``, which counts them at once, else
    its ``reasons`` row by row. A row with no reason counts as ``node(s) rejected by NAME``."""
    counted = getattr(plugin, "reason_counts", None)
    if counted is not None:
        result: Counter[str] = counted(s, rows)
        return result
    found: Counter[str] = Counter()
    for row in rows:
        found.update(plugin.reasons(s, int(row)) or [rejected_by(plugin)])
    return found


def rejected_by(plugin: Plugin) -> str:
    """The reason for a rejection its plugin gave no words for."""
    return f"node(s) rejected by {plugin.name}"


@runtime_checkable
class RuleAwarePlugin(Plugin, Protocol):
    """A plugin may also set ``relevance_by_template = True`` when ``relevant`` depends on the
    pod only through what ``same_template`` compares, and on ``placed`` only through the placed
    pods' inter-pod affinity terms (the snapshot is the same for a run of twins): the placer
    then asks it once for a run of members that are such twins (a gang's members usually are),
    not once per member, and asks no plugin at all for the twins when every rule-aware plugin
    of the profile answers so.

    Such a plugin may also say which pod labels its answer can read, with
    ``relevance_label_keys(snap, pods) -> Collection[str] | None``: the label keys ``relevant``
    may read for any of ``pods`` on ``snap`` (None: any key). Its twins then need the same
    labels on those keys only, so the members of an indexed Job, a Kubeflow job or a
    LeaderWorkerSet, which differ in an index label, keep its answer while nothing it reads
    selects by that label. Without the method every label counts."""

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        """False if, for ``pod`` on ``snap`` with ``placed``, this plugin passes every node and
        scores every node alike: the placer then skips it. True whenever unsure."""


def reads_no_labels(plugin: object, snap: Snapshot, pods: Sequence[PodInfo]) -> frozenset[str]:
    """``relevance_label_keys`` of a plugin whose relevance reads no pod label (set it as the
    class's method)."""
    return frozenset()


def same_template(before: PodInfo, pod: PodInfo) -> bool:
    """Whether ``pod`` is, for a ``relevance_by_template`` plugin, the twin of the member placed
    just before it: the same namespace, labels and controller, the same constraints and rules
    (by identity: parsing shares them between the members of a template, and a stand-in for a
    member not created yet gets rules of its own), and ``before`` joining ``placed`` added no
    affinity term. ``same_but_labels`` asks it all but the labels (``gang.scheduling.twins``)."""
    return same_but_labels(before, pod) and pod.labels == before.labels


def same_but_labels(before: PodInfo, pod: PodInfo) -> bool:
    """``same_template`` but for the labels."""
    return (
        pod.rules is before.rules
        and pod.constraints is before.constraints
        and not pod.rules.pod_affinity
        and pod.namespace == before.namespace
        and pod.controller == before.controller
    )


def scores_for(plugin: object, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
    """Whether a rule-aware Score plugin has anything to say about ``pod`` (its optional
    ``scores_for``; else its ``relevant``): a filter-only rule need not be scored."""
    method = getattr(plugin, "scores_for", None) or getattr(plugin, "relevant", None)
    return True if method is None else bool(method(pod, snap, placed))


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(self, gang: Gang, snap: Snapshot, message: str) -> str | None:
        """Called when the gang could not be placed; may return a better message (or act,
        e.g. nominate preemption victims). ``snap`` is the cluster as the gang's cycle sees
        it, not what the failed placement left of it. gang ships none."""


class ReclaimRules(Protocol):
    """Reclaim's side of a decision: which running pods may be taken, in which order, and which
    sets keep every queue's floor (``gang.scheduling.queues.ReclaimScope``)."""

    def victim_queue(self, pod: PodInfo) -> str | None:
        """The queue ``pod`` would be reclaimed from, or None if it may not be."""
        ...

    def protected(self, queue: str, started: float) -> bool:
        """Whether a gang of ``queue`` running since ``started`` is inside its min runtime."""
        ...

    def order(self, queue: str) -> tuple[Any, ...]:
        """Victim queues are taken in this order (smallest first)."""
        ...

    def allows(self, taken: Mapping[str, Mapping[str, float]]) -> bool:
        """Whether evicting gangs holding ``taken`` (per queue) keeps every rule."""
        ...


class PreemptionRequest(Protocol):
    """What the cycle hands a PreemptionPlugin for a gang that did not fit, read-only (the
    cycle's ``gang.scheduling.preemption.Request`` has this shape)."""

    @property
    def gang(self) -> Gang: ...

    @property
    def pods(self) -> Sequence[PodInfo]:
        """The members (and placeholders) the failed placement tried."""
        ...

    @property
    def need(self) -> int:
        """How many of ``pods`` must place."""
        ...

    @property
    def anchors(self) -> Sequence[str]: ...

    @property
    def snapshot(self) -> Callable[[], Snapshot]:
        """A fresh snapshot as this gang's cycle sees it (its own nominations dropped, those
        of lower-priority gangs lent)."""
        ...

    @property
    def placer(self) -> Any:
        """The profile's placer (``gang.scheduling.placement.Placer``), for trial placements."""
        ...

    @property
    def cache(self) -> ClusterCache: ...

    @property
    def podgroups(self) -> Mapping[Key, Any]:
        """PodGroups by (namespace, name), for victims' minMember."""
        ...

    @property
    def claimed(self) -> frozenset[Key]:
        """Victim pods of the preemptions under way (other gangs' plans)."""
        ...

    @property
    def may_evict(self) -> Callable[[PodInfo], bool]:
        """Whether a running pod may be this gang's victim at all."""
        ...

    @property
    def reclaim(self) -> ReclaimRules | None:
        """Set for a reclaim: victims by queue rules, not by priority."""
        ...


@dataclass(frozen=True, slots=True)
class VictimGang:
    """The members of one victim gang a plan evicts."""

    namespace: str
    #: the PodGroup name, or "" for a pod without a group
    group: str
    priority: int
    pods: tuple[PodInfo, ...]
    #: all bound members go (else only members above ``min_member``)
    whole: bool
    bound: int
    min_member: int
    #: the victim's queue, when it was reclaimed
    queue: str | None = None

    def __str__(self) -> str:
        name = self.group or self.pods[0].name
        scope = "whole" if self.whole else f"{len(self.pods)} above minMember {self.min_member}"
        return (
            f"{self.namespace}/{name} (priority {self.priority}, {len(self.pods)} pod(s), {scope})"
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """A preemption decision: where the preemptor goes once the victims are gone."""

    assignments: dict[Key, str]
    victims: tuple[VictimGang, ...]
    #: victim pods whose eviction overdraws a PodDisruptionBudget (evicted past it: no set
    #: that respects every budget was found)
    past_budget: frozenset[Key]
    #: placements run to decide (for the decision-time figures)
    trials: int
    #: for a reclaim: why (the reclaiming queue and the shares), said on every victim
    reclaim: str | None = None

    @property
    def pods(self) -> int:
        return sum(len(v.pods) for v in self.victims)

    def summary(self) -> str:
        names = ", ".join(str(v) for v in self.victims)
        text = f"{self.pods} pod(s) of {len(self.victims)} gang(s): {names}"
        if self.past_budget:
            text += f"; {len(self.past_budget)} of them past their PodDisruptionBudget"
        return text


@runtime_checkable
class PreemptionPlugin(Plugin, Protocol):
    def preempt(self, request: PreemptionRequest) -> Plan | str | None:
        """PostFilter for a gang that did not fit: a plan (victims to evict, and where the gang
        goes once they are gone) that the cycle nominates and the binding side carries out, or
        why preemption cannot help (added to the failure message), or None."""


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, gang: Gang, pods: list[PodInfo], snap: Snapshot) -> None:
        """Prepare per-cycle state before any member is scored."""


@dataclass(frozen=True, slots=True)
class ScoreInput:
    """What Score plugins see for one member: every candidate node, as vectors.

    ``utilization`` is per candidate and per considered resource, *after* placing the member:
    ``1 - free_after / allocatable``; ``free_after``/``allocatable`` are the same columns.
    """

    candidates: npt.NDArray[np.intp]
    utilization: npt.NDArray[np.float64]
    domains: npt.NDArray[np.int64]  # topology domain id per candidate, -1 if unlabelled
    gang_domains: frozenset[int]  # domains already holding members of this gang
    resources: tuple[str, ...] = ()  # names of the considered columns
    free_after: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.int64)
    )
    allocatable: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.int64)
    )
    #: the member being scored, the cycle's snapshot and the members placed before it (for
    #: scores that look beyond the node itself); None / () only where no pod is at hand
    pod: PodInfo | None = None
    snap: Snapshot | None = None
    placed: Sequence[Placed] = ()


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, s: ScoreInput) -> Scores:
        """One raw score per candidate."""

    def normalize(self, scores: Scores) -> Scores:
        """NormalizeScore: map raw scores onto 0..MAX_NODE_SCORE."""


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, gang: Gang, assignments: Mapping[Key, str]) -> str | None:
        """Reserve what the placed members need; a reason to refuse, or None."""

    def unreserve(self, gang: Gang, assignments: Mapping[Key, str]) -> None:
        """Undo ``reserve`` (must be idempotent)."""


@dataclass(frozen=True, slots=True)
class Allow:
    pass


@dataclass(frozen=True, slots=True)
class Deny:
    reason: str


@dataclass(frozen=True, slots=True)
class Wait:
    timeout: float
    reason: str = ""


PermitDecision = Allow | Deny | Wait


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, gang: Gang) -> PermitDecision:
        """Asked after Reserve and again whenever the gang changes while it waits."""


# --- the binding cycle's points -----------------------------------------------------------

SKIP = "skip"


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, gang: Gang, pod: Key, node: str) -> None:
        """Runs before the member's Bind; raising fails (and retries) this member's binding."""


def pre_bind_needed(plugin: PreBindPlugin, gang: Gang, pod: Key) -> bool:
    """kube-scheduler's PreBindPreFlight: a PreBind plugin may define a synchronous
    ``pre_bind_pre_flight(gang, pod) -> bool``; False skips its PreBind for that member (no
    coroutine, no budget timer: the binding of a pod without volumes costs nothing here)."""
    pre_flight = getattr(plugin, "pre_bind_pre_flight", None)
    return pre_flight is None or bool(pre_flight(gang, pod))


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, gang: Gang, pod: Key, node: str) -> str | None:
        """Bind the member, or return SKIP to let the next Bind plugin do it."""


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    async def post_bind(self, gang: Gang, pod: Key, node: str) -> None:
        """Informational: the member is bound."""


# --- running plugins safely -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Budgets:
    """Seconds a plugin may take per call at each point (None: unlimited)."""

    sync: float | None = 0.5
    asynchronous: float | None = 30.0
    #: a preemption decision runs placement several times, so it gets its own budget
    preemption: float | None = 5.0


def call(plugin: Plugin, point: str, budget: float | None, fn: Callable[..., T], *args: Any) -> T:
    """Run a synchronous plugin method; exceptions and overruns become PluginError."""
    start = time.perf_counter()
    try:
        result = fn(*args)
    except PluginError:
        raise
    except Exception as err:  # a third-party plugin must never take the scheduler down
        raise PluginError(plugin.name, point, f"{type(err).__name__}: {err}") from err
    took = time.perf_counter() - start
    if budget is not None and took > budget:
        raise PluginError(
            plugin.name, point, f"took {took * 1000:.0f} ms, over its {budget * 1000:.0f} ms budget"
        )
    return result


async def call_async(
    plugin: Plugin,
    point: str,
    budget: float | None,
    fn: Callable[..., Awaitable[T]],
    *args: Any,
    passthrough: tuple[type[Exception], ...] = (),
) -> T:
    """Run an asynchronous plugin method, cancelled at its budget. Exceptions of the
    ``passthrough`` types (e.g. API errors the caller knows how to handle) propagate as they are."""
    try:
        async with asyncio.timeout(budget):  # no extra task per call, unlike wait_for
            return await fn(*args)
    except TimeoutError:
        raise PluginError(
            plugin.name, point, f"did not finish within its {budget:g} s budget"
        ) from None
    except PluginError:
        raise
    except passthrough:
        raise
    except Exception as err:
        raise PluginError(plugin.name, point, f"{type(err).__name__}: {err}") from err


# --- a profile: the plugins that serve one schedulerName --------------------------------------


@dataclass(frozen=True, slots=True)
class PluginContext:
    """What a plugin factory may use: the scheduler's settings, the resource index, the API."""

    config: Any  # gang.models.settings.SchedulerConfig
    index: ResourceIndex
    kube: Any  # gang.kube.transport.Kube
    #: the live cluster cache (read by plugins that act at PreBind); None when checking config
    cache: Any = None  # gang.state.cache.ClusterCache


@dataclass(slots=True)
class Profile:
    scheduler_name: str
    queue_sort: QueueSortPlugin
    pre_filters: list[PreFilterPlugin] = field(default_factory=list)
    static_filters: list[StaticFilterPlugin] = field(default_factory=list)
    node_filters: list[NodeFilterPlugin] = field(default_factory=list)
    post_filters: list[PostFilterPlugin] = field(default_factory=list)
    preemptions: list[PreemptionPlugin] = field(default_factory=list)
    pre_scores: list[PreScorePlugin] = field(default_factory=list)
    scores: list[tuple[ScorePlugin, int]] = field(default_factory=list)
    reserves: list[ReservePlugin] = field(default_factory=list)
    permits: list[PermitPlugin] = field(default_factory=list)
    pre_binds: list[PreBindPlugin] = field(default_factory=list)
    binds: list[BindPlugin] = field(default_factory=list)
    post_binds: list[PostBindPlugin] = field(default_factory=list)
    budgets: Budgets = field(default_factory=Budgets)

    def names(self) -> list[str]:
        """Every plugin in the profile, once, in the order first seen."""
        seen: dict[str, None] = {self.queue_sort.name: None}
        for group in (
            self.pre_filters,
            self.static_filters,
            self.node_filters,
            self.post_filters,
            self.preemptions,
            self.pre_scores,
            [p for p, _ in self.scores],
            self.reserves,
            self.permits,
            self.pre_binds,
            self.binds,
            self.post_binds,
        ):
            for plugin in group:
                seen.setdefault(plugin.name, None)
        return list(seen)
