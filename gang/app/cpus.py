"""How many CPUs this process may really use, and how many post workers that buys.

Why not ``os.cpu_count()``: in a pod, the scheduler sees every core of the node but may use only
its CPU limit (a cgroup quota); starting a worker per visible core would have them fight over a
quota of two. The usable count is the affinity mask, capped by the cgroup's quota (v2
``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) where one is set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

#: below this many usable CPUs, bindings are sent in process: the API server and etcd (often on
#: the same machine) need those cores more than the scheduler's
POST_WORKER_MIN_CPUS = 8
#: one post worker per this many usable CPUs, up to POST_WORKER_MAX
CPUS_PER_POST_WORKER = 8
POST_WORKER_MAX = 4

CGROUP = Path("/sys/fs/cgroup")


def cgroup_quota(root: Path = CGROUP) -> float | None:
    """CPUs the cgroup's quota allows (None: no quota, or no cgroup to read)."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def usable_cpus(root: Path = CGROUP) -> float:
    visible = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = cgroup_quota(root)
    count = float(visible or 1)
    return min(count, quota) if quota is not None else count


def post_workers(setting: int | Literal["auto"], cpus: float | None = None) -> int:
    """The post workers to run: the setting's number, or for ``auto`` one per
    CPUS_PER_POST_WORKER usable CPUs from POST_WORKER_MIN_CPUS up, at most POST_WORKER_MAX."""
    if setting != "auto":
        return setting
    usable = usable_cpus() if cpus is None else cpus
    if usable < POST_WORKER_MIN_CPUS:
        return 0
    return min(POST_WORKER_MAX, int(usable // CPUS_PER_POST_WORKER))
