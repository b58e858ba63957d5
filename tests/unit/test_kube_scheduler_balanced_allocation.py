"""kube-scheduler's NodeResourcesBalancedAllocation test table, reproduced by gang's
BalancedAllocation: each ported case builds the cluster it describes, gives the plugin the case's
args through a profile's ``plugin_args``, scores the incoming pod through the placer of that
profile (its Filter first, then the scores) and compares every node's score with
kube-scheduler's. Beside the table: what the default balances, and bad args refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from gang.app.profiles import ProfileError, build_profiles
from gang.models.settings import SchedulerConfig
from gang.scheduling.framework import PluginContext
from gang.scheduling.placement import Placer
from gang.state.resources import ResourceIndex
from tests.unit.kube_scheduler_tables import load, world

CASES = load("balancedallocation.yaml")
#: only BalancedAllocation scores: the other resource scores off, and the rule-aware ones
#: judge every node alike for pods without rules
ONLY_BALANCED = {"most_allocated": 0, "least_allocated": 0, "gang_packing": 0}


def config_with(args: dict[str, Any] | None) -> SchedulerConfig:
    profile: dict[str, Any] = {"scheduler_name": "gang-scheduler"}
    if args is not None:
        profile["plugin_args"] = {"BalancedAllocation": args}
    return SchedulerConfig(weights=ONLY_BALANCED, profiles=[profile])


def node_scores(case: dict[str, Any], args: dict[str, Any] | None) -> dict[str, float]:
    """Node name → the weighted total the placer gives the case's pod there."""
    w = world({**case, "from": "TestNodeResourcesBalancedAllocation"})
    config = config_with(args)
    profile = build_profiles(config, PluginContext(config, w.cache.index, None))["gang-scheduler"]
    placer = Placer.for_profile(w.cache.index, profile, "topology.kubernetes.io/zone")
    evaluation = placer.evaluate(w.snap, w.pod)
    assert list(evaluation.weights) == ["BalancedAllocation"]
    return {w.snap.names[row]: score for row, score in evaluation.scores.items()}


@pytest.mark.parametrize("case", CASES, ids=[f"[{c['index']}] {c['name']}" for c in CASES])
def test_kube_scheduler_balanced_allocation_table(case: dict[str, Any]) -> None:
    scores = node_scores(case, case["args"])
    assert sorted(scores) == sorted(n["metadata"]["name"] for n in case["nodes"])
    if case.get("skip"):
        assert len(set(scores.values())) == 1
    else:  # kube-scheduler truncates its score to an integer
        assert {name: int(score) for name, score in scores.items()} == case["scores"]


def test_the_default_balances_cpu_and_memory_only() -> None:
    """Case 5 without args: the GPU column is left out, so only CPU and memory count (node1's
    3000m of 3500m CPU and 5000 of 40000 bytes are the same on both nodes)."""
    case = next(c for c in CASES if c["index"] == 5)
    default = node_scores(case, None)
    assert {name: int(score) for name, score in default.items()} == {"node1": 63, "node2": 63}
    with_gpu = node_scores(case, case["args"])
    assert int(with_gpu["node1"]) == 70 and int(with_gpu["node2"]) == 65


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"resources": []}, "resources must be a non-empty list"),
        ({"resources": "cpu"}, "resources must be a non-empty list"),
        ({"resources": [{"weight": 1}]}, "each of resources needs a name"),
        ({"resources": [{"name": "cpu", "weight": 0}]}, "resources[cpu].weight must be an integer"),
        ({"resources": [{"name": "cpu", "weight": True}]}, "must be an integer in 1..100"),
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "names 'cpu' twice"),
        ({"resources": [{"name": "cpu", "wieght": 2}]}, "unknown field(s) ['wieght']"),
    ],
)
def test_bad_balanced_allocation_args_are_refused_by_name(args: Any, message: str) -> None:
    config = config_with(args)
    with pytest.raises(ProfileError, match="plugin BalancedAllocation") as raised:
        build_profiles(config, PluginContext(config, ResourceIndex(), None))
    assert message in str(raised.value)
