"""The protocol messages decode like Go's ``encoding/json`` and encode like ``json.Marshal``."""

from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError

from gang.extender.models import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    HostPriority,
    NodeList,
    describe,
)


def test_keys_match_case_insensitively_and_unknown_keys_are_ignored() -> None:
    args = ExtenderArgs.model_validate(
        {"POD": {"metadata": {}}, "nodeNames": ["a"], "Unknown": 1, "nodes": None}
    )
    assert args.pod == {"metadata": {}}
    assert args.node_names == ["a"]
    assert args.nodes is None


def test_a_later_duplicate_key_wins_as_in_go() -> None:
    args = ExtenderArgs.model_validate({"Pod": {"a": 1}, "pod": {"b": 2}, "NodeNames": []})
    assert args.pod == {"b": 2}


def test_null_is_absent() -> None:
    args = ExtenderArgs.model_validate({"Pod": {}, "Nodes": {"items": None}, "NodeNames": None})
    assert args.nodes == NodeList()
    with pytest.raises(ValidationError) as err:
        ExtenderArgs.model_validate({"Pod": None, "NodeNames": []})
    assert describe(err.value) == "Pod: required field missing"


def test_results_are_written_like_json_marshal() -> None:
    """No omitempty anywhere: every field, nil as null, Go's field names in declared order."""
    assert orjson.dumps(ExtenderFilterResult().wire()) == (
        b'{"Nodes":null,"NodeNames":null,"FailedNodes":null,'
        b'"FailedAndUnresolvableNodes":null,"Error":""}'
    )
    result = ExtenderFilterResult(Nodes=NodeList(items=[{"metadata": {"name": "n"}}]))
    assert orjson.dumps(result.wire()).startswith(
        b'{"Nodes":{"metadata":{},"items":[{"metadata":{"name":"n"}}]},"NodeNames":null'
    )
    assert orjson.dumps(HostPriority(Host="n", Score=7).wire()) == b'{"Host":"n","Score":7}'
    assert orjson.dumps(ExtenderBindingResult().wire()) == b'{"Error":""}'


def test_results_read_back_from_either_spelling() -> None:
    """What a Go extender of either generation answers parses too (used by tests, proxies)."""
    legacy = {"nodenames": ["a"], "failedNodes": {"b": "why"}, "error": ""}
    result = ExtenderFilterResult.model_validate(legacy)
    assert result.node_names == ["a"] and result.failed_nodes == {"b": "why"}


def test_scores_outside_0_to_10_are_refused() -> None:
    with pytest.raises(ValidationError):
        HostPriority(Host="n", Score=11)


def test_binding_args_need_name_namespace_and_node() -> None:
    args = ExtenderBindingArgs.model_validate(
        {"PodName": "p", "PodNamespace": "ns", "PodUID": None, "Node": "n"}
    )
    assert (args.pod_name, args.pod_namespace, args.pod_uid, args.node) == ("p", "ns", "", "n")
    with pytest.raises(ValidationError) as err:
        ExtenderBindingArgs.model_validate({"podname": "p"})
    assert describe(err.value) == (
        "PodNamespace: required field missing; Node: required field missing"
    )
