"""Where start-up goes (``gang.app.startup``): ``gang run`` marks each step on its way to the
first binding, logs them there and exports them at /metrics, and ``gang bench`` reads them back.
Checked on the real process against the simulator over HTTP, with kubectl applying a gang."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from prometheus_client import generate_latest

from gang.app.metrics import make_registry
from gang.app.startup import STEPS, StartupClock
from gang.bench.runner import startup_steps
from tests.app.test_gcpolicy import _metric
from tests.sim.kubectl_server import free_port, gang_run, gang_sim_serve

EXAMPLE = Path(__file__).parents[2] / "examples" / "plain-pods-gang.yaml"
#: no later than this process began, on the monotonic clock (this module is imported after)
PROCESS_SEEN = time.monotonic()


def _metrics(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def test_gang_run_marks_each_step_up_to_its_first_binding(tmp_path: Path) -> None:
    with gang_sim_serve(tmp_path, nodes="2:gpu=8") as served:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = tmp_path / "run.log"
        with gang_run(served.kubeconfig, log, port, url):
            served.kubectl("apply", "-f", str(EXAMPLE))
            deadline = time.monotonic() + 20
            while "first_binding" not in (steps := startup_steps(_metrics(url))):
                assert time.monotonic() < deadline, f"no first binding marked: {steps}"
                time.sleep(0.1)
            frozen = 0.0
            while time.monotonic() < deadline and not frozen:  # frozen once the lists are in
                frozen = _metric(url, "gang_gc_frozen_objects")
                time.sleep(0.05)
    assert list(steps) == list(STEPS)
    walls = [wall for wall, _ in steps.values()]
    cpus = [cpu for _, cpu in steps.values()]
    assert walls == sorted(walls) and cpus == sorted(cpus), steps
    assert cpus[0] > 0 and walls[0] > 0  # (CPU counts every thread: numpy's BLAS pool too)
    assert frozen > 20_000, frozen
    said = [line for line in log.read_text().splitlines() if "start-up: imports" in line]
    assert len(said) == 1 and "first_binding" in said[0], said


def test_a_step_is_marked_once_and_an_unknown_one_is_refused() -> None:
    clock = StartupClock(began=time.time() - 1.0)
    clock.mark("lists")
    clock.mark("imports")
    first = clock.marks["lists"]
    clock.mark("lists")  # a later leadership term lists again: the first start-up stands
    assert clock.marks["lists"] == first
    assert clock.summary().startswith("imports ") and ", lists " in clock.summary()
    assert clock.marks["imports"][0] >= 1.0
    with pytest.raises(ValueError, match="unknown start-up step 'warmup'"):
        clock.mark("warmup")


def test_the_bench_reads_back_what_the_collector_exports() -> None:
    clock = StartupClock(began=0.0, marks={"imports": (0.9, 0.7), "lists": (4.2, 2.1)})
    text = generate_latest(make_registry(lambda: None, lambda: False, clock)).decode()
    assert startup_steps(text) == {"imports": [0.9, 0.7], "lists": [4.2, 2.1]}
    assert startup_steps(generate_latest(make_registry(lambda: None, lambda: False)).decode()) == {}


def test_the_process_clock_counts_from_this_process_s_start() -> None:
    """The process's age from the kernel's record of its start, to the clock tick: at least the
    time since this module was imported, and within psutil's figure, which is up to a second
    off (it adds the boot time, stated in whole seconds)."""
    clock = StartupClock.of_this_process()
    clock.mark("imports")
    age, cpu = clock.marks["imports"]
    assert age >= time.monotonic() - PROCESS_SEEN - 0.02
    assert abs(age - (time.time() - psutil.Process().create_time())) < 1.1
    assert cpu > 0
