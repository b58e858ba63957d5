"""Nodes of any shape: the cache skips what it cannot read instead of raising.

A real apiserver type-checks Nodes, but the extender's ``nodeCacheCapable: false`` mode judges
whatever node objects a request carries, and the simulator stores untyped fields: a node whose
``status`` or ``allocatable`` has the wrong shape must count as a node without resources, never
take down the request (a 500) or the informer feeding the scheduler.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from gang.extender.judge import cache_of_nodes
from gang.state.cache import ClusterCache
from tests.badinput.conftest import json_values, mutations

NODE: dict[str, Any] = {
    "metadata": {"name": "n1", "labels": {"pool": "a", "topology.kubernetes.io/zone": "z"}},
    "spec": {
        "unschedulable": False,
        "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
    },
    "status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8", "pods": "110"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8", "pods": "110"},
    },
}


def test_wrong_shapes_count_as_no_resources() -> None:
    for status in ("Ready", ["allocatable"], {"allocatable": "lots"}, {"allocatable": [1, 2]}):
        cache = ClusterCache()
        assert cache.upsert_node({**NODE, "status": status})
        assert cache.nodes["n1"].allocatable == {}
    cache = ClusterCache()
    assert not cache.upsert_node({"metadata": "n1"})  # no name: nothing to add
    assert not cache.nodes


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    node=mutations(NODE, keep=frozenset({"name"}))
    | json_values.map(lambda v: {"metadata": {"name": "n1"}, "status": v})
)
def test_any_node_is_cached_or_skipped(node: dict[str, Any]) -> None:
    cache = ClusterCache()
    cache.upsert_node(node)
    for entry in cache.nodes.values():
        assert all(isinstance(v, int) and v >= 0 for v in entry.allocatable.values())
    judged, names = cache_of_nodes([node, NODE])
    assert set(names) <= {"n1"} and set(judged.nodes) <= {"n1"}
