"""Tests for gang.sim.patch: the PATCH flavours of the simulated kube-apiserver.

They exist because the scheduler relies on the simulator merging its patches
exactly like a real apiserver: a wrong merge of a pod's status conditions or
finalizers would make the simulator disagree with a cluster.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gang.sim.patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    UnsupportedPatchType,
    accepted_patch_types,
    apply_patch,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)

BUILTIN_415 = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, "
    "application/strategic-merge-patch+json, application/apply-patch+yaml"
)
CUSTOM_415 = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
)


def canonical(value: Any) -> bytes:
    """Byte-exact JSON, so that ``True`` and ``1`` compare different."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def patched_without_mutation(fn: Any, target: Any, patch: Any) -> Any:
    """Run ``fn(target, patch)`` and check that neither input changed."""
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    result = fn(target, patch)
    assert canonical(target) == canonical(target_before)
    assert canonical(patch) == canonical(patch_before)
    return result


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "worker-0",
            "namespace": "default",
            "finalizers": ["a.example.com/x", "b.example.com/y"],
            "labels": {"app": "train", "gang": "g1"},
        },
        "spec": {
            "schedulerName": "gang",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1",
                    "args": ["sleep", "1"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                },
                {"name": "sidecar", "image": "envoy:1"},
            ],
            "tolerations": [
                {"key": "k1", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "k2", "operator": "Exists", "effect": "NoExecute"},
            ],
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "PodScheduled", "status": "True", "reason": "Scheduled"},
            ],
        },
    }


# --------------------------------------------------------------------------
# RFC 7386


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc7386_appendix(target: Any, patch: Any, expected: Any) -> None:
    result = patched_without_mutation(json_merge_patch, target, patch)
    assert canonical(result) == canonical(expected)


def test_merge_patch_replaces_lists_and_shares_untouched_subtrees() -> None:
    target = pod()
    patch = {"metadata": {"labels": {"gang": None, "new": "x"}}, "spec": {"tolerations": []}}
    result = patched_without_mutation(json_merge_patch, target, patch)
    assert result["metadata"]["labels"] == {"app": "train", "new": "x"}
    assert result["spec"]["tolerations"] == []
    assert result["spec"]["containers"] == target["spec"]["containers"]
    assert result is not target
    # untouched sub-trees are shared, not copied
    assert result["status"] is target["status"]
    assert result["spec"]["containers"] is target["spec"]["containers"]


# --------------------------------------------------------------------------
# RFC 6902


def test_json_patch_add_remove_replace() -> None:
    target = {"foo": "bar", "list": [1, 2, 3], "obj": {"k": "v"}}
    ops = [
        {"op": "add", "path": "/baz", "value": "qux"},
        {"op": "add", "path": "/list/1", "value": 9},
        {"op": "add", "path": "/list/-", "value": 4},
        {"op": "remove", "path": "/foo"},
        {"op": "replace", "path": "/obj/k", "value": {"deep": True}},
    ]
    result = patched_without_mutation(json_patch, target, ops)
    assert result == {"baz": "qux", "list": [1, 9, 2, 3, 4], "obj": {"k": {"deep": True}}}


def test_json_patch_move_and_copy() -> None:
    target = {"a": {"b": [1, 2]}, "c": {"d": "e"}}
    ops = [
        {"op": "move", "from": "/a/b", "path": "/c/moved"},
        {"op": "copy", "from": "/c/d", "path": "/a/copied"},
        {"op": "add", "path": "/c/moved/-", "value": 3},
    ]
    result = patched_without_mutation(json_patch, target, ops)
    assert result == {"a": {"copied": "e"}, "c": {"d": "e", "moved": [1, 2, 3]}}


def test_json_patch_test_operation() -> None:
    target = {"metadata": {"resourceVersion": "7"}, "spec": {"nodeName": ""}}
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "replace", "path": "/spec/nodeName", "value": "node-1"},
    ]
    result = patched_without_mutation(json_patch, target, ops)
    assert result["spec"]["nodeName"] == "node-1"

    failing = [
        {"op": "replace", "path": "/spec/nodeName", "value": "node-2"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "8"},
    ]
    before = copy.deepcopy(target)
    with pytest.raises(PatchError, match="not equal"):
        json_patch(target, failing)
    # the replace before the failing test did not leak into the input
    assert target == before


def test_json_patch_test_distinguishes_bool_from_int() -> None:
    with pytest.raises(PatchError):
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": True}])


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/a/9", "value": 1}],
        [{"op": "bogus", "path": "/a"}],
        [{"path": "/a"}],
        [{"op": "add", "value": 1}],
        [{"op": "move", "from": "/nope", "path": "/b"}],
        ["not an operation"],
    ],
)
def test_json_patch_library_errors_become_patch_error(ops: Any) -> None:
    with pytest.raises(PatchError) as info:
        json_patch({"a": [1]}, ops)
    assert str(info.value)


def test_json_patch_rejects_non_list_body_like_the_apiserver() -> None:
    with pytest.raises(PatchError) as info:
        json_patch({"a": 1}, {"op": "remove", "path": "/a"})
    assert str(info.value) == "json: cannot unmarshal object into Go value of type jsonpatch.Patch"


def test_json_patch_shares_untouched_subtrees() -> None:
    target = pod()
    ops = [{"op": "replace", "path": "/spec/containers/1/image", "value": "envoy:2"}]
    result = patched_without_mutation(json_patch, target, ops)
    assert result["spec"]["containers"][1]["image"] == "envoy:2"
    assert result["status"] is target["status"]
    assert result["metadata"] is target["metadata"]
    assert result["spec"]["containers"][0] is target["spec"]["containers"][0]


def test_json_patch_added_value_is_not_shared_with_the_operation() -> None:
    value = {"k": "v"}
    ops = [
        {"op": "add", "path": "/x", "value": value},
        {"op": "add", "path": "/x/k2", "value": "v2"},
    ]
    result = patched_without_mutation(json_patch, {}, ops)
    assert result == {"x": {"k": "v", "k2": "v2"}}
    assert value == {"k": "v"}


def test_json_patch_replaces_root() -> None:
    result = patched_without_mutation(
        json_patch, {"a": 1}, [{"op": "replace", "path": "", "value": [1]}]
    )
    assert result == [1]


# --------------------------------------------------------------------------
# strategic merge patch


def test_strategic_kube_scheduler_pod_condition_patch() -> None:
    target = pod()
    # what kube-scheduler sends when it cannot place a pod
    patch = {
        "status": {
            "$setElementOrder/conditions": [{"type": "PodScheduled"}],
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient cpu.",
                }
            ],
        }
    }
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["status"] == {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient cpu.",
            },
            {"type": "Initialized", "status": "True"},
        ],
    }
    assert result["spec"] is target["spec"]
    assert result["metadata"] is target["metadata"]


def test_strategic_condition_added_to_pod_without_conditions() -> None:
    target = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}
    patch = {
        "status": {
            "$setElementOrder/conditions": [{"type": "PodScheduled"}],
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    }
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result == {
        "metadata": {"name": "p"},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def test_strategic_set_element_order_keeps_unmentioned_elements_after() -> None:
    target = {
        "conditions": [
            {"type": "A", "status": "True"},
            {"type": "B", "status": "True"},
            {"type": "C", "status": "True"},
            {"type": "D", "status": "True"},
        ]
    }
    patch = {
        "$setElementOrder/conditions": [{"type": "E"}, {"type": "C"}, {"type": "A"}],
        "conditions": [{"type": "E", "status": "False"}],
    }
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert [c["type"] for c in result["conditions"]] == ["E", "C", "A", "B", "D"]
    assert result["conditions"][0] == {"type": "E", "status": "False"}


def test_strategic_containers_merged_by_name() -> None:
    target = pod()
    patch = {
        "spec": {
            "containers": [
                {"name": "sidecar", "image": "envoy:2"},
                {"name": "debug", "image": "busybox:debug", "stdin": True},
                {
                    "name": "main",
                    "args": ["sleep", "2"],
                    "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                },
            ]
        }
    }
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["spec"]["containers"] == [
        {
            "name": "main",
            "image": "busybox:1",
            # args is not a merged list: replaced wholesale
            "args": ["sleep", "2"],
            # env is merged by name: existing order kept, new ones appended
            "env": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "3"},
                {"name": "C", "value": "4"},
            ],
        },
        {"name": "sidecar", "image": "envoy:2"},
        {"name": "debug", "image": "busybox:debug", "stdin": True},
    ]
    assert result["spec"]["tolerations"] is target["spec"]["tolerations"]


def test_strategic_null_deletes_fields_inside_merged_elements() -> None:
    target = pod()
    patch = {"spec": {"containers": [{"name": "main", "args": None, "env": None}]}}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["spec"]["containers"][0] == {"name": "main", "image": "busybox:1"}
    assert result["spec"]["containers"][1] == target["spec"]["containers"][1]


def test_strategic_patch_delete_removes_element_by_key() -> None:
    target = pod()
    patch = {
        "spec": {"containers": [{"$patch": "delete", "name": "sidecar"}]},
        "status": {"conditions": [{"type": "Initialized", "$patch": "delete"}]},
    }
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert [c["name"] for c in result["spec"]["containers"]] == ["main"]
    assert result["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "True", "reason": "Scheduled"}
    ]


def test_strategic_delete_without_merge_key_is_an_error() -> None:
    with pytest.raises(PatchError, match="merge key"):
        strategic_merge_patch(pod(), {"spec": {"containers": [{"$patch": "delete"}]}})


def test_strategic_tolerations_replaced_wholesale() -> None:
    target = pod()
    patch = {"spec": {"tolerations": [{"key": "k3", "operator": "Exists"}]}}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["spec"]["tolerations"] == [{"key": "k3", "operator": "Exists"}]


def test_strategic_node_taints_replaced_and_addresses_merged_by_type() -> None:
    node = {
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "n1"},
            ]
        },
    }
    patch = {
        "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]},
    }
    result = patched_without_mutation(strategic_merge_patch, node, patch)
    assert result["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]
    assert result["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.2"},
        {"type": "Hostname", "address": "n1"},
    ]


def test_strategic_finalizers_merged_as_set() -> None:
    target = pod()
    patch = {"metadata": {"finalizers": ["b.example.com/y", "c.example.com/z"]}}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["metadata"]["finalizers"] == [
        "a.example.com/x",
        "b.example.com/y",
        "c.example.com/z",
    ]


def test_strategic_delete_from_primitive_list() -> None:
    target = pod()
    patch = {
        "metadata": {
            "$deleteFromPrimitiveList/finalizers": ["a.example.com/x", "not-there"],
            "finalizers": ["d.example.com/w"],
        }
    }
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["metadata"]["finalizers"] == ["b.example.com/y", "d.example.com/w"]
    assert not any(k.startswith("$") for k in result["metadata"])


def test_strategic_finalizers_set_element_order() -> None:
    target = {"metadata": {"finalizers": ["x", "y", "z"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["z", "x"]}}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result == {"metadata": {"finalizers": ["z", "x", "y"]}}


def test_strategic_patch_replace_on_a_map() -> None:
    target = pod()
    patch = {"metadata": {"labels": {"$patch": "replace", "only": "this"}}}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["metadata"]["labels"] == {"only": "this"}
    assert result["metadata"]["name"] == "worker-0"


def test_strategic_patch_replace_on_a_list() -> None:
    target = pod()
    patch = {"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "x:1"}]}}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["spec"]["containers"] == [{"name": "solo", "image": "x:1"}]


def test_strategic_retain_keys() -> None:
    target = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result == {"spec": {"strategy": {"type": "Recreate"}}}


def test_strategic_no_directive_leaks_into_new_fields() -> None:
    target: dict[str, Any] = {"metadata": {"name": "p"}}
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [
                {"name": "b", "image": "b:1", "env": [{"name": "X", "$patch": "delete"}]},
                {"name": "a", "image": "a:1", "stdin": None},
            ],
            "nodeSelector": {"$patch": "replace", "zone": "a"},
        },
        "status": {"$retainKeys": ["phase"], "phase": "Pending"},
    }
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result == {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1"},
                {"name": "b", "image": "b:1", "env": []},
            ],
            "nodeSelector": {"zone": "a"},
        },
        "status": {"phase": "Pending"},
    }
    assert b"$" not in canonical(result)


def test_strategic_keyed_list_without_keys_is_replaced() -> None:
    # Service ports are keyed by "port", not "containerPort": treated as atomic
    target = {"spec": {"ports": [{"port": 80, "protocol": "TCP"}]}}
    patch = {"spec": {"ports": [{"port": 443, "protocol": "TCP"}]}}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result == {"spec": {"ports": [{"port": 443, "protocol": "TCP"}]}}


def test_strategic_ports_merged_by_container_port() -> None:
    target = {"containers": [{"name": "c", "ports": [{"containerPort": 80, "name": "http"}]}]}
    patch = {"containers": [{"name": "c", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}
    result = patched_without_mutation(strategic_merge_patch, target, patch)
    assert result["containers"][0]["ports"] == [
        {"containerPort": 80, "name": "http", "protocol": "TCP"}
    ]


def test_strategic_rejects_non_object_patch() -> None:
    with pytest.raises(PatchError, match="cannot unmarshal array"):
        strategic_merge_patch({}, [{"op": "add"}])


def test_strategic_unknown_patch_directive() -> None:
    with pytest.raises(PatchError, match="unknown patch type"):
        strategic_merge_patch({"a": {}}, {"a": {"$patch": "explode"}})


# --------------------------------------------------------------------------
# dispatch


def test_apply_patch_dispatches_on_media_type() -> None:
    target = {"metadata": {"finalizers": ["a"]}, "spec": {"args": ["x"]}}
    merge = {"metadata": {"finalizers": ["b"]}}
    assert apply_patch(MERGE_PATCH, target, merge, strategic=True) == {
        "metadata": {"finalizers": ["b"]},
        "spec": {"args": ["x"]},
    }
    assert apply_patch(STRATEGIC_MERGE_PATCH, target, merge, strategic=True) == {
        "metadata": {"finalizers": ["a", "b"]},
        "spec": {"args": ["x"]},
    }
    ops = [{"op": "add", "path": "/spec/args/-", "value": "y"}]
    assert apply_patch(JSON_PATCH, target, ops, strategic=False) == {
        "metadata": {"finalizers": ["a"]},
        "spec": {"args": ["x", "y"]},
    }
    assert target == {"metadata": {"finalizers": ["a"]}, "spec": {"args": ["x"]}}


@pytest.mark.parametrize(
    "content_type",
    [
        "application/merge-patch+json; charset=utf-8",
        "Application/Merge-Patch+JSON",
        " application/merge-patch+json;charset=UTF-8 ",
    ],
)
def test_apply_patch_ignores_media_type_parameters(content_type: str) -> None:
    assert apply_patch(content_type, {"a": 1}, {"b": 2}, strategic=False) == {"a": 1, "b": 2}


def test_apply_patch_strategic_on_custom_resource_is_unsupported() -> None:
    with pytest.raises(UnsupportedPatchType) as info:
        apply_patch(STRATEGIC_MERGE_PATCH, {"spec": {}}, {"spec": {}}, strategic=False)
    assert str(info.value) == CUSTOM_415
    assert isinstance(info.value, PatchError)


@pytest.mark.parametrize("content_type", [APPLY_PATCH, "application/json", "text/plain", ""])
@pytest.mark.parametrize(("strategic", "message"), [(True, BUILTIN_415), (False, CUSTOM_415)])
def test_apply_patch_unknown_types(content_type: str, strategic: bool, message: str) -> None:
    with pytest.raises(UnsupportedPatchType) as info:
        apply_patch(content_type, {}, {}, strategic=strategic)
    assert str(info.value) == message


def test_accepted_patch_types_order() -> None:
    assert accepted_patch_types(strategic=True) == (
        JSON_PATCH,
        MERGE_PATCH,
        STRATEGIC_MERGE_PATCH,
        APPLY_PATCH,
    )
    assert accepted_patch_types(strategic=False) == (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)


# --------------------------------------------------------------------------
# properties


def create_merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The RFC 7386 patch turning ``old`` into ``new`` (``new`` holds no nulls)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif isinstance(value, dict) and isinstance(old[key], dict):
            sub = create_merge_patch(old[key], value)
            if sub:
                patch[key] = sub
        elif canonical(old[key]) != canonical(value):
            patch[key] = value
    return patch


json_scalars = (
    st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet="abcxyz", max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)
json_dicts = st.dictionaries(st.sampled_from("abcdef"), json_values, max_size=6)


@settings(max_examples=300, deadline=None)
@given(old=json_dicts, new=json_dicts)
def test_merge_patch_of_diff_reproduces_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    patch = create_merge_patch(old, new)
    result = patched_without_mutation(json_merge_patch, old, patch)
    assert canonical(result) == canonical(new)


@settings(max_examples=200, deadline=None)
@given(old=json_dicts, new=json_dicts)
def test_strategic_patch_without_special_lists_behaves_like_merge_patch(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    # keys a-f are not in the strategic list table, so both flavours must agree
    patch = create_merge_patch(old, new)
    result = patched_without_mutation(strategic_merge_patch, old, patch)
    assert canonical(result) == canonical(json_merge_patch(old, patch))


@settings(max_examples=300, deadline=None)
@given(old=json_dicts, new=json_dicts)
def test_json_patch_from_library_diff_reproduces_new(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    # make_patch emits add/remove/replace/move/copy; applying must not touch old
    operations = list(jsonpatch.make_patch(old, new))
    result = patched_without_mutation(json_patch, old, operations)
    assert canonical(result) == canonical(new)
