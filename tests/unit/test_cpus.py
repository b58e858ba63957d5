"""How many post workers a machine gets: the usable CPUs (a pod's CPU limit counts), the rule,
and the setting's validation."""

from __future__ import annotations

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
