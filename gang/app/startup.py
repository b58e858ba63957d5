"""Where a scheduler's start-up goes: each step's seconds since the process began, wall and CPU.

Why: at 5,000 nodes the first binding comes seconds after the start, and the only split of those
seconds so far came from a copy of the code with marks written into it. The marks live here
instead, so every run says where its start-up went: in one log line at the first binding, at
``/metrics`` (``gang_startup_seconds{step, clock}``), and in ``gang bench``'s report. That
matters most where runs are rare and short (a 16-core machine lent for minutes).

The steps, in the order a start-up passes them (a step is marked once per process, the first
time it is reached; a replica that waited for the lease shows the wait in ``leading``):

- ``imports``: the code loaded, settings about to be read;
- ``api_client``: the kubeconfig read and the API client made;
- ``leading``: this replica leads (at once without leader election);
- ``lists``: every informer listed, parsed and applied: scheduling may start;
- ``first_binding``: the API server accepted this scheduler's first binding.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

STEPS = ("imports", "api_client", "leading", "lists", "first_binding")


def _boot_clock() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _began_on_the_boot_clock() -> float | None:
    """When this process began, in seconds on ``CLOCK_BOOTTIME``, to the clock tick (Linux's
    ``/proc/self/stat``); None elsewhere. psutil's ``create_time`` adds that to the boot time
    the kernel states in whole seconds, so it can be up to a second off (0.3 s here)."""
    try:
        text = Path("/proc/self/stat").read_bytes()
        after_name = text[text.rindex(b")") + 2 :].split()  # the name may hold spaces
        return int(after_name[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
    except (OSError, ValueError, IndexError, AttributeError):
        return None


@dataclass
class StartupClock:
    #: when the process began, on the ``now`` clock
    began: float
    #: step → (wall seconds since ``began``, CPU seconds of the process) when first reached
    marks: dict[str, tuple[float, float]] = field(default_factory=dict)
    now: Callable[[], float] = time.time

    @classmethod
    def of_this_process(cls) -> StartupClock:
        began = _began_on_the_boot_clock()
        if began is not None and hasattr(time, "CLOCK_BOOTTIME"):
            return cls(began, now=_boot_clock)
        return cls(psutil.Process().create_time())

    def mark(self, step: str) -> None:
        """Record ``step`` now, unless it was reached before (a later leadership term, say)."""
        if step not in STEPS:
            raise ValueError(f"unknown start-up step {step!r}")
        if step not in self.marks:
            self.marks[step] = (max(0.0, self.now() - self.began), time.process_time())

    def summary(self) -> str:
        """``imports 0.98 s (0.73 CPU s), api_client 1.26 s (0.98 CPU s), ...``: the steps
        reached so far, in order, each since the process began."""
        return ", ".join(
            f"{step} {wall:.2f} s ({cpu:.2f} CPU s)"
            for step in STEPS
            if step in self.marks
            for wall, cpu in [self.marks[step]]
        )
