"""The benchmark's own tests, at small sizes: workloads, the three-process run, invariants, output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import orjson
import pytest
from pydantic import ValidationError

from gang.bench.ceiling import assign, segments
from gang.bench.placement import placement_ms
from gang.bench.report import html_report, table
from gang.bench.runner import BenchResult, _overcommitted, _percentile, result_json, run_bench
from gang.bench.workload import REPLICA_INDEX_LABEL, BenchConfig, plan, pods, services
from gang.cli import main
from tests.test_manifests import K8S_VERSION


def test_plan_is_deterministic_and_sized() -> None:
    config = BenchConfig(pods=500, min_gang=4, max_gang=16, seed=7)
    first, second = plan(config), plan(config)
    assert first == second
    assert sum(g.size for g in first) == 500
    assert all(1 <= g.size <= 16 for g in first)
    assert all(g.size >= 4 for g in first[:-1])  # only the last gang may be cut short
    assert plan(config.model_copy(update={"seed": 8})) != first
    body = pods(first[0], config)
    assert len(body) == first[0].size
    assert body[0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_invalid_benchmarks_are_refused() -> None:
    with pytest.raises(ValidationError, match="max_gang"):
        BenchConfig(min_gang=8, max_gang=4)
    with pytest.raises(ValidationError):
        BenchConfig(pods=0)
    # refused before any process starts, naming the bad part (it used to surface only as
    # "the simulator did not start")
    with pytest.raises(ValidationError, match="workers"):
        BenchConfig(api_latency="workers=many")
    assert BenchConfig(api_latency="real").api_latency == "real"
    with pytest.raises(ValidationError, match="per-replica"):
        BenchConfig(services="per-pod")  # type: ignore[arg-type]


def test_services_are_refused_where_no_end_to_end_run_makes_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--placement", "--services", "per-replica"]) == 2
    assert "--services applies to end-to-end runs" in capsys.readouterr().err
    assert main(["bench", "--workload", "mixed-stream", "--services", "per-replica"]) == 2
    assert "--services does not apply to --workload mixed-stream" in capsys.readouterr().err


def test_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert _percentile(values, 0.5) == 50.0 or _percentile(values, 0.5) == 51.0
    assert _percentile(values, 0.99) == 99.0
    assert _percentile([], 0.5) == 0.0


def test_overcommit_detection() -> None:
    nodes = [
        {
            "metadata": {"name": "n"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
        }
    ]

    def pod(name: str, cpu: str) -> dict[str, object]:
        return {
            "metadata": {"name": name, "namespace": "x"},
            "spec": {
                "nodeName": "n",
                "containers": [
                    {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}
                ],
            },
            "status": {"phase": "Pending"},
        }

    assert _overcommitted(nodes, [pod("a", "1"), pod("b", "1")]) == 0
    assert _overcommitted(nodes, [pod("a", "1"), pod("b", "1500m")]) == 1


def test_placement_micro_benchmark_runs() -> None:
    figures = placement_ms("50:gpu=8,zones=2", members=16, repeat=3)
    assert figures["nodes"] == 50 and figures["members"] == 16
    assert figures["median_ms"] > 0


def test_end_to_end_small_run(tmp_path: Path) -> None:
    config = BenchConfig(
        nodes="20:gpu=8,cpu=64,memory=512Gi,zones=2",
        pods=60,
        min_gang=4,
        max_gang=8,
        timeout_seconds=60,
        scheduler={"post_workers": 2},  # the bindings sent by worker processes
    )
    result = run_bench(config, progress=False)
    assert result.nodes == 20
    assert result.pods_bound == 60 and result.gangs_bound == result.gangs_total
    assert result.invariants_hold
    assert result.pods_per_second > 0 and result.scheduler_cpu_seconds > 0
    assert 0 <= result.binding_cpu_seconds_per_1000_pods <= result.cpu_seconds_per_1000_pods
    assert result.scheduler_peak_rss_mb > 10
    assert result.timeline[-1][1] == 60
    assert len(result.full_gang_seconds) == result.gangs_total
    body = orjson.loads(result_json(result))
    assert body["invariants_hold"] is True and body["pods_bound"] == 60
    page = html_report(result)
    assert page.count("<svg") == 2 and "pods bound" in page
    assert "ok" in table([result])
    # the ceiling: the same 60 pods bound again by a binder that knows the answer
    assert [seg["concurrency"] for seg in result.ceiling_segments] == [64, 128, 256]
    assert sum(seg["pods"] for seg in result.ceiling_segments) == 60
    # watched by the driver as gang's run was: the server carries the same observer in both
    assert result.ceiling_observed == 60
    assert result.ceiling_pods_per_second == max(
        seg["pods_per_second"] for seg in result.ceiling_segments
    )
    assert result.percent_of_ceiling is not None and result.percent_of_ceiling > 0
    assert "ceiling:" in table([result]) and body["ceiling_pods_per_second"] > 0
    # beside it, the binder's whole run (the best segment is the upper edge of the noise)
    rates = [seg["pods_per_second"] for seg in result.ceiling_segments]
    assert min(rates) <= body["ceiling_whole_run_pods_per_second"] <= max(rates)
    assert "of the binder's whole run" in table([result])
    # what a binding costs a binder that decides nothing, measured beside what it costs gang
    # (which is cheaper is the benchmark's to report, not a test's: at 60 pods gang's figure is
    # one or two 10 ms clock ticks of its process)
    assert result.ceiling_cpu_us_per_pod > 0
    assert "CPU per bound pod: gang" in table([result])
    assert result.worker_cpu_seconds_per_1000_pods > 0  # the workers' CPU is counted apart
    assert "in its post workers" in table([result])
    # start-up: the scheduler's first binding after its start, with the CPU it took to get there
    assert 0 < result.first_binding_seconds < 60 and result.startup_cpu_seconds > 0
    assert "start-up: first binding" in table([result])
    # what it wrote besides bindings while binding, and the bindings it allowed in flight
    assert result.status_writes >= 0 and result.events_posted >= 0
    # every bound gang's group status changed: written by the last binding, or still waiting
    assert result.status_writes + result.status_backlog > 0
    assert "more waiting)" in table([result])
    assert result.pod_condition_writes >= 0
    assert 4 <= result.bind_concurrency_limit <= 512
    assert "writes besides bindings" in table([result]) and " pod conditions, " in table([result])


def test_bench_with_the_api_latency_model_measures_the_ceiling_on_the_same_server() -> None:
    config = BenchConfig(
        nodes="16:gpu=8,cpu=64,memory=512Gi,zones=2",
        pods=64,
        min_gang=8,
        max_gang=8,
        timeout_seconds=60,
        api_latency="workers=4,service=2ms,network=5ms",
        ceiling_levels=[4, 16],
        # among the training operator's per-replica Services: created once with the groups,
        # they outlive the pods the ceiling run creates again
        services="per-replica",
    )
    result = run_bench(config, progress=False)
    assert result.pods_bound == 64 and result.gangs_bound == 8 and result.invariants_hold
    assert result.api_latency == "workers=4,service=2ms,network=5ms"
    assert [seg["pods"] for seg in result.ceiling_segments] == [32, 32]
    assert "API latency model: workers=4" in table([result])
    assert result.services == "per-replica" and "Services: per-replica" in table([result])
    assert orjson.loads(result_json(result))["services"] == "per-replica"


def test_the_ceiling_binder_assigns_first_fit_and_splits_into_segments() -> None:
    nodes = [
        {
            "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"nvidia.com/gpu": "2", "pods": "110"}},
        }
        for i in range(2)
    ]
    pods = [
        {
            "metadata": {"namespace": "bench", "name": f"p{i}"},
            "spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
        }
        for i in range(5)
    ]
    plan, unplaced = assign(nodes, pods)
    assert [node for _, _, node in plan] == ["n0", "n0", "n1", "n1"] and unplaced == 1
    assert [len(part) for part in segments(list(range(10)), [64, 128, 256])] == [4, 3, 3]


def test_per_replica_services_select_each_member_alone_as_the_training_operator_s_do() -> None:
    """``services: per-replica``: the v1 training operator's labels on every member and one
    headless Service per member selecting it by them (``CreateNewService``), valid objects."""
    config = BenchConfig(pods=24, min_gang=8, max_gang=8, services="per-replica")
    for gang in plan(config):
        members, around = pods(gang, config), services(gang, config)
        assert len(around) == len(members) == 8
        for index, service in enumerate(around):
            kubernetes_validate.validate(service, K8S_VERSION, strict=True)
            selector = service["spec"]["selector"]
            chosen = [
                p["metadata"]["name"]
                for p in members
                if selector.items() <= p["metadata"]["labels"].items()
            ]
            assert chosen == [f"{gang.name}-{index:03d}"]
            assert (
                selector[REPLICA_INDEX_LABEL] == str(index)
                and service["spec"]["clusterIP"] == "None"
            )
    assert services(gang, BenchConfig()) == []


def test_a_workload_larger_than_the_cluster_reports_what_fit() -> None:
    """10 GPUs for gangs of 4 x 1 GPU: two whole gangs fit, never a part of a third."""
    config = BenchConfig(
        nodes="2:gpu=5,cpu=64,memory=512Gi", pods=16, min_gang=4, max_gang=4, timeout_seconds=60
    )
    result = run_bench(config, progress=False)
    assert result.pods_bound == 8 and result.gangs_bound == 2
    assert result.partial_gangs == 0 and result.invariants_hold


def test_gang_bench_command_writes_json_and_html(tmp_path: Path) -> None:
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gang",
            "bench",
            "--nodes",
            "10:gpu=8",
            "--pods",
            "24",
            "--gang-sizes",
            "4-8",
            "--quiet",
            "--out",
            str(out),
            "--html",
            str(page),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "pods/s" in proc.stdout and " ok" in proc.stdout
    results = orjson.loads(out.read_bytes())
    assert isinstance(results, list) and results[0]["pods_bound"] == 24
    assert "<svg" in page.read_text()


def test_result_without_bindings_is_well_formed() -> None:
    empty = BenchResult(nodes=1, pods_total=4, gangs_total=1)
    assert empty.invariants_hold and "no bindings" in html_report(empty)


def test_the_readme_benchmark_configs_parse() -> None:
    import yaml

    root = Path(__file__).resolve().parents[2]
    for path in (root / "examples" / "bench").glob("*.yaml"):
        config = BenchConfig.model_validate(yaml.safe_load(path.read_text()))
        assert config.pods >= 1, path


def test_a_bare_node_count_means_the_default_node() -> None:
    """``--nodes 500`` as a new user writes it: 500 nodes with the GPUs the workload's pods ask
    for (a node without any fits none of them, and every run bound 0 pods)."""
    assert BenchConfig(nodes="500").nodes == "500:gpu=8,cpu=64,memory=512Gi,zones=8"
    assert BenchConfig(nodes="3:gpu=2").nodes == "3:gpu=2"


def test_a_run_that_binds_less_than_fits_fails_loudly(tmp_path: Path) -> None:
    """Every pod fits the nodes' resources, but a taint no pod tolerates keeps them all off:
    the run is SHORT, not ok, says the scheduler's reason, and ``gang bench`` exits non-zero
    with the scheduler's log tail."""
    config = BenchConfig(
        nodes="2:gpu=8,cpu=64,memory=512Gi,taint:dedicated=infra:NoSchedule",
        pods=8,
        min_gang=4,
        max_gang=4,
        timeout_seconds=6,
        ceiling_levels=[],
    )
    result = run_bench(config, progress=False)
    assert result.pods_bound == 0 and result.pods_expected == 8
    assert "bound 0 of 8 pods" in result.shortfall
    assert "untolerated taint" in result.shortfall  # the scheduler's own words, from its Events
    assert "SHORT" in table([result]) and " ok" not in table([result])
    settings = tmp_path / "short.yaml"
    settings.write_text("timeout_seconds: 6\n")
    proc = subprocess.run(
        [
            sys.executable, "-m", "gang", "bench", "--config", str(settings), "--nodes",
            "2:gpu=8,taint:dedicated=infra:NoSchedule", "--pods", "8", "--gang-sizes", "4-4",
            "--ceiling", "none", "--quiet",
        ],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gang bench: FAILED: bound 0 of 8 pods" in proc.stderr
    assert "SHORT" in proc.stdout


def test_a_scheduler_that_dies_makes_a_loud_short_run() -> None:
    """The run reports that the scheduler exited, with its code and log tail, instead of
    failing on the CPU reading of a process that is gone."""
    config = BenchConfig(
        nodes="4:gpu=8,zones=1",
        pods=8,
        min_gang=4,
        max_gang=4,
        timeout_seconds=30,
        ceiling_levels=[],
        scheduler={"plugin_paths": ["no_such_module_for_gang:Plugin"]},
    )
    result = run_bench(config, progress=False)
    assert result.pods_bound == 0
    assert "the scheduler exited (code 2) after binding 0 of 8 pods" in result.shortfall
    assert "no_such_module_for_gang" in result.log_tail
    assert "SHORT" in table([result])


def _run(nodes: int, pods_per_second: float, ceiling: float, gang_us: float) -> BenchResult:
    result = BenchResult(nodes=nodes, pods_total=8000, gangs_total=1000, pods_bound=8000)
    result.pods_per_second, result.ceiling_pods_per_second = pods_per_second, ceiling
    result.binding_cpu_seconds_per_1000_pods, result.ceiling_cpu_us_per_pod = gang_us / 1000, 110.0
    return result


def test_the_ceiling_binders_whole_run_is_its_pods_over_its_segments_summed_spans() -> None:
    """Three equal segments at 1,490, 1,707 and 1,125 pods/s (a real 2-core run's): the
    binder's whole run is their harmonic mean, 1,398 pods/s, where the ceiling is 1,707."""
    result = _run(2000, 1339, 1707, 250)
    result.ceiling_segments = [
        {"concurrency": c, "pods": p, "pods_per_second": r}
        for c, p, r in ((64, 2667, 1490.0), (128, 2667, 1707.0), (256, 2666, 1125.0))
    ]
    assert round(result.ceiling_whole_run) == 1398
    assert "gang: 78% of it (96% of the binder's whole run, 1398 pods/s)" in table([result])
    result.ceiling_segments = []
    assert result.ceiling_whole_run == 0.0


def test_a_size_run_more_than_once_is_summarised_by_its_median_and_range() -> None:
    runs = [_run(2000, 900, 1000, 260), _run(2000, 500, 1000, 300), _run(2000, 700, 1000, 280)]
    runs.append(_run(5000, 400, 1000, 400))  # once: no summary
    text = table(runs)
    assert (
        "2000 nodes, 3 runs: gang 70% of its ceiling (median; lowest 50%, highest 90%); "
        "CPU per bound pod, medians: gang 280 µs, the ceiling's binder 110 µs"
    ) in text
    assert "5000 nodes," not in text
    assert "runs: gang" not in table(runs[:1])
