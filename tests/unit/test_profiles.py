"""Profiles from configuration: defaults, enable/disable/weights, loading, and clear refusals."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from gang.app.profiles import ProfileError, build_profiles, check_profiles, load_object
from gang.models.settings import SchedulerConfig
from gang.scheduling.framework import PluginContext
from gang.state.resources import ResourceIndex


def profiles(**config: Any) -> dict[str, Any]:
    cfg = SchedulerConfig(**config)
    return dict(build_profiles(cfg, PluginContext(cfg, ResourceIndex(), None)))


def test_default_profile_has_every_builtin_at_its_points() -> None:
    p = profiles()["gang-scheduler"]
    assert p.queue_sort.name == "PrioritySort"
    assert [f.name for f in p.pre_filters] == [
        "PodGroupReady",
        "UnsupportedFields",
        "MinResources",
        "VolumeBinding",
        "DynamicResources",
    ]
    assert [x.name for x in p.pre_binds] == ["VolumeBinding", "DynamicResources"]
    assert [x.name for x in p.reserves] == ["VolumeBinding", "DynamicResources"]
    assert [f.name for f in p.static_filters] == [
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
    ]
    assert [f.name for f in p.node_filters] == [
        "NodePorts",
        "NodeResourcesFit",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
    ]
    # the placement rules' scores weigh as in kube-scheduler's default profile
    assert [(s.name, w) for s, w in p.scores] == [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("MostAllocated", 1),
        ("BalancedAllocation", 1),
        ("GangPacking", 2),
    ]
    assert [x.name for x in p.permits] == ["GangPermit"]
    assert [x.name for x in p.binds] == ["DefaultBinder"]


def test_disable_enable_and_reweigh() -> None:
    p = profiles(
        profiles=[
            {
                "scheduler_name": "s",
                "plugins": {
                    "disabled": ["MostAllocated", "GangPacking"],
                    "enabled": [
                        {"name": "LeastAllocated", "weight": 7},
                        {"name": "BalancedAllocation", "weight": 3},
                    ],
                },
            }
        ]
    )["s"]
    resource_scores = [(s.name, w) for s, w in p.scores if s.name.endswith("Allocation")]
    assert resource_scores + [(s.name, w) for s, w in p.scores if s.name == "LeastAllocated"] == [
        ("BalancedAllocation", 3),
        ("LeastAllocated", 7),
    ]
    assert "MostAllocated" not in [s.name for s, _ in p.scores]


def test_disable_all_then_build_a_minimal_profile() -> None:
    p = profiles(
        profiles=[
            {
                "scheduler_name": "s",
                "plugins": {
                    "disabled": ["*"],
                    "enabled": [
                        {"name": "PrioritySort"},
                        {"name": "NodeResourcesFit"},
                        {"name": "DefaultBinder"},
                    ],
                },
            }
        ]
    )["s"]
    assert p.names() == ["PrioritySort", "NodeResourcesFit", "DefaultBinder"]
    assert not p.static_filters and not p.permits


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        ({"enabled": [{"name": "NoSuchPlugin"}]}, "unknown plugin(s) ['NoSuchPlugin']"),
        ({"disabled": ["PrioritySort"]}, "needs exactly one QueueSort plugin, has []"),
        ({"disabled": ["DefaultBinder"]}, "needs a Bind plugin"),
    ],
)
def test_unusable_profiles_are_refused_by_name(plugins: dict[str, Any], message: str) -> None:
    with pytest.raises(ProfileError, match=f"profile s: .*{re.escape(message)}"):
        check_profiles(SchedulerConfig(profiles=[{"scheduler_name": "s", "plugins": plugins}]))


def test_profiles_must_share_one_queue_sort() -> None:
    config = SchedulerConfig(
        plugin_paths=["examples.plugins.qos_sort:QoSSort"],
        profiles=[
            {"scheduler_name": "a"},
            {
                "scheduler_name": "b",
                "plugins": {"disabled": ["PrioritySort"], "enabled": [{"name": "QoSSort"}]},
            },
        ],
    )
    with pytest.raises(ProfileError, match="same QueueSort"):
        check_profiles(config)


def test_duplicate_scheduler_names_are_invalid() -> None:
    with pytest.raises(ValueError, match="distinct scheduler names"):
        SchedulerConfig(profiles=[{"scheduler_name": "a"}, {"scheduler_name": "a"}])


def test_plugin_paths_and_their_errors() -> None:
    assert load_object("examples.plugins.qos_sort:QoSSort").name == "QoSSort"
    assert load_object("examples.plugins.qos_sort.QoSSort").name == "QoSSort"
    with pytest.raises(ProfileError, match="cannot import plugin module"):
        load_object("no.such.module:X")
    with pytest.raises(ProfileError, match="has no 'Nope'"):
        load_object("examples.plugins.qos_sort:Nope")
    with pytest.raises(ProfileError, match="must look like"):
        load_object("justaname")


def test_a_factory_that_fails_is_named() -> None:
    config = SchedulerConfig(
        plugin_paths=["tests.scheduler.plugins_for_tests:Broken"],
        profiles=[
            {
                "scheduler_name": "s",
                "plugins": {"enabled": [{"name": "Broken"}]},
                "plugin_args": {"Broken": {"x": 1}},
            }
        ],
    )
    with pytest.raises(
        ProfileError,
        match=re.escape("plugin Broken: cannot be created: ValueError: bad args ['x']"),
    ):
        check_profiles(config)


def test_entry_point_group_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = tmp_path / "gang_extra-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gang-extra\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[gang.plugins]\nQoSSortEP = examples.plugins.qos_sort:QoSSort\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = SchedulerConfig(
        profiles=[
            {
                "scheduler_name": "s",
                "plugins": {"disabled": ["PrioritySort"], "enabled": [{"name": "QoSSortEP"}]},
            }
        ]
    )
    built = build_profiles(config, PluginContext(config, ResourceIndex(), None))
    assert built["s"].queue_sort.name == "QoSSort"
    assert "examples.plugins.qos_sort" in sys.modules
