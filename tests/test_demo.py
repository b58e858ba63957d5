"""The README's first command: ``gang demo`` places gangs on the embedded cluster and says so."""

from __future__ import annotations

import re
import subprocess
import sys


def test_demo_places_the_gangs_and_explains_the_one_that_cannot_fit() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gang", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for group, size in (("llm", 8), ("mpi", 5), ("late", 8)):
        assert re.search(rf"^\s+{group}\s+Finished\s+{size}\s+{size}\s+{size}$", out, re.M), out
    assert re.search(r"^\s+huge\s+Scheduling\s+20\s+0\s+0$", out, re.M), out
    # its phase reads "in progress", so its condition says it will not run as the cluster is
    said = "PodGroup 'huge' (kubectl describe pg huge): Unschedulable, reason NeverFits:\n"
    assert said + "  will not run on the cluster as it is, not even with every node empty" in out
    assert "Insufficient nvidia.com/gpu" in out
    llm_zones = set(re.findall(r"bound\s+llm-\d\s+→ node-\d+ \((zone-\d)\)", out))
    assert len(llm_zones) == 1  # the training gang was packed into one zone
