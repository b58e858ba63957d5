"""The queue APIs on gang's one model, the tree's checks, membership, and the queue order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gang.models.queueapis import (
    ALL,
    GPU,
    parse_elastic_quota,
    parse_kai_queue,
    parse_volcano_queue,
)
from gang.queue.gangqueue import GangQueue
from gang.queue.tree import Claims, Membership, QueueTree


def _obj(name: str, spec: Any, namespace: str = "", status: Any = None) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "spec": spec, **({"status": status} if status else {})}


# --- each API's fields on the one model ------------------------------------------------------


def test_volcano_fields() -> None:
    spec = parse_volcano_queue(
        _obj(
            "team-a",
            {
                "weight": 3,
                "deserved": {GPU: 8, "cpu": "16"},
                "guarantee": {"resource": {GPU: 4}},
                "capability": {GPU: 16},
                "priority": 2,
                "parent": "org",
                "reclaimable": False,
            },
        )
    )
    assert spec.error is None
    assert (spec.key, spec.parent, spec.priority) == ("volcano/team-a", "volcano/org", 2)
    assert spec.quota == {GPU: 8, "cpu": 16000} and spec.guarantee == {GPU: 4}
    assert spec.limit == {GPU: 16} and spec.weight_of(GPU) == 3.0
    assert not spec.reclaimable and spec.open


def test_volcano_root_parent_closed_state_and_guarantee_above_deserved() -> None:
    spec = parse_volcano_queue(
        _obj(
            "q", {"parent": "root", "guarantee": {"resource": {GPU: 4}}}, status={"state": "Closed"}
        )
    )
    assert spec.parent is None and not spec.open
    assert spec.quota == {GPU: 4}  # a guarantee is part of the entitlement


def test_kai_fields_units_and_unlimited() -> None:
    spec = parse_kai_queue(
        _obj(
            "research",
            {
                "parentQueue": "org",
                "priority": 7,
                "resources": {
                    "gpu": {"quota": 2.5, "overQuotaWeight": 2, "limit": -1},
                    "cpu": {"quota": 4000, "limit": 8000},
                    "memory": {"quota": -1},
                },
            },
        )
    )
    assert spec.error is None and spec.parent == "kai/org" and spec.priority == 7
    # GPUs whole (a fractional quota rounds down), cpu millicores, memory megabytes
    assert spec.quota == {GPU: 2, "cpu": 4000, "memory": ALL}
    assert spec.limit == {"cpu": 8000}
    assert spec.guarantee == {GPU: 2, "cpu": 4000}  # "all of it" guarantees nothing
    assert spec.weight_of(GPU) == 2.0
    assert parse_kai_queue(_obj("plain", {})).priority == 100  # KAI's default


def test_elastic_quota_is_per_namespace() -> None:
    spec = parse_elastic_quota(_obj("quota", {"min": {GPU: 8}, "max": {GPU: 16}}, "team-a"))
    assert spec.key == "elasticquota/team-a" and spec.name == "team-a"
    assert spec.quota == spec.guarantee == {GPU: 8} and spec.limit == {GPU: 16}


@pytest.mark.parametrize(
    ("parse", "spec", "error"),
    [
        (parse_volcano_queue, {"deserved": {GPU: "lots"}}, "spec.deserved.nvidia.com/gpu: "),
        (parse_volcano_queue, {"capability": {"cpu": "-1"}}, "must not be negative, got '-1'"),
        (parse_volcano_queue, {"weight": "heavy"}, "spec.weight: "),
        (parse_volcano_queue, {"deserved": [1]}, "spec.deserved: "),
        (
            parse_volcano_queue,
            {"deserved": {GPU: 9}, "capability": {GPU: 8}},
            "spec.deserved.nvidia.com/gpu (9 GPUs) is above spec.capability.nvidia.com/gpu (8 GPUs)",
        ),
        (parse_kai_queue, {"resources": {"gpu": {"quota": -2}}}, "must be -1 (unlimited)"),
        (parse_kai_queue, {"resources": {"gpu": {"quota": "x"}}}, "spec.resources.gpu.quota"),
        (parse_kai_queue, {"resources": {"gpu": {"overQuotaWeight": -1}}}, "overQuotaWeight"),
        (parse_elastic_quota, {"min": {GPU: "1.5.2"}}, "spec.min.nvidia.com/gpu: "),
        (parse_elastic_quota, {"min": {GPU: 4}, "max": {GPU: 2}}, "(4 GPUs) is above spec.max"),
    ],
)
def test_bad_input_is_an_error_never_an_exception(parse: Any, spec: Any, error: str) -> None:
    parsed = parse(_obj("q", spec, "ns"))
    assert parsed.error is not None and error in parsed.error, parsed.error


# --- the tree ----------------------------------------------------------------------------------


def _tree(*queues: dict[str, Any]) -> QueueTree:
    tree = QueueTree()
    tree.served |= {"volcano", "kai", "elasticquota"}
    for raw in queues:
        tree.upsert(parse_kai_queue(raw))
    return tree


def _kai(name: str, parent: str = "", quota: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"gpu": {"quota": quota}}}
    if parent:
        spec["parentQueue"] = parent
    return _obj(name, spec)


def test_tree_problems() -> None:
    tree = _tree(
        _kai("orphan", parent="nowhere"),
        _kai("a", parent="b"),
        _kai("b", parent="a"),
        _kai("org", quota=8),
        _kai("team-1", parent="org", quota=6),
        _kai("team-2", parent="org", quota=6),
        _kai("fine", quota=4),
    )
    problems = tree.problems()
    assert problems["kai/orphan"] == "parent queue nowhere does not exist"
    assert problems["kai/a"] == "its parents form a cycle: a → b → a"
    assert "kai/fine" not in problems and "default" not in problems
    # KAI lets children ask quotas beyond their parent's (they share what it gets)
    assert {"kai/org", "kai/team-1", "kai/team-2"}.isdisjoint(problems)


def test_volcano_children_guaranteed_more_than_their_parent_are_refused() -> None:
    def volcano(name: str, gpus: int, parent: str = "") -> dict[str, Any]:
        spec: dict[str, Any] = {"guarantee": {"resource": {GPU: gpus}}}
        return _obj(name, {**spec, "parent": parent} if parent else spec)

    tree = QueueTree()
    tree.served.add("volcano")
    for raw in (volcano("org", 8), volcano("team-1", 6, "org"), volcano("team-2", 6, "org")):
        tree.upsert(parse_volcano_queue(raw))
    problems = tree.problems()
    assert "its child queues guarantee 12 GPUs" in problems["volcano/org"]
    assert problems["volcano/team-1"] == "parent queue org is invalid"
    tree.upsert(parse_volcano_queue(volcano("org", 12)))  # fixed: the children become usable
    assert {"volcano/org", "volcano/team-1", "volcano/team-2"}.isdisjoint(tree.problems())


def test_membership() -> None:
    tree = _tree(_kai("org"), _kai("team", parent="org"))
    assert tree.resolve(Claims("ns")) == Membership("default")
    assert tree.resolve(Claims("ns", kai=frozenset({"team"}))) == Membership("kai/team")
    assert "only leaf queues hold gangs" in str(
        tree.resolve(Claims("ns", kai=frozenset({"org"}))).error
    )
    assert "does not exist" in str(tree.resolve(Claims("ns", kai=frozenset({"nope"}))).error)
    two = tree.resolve(Claims("ns", kai=frozenset({"team", "org"})))
    assert two.queue is None and "different queues" in str(two.error)
    # a Volcano group in the implicit default queue is in gang's default queue
    assert tree.resolve(Claims("ns", volcano="default")) == Membership("default")
    named = tree.resolve(Claims("ns", volcano="other", kai=frozenset({"team"})))
    assert "names two queues" in str(named.error)
    tree.upsert(parse_elastic_quota(_obj("q", {"min": {GPU: 2}}, "ns")))
    assert tree.resolve(Claims("ns")) == Membership("elasticquota/ns")
    assert tree.resolve(Claims("other")) == Membership("default")


# --- the gang queue's order among queues ---------------------------------------------------------


async def test_pop_takes_the_queue_ranked_first_then_queue_sort_inside_it() -> None:
    standing = {"a": 0.9, "b": 0.2}
    queue = GangQueue(rank=lambda q: standing[q])
    queue.add("a-old", (0, 1.0), "a")
    queue.add("b-young", (0, 5.0), "b")
    queue.add("b-old", (0, 2.0), "b")
    assert await queue.pop() == "b-old"
    standing["b"] = 1.5  # b is above a now
    assert await queue.pop() == "a-old"
    assert await queue.pop() == "b-young"
    queue.add("moved", (0, 0.0), "a")
    queue.add("moved", (0, 0.0), "b")  # its queue changed: only the new heap counts
    standing["a"] = 0.0
    assert await asyncio.wait_for(queue.pop(), 1) == "moved"
    assert queue.active_queues() == []


def test_an_anonymised_snapshot_renames_queues_consistently() -> None:
    from gang.app.snapshot import anonymise

    items = [
        {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "org"}},
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "team-x"},
            "spec": {"parentQueue": "org"},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "prod"},
            "spec": {"queue": "team-x", "minMember": 1},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "namespace": "prod",
                "labels": {"kai.scheduler/queue": "team-x"},
            },
            "spec": {"containers": []},
        },
    ]
    out = anonymise({"items": items})["items"]
    org, team, group, pod = out
    assert team["spec"]["parentQueue"] == org["metadata"]["name"] != "org"
    assert group["spec"]["queue"] == team["metadata"]["name"] != "team-x"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == team["metadata"]["name"]
