"""Tests for gang.scheduling.predicates: the non-resource Filter checks and kube-scheduler wording."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gang.scheduling.predicates import (
    REASON_HOST_PORTS,
    REASON_NODE_SELECTOR,
    REASON_UNSCHEDULABLE,
    STATIC_CHECKS,
    NodeFacts,
    Taint,
    check_host_ports,
    check_node_affinity,
    check_taints,
    check_unschedulable,
    first_failure,
    host_port_key,
    insufficient,
    node_facts,
    summarize,
    tolerates,
    used_host_ports,
)
from gang.state.podinfo import (
    Constraints,
    HostPort,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Toleration,
)

# --------------------------------------------------------------------------- builders


def constraints(
    *,
    node_selector: Mapping[str, str] | None = None,
    terms: tuple[NodeSelectorTerm, ...] = (),
    tolerations: tuple[Toleration, ...] = (),
    host_ports: tuple[HostPort, ...] = (),
) -> Constraints:
    return Constraints(
        node_selector=tuple((node_selector or {}).items()),
        required_terms=terms,
        tolerations=tolerations,
        host_ports=host_ports,
    )


def node(
    name: str = "node-1",
    *,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    unschedulable: bool = False,
    ports: frozenset[tuple[str, str, int]] = frozenset(),
) -> NodeFacts:
    return NodeFacts(
        name=name,
        labels=dict(labels or {}),
        taints=taints,
        unschedulable=unschedulable,
        used_host_ports=ports,
    )


def req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=operator, values=values)


def term(
    *expressions: NodeSelectorRequirement, fields: tuple[NodeSelectorRequirement, ...] = ()
) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=expressions, match_fields=fields)


def tol(key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> Toleration:
    return Toleration(key=key, operator=operator, value=value, effect=effect)


def affinity_ok(labels: Mapping[str, str], *terms: NodeSelectorTerm, name: str = "node-1") -> bool:
    reason = check_node_affinity(constraints(terms=terms), node(name, labels=labels))
    assert reason in (None, REASON_NODE_SELECTOR)
    return reason is None


# --------------------------------------------------------------------------- node affinity

EXPRESSION_CASES: list[tuple[str, NodeSelectorRequirement, dict[str, str], bool]] = [
    ("In matches a listed value", req("zone", "In", "a", "b"), {"zone": "b"}, True),
    ("In rejects another value", req("zone", "In", "a", "b"), {"zone": "c"}, False),
    ("In rejects an absent label", req("zone", "In", "a"), {}, False),
    ("In with no values never matches", req("zone", "In"), {"zone": ""}, False),
    ("NotIn rejects a listed value", req("zone", "NotIn", "a"), {"zone": "a"}, False),
    ("NotIn accepts another value", req("zone", "NotIn", "a"), {"zone": "b"}, True),
    ("NotIn accepts an absent label", req("zone", "NotIn", "a"), {}, True),
    ("NotIn with no values never matches", req("zone", "NotIn"), {}, False),
    ("Exists with the label", req("gpu", "Exists"), {"gpu": ""}, True),
    ("Exists without the label", req("gpu", "Exists"), {"cpu": "x"}, False),
    ("Exists with values is malformed", req("gpu", "Exists", "x"), {"gpu": "x"}, False),
    ("DoesNotExist without the label", req("gpu", "DoesNotExist"), {}, True),
    ("DoesNotExist with the label", req("gpu", "DoesNotExist"), {"gpu": "1"}, False),
    ("Gt greater", req("cores", "Gt", "8"), {"cores": "16"}, True),
    ("Gt equal", req("cores", "Gt", "8"), {"cores": "8"}, False),
    ("Gt smaller", req("cores", "Gt", "8"), {"cores": "4"}, False),
    ("Gt compares numerically, not as text", req("cores", "Gt", "9"), {"cores": "10"}, True),
    ("Gt with a non-integer label", req("cores", "Gt", "8"), {"cores": "sixteen"}, False),
    ("Gt with a decimal label", req("cores", "Gt", "8"), {"cores": "16.5"}, False),
    ("Gt with a label beyond int64", req("cores", "Gt", "8"), {"cores": "9" * 20}, False),
    ("Gt with an absent label", req("cores", "Gt", "8"), {}, False),
    ("Gt with a non-integer value", req("cores", "Gt", "eight"), {"cores": "16"}, False),
    ("Gt with two values", req("cores", "Gt", "1", "2"), {"cores": "16"}, False),
    ("Gt with no value", req("cores", "Gt"), {"cores": "16"}, False),
    ("Lt smaller", req("cores", "Lt", "8"), {"cores": "4"}, True),
    ("Lt equal", req("cores", "Lt", "8"), {"cores": "8"}, False),
    ("Lt greater", req("cores", "Lt", "8"), {"cores": "16"}, False),
    ("Lt with a non-integer label", req("cores", "Lt", "8"), {"cores": "4x"}, False),
    (
        "Lt with a spaced label (Go ParseInt is strict)",
        req("cores", "Lt", "8"),
        {"cores": " 4"},
        False,
    ),
    ("Lt with an underscored label", req("cores", "Lt", "100"), {"cores": "1_0"}, False),
    ("Lt with an absent label", req("cores", "Lt", "8"), {}, False),
    ("unknown operator", req("zone", "Equals", "a"), {"zone": "a"}, False),
    ("invalid label value in values", req("zone", "In", "a b"), {"zone": "a b"}, False),
    ("invalid label key", req("bad key", "Exists"), {"bad key": "x"}, False),
    ("prefixed key", req("example.com/zone", "In", "a"), {"example.com/zone": "a"}, True),
]


@pytest.mark.parametrize(
    ("expression", "labels", "expected"),
    [case[1:] for case in EXPRESSION_CASES],
    ids=[case[0] for case in EXPRESSION_CASES],
)
def test_match_expression_operators(
    expression: NodeSelectorRequirement, labels: dict[str, str], expected: bool
) -> None:
    assert affinity_ok(labels, term(expression)) is expected


def test_expressions_in_one_term_are_anded() -> None:
    both = term(req("zone", "In", "a"), req("gpu", "Exists"))
    assert affinity_ok({"zone": "a", "gpu": "1"}, both)
    assert not affinity_ok({"zone": "a"}, both)
    assert not affinity_ok({"gpu": "1"}, both)


def test_terms_are_ored() -> None:
    zone_a = term(req("zone", "In", "a"))
    gpu = term(req("gpu", "Exists"))
    assert affinity_ok({"zone": "a"}, zone_a, gpu)
    assert affinity_ok({"gpu": "1"}, zone_a, gpu)
    assert not affinity_ok({"zone": "b"}, zone_a, gpu)


def test_empty_term_matches_nothing_but_other_terms_still_count() -> None:
    assert not affinity_ok({"zone": "a"}, term())
    assert affinity_ok({"zone": "a"}, term(), term(req("zone", "In", "a")))


def test_malformed_term_does_not_spoil_the_others() -> None:
    broken = term(req("cores", "Gt", "many"))
    assert not affinity_ok({"cores": "4"}, broken)
    assert affinity_ok({"zone": "a"}, broken, term(req("zone", "Exists")))


def test_no_required_terms_means_no_requirement() -> None:
    assert check_node_affinity(constraints(), node(labels={})) is None


FIELD_CASES: list[tuple[str, NodeSelectorRequirement, str, bool]] = [
    ("In own name", req("metadata.name", "In", "node-1"), "node-1", True),
    ("In other name", req("metadata.name", "In", "node-2"), "node-1", False),
    ("NotIn own name", req("metadata.name", "NotIn", "node-1"), "node-1", False),
    ("NotIn other name", req("metadata.name", "NotIn", "node-2"), "node-1", True),
    ("In with two values is malformed", req("metadata.name", "In", "node-1", "x"), "node-1", False),
    ("Exists is not a field operator", req("metadata.name", "Exists"), "node-1", False),
    ("unknown field reads as empty (In)", req("spec.foo", "In", "x"), "node-1", False),
    ("unknown field reads as empty (NotIn)", req("spec.foo", "NotIn", "x"), "node-1", True),
]


@pytest.mark.parametrize(
    ("field", "name", "expected"),
    [case[1:] for case in FIELD_CASES],
    ids=[case[0] for case in FIELD_CASES],
)
def test_match_fields_against_node_name(
    field: NodeSelectorRequirement, name: str, expected: bool
) -> None:
    assert affinity_ok({}, term(fields=(field,)), name=name) is expected


def test_match_fields_and_expressions_are_anded() -> None:
    pinned = term(req("zone", "In", "a"), fields=(req("metadata.name", "In", "node-1"),))
    assert affinity_ok({"zone": "a"}, pinned, name="node-1")
    assert not affinity_ok({"zone": "b"}, pinned, name="node-1")
    assert not affinity_ok({"zone": "a"}, pinned, name="node-2")


def test_match_fields_are_skipped_for_a_nameless_node() -> None:
    # component-helpers only builds the field set from a non-empty node name.
    pinned = term(req("zone", "In", "a"), fields=(req("metadata.name", "In", "node-1"),))
    assert affinity_ok({"zone": "a"}, pinned, name="")
    assert not affinity_ok({"zone": "b"}, pinned, name="")


NODE_SELECTOR_CASES: list[tuple[str, dict[str, str], dict[str, str], bool]] = [
    ("all pairs equal", {"zone": "a", "disk": "ssd"}, {"zone": "a", "disk": "ssd", "x": "y"}, True),
    ("one pair differs", {"zone": "a", "disk": "ssd"}, {"zone": "a", "disk": "hdd"}, False),
    ("label absent", {"zone": "a"}, {}, False),
    ("empty value needs the label present", {"zone": ""}, {}, False),
    ("empty value present", {"zone": ""}, {"zone": ""}, True),
]


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [case[1:] for case in NODE_SELECTOR_CASES],
    ids=[case[0] for case in NODE_SELECTOR_CASES],
)
def test_node_selector(selector: dict[str, str], labels: dict[str, str], expected: bool) -> None:
    reason = check_node_affinity(constraints(node_selector=selector), node(labels=labels))
    assert reason == (None if expected else REASON_NODE_SELECTOR)


def test_node_selector_and_affinity_are_both_required() -> None:
    c = constraints(node_selector={"pool": "gpu"}, terms=(term(req("zone", "In", "a")),))
    assert check_node_affinity(c, node(labels={"pool": "gpu", "zone": "a"})) is None
    assert check_node_affinity(c, node(labels={"pool": "gpu", "zone": "b"})) == REASON_NODE_SELECTOR
    assert check_node_affinity(c, node(labels={"pool": "cpu", "zone": "a"})) == REASON_NODE_SELECTOR


# --------------------------------------------------------------------------- taints

TOLERATES_CASES: list[tuple[str, Toleration, Taint, bool]] = [
    (
        "Equal same key/value/effect",
        tol("k", "Equal", "v", "NoSchedule"),
        Taint("k", "v", "NoSchedule"),
        True,
    ),
    (
        "Equal other value",
        tol("k", "Equal", "v", "NoSchedule"),
        Taint("k", "w", "NoSchedule"),
        False,
    ),
    ("Equal other key", tol("k", "Equal", "v", "NoSchedule"), Taint("j", "v", "NoSchedule"), False),
    (
        "Equal other effect",
        tol("k", "Equal", "v", "NoSchedule"),
        Taint("k", "v", "NoExecute"),
        False,
    ),
    ("empty operator means Equal", tol("k", "", "v"), Taint("k", "v", "NoSchedule"), True),
    ("empty operator, other value", tol("k", "", "v"), Taint("k", "x", "NoSchedule"), False),
    ("effect-less matches NoSchedule", tol("k", "Equal", "v"), Taint("k", "v", "NoSchedule"), True),
    ("effect-less matches NoExecute", tol("k", "Equal", "v"), Taint("k", "v", "NoExecute"), True),
    ("Exists ignores the value", tol("k", "Exists"), Taint("k", "anything", "NoSchedule"), True),
    ("Exists checks the key", tol("k", "Exists"), Taint("j", "", "NoSchedule"), False),
    (
        "Exists checks the effect",
        tol("k", "Exists", effect="NoExecute"),
        Taint("k", "", "NoSchedule"),
        False,
    ),
    (
        "Exists with empty key tolerates all",
        tol("", "Exists"),
        Taint("any", "thing", "NoExecute"),
        True,
    ),
    (
        "Exists empty key, effect given",
        tol("", "Exists", effect="NoSchedule"),
        Taint("a", "", "NoExecute"),
        False,
    ),
    (
        "unknown operator tolerates nothing",
        tol("k", "Gte", "v"),
        Taint("k", "v", "NoSchedule"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [case[1:] for case in TOLERATES_CASES],
    ids=[case[0] for case in TOLERATES_CASES],
)
def test_tolerates(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


DEDICATED = Taint("dedicated", "ml", "NoSchedule")
NOT_READY = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")


def test_untolerated_taint_reason_format() -> None:
    assert check_taints(constraints(), node(taints=(DEDICATED,))) == (
        "node(s) had untolerated taint {dedicated: ml}"
    )


def test_taint_with_empty_value_reason_format() -> None:
    assert check_taints(constraints(), node(taints=(NOT_READY,))) == (
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    )


def test_prefer_no_schedule_never_filters() -> None:
    soft = Taint("dedicated", "ml", "PreferNoSchedule")
    assert check_taints(constraints(), node(taints=(soft,))) is None


def test_no_execute_filters() -> None:
    evict = Taint("dedicated", "ml", "NoExecute")
    assert check_taints(constraints(), node(taints=(evict,))) == (
        "node(s) had untolerated taint {dedicated: ml}"
    )
    tolerated = constraints(tolerations=(tol("dedicated", "Exists", effect="NoExecute"),))
    assert check_taints(tolerated, node(taints=(evict,))) is None


def test_first_untolerated_taint_is_reported() -> None:
    soft = Taint("a", "1", "PreferNoSchedule")
    gpu = Taint("gpu", "true", "NoSchedule")
    c = constraints(tolerations=(tol("gpu", "Equal", "true", "NoSchedule"),))
    n = node(taints=(soft, gpu, DEDICATED, NOT_READY))
    assert check_taints(c, n) == "node(s) had untolerated taint {dedicated: ml}"


def test_not_ready_taint_needs_a_no_schedule_toleration() -> None:
    # The default tolerations admission adds are NoExecute: they do not cover the NoSchedule
    # not-ready taint the node lifecycle controller sets, so such nodes are filtered.
    default = tol("node.kubernetes.io/not-ready", "Exists", effect="NoExecute")
    n = node(taints=(NOT_READY,))
    assert check_taints(constraints(tolerations=(default,)), n) is not None
    daemon = tol("node.kubernetes.io/not-ready", "Exists", effect="NoSchedule")
    assert check_taints(constraints(tolerations=(daemon,)), n) is None


def test_tolerate_everything() -> None:
    c = constraints(tolerations=(tol("", "Exists"),))
    assert check_taints(c, node(taints=(DEDICATED, NOT_READY, Taint("x", "", "NoExecute")))) is None


# --------------------------------------------------------------------------- unschedulable

UNSCHEDULABLE_CASES: list[tuple[str, bool, tuple[Toleration, ...], str | None]] = [
    ("schedulable node", False, (), None),
    ("cordoned node", True, (), REASON_UNSCHEDULABLE),
    (
        "cordoned, tolerated by Exists",
        True,
        (tol("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule"),),
        None,
    ),
    (
        "cordoned, tolerated effect-less",
        True,
        (tol("node.kubernetes.io/unschedulable", "Exists"),),
        None,
    ),
    (
        "cordoned, tolerated by Equal empty value",
        True,
        (tol("node.kubernetes.io/unschedulable"),),
        None,
    ),
    ("cordoned, tolerate-all", True, (tol("", "Exists"),), None),
    (
        "cordoned, NoExecute toleration is not enough",
        True,
        (tol("node.kubernetes.io/unschedulable", "Exists", effect="NoExecute"),),
        REASON_UNSCHEDULABLE,
    ),
    ("cordoned, other key", True, (tol("dedicated", "Exists"),), REASON_UNSCHEDULABLE),
]


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "expected"),
    [case[1:] for case in UNSCHEDULABLE_CASES],
    ids=[case[0] for case in UNSCHEDULABLE_CASES],
)
def test_unschedulable(
    unschedulable: bool, tolerations: tuple[Toleration, ...], expected: str | None
) -> None:
    c = constraints(tolerations=tolerations)
    assert check_unschedulable(c, node(unschedulable=unschedulable)) == expected


# --------------------------------------------------------------------------- host ports

HOST_PORT_CASES: list[tuple[str, list[HostPort], HostPort, bool]] = [
    (
        "same ip/protocol/port",
        [HostPort(80, "TCP", "10.0.0.1")],
        HostPort(80, "TCP", "10.0.0.1"),
        True,
    ),
    ("other port", [HostPort(80, "TCP", "10.0.0.1")], HostPort(81, "TCP", "10.0.0.1"), False),
    ("other protocol", [HostPort(53, "UDP", "")], HostPort(53, "TCP", ""), False),
    (
        "other specific ips",
        [HostPort(80, "TCP", "10.0.0.1")],
        HostPort(80, "TCP", "10.0.0.2"),
        False,
    ),
    (
        "wanted wildcard vs used ip",
        [HostPort(80, "TCP", "10.0.0.1")],
        HostPort(80, "TCP", "0.0.0.0"),
        True,
    ),
    (
        "used wildcard vs wanted ip",
        [HostPort(80, "TCP", "0.0.0.0")],
        HostPort(80, "TCP", "10.0.0.2"),
        True,
    ),
    ("empty ip is the wildcard", [HostPort(80, "TCP", "10.0.0.1")], HostPort(80, "TCP", ""), True),
    (
        "used empty ip is the wildcard",
        [HostPort(80, "TCP", "")],
        HostPort(80, "TCP", "10.0.0.9"),
        True,
    ),
    ("empty protocol is TCP", [HostPort(80, "TCP", "")], HostPort(80, "", ""), True),
    (
        "wildcard, other protocol",
        [HostPort(80, "UDP", "10.0.0.1")],
        HostPort(80, "TCP", "0.0.0.0"),
        False,
    ),
    ("port 0 requests nothing", [HostPort(80, "TCP", "")], HostPort(0, "TCP", ""), False),
]


@pytest.mark.parametrize(
    ("used", "wanted", "conflict"),
    [case[1:] for case in HOST_PORT_CASES],
    ids=[case[0] for case in HOST_PORT_CASES],
)
def test_host_ports(used: list[HostPort], wanted: HostPort, conflict: bool) -> None:
    n = node(ports=used_host_ports(used))
    reason = check_host_ports(constraints(host_ports=(wanted,)), n)
    assert reason == (REASON_HOST_PORTS if conflict else None)


def test_any_conflicting_port_rejects() -> None:
    n = node(ports=used_host_ports([HostPort(8080, "TCP", "")]))
    c = constraints(host_ports=(HostPort(9090, "TCP", ""), HostPort(8080, "TCP", "")))
    assert check_host_ports(c, n) == REASON_HOST_PORTS


def test_used_host_ports_defaults_and_skips_zero() -> None:
    ports = [HostPort(80, "", ""), HostPort(53, "UDP", "10.0.0.1"), HostPort(0, "TCP", "")]
    assert used_host_ports(ports) == frozenset({("0.0.0.0", "TCP", 80), ("10.0.0.1", "UDP", 53)})
    assert host_port_key(HostPort(-1, "TCP", "")) is None


# --------------------------------------------------------------------------- node_facts

RAW_NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-7",
        "labels": {"pool": "gpu", "cores": "64", "broken": 5},
    },
    "spec": {
        "unschedulable": True,
        "taints": [
            {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "x"},
            "not-a-taint",
            {"value": "no-key", "effect": "NoSchedule"},
            {"key": "", "effect": "NoSchedule"},
            {"key": "no-effect"},
            {"key": "numeric-value", "value": 3, "effect": "NoSchedule"},
            {"key": "soft", "value": "1", "effect": "PreferNoSchedule"},
        ],
    },
}


def test_node_facts_from_raw_node() -> None:
    ports = frozenset({("0.0.0.0", "TCP", 22)})
    facts = node_facts(RAW_NODE, ports)
    assert facts.name == "gpu-7"
    assert dict(facts.labels) == {"pool": "gpu", "cores": "64"}
    assert facts.taints == (
        Taint("dedicated", "ml", "NoSchedule"),
        Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
        Taint("soft", "1", "PreferNoSchedule"),
    )
    assert facts.unschedulable is True
    assert facts.used_host_ports == ports


def test_node_facts_labels_are_read_only_and_detached() -> None:
    raw: dict[str, Any] = {"metadata": {"name": "n", "labels": {"a": "1"}}}
    facts = node_facts(raw)
    raw["metadata"]["labels"]["a"] = "2"
    assert facts.labels["a"] == "1"
    with pytest.raises(TypeError):
        facts.labels["a"] = "3"  # type: ignore[index]


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"metadata": None, "spec": None},
        {"metadata": "x", "spec": []},
        {"metadata": {"name": 7, "labels": ["a"]}, "spec": {"taints": {"k": "v"}}},
        {"spec": {"unschedulable": "true"}},
    ],
)
def test_node_facts_never_crashes_on_malformed_nodes(raw: dict[str, Any]) -> None:
    facts = node_facts(raw)
    assert facts.name == ""
    assert dict(facts.labels) == {}
    assert facts.taints == ()
    assert facts.unschedulable is False
    assert facts.used_host_ports == frozenset()


def test_node_facts_is_hashable() -> None:
    assert hash(node_facts(RAW_NODE)) == hash(node_facts(RAW_NODE))


# --------------------------------------------------------------------------- order and reporting


def test_static_checks_follow_kube_scheduler_filter_order() -> None:
    # NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts (default plugin order).
    assert [check.__name__ for check in STATIC_CHECKS] == [
        "check_unschedulable",
        "check_taints",
        "check_node_affinity",
        "check_host_ports",
    ]


def test_first_failure_stops_at_the_first_rejection() -> None:
    c = constraints(node_selector={"pool": "gpu"}, host_ports=(HostPort(80, "TCP", ""),))
    used = used_host_ports([HostPort(80, "TCP", "")])
    everything_wrong = node(taints=(DEDICATED,), unschedulable=True, ports=used)
    assert first_failure(c, everything_wrong) == REASON_UNSCHEDULABLE
    cordon_ok = node(taints=(DEDICATED,), ports=used)
    assert first_failure(c, cordon_ok) == "node(s) had untolerated taint {dedicated: ml}"
    taints_ok = node(ports=used)
    assert first_failure(c, taints_ok) == REASON_NODE_SELECTOR
    labels_ok = node(labels={"pool": "gpu"}, ports=used)
    assert first_failure(c, labels_ok) == REASON_HOST_PORTS
    assert first_failure(c, node(labels={"pool": "gpu"})) is None


def test_insufficient_wording() -> None:
    assert insufficient("nvidia.com/gpu") == "Insufficient nvidia.com/gpu"
    assert insufficient("cpu") == "Insufficient cpu"
    assert insufficient("pods") == "Too many pods"


def test_summarize_matches_kube_scheduler() -> None:
    reasons = {
        insufficient("nvidia.com/gpu"): 60,
        "node(s) had untolerated taint {dedicated: ml}": 40,
    }
    assert summarize(100, reasons) == (
        "0/100 nodes are available: 40 node(s) had untolerated taint {dedicated: ml}, "
        "60 Insufficient nvidia.com/gpu."
    )


def test_summarize_sorts_the_formatted_strings_not_the_counts() -> None:
    # Go's sort.Strings on "count reason": "100 ..." sorts before "20 ...", and ties in the
    # leading digits fall through to the reason text.
    reasons = {"Insufficient cpu": 20, REASON_NODE_SELECTOR: 100, "Insufficient memory": 2}
    assert summarize(122, reasons) == (
        "0/122 nodes are available: 100 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient memory, 20 Insufficient cpu."
    )


def test_summarize_single_and_empty() -> None:
    assert summarize(3, {REASON_UNSCHEDULABLE: 3}) == (
        "0/3 nodes are available: 3 node(s) were unschedulable."
    )
    assert summarize(0, {}) == "0/0 nodes are available:"
    assert summarize(2, {"Too many pods": 0}) == "0/2 nodes are available:"
