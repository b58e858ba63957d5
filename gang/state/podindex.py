"""Every pod that holds a node (bound or assumed), indexed by label and by affinity term.

Why this exists: inter-pod affinity is kube-scheduler's slowest plugin because every check scans
the pods of every node. Here a check is a lookup instead:

- ``by_label[(key, value)]`` holds the pods carrying that label, so a selector starts from the
  pods of the requirement that the fewest placed pods satisfy (counted in these maps), not from
  all pods; only selectors made of ``NotIn`` / ``DoesNotExist`` fall back to a scan.
  It is built when the first selector is asked about, and kept from then on: a cluster where no
  pod states a pod-affinity or spread rule never asks, and indexing every placed pod's labels
  twice was about a twentieth of the scheduler's samples in a profile of such a cluster;
- ``term_nodes`` counts, per distinct affinity term of the pods already placed, the nodes they
  sit on. Pods stamped from one template share their terms, so a cluster of 20,000 pods in a few
  hundred jobs has a few hundred terms; an incoming pod is matched against the terms that could
  select it (``term_by_label``), which answers "whose anti-affinity forbids me where?"
  (kube-scheduler's symmetry) without visiting those pods.

The cache keeps this index in step with its own pod records (``ClusterCache._attach`` /
``_detach``), so the invariant is the cache's: a pod is here exactly while it is ASSUMED or BOUND
on a node; ``deleting`` follows the pod's deletionTimestamp (spread ignores such pods, affinity
counts them, as upstream does).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gang.state.labels import LabelSelector
from gang.state.podinfo import PodInfo
from gang.state.podrules import AffinityTerm, PodAffinity

Key = tuple[str, str]
#: how an existing pod's term bears on others: its kind and weight (1 for required terms)
REQUIRED, REQUIRED_ANTI, PREFERRED, PREFERRED_ANTI = "required", "anti", "preferred", "avoid"
TermKey = tuple[str, int, AffinityTerm]


@dataclass(slots=True)
class IndexedPod:
    key: Key
    namespace: str
    labels: Mapping[str, str]
    node: str
    affinity: PodAffinity
    deleting: bool
    claims: tuple[str, ...] = ()


@dataclass(slots=True)
class PodIndex:
    pods: dict[Key, IndexedPod] = field(default_factory=dict)
    #: while ``labels_indexed``: exactly the pods of ``pods`` carrying each label pair
    by_label: dict[tuple[str, str], dict[Key, IndexedPod]] = field(default_factory=dict)
    #: the pods carrying a label key, whatever its value (for ``Exists`` requirements)
    by_key: dict[str, dict[Key, IndexedPod]] = field(default_factory=dict)
    #: False until a selector is first asked about (:meth:`selected`); both maps empty until then
    labels_indexed: bool = False
    #: per affinity term of a placed pod: the nodes holding pods with it, counted
    term_nodes: dict[TermKey, Counter[str]] = field(default_factory=dict)
    #: terms whose selector needs one of these label pairs; ``term_anywhere`` the others
    term_by_label: dict[tuple[str, str], set[TermKey]] = field(default_factory=dict)
    term_anywhere: set[TermKey] = field(default_factory=set)
    #: how many distinct terms weigh on a score (every kind but required anti-affinity)
    scored_terms: int = 0
    #: label key → how many distinct terms of ``term_nodes`` have a selector reading it: the
    #: only pod labels inter-pod affinity can tell pods apart by (a key at 0 is deleted)
    term_label_keys: Counter[str] = field(default_factory=Counter)
    #: node → the pods there that mount claims (for per-node volume limits)
    with_claims: dict[str, dict[Key, IndexedPod]] = field(default_factory=dict)

    # --- keeping it in step ------------------------------------------------------------------

    def add(self, info: PodInfo, node: str) -> None:
        """Index ``info`` on ``node`` (replacing what was known of the same key)."""
        old = self.pods.get(info.key)
        if old is not None:
            if (
                old.node == node
                and old.labels == info.labels
                and old.deleting == info.deleting
                and old.affinity is info.rules.pod_affinity
                and old.claims is info.rules.claims
            ):
                return
            self.remove(info.key)
        pod = IndexedPod(
            info.key,
            info.namespace,
            info.labels,
            node,
            info.rules.pod_affinity,
            info.deleting,
            info.rules.claims,
        )
        self.pods[pod.key] = pod
        if pod.claims:
            self.with_claims.setdefault(node, {})[pod.key] = pod
        if self.labels_indexed:
            self._index_labels(pod)
        for term_key in affinity_terms(pod.affinity) if pod.affinity else ():
            nodes = self.term_nodes.get(term_key)
            if nodes is None:
                nodes = self.term_nodes[term_key] = Counter()
                self.scored_terms += term_key[0] != REQUIRED_ANTI
                self.term_label_keys.update(term_key[2].selector.keys_read())
                pairs = term_key[2].selector.index_keys()
                if pairs is None:
                    self.term_anywhere.add(term_key)
                for pair in pairs or ():
                    self.term_by_label.setdefault(pair, set()).add(term_key)
            nodes[node] += 1

    def remove(self, key: Key) -> None:
        pod = self.pods.pop(key, None)
        if pod is None:
            return
        if pod.claims:
            on_node = self.with_claims.get(pod.node, {})
            on_node.pop(key, None)
            if not on_node:
                self.with_claims.pop(pod.node, None)
        if self.labels_indexed:
            for pair in pod.labels.items():
                _discard(self.by_label, pair, key)
                _discard(self.by_key, pair[0], key)
        for term_key in affinity_terms(pod.affinity):
            nodes = self.term_nodes[term_key]
            nodes[pod.node] -= 1
            if nodes[pod.node] <= 0:
                del nodes[pod.node]
            if not nodes:
                del self.term_nodes[term_key]
                self.scored_terms -= term_key[0] != REQUIRED_ANTI
                for label_key in term_key[2].selector.keys_read():
                    left = self.term_label_keys[label_key] - 1
                    if left:
                        self.term_label_keys[label_key] = left
                    else:
                        del self.term_label_keys[label_key]
                pairs = term_key[2].selector.index_keys()
                self.term_anywhere.discard(term_key)
                for pair in pairs or ():
                    keys = self.term_by_label.get(pair)
                    if keys is not None:
                        keys.discard(term_key)
                        if not keys:
                            del self.term_by_label[pair]

    def _index_labels(self, pod: IndexedPod) -> None:
        by_label, by_key = self.by_label, self.by_key
        for pair in pod.labels.items():
            holders = by_label.get(pair)
            if holders is None:
                holders = by_label[pair] = {}
            holders[pod.key] = pod
            holders = by_key.get(pair[0])
            if holders is None:
                holders = by_key[pair[0]] = {}
            holders[pod.key] = pod

    # --- questions ----------------------------------------------------------------------------

    def selected(self, selector: LabelSelector) -> Iterator[IndexedPod]:
        """Pods whose labels ``selector`` matches (namespaces are the caller's to check)."""
        if selector.nothing:
            return
        if not self.labels_indexed:
            self.labels_indexed = True
            for pod in self.pods.values():
                self._index_labels(pod)
        groups = self._narrowest(selector)
        for group in groups:
            for pod in group.values():
                if selector.matches(pod.labels):
                    yield pod

    def _narrowest(self, selector: LabelSelector) -> list[dict[Key, IndexedPod]]:
        """The fewest pods a match must be among (:meth:`LabelSelector.narrowest`), else all
        (the groups are parts of ``pods``: never more)."""
        groups = selector.narrowest(self.by_label, self.by_key)
        return [self.pods] if groups is None else groups

    def terms_selecting(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]
    ) -> Iterator[tuple[TermKey, Counter[str]]]:
        """Placed pods' affinity terms that select a pod with these labels in ``namespace``,
        with the nodes of the pods stating them."""
        seen: set[TermKey] = set()
        buckets = [self.term_anywhere]
        buckets += [self.term_by_label[p] for p in labels.items() if p in self.term_by_label]
        for bucket in buckets:
            for term_key in bucket:
                if term_key in seen:
                    continue
                seen.add(term_key)
                if term_key[2].matches(namespace, labels, namespace_labels):
                    yield term_key, self.term_nodes[term_key]

    def has_terms(self) -> bool:
        return bool(self.term_nodes)


def _discard(index: dict[Any, dict[Key, IndexedPod]], at: Any, key: Key) -> None:
    holders = index.get(at)
    if holders is not None:
        holders.pop(key, None)
        if not holders:
            del index[at]


def affinity_terms(affinity: PodAffinity) -> Iterator[TermKey]:
    """A pod's own terms, each with its kind and weight (1 for required terms)."""
    if not affinity:
        return
    for term in affinity.required:
        yield (REQUIRED, 1, term)
    for term in affinity.required_anti:
        yield (REQUIRED_ANTI, 1, term)
    for weighted in affinity.preferred:
        yield (PREFERRED, weighted.weight, weighted.term)
    for weighted in affinity.preferred_anti:
        yield (PREFERRED_ANTI, weighted.weight, weighted.term)
