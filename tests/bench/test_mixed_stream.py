"""The mixed-stream benchmark: its workload plan, its plumbing, and one short real run.

The run is tiny (8 nodes, big gangs of 4 whole nodes, 15 s of arrivals, runs of seconds) but
real: the simulator with its kubelet, the scheduler and the driver as three processes. It checks
that the report is computed, not what it says about reservations: that is the scheduler's test.
"""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from gang.bench.streamreport import stream_table
from gang.bench.streamrun import metric_sums, reservations_override, result_json, run_stream
from gang.bench.streams import (
    MixedStreamConfig,
    plan,
    pods,
    stream_podgroup,
    total_gpus,
)
from gang.cli import main
from gang.sim.kubelet import RUN_SECONDS
from gang.state.podinfo import EXPECTED_RUN_ANNOTATION

TINY = MixedStreamConfig(
    nodes="8:gpu=8,cpu=64,memory=512Gi",
    duration=15,
    big_members=4,
    big_gpus=8,
    big_interval=6,
    big_run_min=3,
    big_run_max=5,
    small_max_members=4,
    small_run_median=2,
    small_run_min=0.5,
    small_run_max=6,
    timeout_seconds=60,
)


def test_the_plan_is_deterministic_and_shaped() -> None:
    config = MixedStreamConfig()
    gangs = plan(config)
    assert gangs == plan(config)
    assert gangs != plan(config.model_copy(update={"seed": 2}))
    # in creation order, named in that order (a queue sorted by name agrees)
    assert [g.at for g in gangs] == sorted(g.at for g in gangs)
    assert [g.name for g in gangs] == sorted(g.name for g in gangs)
    big = [g for g in gangs if g.big]
    assert [g.at for g in big] == [0.0, 30.0, 60.0]
    assert gangs[0].big  # the first big gang comes before the stream
    assert all(g.size == 16 and g.gpus == 8 and 15 <= g.run_seconds <= 25 for g in big)
    small = [g for g in gangs if not g.big]
    assert all(1 <= g.size <= 8 and g.gpus == 1 and 2 <= g.run_seconds <= 40 for g in small)
    assert all(g.at < config.duration for g in gangs)
    assert all(g.declared_seconds == g.run_seconds for g in gangs)
    # the offered load is near what was asked for (a sampled stream: within 15 %)
    offered = sum(g.size * g.gpus * g.run_seconds for g in gangs) / config.duration
    assert offered / total_gpus(config.nodes) == pytest.approx(config.load, rel=0.15)


def test_pods_declare_their_run_time() -> None:
    config = MixedStreamConfig(declared_noise=0.5, deadline_factor=1.5)
    gangs = plan(config)
    assert all(g.run_seconds <= g.declared_seconds <= 1.5 * g.run_seconds + 0.1 for g in gangs)
    assert any(g.declared_seconds > g.run_seconds for g in gangs)
    gang = gangs[0]
    members = pods(gang, config)
    assert len(members) == gang.size
    first = members[0]
    annotations = first["metadata"]["annotations"]
    assert float(annotations[RUN_SECONDS]) == gang.run_seconds
    assert float(annotations[EXPECTED_RUN_ANNOTATION]) == gang.declared_seconds
    spec = first["spec"]
    assert spec["schedulerName"] == "gang-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 0
    assert "priorityClassName" not in spec  # one priority for all
    assert spec["activeDeadlineSeconds"] == math.ceil(gang.declared_seconds * 1.5)
    assert spec["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "8",
        "cpu": "32000m",
        "memory": "262144Mi",
    }
    assert first["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == gang.name
    assert stream_podgroup(gang)["spec"]["minMember"] == gang.size
    assert "activeDeadlineSeconds" not in pods(gang, MixedStreamConfig())[0]["spec"]


def test_impossible_workloads_are_refused() -> None:
    with pytest.raises(ValidationError, match="more GPUs than the cluster"):
        MixedStreamConfig(nodes="4:gpu=8")
    with pytest.raises(ValidationError, match="big gangs alone"):
        MixedStreamConfig(big_interval=5)
    with pytest.raises(ValidationError, match="no GPUs"):
        MixedStreamConfig(nodes="4:cpu=8")
    with pytest.raises(ValidationError, match=r"not scheduler\.reservations"):
        MixedStreamConfig(scheduler={"reservations": False})
    with pytest.raises(ValidationError, match="small_run_max"):
        MixedStreamConfig(small_run_min=10, small_run_max=5)


def test_reservations_are_passed_only_when_off_the_default() -> None:
    on_by_default = {"reservations": FieldInfo(default=True)}
    assert reservations_override(True, on_by_default) == ({}, "default")
    assert reservations_override(False, on_by_default) == (
        {"reservations": False},
        "GANG_SCHEDULER__RESERVATIONS=False",
    )
    # a scheduler without the setting would refuse it: nothing is passed, and it is said
    settings, note = reservations_override(False, {})
    assert settings == {} and "no reservations setting" in note


def test_metric_sums_add_up_labels() -> None:
    text = (
        "# TYPE gang_reservations gauge\ngang_reservations 2.0\n"
        "# TYPE gang_backfills counter\ngang_backfills_total 7.0\n"
        "# TYPE gang_reservation_wait_seconds histogram\n"
        'gang_reservation_wait_seconds_bucket{le="+Inf"} 3.0\n'
        "gang_reservation_wait_seconds_sum 4.5\ngang_reservation_wait_seconds_count 3.0\n"
        "# TYPE gang_queue_depth gauge\n"
        'gang_queue_depth{queue="active"} 1.0\ngang_queue_depth{queue="backoff"} 2.0\n'
    )
    sums = metric_sums(text)
    assert sums["gang_reservations"] == 2.0 and sums["gang_backfills_total"] == 7.0
    assert sums["gang_reservation_wait_seconds_count"] == 3.0
    assert sums["gang_queue_depth"] == 3.0
    assert "gang_reservation_wait_seconds_bucket" not in sums
    assert metric_sums("") == {}


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--workload", "mixed-stream", "--pods", "10"],
        ["bench", "--workload", "mixed-stream", "--duration", "0"],
        ["bench", "--reservations", "off"],
    ],
)
def test_bench_refuses_flags_that_do_not_apply(argv: list[str]) -> None:
    assert main(argv) == 2


def test_a_short_mixed_stream_run(tmp_path: Path) -> None:
    result = run_stream(TINY, progress=False)
    figures = result.figures
    assert result.scheduler_exit is None
    assert result.nodes == 8 and result.gpus == 64
    assert result.reservations == "on"
    assert figures.big_created == 3 and figures.big_bound == 3
    assert figures.small_created > 20 and figures.small_bound > 0
    assert [g.name for g in figures.big_gangs] == [g.name for g in plan(TINY) if g.big]
    for gang in figures.big_gangs:
        assert gang.min_wait is not None and gang.min_wait >= 0
        assert gang.wait >= 0
    assert figures.big_wait_max >= figures.big_wait_p50 >= 0
    assert 0 < figures.utilisation_overall <= 1
    assert 0 < figures.utilisation_while_waiting <= 1
    assert result.invariants_hold and not figures.overcommitted_during_run
    assert result.pods_bound > 0 and result.pods_created >= result.pods_bound
    table = stream_table([result])
    assert "reservations on" in table and "big gangs bound" in table and " ok" in table
    body = orjson.loads(result_json([result]))
    assert body[0]["invariants_hold"] is True
    assert len(body[0]["figures"]["big_gangs"]) == 3
