"""Topology domains: for a label key, which domain each node row belongs to, as an int array.

Why this exists: pod affinity, topology spread and gang packing all ask "which nodes share this
node's zone (or host, or rack)?". Answering it with a per-row integer array turns a rule into
numpy indexing: count matching pods per domain id once, then ``counts[ids]`` is every node's
answer at once. Domains depend only on node labels, so one ``NodeDomains`` serves every
snapshot of a node-set version (the cache hands out a new one when the version changes) and
computes each key's array on first use.

Ordered levels (block → rack → host) make a :class:`DomainTree`: a domain of a level is the
path of label values down to it, so rack ``r1`` of block ``b1`` and rack ``r1`` of block ``b2``
are two racks, as in Kueue's and KAI's topology trees. A node that lacks any level's label is in
no domain of the tree: the tree counts it (``unlabelled``) so a message can say so, and never
guesses where it stands. A level may also be a Volcano HyperNode tier (``gang.state.hypernodes``):
its domains are the HyperNodes of that tier, worked out from the nodes' names and labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from gang.models.topologyapis import tier_of
from gang.state.hypernodes import HyperNode, membership
from gang.state.nodefacts import NodeFacts

Ids = npt.NDArray[np.int64]
T = TypeVar("T", bound=np.generic)


@dataclass(frozen=True, slots=True)
class Domains:
    """One topology key: ``ids[row]`` is the row's domain (-1: the node lacks the label)."""

    ids: Ids
    values: list[str]  # domain id → label value
    id_of: Mapping[str, int]
    #: ``ids`` with -1 replaced by ``len(values)``: index a per-domain array with one extra
    #: slot (the answer for nodes without the label) to get every node's answer in one gather
    slots: Ids

    def count(
        self,
        rows: Sequence[int],
        weights: Sequence[int] | None = None,
        where: npt.NDArray[np.bool_] | None = None,
    ) -> Ids:
        """Per domain, then one more slot for nodes without the label: how many of ``rows``
        (each counted ``weights[i]`` times, default once; only rows ``where`` admits) are in it."""
        counts = np.zeros(len(self.values) + 1, dtype=np.int64)
        if len(rows):
            at = np.asarray(rows, dtype=np.intp)
            many = np.ones(len(at), dtype=np.int64) if weights is None else np.asarray(weights)
            if where is not None:
                keep = where[at]
                at, many = at[keep], many[keep]
            np.add.at(counts, self.slots[at], many)
        return counts

    def per_node(self, per_domain: npt.NDArray[T], unlabelled: object) -> npt.NDArray[T]:
        """Spread a per-domain answer over the node rows; ``unlabelled`` for nodes without it."""
        extended = np.empty(len(per_domain) + 1, dtype=per_domain.dtype)
        extended[:-1] = per_domain
        extended[-1] = unlabelled
        result: npt.NDArray[T] = extended[self.slots]
        return result


@dataclass(frozen=True, slots=True)
class DomainTree:
    """Nodes under ordered topology levels, coarse to fine.

    Invariant: ``ids[i][row] >= 0`` for every level or for none (a node lacking a level's
    label is outside the tree); ``parent[i][d]`` is the domain at level ``i - 1`` holding
    domain ``d`` of level ``i`` (0 at level 0), so every row's domains form one path."""

    levels: tuple[str, ...]
    ids: list[Ids]  # per level: row → domain id (-1: outside the tree)
    parent: list[Ids]
    #: per level: domain → its label values from level 0 down to it
    values: list[list[tuple[str, ...]]]
    #: per level key: how many live nodes lack it
    unlabelled: dict[str, int]

    def size(self, level: int) -> int:
        return len(self.values[level])

    def ancestors(self, level: int, up_to: int) -> Ids:
        """Per domain of ``level``: the domain of the coarser level ``up_to`` holding it."""
        found: Ids = np.arange(self.size(level), dtype=np.int64)
        for up in range(level, up_to, -1):
            found = self.parent[up][found]
        return found


@dataclass(slots=True)
class NodeDomains:
    facts: Sequence[NodeFacts | None]
    #: node name → row, for every live node
    row_of: dict[str, int] = field(default_factory=dict)
    #: Volcano HyperNodes: their tiers are levels too (see ``gang.state.hypernodes``)
    hypernodes: tuple[HyperNode, ...] = ()
    _tiers: dict[int, dict[int, str]] | None = None
    _by_key: dict[str, Domains] = field(default_factory=dict)
    _trees: dict[tuple[str, ...], DomainTree] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.row_of:
            self.row_of = {f.name: row for row, f in enumerate(self.facts) if f is not None}

    def __call__(self, key: str) -> Domains:
        found = self._by_key.get(key)
        if found is None:
            id_of: dict[str, int] = {}
            ids = np.full(len(self.facts), -1, dtype=np.int64)
            for row, value in self._values(key):
                ids[row] = id_of.setdefault(value, len(id_of))
            slots = np.where(ids >= 0, ids, len(id_of))
            found = self._by_key[key] = Domains(ids, list(id_of), id_of, slots)
        return found

    def _values(self, key: str) -> list[tuple[int, str]]:
        """(row, the node's value for ``key``), for every live node that has one: its label,
        or for a HyperNode tier the HyperNode of that tier above it."""
        tier = tier_of(key)
        if tier is not None:
            if self._tiers is None:
                self._tiers = membership(self.hypernodes, self.facts)
            return sorted(self._tiers.get(tier, {}).items())
        found = []
        for row, facts in enumerate(self.facts):
            if facts is not None:
                value = facts.labels.get(key)
                if value is not None:
                    found.append((row, value))
        return found

    def tree(self, levels: tuple[str, ...]) -> DomainTree:
        """The domain tree of ``levels`` (coarse to fine) over the live nodes (cached)."""
        found = self._trees.get(levels)
        if found is None:
            found = self._trees[levels] = self._build_tree(levels)
        return found

    def _build_tree(self, levels: tuple[str, ...]) -> DomainTree:
        per_key = [self(key) for key in levels]
        live = np.array([f is not None for f in self.facts], dtype=np.bool_)
        inside = live.copy()
        for domains in per_key:
            inside &= domains.ids >= 0
        rows = np.flatnonzero(inside)
        ids: list[Ids] = []
        parents: list[Ids] = []
        values: list[list[tuple[str, ...]]] = []
        prefix = np.zeros(len(rows), dtype=np.int64)  # the row's domain one level up
        for domains in per_key:
            code = prefix * (len(domains.values) + 1) + domains.ids[rows]
            _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
            level_ids = np.full(len(self.facts), -1, dtype=np.int64)
            level_ids[rows] = inverse
            above = values[-1] if values else None
            parent = prefix[first] if len(first) else np.zeros(0, dtype=np.int64)
            names = [
                (*(above[int(up)] if above is not None else ()), domains.values[int(v)])
                for up, v in zip(parent, domains.ids[rows][first], strict=True)
            ]
            ids.append(level_ids)
            parents.append(parent.astype(np.int64))
            values.append(names)
            prefix = inverse.astype(np.int64)
        unlabelled = {
            key: int((live & (domains.ids < 0)).sum())
            for key, domains in zip(levels, per_key, strict=True)
        }
        return DomainTree(levels, ids, parents, values, unlabelled)
