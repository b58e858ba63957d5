"""Per-node Filter checks (everything except resources) with kube-scheduler's exact wording.

Why this exists: when a gang cannot be placed, its users read the reason in a pod condition or
an event, and they already know how to read kube-scheduler's ``0/100 nodes are available: 60
Insufficient nvidia.com/gpu, 40 node(s) had untolerated taint {dedicated: ml}.``. Reporting the
same reasons, in the same order and format, means runbooks, alerts and muscle memory keep working
and a pod is never "schedulable by gang, unschedulable by kube-scheduler" or the other way round.
So each check here ports one default Filter plugin — NodeUnschedulable, TaintToleration,
NodeAffinity (with ``component-helpers``' node-selector semantics, including its parse-error and
empty-term quirks) and NodePorts — and :func:`summarize` ports ``FitError.Error``.

Node JSON is parsed once per node update into :class:`NodeFacts`, so the hot loop (every pod of
a gang against every node) touches only small immutable values. Pod-side inputs come from
:class:`gang.state.podinfo.Constraints`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Final

from gang.state.labels import is_label_key as _is_label_key
from gang.state.labels import is_label_value as _is_label_value
from gang.state.labels import set_operator_matches
from gang.state.nodefacts import (
    BIND_ALL_HOST_IP,
    NodeFacts,
    Taint,
    host_port_key,
    node_facts,
    used_host_ports,
)
from gang.state.podinfo import (
    Constraints,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Toleration,
)

__all__ = [
    "REASON_HOST_PORTS",
    "REASON_NODE_SELECTOR",
    "REASON_UNSCHEDULABLE",
    "STATIC_CHECKS",
    "NodeFacts",
    "Taint",
    "check_host_ports",
    "check_node_affinity",
    "check_taints",
    "check_unschedulable",
    "first_failure",
    "host_port_key",
    "insufficient",
    "node_facts",
    "preferred_node_weight",
    "summarize",
    "taint_reason",
    "term_matches",
    "tolerates",
    "untolerated_prefer_no_schedule",
    "used_host_ports",
]

REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
REASON_NODE_SELECTOR: Final = "node(s) didn't match Pod's node affinity/selector"
REASON_HOST_PORTS: Final = "node(s) didn't have free ports for the requested pod ports"

TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
EFFECT_NO_SCHEDULE: Final = "NoSchedule"
EFFECT_PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
EFFECT_NO_EXECUTE: Final = "NoExecute"
_FILTERING_EFFECTS: Final = frozenset({EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE})

_FIELD_NODE_NAME: Final = "metadata.name"

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


# --------------------------------------------------------------------------- NodeUnschedulable


def check_unschedulable(c: Constraints, node: NodeFacts) -> str | None:
    """NodeUnschedulable: a cordoned node only takes pods tolerating its unschedulable taint."""
    if not node.unschedulable:
        return None
    cordon = Taint(key=TAINT_NODE_UNSCHEDULABLE, value="", effect=EFFECT_NO_SCHEDULE)
    if any(tolerates(t, cordon) for t in c.tolerations):
        return None
    return REASON_UNSCHEDULABLE


# --------------------------------------------------------------------------- TaintToleration


def tolerates(t: Toleration, taint: Taint) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``.

    An empty effect matches every effect and an empty key every key; operator ``Exists`` ignores
    the value, ``Equal`` (or empty) requires it to be equal, any other operator tolerates nothing.
    """
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator in ("", "Equal"):
        return t.value == taint.value
    return t.operator == "Exists"


def taint_reason(taint: Taint) -> str:
    """The TaintToleration rejection for ``taint``, formatted exactly as kube-scheduler does."""
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def check_taints(c: Constraints, node: NodeFacts) -> str | None:
    """TaintToleration: the first NoSchedule/NoExecute taint no toleration tolerates rejects."""
    for taint in node.taints:
        if taint.effect not in _FILTERING_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in c.tolerations):
            return taint_reason(taint)
    return None


def untolerated_prefer_no_schedule(c: Constraints, node: NodeFacts) -> int:
    """TaintToleration's score input: the node's PreferNoSchedule taints that no toleration
    with an empty or PreferNoSchedule effect tolerates."""
    tolerations = [t for t in c.tolerations if t.effect in ("", EFFECT_PREFER_NO_SCHEDULE)]
    return sum(
        1
        for taint in node.taints
        if taint.effect == EFFECT_PREFER_NO_SCHEDULE
        and not any(tolerates(t, taint) for t in tolerations)
    )


# --------------------------------------------------------------------------- NodeAffinity


def check_node_affinity(c: Constraints, node: NodeFacts) -> str | None:
    """NodeAffinity: every ``nodeSelector`` pair and at least one required term must match."""
    labels = node.labels
    for key, value in c.node_selector:
        if labels.get(key) != value:
            return REASON_NODE_SELECTOR
    if c.required_terms and not any(term_matches(t, node) for t in c.required_terms):
        return REASON_NODE_SELECTOR
    return None


def preferred_node_weight(
    preferred: tuple[tuple[int, NodeSelectorTerm], ...], node: NodeFacts
) -> int:
    """NodeAffinity's score input: the summed weights of the preferred terms the node matches
    (a term that cannot match any node, e.g. an empty one, adds nothing)."""
    return sum(weight for weight, term in preferred if term_matches(term, node))


def term_matches(term: NodeSelectorTerm, node: NodeFacts) -> bool:
    """One ``nodeSelectorTerm``: all expressions and all fields, ANDed.

    Mirrors component-helpers: a term with neither expressions nor fields, or one that fails to
    parse (e.g. ``Gt`` with a non-integer value, ``In`` with no values), matches no node; field
    requirements are only consulted when the node has a name.
    """
    if not _term_is_valid(term):
        return False
    labels = node.labels
    if not all(_label_requirement_matches(r, labels) for r in term.match_expressions):
        return False
    if node.name and term.match_fields:
        fields = {_FIELD_NODE_NAME: node.name}
        return all(_field_requirement_matches(r, fields) for r in term.match_fields)
    return True


@functools.lru_cache(maxsize=4096)
def _term_is_valid(term: NodeSelectorTerm) -> bool:
    """Whether the term parses like ``nodeaffinity.newNodeSelectorTerm`` (cached: pods repeat)."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(map(_label_requirement_is_valid, term.match_expressions)) and all(
        map(_field_requirement_is_valid, term.match_fields)
    )


_GO_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: optional sign, ASCII digits, int64 range."""
    if _GO_INT.fullmatch(text) is None:
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def _label_requirement_is_valid(r: NodeSelectorRequirement) -> bool:
    """Mirrors ``labels.NewRequirement`` validation of key, operator and values."""
    if not _is_label_key(r.key):
        return False
    if r.operator in ("In", "NotIn"):
        ok = len(r.values) > 0
    elif r.operator in ("Exists", "DoesNotExist"):
        ok = len(r.values) == 0
    elif r.operator in ("Gt", "Lt"):
        ok = len(r.values) == 1 and _parse_int64(r.values[0]) is not None
    else:
        return False
    return ok and all(map(_is_label_value, r.values))


def _label_requirement_matches(r: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(r.key)
    op = r.operator
    found = set_operator_matches(op, r.values, value)
    if found is not None:
        return found
    if op in ("Gt", "Lt") and value is not None:
        have = _parse_int64(value)
        want = _parse_int64(r.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_requirement_is_valid(r: NodeSelectorRequirement) -> bool:
    """Mirrors ``nodeSelectorRequirementsAsFieldSelector``: In/NotIn with exactly one value."""
    return r.operator in ("In", "NotIn") and len(r.values) == 1


def _field_requirement_matches(r: NodeSelectorRequirement, fields: Mapping[str, str]) -> bool:
    # fields.Set.Get: an unknown field reads as the empty string.
    value = fields.get(r.key, "")
    return value == r.values[0] if r.operator == "In" else value != r.values[0]


# --------------------------------------------------------------------------- NodePorts


def check_host_ports(c: Constraints, node: NodeFacts) -> str | None:
    """NodePorts: a wanted host port conflicts with one in use on the same protocol and port.

    Like ``HostPortInfo.CheckConflict``: a wildcard (``0.0.0.0``) request conflicts with that
    protocol/port on any IP, and a specific IP conflicts with the same IP or the wildcard.
    """
    used = node.used_host_ports
    if not used:
        return None
    for port in c.host_ports:
        key = host_port_key(port)
        if key is None:
            continue
        ip, protocol, number = key
        if ip == BIND_ALL_HOST_IP:
            if any(p == protocol and n == number for _, p, n in used):
                return REASON_HOST_PORTS
        elif key in used or (BIND_ALL_HOST_IP, protocol, number) in used:
            return REASON_HOST_PORTS
    return None


# --------------------------------------------------------------------------- running and reporting

#: one Filter check: the node's rejection reason for a pod, or None
Check = Callable[[Constraints, NodeFacts], str | None]

STATIC_CHECKS: Final[tuple[Check, ...]] = (
    # kube-scheduler's default Filter order: NodeUnschedulable, (NodeName), TaintToleration,
    # NodeAffinity, NodePorts, then NodeResourcesFit (checked elsewhere, against the snapshot).
    check_unschedulable,
    check_taints,
    check_node_affinity,
    check_host_ports,
)


def first_failure(c: Constraints, node: NodeFacts) -> str | None:
    """Run :data:`STATIC_CHECKS` in order; the first rejection is the node's reason."""
    for check in STATIC_CHECKS:
        reason = check(c, node)
        if reason is not None:
            return reason
    return None


def insufficient(resource: str) -> str:
    """NodeResourcesFit's reason for ``resource``; the pod count has its own wording."""
    if resource == "pods":
        return "Too many pods"
    return f"Insufficient {resource}"


def summarize(total_nodes: int, reasons: Mapping[str, int]) -> str:
    """``FitError.Error``: ``0/N nodes are available: <count reason>, ... .``.

    As in kube-scheduler the ``"<count> <reason>"`` strings are sorted as plain strings, so
    ``"100 ..."`` comes before ``"40 ..."``. Reasons with no nodes are left out; with none left
    the message ends at the colon, as kube-scheduler's does.
    """
    message = f"0/{total_nodes} nodes are available:"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items() if count > 0)
    if parts:
        message += f" {', '.join(parts)}."
    return message
