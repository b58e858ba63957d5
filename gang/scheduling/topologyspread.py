"""PodTopologySpread: ``topologySpreadConstraints`` (DoNotSchedule and ScheduleAnyway), gang-aware.

Why this exists: replicas and training workers are spread over zones or hosts with
``maxSkew``; a scheduler that ignores it binds a gang of eight 8/0/0/0 over four zones. This
plugin ports kube-scheduler's PodTopologySpread — Filter, Score and NormalizeScore, their node
inclusion policies (``nodeAffinityPolicy``, ``nodeTaintsPolicy``), ``minDomains`` and
``matchLabelKeys`` (merged into the selector when the pod is parsed) — with its exact reasons and
arithmetic. Gang-aware: members placed earlier in the same cycle count like bound pods, so a gang
of eight over four zones with maxSkew 1 lands 2/2/2/2, member by member.

Filter, per DoNotSchedule constraint, in order: the node must carry the topology key; then
``matching pods in its domain + (1 if the pod matches its own selector) - global minimum`` must
not exceed ``maxSkew``. Pods are counted in the incoming pod's namespace, not terminating, on
nodes that carry every constraint's key and pass the inclusion policies; the global minimum is
over those nodes' domains, and 0 while fewer than ``minDomains`` domains exist.

Score, over ScheduleAnyway constraints (or the profile's default constraints for a pod that states
none): per constraint ``matching pods in the node's domain * log(domains + 2) + maxSkew - 1``,
summed and rounded; NormalizeScore turns fewer pods into a higher score; nodes lacking a key score
0 when the pod's own constraints need it.

Default constraints apply to a pod that states none, as in kube-scheduler: ``defaulting_type:
System`` (the default) adds hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway;
``List`` adds the profile's ``default_constraints``. Their selector is the union of the selectors
of the Services and of the controller (ReplicaSet, StatefulSet, ReplicationController) that
select the pod (``gang.state.selecting``); a pod nobody selects gets none — so a plain gang's
bin-packing is untouched, while replicas behind a Service are softly spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from gang.scheduling import predicates
from gang.scheduling.framework import (
    MAX_NODE_SCORE,
    Mask,
    NodeFilterInput,
    Placed,
    ScoreInput,
    Scores,
)
from gang.scheduling.placedmemo import PlacedMemo
from gang.state.cache import Snapshot
from gang.state.labels import EVERYTHING, LabelSelector
from gang.state.podinfo import Constraints, PodInfo
from gang.state.podrules import (
    DO_NOT_SCHEDULE,
    HONOR,
    SCHEDULE_ANYWAY,
    RuleError,
    SpreadConstraint,
    parse_spread,
)
from gang.state.selecting import SelectorCatalog

REASON_MISSING_LABEL: Final = (
    "node(s) didn't match pod topology spread constraints (missing required label)"
)
REASON_SKEW: Final = "node(s) didn't match pod topology spread constraints"
HOSTNAME: Final = "kubernetes.io/hostname"
ZONE: Final = "topology.kubernetes.io/zone"
SYSTEM: Final = "System"
LIST: Final = "List"
#: kube-scheduler's ``System`` default constraints (their selector is filled per pod)
SYSTEM_DEFAULTS: Final = (
    SpreadConstraint(3, HOSTNAME, SCHEDULE_ANYWAY, EVERYTHING),
    SpreadConstraint(5, ZONE, SCHEDULE_ANYWAY, EVERYTHING),
)
Ids = npt.NDArray[np.int64]
_REASONS: Final = {1: REASON_MISSING_LABEL, 2: REASON_SKEW}


def parse_default_constraints(raw: Any) -> tuple[SpreadConstraint, ...]:
    """Profile-level default constraints (kube-scheduler's ``defaultConstraints``: no selector;
    each pod's is derived from the Services and controller selecting it)."""
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise ValueError("default_constraints: expected a list of topology spread constraints")
    for i, entry in enumerate(raw):
        if isinstance(entry, Mapping) and entry.get("labelSelector") is not None:
            raise ValueError(f"default_constraints[{i}].labelSelector: must not be set")
    try:
        return parse_spread(raw, {})
    except RuleError as err:
        message = str(err).replace("spec.topologySpreadConstraints", "default_constraints")
        raise ValueError(message) from None


@dataclass(slots=True, eq=False)  # plugins are compared by identity
class PodTopologySpread:
    default_constraints: tuple[SpreadConstraint, ...] = ()
    #: "System" (kube-scheduler's defaults) or "List" (``default_constraints``)
    defaulting_type: str = SYSTEM
    name: str = "PodTopologySpread"
    #: relevant for a pod by its own or its controller's default constraints
    relevance_by_template: ClassVar[bool] = True
    _last: tuple[object, npt.NDArray[np.int8]] | None = field(default=None, repr=False)
    #: the last selected pod's default constraints, with the catalog and its generation they
    #: came from (each member is asked about four times: relevance, Filter, scoring, Score)
    _defaulted: tuple[PodInfo, SelectorCatalog, int, tuple[SpreadConstraint, ...]] | None = field(
        default=None, repr=False
    )
    _memo: PlacedMemo = field(default_factory=PlacedMemo, repr=False)
    #: (constraints, node-set version, policy) → rows passing the node inclusion policy
    _included: dict[tuple[Constraints, int, str], Mask] = field(default_factory=dict, repr=False)
    _eligible_memo: dict[
        tuple[tuple[SpreadConstraint, ...], Constraints, int],
        list[tuple[SpreadConstraint, Mask, Ids]],
    ] = field(default_factory=dict, repr=False)

    def constraints(
        self, pod: PodInfo, snap: Snapshot
    ) -> tuple[tuple[SpreadConstraint, ...], bool]:
        """The constraints that apply to the pod — its own, or the defaults with the selector
        of whatever selects it — and whether a node must carry every key to be scored (its own
        or List defaults: yes; System defaults: no, as in kube-scheduler)."""
        if pod.rules.spread:
            return pod.rules.spread, True
        defaults = SYSTEM_DEFAULTS if self.defaulting_type == SYSTEM else self.default_constraints
        if not defaults:
            return (), False
        catalog = snap.selecting
        last = self._defaulted
        if (
            last is not None
            and last[0] is pod
            and last[1] is catalog
            and last[2] == catalog.generation
        ):
            return last[3], self.defaulting_type != SYSTEM
        selector = catalog.default_selector(pod.namespace, pod.labels, pod.controller)
        if selector is None:  # (answered at once where nothing could select it: not kept)
            return (), False
        found = tuple(
            SpreadConstraint(
                c.max_skew,
                c.topology_key,
                c.when_unsatisfiable,
                selector,
                c.min_domains,
                c.node_affinity_policy,
                c.node_taints_policy,
            )
            for c in defaults
        )
        self._defaulted = (pod, catalog, catalog.generation, found)
        return found, self.defaulting_type != SYSTEM

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        return bool(self.constraints(pod, snap)[0])

    def relevance_label_keys(self, snap: Snapshot, pods: Sequence[PodInfo]) -> set[str]:
        """What the Services select by, in the namespaces of those of ``pods`` stating no
        spread of their own: whether such a pod gets default constraints depends on its labels
        through them only (a controller's selector is its controller's, whatever its labels)."""
        if self.defaulting_type != SYSTEM and not self.default_constraints:
            return set()
        namespaces = {p.namespace for p in pods if not p.rules.spread}
        return {key for ns in namespaces for key in snap.selecting.label_keys_read(ns)}

    def scores_for(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        constraints = self.constraints(pod, snap)[0]
        return any(c.when_unsatisfiable == SCHEDULE_ANYWAY for c in constraints)

    # --- shared counting ---------------------------------------------------------------------

    def _inclusion(self, snap: Snapshot, pod: PodInfo, c: SpreadConstraint) -> Mask:
        """Rows whose pods count for ``c``: live nodes passing the inclusion policies."""
        mask = snap.valid.copy()
        for policy, check in (
            (c.node_affinity_policy, predicates.check_node_affinity),
            (c.node_taints_policy, predicates.check_taints),
        ):
            if policy != HONOR:
                continue
            key = (pod.constraints, snap.version, check.__name__)
            found = self._included.get(key)
            if found is None:
                if len(self._included) > 1024:
                    self._included.clear()
                found = np.array(
                    [f is not None and check(pod.constraints, f) is None for f in snap.facts],
                    dtype=np.bool_,
                )
                self._included[key] = found
            mask &= found
        return mask

    def _matching_rows(
        self, snap: Snapshot, placed: Sequence[Placed], pod: PodInfo, c: SpreadConstraint
    ) -> list[int]:
        """Rows of the pods ``c`` counts: same namespace, selected, not terminating."""
        row_of = snap.domains.row_of
        rows = [
            row_of[p.node]
            for p in snap.pods.selected(c.selector)
            if p.namespace == pod.namespace and not p.deleting and p.node in row_of
        ]
        return rows + self._memo.selected(
            placed,
            (pod.namespace, c.selector),
            c.selector,
            lambda m: m.namespace == pod.namespace and c.selector.matches(m.labels),
        )

    # --- Filter ------------------------------------------------------------------------------

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        result: Mask = self._verdict(s) == 0
        return result

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        code = int(self._verdict(s)[row])
        return [_REASONS[code]] if code else []

    def _verdict(self, s: NodeFilterInput) -> npt.NDArray[np.int8]:
        """Per row: 0 fits, 1 lacks a topology key, 2 would exceed a maxSkew (first failing
        constraint wins, as in kube-scheduler)."""
        if self._last is not None and self._last[0] is s:
            return self._last[1]
        snap, pod = s.snap, s.pod
        codes = np.zeros(len(snap.names), dtype=np.int8)
        # the first failing constraint wins: each fills only rows not failed yet
        for c, _, counts, present in self.hard_counts(snap, pod, s.placed):
            if len(present) == 0:
                minimum = None  # no domain to compare with: any labelled node will do
            elif c.min_domains is not None and len(present) < c.min_domains:
                minimum = 0
            else:
                minimum = int(counts[present].min())
            self_match = 1 if c.selector.matches(pod.labels) else 0
            per_domain = np.zeros(len(counts), dtype=np.int8)
            if minimum is not None:
                per_domain[counts + self_match - minimum > c.max_skew] = 2
            verdict = snap.domains(c.topology_key).per_node(per_domain, 1)
            codes = verdict if not codes.any() else np.where(codes == 0, verdict, codes)
        self._last = (s, codes)
        return codes

    def hard_counts(
        self, snap: Snapshot, pod: PodInfo, placed: Sequence[Placed]
    ) -> list[
        tuple[SpreadConstraint, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]
    ]:
        """Per DoNotSchedule constraint: (constraint, domain id per row, matching pods per
        domain, the domains that count), as kube-scheduler's PreFilter computes them."""
        constraints = self.constraints(pod, snap)[0]
        hard = tuple(c for c in constraints if c.when_unsatisfiable == DO_NOT_SCHEDULE)
        out = []
        for c, counted, present in self._eligible(snap, pod, hard):
            domains = snap.domains(c.topology_key)
            rows = self._matching_rows(snap, placed, pod, c)
            counts = domains.count(rows, where=counted)[:-1]
            out.append((c, domains.ids, counts, present))
        return out

    def _eligible(
        self, snap: Snapshot, pod: PodInfo, hard: tuple[SpreadConstraint, ...]
    ) -> list[tuple[SpreadConstraint, Mask, Ids]]:
        """Per constraint: the rows whose pods count, and the domains among them (they depend
        on node labels and the pod's template only: cached per node-set version)."""
        key = (hard, pod.constraints, snap.version)
        found = self._eligible_memo.get(key)
        if found is None:
            if len(self._eligible_memo) > 1024:
                self._eligible_memo.clear()
            all_keys = snap.valid.copy()
            for c in hard:
                all_keys &= snap.domains(c.topology_key).ids >= 0
            found = []
            for c in hard:
                counted = all_keys & self._inclusion(snap, pod, c)
                found.append((c, counted, np.unique(snap.domains(c.topology_key).ids[counted])))
            self._eligible_memo[key] = found
        return found

    # --- Score -------------------------------------------------------------------------------

    def score(self, s: ScoreInput) -> Scores:
        """Raw scores; NaN marks a node ignored (it lacks a key the pod's constraints need)."""
        pod, snap = s.pod, s.snap
        raw = np.zeros(len(s.candidates), dtype=np.float64)
        if pod is None or snap is None:
            return raw
        constraints, own = self.constraints(pod, snap)
        soft = [c for c in constraints if c.when_unsatisfiable == SCHEDULE_ANYWAY]
        if not soft:
            return raw
        cand = s.candidates
        has_all = np.ones(len(cand), dtype=np.bool_)
        for c in soft:
            has_all &= snap.domains(c.topology_key).ids[cand] >= 0
        ignored = ~has_all if own else np.zeros(len(cand), dtype=np.bool_)
        scored = cand[~ignored]
        all_keys = np.ones(len(snap.names), dtype=np.bool_)
        if own:
            for c in soft:
                all_keys &= snap.domains(c.topology_key).ids >= 0
        # the counted rows, per selector: default constraints share one (host and zone)
        rows_of: dict[LabelSelector, list[int]] = {}
        for c in soft:
            domains = snap.domains(c.topology_key)
            labelled = domains.ids[cand] >= 0  # a node without the key scores nothing here
            rows = rows_of.get(c.selector)
            if rows is None:
                rows = rows_of[c.selector] = self._matching_rows(snap, s.placed, pod, c)
            if not rows:  # every count is 0 (a per-replica Service's pod, a gang's first)
                raw += np.where(labelled, float(c.max_skew - 1), 0.0)
                continue
            slots = domains.slots  # a node without the key sits in the last, "" slot
            if c.topology_key == HOSTNAME:
                size = len(scored)
                counted = snap.valid
            else:
                # the candidates' domains, "" included (as kube-scheduler counts them); pods
                # count on every node in one of them that the inclusion policies admit
                tracked = np.zeros(len(domains.values) + 1, dtype=np.bool_)
                tracked[slots[scored]] = True
                size = int(tracked.sum())
                counted = all_keys & self._inclusion(snap, pod, c) & tracked[slots]
            counts = domains.count(rows, where=counted)
            weight = float(np.log(size + 2))
            raw += np.where(labelled, counts[slots[cand]] * weight + (c.max_skew - 1), 0.0)
        raw = np.floor(raw + 0.5)  # Go's math.Round for non-negative values
        raw[ignored] = np.nan
        return raw

    def normalize(self, scores: Scores) -> Scores:
        """``MaxNodeScore * (max + min - score) / max`` (integer division), ignored nodes 0."""
        if not len(scores):
            return scores
        valid = ~np.isnan(scores)
        if not valid.any():
            return np.zeros_like(scores)
        low, high = scores[valid].min(), scores[valid].max()
        out = np.zeros_like(scores)
        if high == 0:
            out[valid] = MAX_NODE_SCORE
            return out
        out[valid] = np.floor(MAX_NODE_SCORE * (high + low - scores[valid]) / high)
        return out
