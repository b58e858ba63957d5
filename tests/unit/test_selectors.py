"""Tests for gang.sim.selectors: label/field selector parsing and matching like the apiserver."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gang.sim.selectors import (
    FieldSelector,
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    escape_field_value,
    parse_field_selector,
    parse_label_selector,
)

POD_FIELDS = frozenset({"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"})

VALUE_REGEX_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def sel(text: str | None) -> LabelSelector:
    return parse_label_selector(text)


def label_error(text: str) -> str:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    return str(info.value)


def field_error(text: str, supported: frozenset[str] = POD_FIELDS) -> str:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text, supported)
    return str(info.value)


# --------------------------------------------------------------------------------------------
# Label selectors: empty
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "", "   ", "\t\r\n"])
def test_empty_label_selector_matches_everything(text: str | None) -> None:
    selector = sel(text)
    assert selector.is_empty()
    assert selector.matches(None)
    assert selector.matches({})
    assert selector.matches({"app": "x"})
    assert str(selector) == ""


def test_non_empty_selector_is_not_empty() -> None:
    assert not sel("app").is_empty()


def test_none_labels_behave_like_no_labels() -> None:
    assert not sel("app=x").matches(None)
    assert sel("app!=x").matches(None)
    assert sel("!app").matches(None)


# --------------------------------------------------------------------------------------------
# Label selectors: operators
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["app=web", "app==web"])
def test_equality(text: str) -> None:
    selector = sel(text)
    assert selector.matches({"app": "web"})
    assert selector.matches({"app": "web", "tier": "front"})
    assert not selector.matches({"app": "db"})
    assert not selector.matches({"tier": "web"})
    assert not selector.matches({})


def test_not_equals_matches_absent_key() -> None:
    selector = sel("app!=web")
    assert selector.matches({"app": "db"})
    assert selector.matches({})
    assert selector.matches({"other": "web"})
    assert not selector.matches({"app": "web"})


def test_empty_exact_value() -> None:
    assert sel("app=").matches({"app": ""})
    assert not sel("app=").matches({})
    assert not sel("app=").matches({"app": "x"})
    assert sel("app!=").matches({"app": "x"})
    assert sel("app!=").matches({})
    assert not sel("app!=").matches({"app": ""})
    # An empty value followed by another requirement.
    assert sel("app=,tier").matches({"app": "", "tier": "x"})


def test_in() -> None:
    selector = sel("env in (prod, staging)")
    assert selector.matches({"env": "prod"})
    assert selector.matches({"env": "staging"})
    assert not selector.matches({"env": "dev"})
    assert not selector.matches({})


def test_notin_matches_absent_key() -> None:
    selector = sel("env notin (prod,staging)")
    assert selector.matches({"env": "dev"})
    assert selector.matches({})
    assert not selector.matches({"env": "prod"})
    assert not selector.matches({"env": "staging"})


def test_in_with_empty_values_like_go() -> None:
    assert sel("x in ()").requirements == (Requirement("x", Operator.IN, ("",)),)
    assert sel("x in ()").matches({"x": ""})
    assert not sel("x in ()").matches({"x": "a"})
    assert sel("x in (a,)").requirements[0].values == ("", "a")
    assert sel("x in (,a)").requirements[0].values == ("", "a")
    assert sel("x in (a,,b)").requirements[0].values == ("", "a", "b")
    assert sel("x in (a,)").matches({"x": ""})
    assert sel("x in (a,)").matches({"x": "a"})
    assert not sel("x in (a,)").matches({"x": "b"})


def test_in_values_are_deduplicated_and_sorted() -> None:
    assert sel("x in (b,a,b)").requirements[0].values == ("a", "b")


def test_exists_and_does_not_exist() -> None:
    assert sel("app").matches({"app": ""})
    assert sel("app").matches({"app": "x"})
    assert not sel("app").matches({"apps": "x"})
    assert sel("!app").matches({"apps": "x"})
    assert not sel("!app").matches({"app": ""})
    assert sel("! app").matches({})  # whitespace after "!" is fine, as in Go


def test_greater_and_less_than() -> None:
    assert sel("replicas>3").matches({"replicas": "4"})
    assert not sel("replicas>3").matches({"replicas": "3"})
    assert sel("replicas<3").matches({"replicas": "2"})
    assert not sel("replicas<3").matches({"replicas": "3"})
    # Numeric, not lexicographic.
    assert sel("replicas>9").matches({"replicas": "10"})
    assert sel("replicas<10").matches({"replicas": "007"})


def test_greater_than_needs_present_integer_label() -> None:
    assert not sel("replicas>3").matches({})
    assert not sel("replicas<3").matches({})
    assert not sel("replicas>3").matches({"replicas": "many"})
    assert not sel("replicas>3").matches({"replicas": "1_000"})  # Go's ParseInt rejects "_"
    assert not sel("replicas>3").matches({"replicas": " 5"})
    assert not sel("replicas>3").matches({"replicas": "99999999999999999999"})  # > int64
    assert sel("replicas<3").matches({"replicas": "-5"})


def test_greater_than_value_must_be_integer() -> None:
    assert label_error("replicas>abc") == (
        'unable to parse requirement: values[0]: Invalid value: "abc": '
        "for 'Gt', 'Lt' operators, the value must be an integer"
    )
    assert "must be an integer" in label_error("replicas<1_0")
    assert "must be an integer" in label_error("replicas>99999999999999999999")


def test_negative_threshold_is_rejected_as_label_value_like_go() -> None:
    # "-1" is an integer but not a valid label value, and Go validates both.
    message = label_error("replicas>-1")
    assert message.startswith(
        'unable to parse requirement: values[0][replicas]: Invalid value: "-1"'
    )


def test_multiple_requirements_are_anded() -> None:
    selector = sel("app=web,env in (prod),!canary,tier")
    assert selector.matches({"app": "web", "env": "prod", "tier": "x"})
    assert not selector.matches({"app": "web", "env": "prod"})
    assert not selector.matches({"app": "web", "env": "prod", "tier": "x", "canary": "1"})
    assert not selector.matches({"app": "db", "env": "prod", "tier": "x"})


def test_whitespace_is_tolerated_around_tokens() -> None:
    selector = sel("  app = web ,\tenv  in  ( prod ,  staging ) ,  ! canary , n > 2 ")
    assert selector == sel("app=web,env in (prod,staging),!canary,n>2")
    assert selector.matches({"app": "web", "env": "staging", "n": "3"})


def test_keywords_are_plain_identifiers_in_key_and_value_positions() -> None:
    assert sel("in=notin").matches({"in": "notin"})
    assert sel("x in (in,notin)").matches({"x": "notin"})
    assert sel("notin").matches({"notin": "1"})
    assert sel("x=in").matches({"x": "in"})


def test_prefixed_keys() -> None:
    selector = sel("scheduling.x-k8s.io/pod-group=g1")
    assert selector.matches({"scheduling.x-k8s.io/pod-group": "g1"})
    assert not selector.matches({"pod-group": "g1"})


def test_requirements_are_sorted_by_key_and_str_is_canonical() -> None:
    selector = sel("b in (y,x), a==1, !c, d, e notin (), f>1, g<2, h!=z")
    assert [r.key for r in selector.requirements] == ["a", "b", "c", "d", "e", "f", "g", "h"]
    assert str(selector) == "a==1,b in (x,y),!c,d,e notin (),f>1,g<2,h!=z"
    assert sel(str(selector)) == selector


def test_requirement_operators() -> None:
    ops = [r.operator for r in sel("a,!b,c=1,d==1,e!=1,f in (1),g notin (1),h>1,i<1").requirements]
    assert ops == [
        Operator.EXISTS,
        Operator.DOES_NOT_EXIST,
        Operator.EQUALS,
        Operator.DOUBLE_EQUALS,
        Operator.NOT_EQUALS,
        Operator.IN,
        Operator.NOT_IN,
        Operator.GREATER_THAN,
        Operator.LESS_THAN,
    ]


# --------------------------------------------------------------------------------------------
# Label selectors: validation and syntax errors
# --------------------------------------------------------------------------------------------


def test_invalid_value_message_matches_apiserver() -> None:
    assert label_error("app=a_") == (
        f'unable to parse requirement: values[0][app]: Invalid value: "a_": {VALUE_REGEX_MSG}'
    )
    assert label_error("app in (ok, -bad)") == (
        f'unable to parse requirement: values[0][app]: Invalid value: "-bad": {VALUE_REGEX_MSG}'
    )


def test_too_long_value() -> None:
    message = label_error("app=" + "a" * 64)
    assert "must be no more than 63 characters" in message
    assert "regex used" not in message  # only the length is wrong
    sel("app=" + "a" * 63)  # the limit itself is fine


def test_two_bad_values_are_aggregated() -> None:
    message = label_error("app in (-a,-b)")
    assert message.startswith("unable to parse requirement: [values[0][app]:")
    assert 'values[1][app]: Invalid value: "-b"' in message
    assert message.endswith("]")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("-app", "name part must consist of alphanumeric characters"),
        ("app-", "name part must consist of alphanumeric characters"),
        ("a" * 64, "name part must be no more than 63 characters"),
        ("/app", "prefix part must be non-empty"),
        ("example.com/", "name part must be non-empty"),
        ("Example.com/app", "prefix part a lowercase RFC 1123 subdomain must consist of"),
        ("a" * 254 + "/app", "prefix part must be no more than 253 characters"),
        ("a/b/c", "a qualified name must consist of"),
    ],
)
def test_invalid_keys(text: str, fragment: str) -> None:
    for selector in (text, f"{text}=x", f"!{text}", f"{text} in (x)"):
        message = label_error(selector)
        assert message.startswith(f'unable to parse requirement: key: Invalid value: "{text}": ')
        assert fragment in message


def test_valid_key_limits() -> None:
    long_prefix = ".".join(["a" * 63] * 4)[:253]
    assert len(long_prefix) == 253
    assert sel(f"{long_prefix}/{'n' * 63}").matches({f"{long_prefix}/{'n' * 63}": "v"})
    assert sel("A_b.C-1=x").matches({"A_b.C-1": "x"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!,a", "unable to parse requirement: found ',', expected: identifier"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a!", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=(", "unable to parse requirement: found '(', expected: identifier"),
        (
            "a>",
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' "
            "operators, the value must be an integer",
        ),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in", "unable to parse requirement: found '' expected: '('"),
        ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b,", "unable to parse requirement: found '', expected: ',', or identifier"),
        ("a in (b,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("a in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a notin (b)c", "found 'c', expected: ',' or 'end of string'"),
    ],
)
def test_syntax_errors(text: str, message: str) -> None:
    assert label_error(text) == message


def test_selector_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_label_selector("a,")


# --------------------------------------------------------------------------------------------
# Field selectors
# --------------------------------------------------------------------------------------------


def pod(name: str = "p", node: Any = None, phase: str | None = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {} if node is None else {"nodeName": node}
    status: dict[str, Any] = {} if phase is None else {"phase": phase}
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": status}


@pytest.mark.parametrize("text", [None, "", ",", ",,"])
def test_empty_field_selector(text: str | None) -> None:
    selector = parse_field_selector(text, POD_FIELDS)
    assert selector.is_empty()
    assert selector.matches({})
    assert selector.matches(pod())
    assert selector.required_value("spec.nodeName") is None


@pytest.mark.parametrize("text", ["metadata.name=p1", "metadata.name==p1"])
def test_field_equals(text: str) -> None:
    selector = parse_field_selector(text, POD_FIELDS)
    assert not selector.is_empty()
    assert selector.matches(pod("p1"))
    assert not selector.matches(pod("p2"))
    assert selector.required_value("metadata.name") == "p1"
    assert selector.required_value("spec.nodeName") is None


def test_field_not_equals() -> None:
    selector = parse_field_selector("status.phase!=Running", POD_FIELDS)
    assert selector.matches(pod(phase="Pending"))
    assert selector.matches(pod(phase=None))  # missing compares as ""
    assert not selector.matches(pod(phase="Running"))
    assert selector.required_value("status.phase") is None


def test_empty_node_name_selects_unassigned_pods() -> None:
    unassigned = parse_field_selector("spec.nodeName=", POD_FIELDS)
    assigned = parse_field_selector("spec.nodeName!=", POD_FIELDS)
    assert unassigned.matches(pod(node=None))  # key absent
    assert unassigned.matches({"spec": {"nodeName": None}})  # explicit null
    assert unassigned.matches({})  # no spec at all
    assert unassigned.matches(pod(node=""))
    assert not unassigned.matches(pod(node="n1"))
    assert assigned.matches(pod(node="n1"))
    assert not assigned.matches(pod(node=None))
    assert unassigned.required_value("spec.nodeName") == ""


def test_field_terms_are_anded() -> None:
    selector = parse_field_selector("spec.nodeName=n1,status.phase!=Failed", POD_FIELDS)
    assert selector.matches(pod(node="n1", phase="Running"))
    assert not selector.matches(pod(node="n1", phase="Failed"))
    assert not selector.matches(pod(node="n2", phase="Running"))


def test_field_path_through_non_mapping_is_missing() -> None:
    selector = parse_field_selector("spec.nodeName=", POD_FIELDS)
    assert selector.matches({"spec": "not-a-dict"})
    assert not parse_field_selector("spec.nodeName=x", POD_FIELDS).matches({"spec": ["x"]})


def test_non_string_scalars_compare_as_text() -> None:
    fields = {"spec.priority", "spec.hostNetwork", "status.ratio"}
    assert parse_field_selector("spec.priority=10", fields).matches({"spec": {"priority": 10}})
    assert not parse_field_selector("spec.priority=1", fields).matches({"spec": {"priority": 10}})
    assert parse_field_selector("status.ratio=0.5", fields).matches({"status": {"ratio": 0.5}})
    # Bools render like Go's strconv.FormatBool, as the real server's field sets do.
    host = parse_field_selector("spec.hostNetwork=true", fields)
    assert host.matches({"spec": {"hostNetwork": True}})
    assert not host.matches({"spec": {"hostNetwork": False}})
    assert parse_field_selector("spec.hostNetwork=false", fields).matches(
        {"spec": {"hostNetwork": False}}
    )


def test_container_values_never_equal_a_selector_value() -> None:
    fields = {"spec.nodeName"}
    obj = {"spec": {"nodeName": {"a": "b"}}}
    assert not parse_field_selector("spec.nodeName=", fields).matches(obj)
    assert not parse_field_selector("spec.nodeName={'a': 'b'}", fields).matches(obj)
    assert parse_field_selector("spec.nodeName!=", fields).matches(obj)


def test_field_escapes() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d", POD_FIELDS)
    assert selector.matches(pod("a,b=c\\d"))
    assert not selector.matches(pod(r"a\,b\=c\\d"))
    assert selector.required_value("metadata.name") == "a,b=c\\d"
    # An escaped comma does not split the selector into two terms.
    assert len(selector.terms) == 1


def test_escape_field_value() -> None:
    assert escape_field_value("a,b=c\\d") == r"a\,b\=c\\d"
    assert escape_field_value("plain") == "plain"
    selector = parse_field_selector(r"spec.nodeName!=x\,y,metadata.name=p", POD_FIELDS)
    assert str(selector) == r"metadata.name=p,spec.nodeName!=x\,y"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (r"metadata.name=a\b", "invalid field selector: invalid escape sequence: \\b"),
        ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
        ("metadata.name=a=b", "invalid field selector: unescaped character in value: '='"),
        ("metadata.name!==b", "invalid field selector: unescaped character in value: '='"),
    ],
)
def test_bad_field_escapes(text: str, message: str) -> None:
    assert field_error(text) == message


def test_unsupported_field() -> None:
    assert field_error("spec.schedulerName=x") == "field label not supported: spec.schedulerName"
    assert field_error("metadata.name=a,spec.foo!=b") == "field label not supported: spec.foo"
    # Fields are taken verbatim, so whitespace around them is not trimmed (as in Go).
    assert field_error("metadata.name=a, spec.nodeName=b") == (
        "field label not supported:  spec.nodeName"
    )
    assert field_error("metadata.name=x", frozenset()) == "field label not supported: metadata.name"


@pytest.mark.parametrize("term", ["metadata.name", "spec.nodeName<x", " "])
def test_field_term_without_operator(term: str) -> None:
    text = f"status.phase=Running,{term}"
    assert field_error(text) == f"invalid selector: '{text}'; can't understand '{term}'"


def test_syntax_errors_win_over_unsupported_fields() -> None:
    assert field_error("zzz.unsupported=a,metadata.name").startswith("invalid selector:")


def test_field_operator_is_the_leftmost_one() -> None:
    selector = parse_field_selector("metadata.name==x", POD_FIELDS)
    assert selector.matches(pod("x"))
    # "a!b=c" has no "!=": the field is "a!b".
    assert field_error("a!b=c") == "field label not supported: a!b"


def test_field_selector_objects_are_immutable() -> None:
    selector = parse_field_selector("metadata.name=x", POD_FIELDS)
    with pytest.raises(AttributeError):
        selector.terms = ()  # type: ignore[misc]
    assert isinstance(selector, FieldSelector)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

label_names = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?", fullmatch=True)
label_prefixes = st.from_regex(
    r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\.[a-z0-9]{1,5}){0,2}", fullmatch=True
)
label_keys = st.one_of(label_names, st.tuples(label_prefixes, label_names).map("/".join))
label_values = st.one_of(st.just(""), label_names)
label_sets = st.dictionaries(label_keys, label_values, max_size=5)


@given(key=label_keys, value=label_values, labels=label_sets, double=st.booleans())
def test_property_equality_matches_exactly_dicts_with_the_pair(
    key: str, value: str, labels: dict[str, str], double: bool
) -> None:
    op = "==" if double else "="
    selector = parse_label_selector(f"{key}{op}{value}")
    assert selector.matches(labels) == (labels.get(key) == value)
    with_pair = {**labels, key: value}
    assert selector.matches(with_pair)
    # "!=" is the exact complement of "=".
    assert parse_label_selector(f"{key}!={value}").matches(labels) != selector.matches(labels)


# Value lists are unique: Go itself rejects a trailing run of empty values such as "(a,,)".
unique_values = st.lists(label_values, max_size=4, unique=True)


@given(key=label_keys, values=unique_values.filter(bool), labels=label_sets)
def test_property_in_and_notin_are_complements(
    key: str, values: list[str], labels: dict[str, str]
) -> None:
    body = ", ".join(values)
    inside = parse_label_selector(f"{key} in ({body})")
    outside = parse_label_selector(f"{key} notin ({body})")
    assert inside.matches(labels) == (key in labels and labels[key] in values)
    assert inside.matches(labels) != outside.matches(labels)


@given(key=label_keys, labels=label_sets)
def test_property_exists_and_not_exists_are_complements(key: str, labels: dict[str, str]) -> None:
    assert parse_label_selector(key).matches(labels) == (key in labels)
    assert parse_label_selector(f"!{key}").matches(labels) == (key not in labels)


@given(key=label_keys, threshold=st.integers(0, 10**6), have=st.integers(-(10**6), 10**6))
def test_property_numeric_comparison(key: str, threshold: int, have: int) -> None:
    labels = {key: str(have)}
    assert parse_label_selector(f"{key}>{threshold}").matches(labels) == (have > threshold)
    assert parse_label_selector(f"{key}<{threshold}").matches(labels) == (have < threshold)


requirement_texts = st.one_of(
    label_keys,
    label_keys.map(lambda k: "!" + k),
    st.tuples(label_keys, st.sampled_from(["=", "==", "!="]), label_values).map("".join),
    st.tuples(label_keys, st.sampled_from([" in ", " notin "]), unique_values).map(
        lambda t: f"{t[0]}{t[1]}({','.join(t[2])})"
    ),
    st.tuples(label_keys, st.sampled_from([">", "<"]), st.integers(0, 10**9)).map(
        lambda t: f"{t[0]}{t[1]}{t[2]}"
    ),
)


@given(parts=st.lists(requirement_texts, max_size=5), labels=label_sets)
def test_property_str_round_trips(parts: list[str], labels: dict[str, str]) -> None:
    selector = parse_label_selector(" , ".join(parts))
    again = parse_label_selector(str(selector))
    assert again == selector
    assert again.matches(labels) == selector.matches(labels)


@given(name=st.text(max_size=20), other=st.text(max_size=20))
def test_property_escaped_field_values_match_exactly(name: str, other: str) -> None:
    selector = parse_field_selector(f"metadata.name={escape_field_value(name)}", POD_FIELDS)
    assert selector.required_value("metadata.name") == name
    assert selector.matches({"metadata": {"name": name}})
    assert selector.matches({"metadata": {"name": other}}) == (name == other)
