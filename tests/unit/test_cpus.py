"""How many post workers a machine gets: the usable CPUs (a pod's CPU limit counts), the rule,
and the setting's validation; and that the command keeps numpy's OpenBLAS to one thread."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from gang.app.cpus import cgroup_quota, post_workers
from gang.models.settings import SchedulerConfig


@pytest.mark.parametrize(
    ("cpus", "expected"),
    [(1, 0), (2, 0), (7.9, 0), (8, 1), (15, 1), (16, 2), (24, 3), (32, 4), (96, 4)],
)
def test_auto_runs_one_worker_per_eight_cpus_from_eight_up_to_four(
    cpus: float, expected: int
) -> None:
    assert post_workers("auto", cpus) == expected


def test_a_number_is_taken_as_it_is() -> None:
    assert post_workers(0, 64) == 0
    assert post_workers(3, 2) == 3


def test_the_cgroup_quota_caps_the_cpus(tmp_path: Path) -> None:
    assert cgroup_quota(tmp_path) is None  # nothing to read
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_quota(tmp_path) is None  # v2, no limit
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert cgroup_quota(tmp_path) == 2.5  # v2: a 2.5-CPU limit
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_quota(tmp_path) is None  # v1, no limit
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("800000\n")
    assert cgroup_quota(tmp_path) == 8.0


@pytest.mark.parametrize("value", [-1, 65, "many", 1.5, True, None])
def test_post_workers_setting_refuses_what_is_not_auto_or_0_to_64(value: object) -> None:
    with pytest.raises(ValidationError, match="must be 'auto' or a whole number from 0 to 64"):
        SchedulerConfig(post_workers=value)


def test_post_workers_setting_reads_numbers_and_auto() -> None:
    assert SchedulerConfig().post_workers == "auto"
    assert SchedulerConfig(post_workers="2").post_workers == 2
    assert SchedulerConfig(post_workers=0).post_workers == 0


_THREADS_AFTER_IMPORT = (
    "import os, gang.cli, numpy; "
    "print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])"
)


def _run_python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_the_command_imports_numpy_with_one_openblas_thread() -> None:
    # without it OpenBLAS starts a thread per core at numpy's import (one here on 2 cores:
    # the count would be 2)
    assert _run_python(_THREADS_AFTER_IMPORT) == ["1", "1"]


def test_a_users_openblas_setting_is_kept() -> None:
    code = "import os, gang.cli; print(os.environ['OPENBLAS_NUM_THREADS'])"
    assert _run_python(code, OPENBLAS_NUM_THREADS="3") == ["3"]
