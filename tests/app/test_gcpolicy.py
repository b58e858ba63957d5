"""``gang run`` keeps its listed cache out of the garbage collector's passes (gang.app.gcpolicy):
checked on the real process, through its /metrics, against the simulator over HTTP."""

from __future__ import annotations

import gc
import urllib.request
from pathlib import Path

from gang.app.gcpolicy import YOUNG_THRESHOLD
from tests.sim.kubectl_server import free_port, gang_run, gang_sim_serve


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} is not exported")


def test_gang_run_freezes_what_its_lists_built_once_synced(tmp_path: Path) -> None:
    with gang_sim_serve(tmp_path, nodes="200:gpu=8") as served:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with gang_run(served.kubeconfig, tmp_path / "run.log", port, url):
            frozen = _metric(url, "gang_gc_frozen_objects")
    # the imports and 200 listed nodes are tens of thousands of objects; none frozen would
    # mean every later collection walks them again
    assert frozen > 20_000, frozen


def test_an_embedded_scheduler_leaves_the_host_process_collector_alone() -> None:
    # the tests embed Process and GangScheduler in this process: only `gang run` tunes it
    assert gc.get_threshold()[0] != YOUNG_THRESHOLD
