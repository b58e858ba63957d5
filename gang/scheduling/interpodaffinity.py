"""InterPodAffinity: required and preferred pod affinity / anti-affinity, for whole gangs.

Why this exists: MPI and training jobs keep one rank per host with required anti-affinity on
``kubernetes.io/hostname`` and put a launcher next to its workers with pod affinity. A scheduler
that reads these rules and ignores them binds eight ranks on one node. This plugin ports
kube-scheduler's InterPodAffinity (Filter, Score, NormalizeScore) with its exact reasons and
arithmetic, and makes it gang-aware: the members placed earlier in the same cycle (``placed``)
count exactly like pods already bound, so "one per node" holds inside a gang as between gangs.

Per pod the Filter checks, in kube-scheduler's order:
1. the pod's required affinity: every term needs a matching pod in the node's domain — a pod
   matching *all* terms counts for each term — unless no pod matches anywhere and the pod matches
   its own terms (the first of a group that wants to be together may start it);
2. the pod's required anti-affinity: no pod matching a term in the node's domain;
3. existing pods' required anti-affinity against the incoming pod (symmetry).

The Score adds, per topology domain, the weights of the pod's preferred terms matched by pods
there (anti-affinity subtracts) and of other pods' terms matching this pod (their required
affinity at ``hard_pod_affinity_weight``), then normalises to 0..100 by min and max.

Speed: the pods a term selects come from the label index (``gang.state.podindex``), other pods'
terms from its term index; counting per domain is numpy over ``NodeDomains`` ids, so a check is
a lookup and a vector operation, never a scan of every pod on every node.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final

import numpy as np
import numpy.typing as npt

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
from gang.state.podindex import (
    PREFERRED,
    PREFERRED_ANTI,
    REQUIRED,
    REQUIRED_ANTI,
    affinity_terms,
)
from gang.state.podinfo import PodInfo
from gang.state.podrules import AffinityTerm

REASON_EXISTING_ANTI: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_ANTI: Final = "node(s) didn't match pod anti-affinity rules"
_REASONS: Final = {1: REASON_EXISTING_ANTI, 2: REASON_AFFINITY, 3: REASON_ANTI}
_EMPTY: Final[Mapping[str, str]] = {}


def _rows_matching(
    snap: Snapshot, placed: Sequence[Placed], terms: tuple[AffinityTerm, ...], memo: PlacedMemo
) -> list[int]:
    """Rows of the pods (placed anywhere, or earlier in this cycle) that match every term."""
    if not terms:
        return []
    ns_labels = snap.namespace_labels

    def matches_all(pod_namespace: str, labels: Mapping[str, str]) -> bool:
        ns = ns_labels.get(pod_namespace, _EMPTY)
        return all(t.matches(pod_namespace, labels, ns) for t in terms)

    row_of = snap.domains.row_of
    rows = [
        row_of[pod.node]
        for pod in snap.pods.selected(terms[0].selector)
        if pod.node in row_of and matches_all(pod.namespace, pod.labels)
    ]
    return rows + memo.rows(placed, terms, lambda m: matches_all(m.namespace, m.labels))


def _terms_selecting(
    pod: PodInfo, snap: Snapshot, placed: Sequence[Placed], memo: PlacedMemo
) -> Iterator[tuple[str, int, AffinityTerm, list[tuple[int, int]]]]:
    """Other pods' affinity terms that select ``pod``: (kind, weight, term, [(row, count)])."""
    ns_labels = snap.namespace_labels.get(pod.namespace, _EMPTY)
    row_of = snap.domains.row_of
    for (kind, weight, term), nodes in snap.pods.terms_selecting(
        pod.namespace, pod.labels, ns_labels
    ):
        rows = [(row_of[n], c) for n, c in nodes.items() if n in row_of]
        yield kind, weight, term, rows
    # members of one template share their terms: each distinct term is matched once
    grouped = memo.groups(
        placed,
        "terms",
        lambda m, row: [(t, (row, 1)) for t in affinity_terms(m.rules.pod_affinity)],
    )
    for (kind, weight, term), rows in grouped.items():  # type: ignore[misc]
        if term.matches(pod.namespace, pod.labels, ns_labels):
            yield kind, weight, term, rows


def _states_scored_terms(pod: PodInfo) -> bool:
    affinity = pod.rules.pod_affinity
    return bool(affinity.required or affinity.preferred or affinity.preferred_anti)


def _per_domain(
    snap: Snapshot, key: str, rows: Sequence[tuple[int, int]]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(domain id per node row for ``key``, count per domain of the given (row, count)s)."""
    domains = snap.domains(key)
    where = [row for row, _ in rows]
    return domains.ids, domains.count(where, [count for _, count in rows])[:-1]


def _occupied(snap: Snapshot, key: str, rows: Sequence[tuple[int, int]]) -> Mask:
    """Nodes whose ``key`` domain holds one of ``rows`` (nodes without the label: False)."""
    _, counts = _per_domain(snap, key, rows)
    return snap.domains(key).per_node(counts > 0, False)


@dataclass(slots=True, eq=False)  # plugins are compared by identity
class InterPodAffinity:
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False
    name: str = "InterPodAffinity"
    #: relevant for a pod by its labels and namespace against the terms around it
    relevance_by_template: ClassVar[bool] = True
    #: the last filter verdict (codes per row), for ``reasons`` on the same input
    _last: tuple[object, npt.NDArray[np.int8]] | None = field(default=None, repr=False)
    _memo: PlacedMemo = field(default_factory=PlacedMemo, repr=False)

    def relevant(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        if pod.rules.pod_affinity:
            return True
        stating = self._memo.rows(placed, "stating", lambda m: bool(m.rules.pod_affinity))
        if not snap.pods.has_terms() and not stating:
            return False  # nobody states a rule about other pods
        return next(_terms_selecting(pod, snap, placed, self._memo), None) is not None

    def relevance_label_keys(self, snap: Snapshot, pods: Sequence[PodInfo]) -> set[str]:
        """The keys the selectors of the placed pods' terms and of ``pods``' own terms read:
        no other label decides whether a term selects a pod."""
        keys = set(snap.pods.term_label_keys)
        own = {id(p.rules.pod_affinity): p.rules.pod_affinity for p in pods}
        for affinity in own.values():
            for _, _, term in affinity_terms(affinity):
                keys |= term.selector.keys_read()
        return keys

    def scores_for(self, pod: PodInfo, snap: Snapshot, placed: Sequence[Placed]) -> bool:
        """Preferred terms of its own, or other pods' terms that weigh on it (their required
        affinity at the hard weight, their preferences); required anti-affinity is not scored."""
        affinity = pod.rules.pod_affinity
        if affinity.preferred or affinity.preferred_anti:
            return True
        if self.ignore_preferred_terms_of_existing_pods:
            return False
        weighing = self._memo.rows(placed, "weighing", _states_scored_terms)
        if not snap.pods.scored_terms and not weighing:
            return False  # only required anti-affinity around: nothing to score
        for kind, _, _, _ in _terms_selecting(pod, snap, placed, self._memo):
            if kind != REQUIRED_ANTI and (kind != REQUIRED or self.hard_pod_affinity_weight > 0):
                return True
        return False

    # --- Filter ----------------------------------------------------------------------------

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        codes = self._verdict(s)
        result: Mask = codes == 0
        return result

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        code = int(self._verdict(s)[row])
        return [_REASONS[code]] if code else []

    def _verdict(self, s: NodeFilterInput) -> npt.NDArray[np.int8]:
        """Per row: 0 fits, else the first failing check (2 affinity, 3 anti-affinity, 1 other
        pods' anti-affinity)."""
        if self._last is not None and self._last[0] is s:
            return self._last[1]
        snap, pod = s.snap, s.pod
        codes = np.zeros(len(snap.names), dtype=np.int8)
        affinity = pod.rules.pod_affinity
        # kube-scheduler's order is affinity, anti-affinity, existing pods' anti-affinity: the
        # checks are written last to first, so the first failing one is what remains
        own: list[tuple[AffinityTerm, list[tuple[int, int]], Mask]] = []
        for term in affinity.required_anti:
            rows = [(r, 1) for r in _rows_matching(snap, s.placed, (term,), self._memo)]
            own.append((term, rows, _occupied(snap, term.topology_key, rows)))
        for kind, _, term, rows in _terms_selecting(pod, snap, s.placed, self._memo):
            # a gang's "one per node" is the same term, over the same pods (in the same order,
            # the order they were placed in), both ways: the pod's own verdict covers it
            if kind == REQUIRED_ANTI and not any(t == term and r == rows for t, r, _ in own):
                codes[_occupied(snap, term.topology_key, rows)] = 1
        for _, _, mask in own:
            codes[mask] = 3
        if affinity.required:
            codes[~self._affinity_ok(s, affinity.required)] = 2
        self._last = (s, codes)
        return codes

    def _affinity_ok(self, s: NodeFilterInput, terms: Sequence[AffinityTerm]) -> Mask:
        snap, pod = s.snap, s.pod
        rows = [(r, 1) for r in _rows_matching(snap, s.placed, tuple(terms), self._memo)]
        labelled = np.ones(len(snap.names), dtype=np.bool_)
        populated = np.ones(len(snap.names), dtype=np.bool_)
        anywhere = False
        for term in terms:
            ids, counts = _per_domain(snap, term.topology_key, rows)
            labelled &= ids >= 0
            if len(counts):
                populated &= (ids >= 0) & (counts[np.maximum(ids, 0)] > 0)
                anywhere = anywhere or bool(counts.any())
            else:
                populated[:] = False
        if not anywhere:
            ns_labels = snap.namespace_labels.get(pod.namespace, _EMPTY)
            if all(t.matches(pod.namespace, pod.labels, ns_labels) for t in terms):
                return labelled  # it may start the group it wants to join
        result: Mask = labelled & populated
        return result

    # --- Score -----------------------------------------------------------------------------

    def score(self, s: ScoreInput) -> Scores:
        pod, snap = s.pod, s.snap
        raw = np.zeros(len(s.candidates), dtype=np.float64)
        if pod is None or snap is None:
            return raw
        affinity = pod.rules.pod_affinity
        if self.ignore_preferred_terms_of_existing_pods and not (
            affinity.preferred or affinity.preferred_anti
        ):
            return raw
        by_key: dict[str, npt.NDArray[np.int64]] = {}

        def add(key: str, rows: Sequence[tuple[int, int]], weight: int) -> None:
            _, counts = _per_domain(snap, key, rows)
            total = by_key.get(key)
            by_key[key] = counts * weight if total is None else total + counts * weight

        memo = self._memo
        for weighted in affinity.preferred:
            rows = [(r, 1) for r in _rows_matching(snap, s.placed, (weighted.term,), memo)]
            add(weighted.term.topology_key, rows, weighted.weight)
        for weighted in affinity.preferred_anti:
            rows = [(r, 1) for r in _rows_matching(snap, s.placed, (weighted.term,), memo)]
            add(weighted.term.topology_key, rows, -weighted.weight)
        for kind, weight, term, rows in _terms_selecting(pod, snap, s.placed, memo):
            if kind == REQUIRED and self.hard_pod_affinity_weight > 0:
                add(term.topology_key, rows, self.hard_pod_affinity_weight)
            elif kind == PREFERRED and not self.ignore_preferred_terms_of_existing_pods:
                add(term.topology_key, rows, weight)
            elif kind == PREFERRED_ANTI and not self.ignore_preferred_terms_of_existing_pods:
                add(term.topology_key, rows, -weight)
        for key, counts in by_key.items():
            if not len(counts):
                continue
            ids = snap.domains(key).ids[s.candidates]
            raw += np.where(ids >= 0, counts[np.maximum(ids, 0)], 0)
        return raw

    def normalize(self, scores: Scores) -> Scores:
        """``MaxNodeScore * (score - min) / (max - min)``, truncated; all 0 when all equal."""
        if not len(scores):
            return scores
        low, high = scores.min(), scores.max()
        if high <= low:
            return np.zeros_like(scores)
        result: Scores = np.trunc(MAX_NODE_SCORE * (scores - low) / (high - low))
        return result
