"""Volcano's HyperNodes: a network topology written as objects instead of node labels.

Volcano users describe racks and spines as ``HyperNode`` objects (``topology.volcano.sh``): a
tier-1 HyperNode names its nodes (by exact name, a regular expression or a label selector), a
higher tier names HyperNodes. gang's domain tree reads levels as node label keys, so each tier
becomes one *virtual* level key (:func:`tier_key`), whose value for a node is the HyperNode of
that tier above it. Membership depends on node names and labels, so it is worked out with the
nodes (:func:`membership`), per node-set version, by ``gang.state.topology.NodeDomains``.

Volcano's own semantics, kept: a ``regexMatch`` pattern matches anywhere in the name (Go's
``regexp.MatchString``), ``labelMatch`` applies to nodes only. Where the objects are ambiguous
(a node or HyperNode named by two HyperNodes of a tier) the first by name wins, deterministically.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gang.state.labels import LabelSelector, SelectorError, parse_selector
from gang.state.nodefacts import NodeFacts


@dataclass(frozen=True, slots=True)
class Member:
    """One ``spec.members[]`` entry: what it selects, and of which kind."""

    kind: str  # "Node" or "HyperNode"
    exact: str = ""
    pattern: re.Pattern[str] | None = None
    labels: LabelSelector | None = None

    def selects(self, name: str, labels: Mapping[str, str] | None = None) -> bool:
        if self.exact:
            return name == self.exact
        if self.pattern is not None:
            return self.pattern.search(name) is not None
        return self.labels is not None and labels is not None and self.labels.matches(labels)


@dataclass(frozen=True, slots=True)
class HyperNode:
    name: str
    tier: int
    tier_name: str = ""
    members: tuple[Member, ...] = ()
    #: why it is unusable, or None
    error: str | None = None


def parse_hypernode(raw: Mapping[str, Any]) -> HyperNode:
    """A ``topology.volcano.sh/v1alpha1`` HyperNode; a malformed one carries ``error``."""
    meta = raw.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    spec = raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    tier = spec.get("tier")
    tier_name = spec.get("tierName")
    tier_name = tier_name if isinstance(tier_name, str) else ""
    if not isinstance(tier, int) or isinstance(tier, bool) or tier < 0:
        return HyperNode(
            name, 0, tier_name, error=f"spec.tier: expected a whole number >= 0, got {tier!r}"
        )
    members = spec.get("members")
    if not isinstance(members, list) or not members:
        return HyperNode(
            name, tier, tier_name, error="spec.members: member must have at least one member"
        )
    parsed: list[Member] = []
    for i, raw_member in enumerate(members):
        member = _member(raw_member, f"spec.members[{i}]")
        if isinstance(member, str):
            return HyperNode(name, tier, tier_name, error=member)
        parsed.append(member)
    return HyperNode(name, tier, tier_name, tuple(parsed))


def _member(raw: Any, where: str) -> Member | str:
    if not isinstance(raw, Mapping):
        return f"{where}: expected an object"
    kind = raw.get("type")
    if kind not in ("Node", "HyperNode"):
        return f"{where}.type: expected Node or HyperNode, got {kind!r}"
    selector = raw.get("selector")
    selector = selector if isinstance(selector, Mapping) else {}
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if selector.get(k) is not None]
    if len(given) != 1:
        return (
            f"{where}.selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
        )
    body = selector[given[0]]
    body = body if isinstance(body, Mapping) else {}
    if given[0] == "exactMatch":
        exact = body.get("name")
        if not isinstance(exact, str) or not exact:
            return f"{where}.selector.exactMatch.name: Required value"
        return Member(kind, exact=exact)
    if given[0] == "regexMatch":
        pattern = body.get("pattern")
        try:
            return Member(kind, pattern=re.compile(str(pattern or "")))
        except re.error as err:
            return f"{where}.selector.regexMatch: member regexMatch pattern is invalid: {err}"
    if kind != "Node":
        return f"{where}.selector.labelMatch: only takes effect for members of type Node"
    try:
        return Member(kind, labels=parse_selector(body, f"{where}.selector.labelMatch"))
    except SelectorError as err:
        return str(err)


def membership(
    hypernodes: Sequence[HyperNode], facts: Sequence[NodeFacts | None]
) -> dict[int, dict[int, str]]:
    """Per tier: node row → the HyperNode of that tier above it (rows outside none)."""
    usable = sorted((h for h in hypernodes if h.error is None), key=lambda h: (h.tier, h.name))
    exact: dict[str, HyperNode] = {}  # node name → the first HyperNode naming it exactly
    selecting: list[HyperNode] = []  # HyperNodes selecting nodes by pattern or labels
    for h in usable:
        for m in h.members:
            if m.kind == "Node" and m.exact:
                exact.setdefault(m.exact, h)
            elif m.kind == "Node" and h not in selecting:
                selecting.append(h)
    parent: dict[str, HyperNode] = {}  # HyperNode → the one above it (first by tier, name)
    for above in usable:
        for member in above.members:
            if member.kind != "HyperNode":
                continue
            for child in usable:
                if (
                    child.tier < above.tier
                    and child.name not in parent
                    and member.selects(child.name)
                ):
                    parent[child.name] = above
    out: dict[int, dict[int, str]] = {h.tier: {} for h in usable}
    for row, node in enumerate(facts):
        if node is None:
            continue
        first = exact.get(node.name)
        for h in selecting:
            if first is not None and (first.tier, first.name) <= (h.tier, h.name):
                break
            if any(
                m.kind == "Node" and not m.exact and m.selects(node.name, node.labels)
                for m in h.members
            ):
                first = h
                break
        seen: set[str] = set()
        while first is not None and first.name not in seen:
            seen.add(first.name)
            out[first.tier].setdefault(row, first.name)
            first = parent.get(first.name)
    return out
