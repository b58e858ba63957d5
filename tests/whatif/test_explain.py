"""``kubectl gang explain`` with the real kubectl, against ``gang sim serve`` and ``gang run``.

Two ways to the answer, both tried: the running scheduler's ``/debug/explain`` endpoint
(``--scheduler URL``), and, when no scheduler answers (the simulator has no service proxy), a
copy of the cluster with gang's scheduler run on it. Both must say the same thing about a gang
that can never fit, and the endpoint must say where a waiting gang stands in the queue.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.sim.kubectl_server import Served, free_port, gang_sim_serve

Obj = dict[str, Any]
BIN = Path(sys.executable).parent


def kubectl_gang(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl gang ...``: kubectl finds the ``kubectl-gang`` plugin on the PATH."""
    assert (BIN / "kubectl-gang").exists(), "kubectl-gang is not installed beside python"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(served.kubeconfig)}  # fmt: skip
    return subprocess.run(
        [shutil.which("kubectl") or "kubectl", "gang", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def group(name: str, size: int) -> Obj:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": {"minMember": size}}  # fmt: skip


def pod(name: str, gang: str, gpu: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"scheduling.x-k8s.io/pod-group": gang}},
        "spec": {
            "schedulerName": "gang-scheduler",
            "containers": [{"name": "c", "image": "trainer:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpu)}}}],
        },
    }  # fmt: skip


def create(served: Served, obj: Obj) -> None:
    base = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    plural = "pods" if obj["kind"] == "Pod" else "podgroups"
    status, body = served.request("POST", f"{base}/namespaces/default/{plural}", obj)
    assert status == 201, body


def wait_for(check: Any, within: float = 20.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.2)


def test_kubectl_gang_explain_from_the_scheduler_and_from_a_copy(tmp_path: Path) -> None:
    with gang_sim_serve(tmp_path, nodes="2:gpu=8") as served:
        port = free_port()
        log = (tmp_path / "run.log").open("wb")
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "gang", "run", "--kubeconfig", str(served.kubeconfig),
             "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            for obj in (group("huge", 3), *(pod(f"huge-{i}", "huge", 8) for i in range(3))):
                create(served, obj)
            for obj in (group("fits", 1), pod("fits-0", "fits", 1)):
                create(served, obj)

            def explained() -> Obj | None:
                done = kubectl_gang(served, "explain", "default/huge", "--scheduler", url,
                                    "-o", "json")  # fmt: skip
                if done.returncode != 0:
                    return None
                answer: Obj = json.loads(done.stdout)
                return answer if answer["state"] == "never" else None

            live = wait_for(explained)
            assert live["never"]["members_that_fit_empty"] == 2
            assert "lower minMember to 2 (2 member(s) fit)" in live["unblock"]
            assert "Insufficient nvidia.com/gpu" in live["never"]["why"]

            text = kubectl_gang(served, "explain", "default/huge", "--scheduler", url)
            assert text.returncode == 0, text.stderr
            assert text.stdout.startswith("gang default/huge: NEVER\n"), text.stdout
            assert "to unblock: lower minMember to 2" in text.stdout

            placed = kubectl_gang(
                served, "explain", "default/fits", "--scheduler", url, "-o", "json"
            )
            assert json.loads(placed.stdout)["state"] == "placed", placed.stdout

            unknown = kubectl_gang(served, "explain", "default/nope", "--scheduler", url)
            assert unknown.returncode == 1
            assert "no gang default/nope known to the scheduler" in unknown.stderr
        finally:
            scheduler.send_signal(signal.SIGTERM)
            scheduler.wait(timeout=15)
            log.close()
        # no scheduler now: the answer comes from a copy of the cluster
        copy = kubectl_gang(served, "explain", "default/huge", "-o", "json")
        assert copy.returncode == 0, copy.stderr
        from_copy = json.loads(copy.stdout)
        assert "state" in from_copy, from_copy
        assert from_copy["state"] == "never"
        assert from_copy["never"] == live["never"]
        assert from_copy["unblock"] == live["unblock"]


@pytest.mark.parametrize("anonymise", [False, True])
def test_snapshot_replays_in_gang_sim_serve(tmp_path: Path, anonymise: bool) -> None:
    """``gang snapshot`` of a cluster, ``gang sim serve --from-snapshot`` of the file: the
    same nodes, the bound pods still bound where they were, the groups there."""
    with gang_sim_serve(tmp_path, nodes="3:gpu=8,zones=3") as served:
        for obj in (group("g", 2), pod("g-0", "g", 4), pod("g-1", "g", 4)):
            create(served, obj)
        served.request("POST", "/api/v1/namespaces/default/pods/g-0/binding",
                       {"metadata": {"name": "g-0"}, "target": {"kind": "Node", "name": "node-00001"}})  # fmt: skip
        out = tmp_path / ("snap.json.gz" if anonymise else "snap.json")
        args = ["snapshot", "--kubeconfig", str(served.kubeconfig), "-o", str(out)]
        done = subprocess.run([sys.executable, "-m", "gang", *args, *(["--anonymise"] if anonymise else [])],
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "3 Node" in done.stdout and "2 Pod" in done.stdout and "1 PodGroup" in done.stdout
    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    with gang_sim_serve(
        replay_dir, "--from-snapshot", str(out), nodes="1:gpu=8,prefix=extra"
    ) as replay:
        nodes = replay.kubectl("get", "nodes", "-o", "name").split()
        assert len(nodes) == 4  # the snapshot's 3 and the one added
        pods = json.loads(replay.kubectl("get", "pods", "-A", "-o", "json"))["items"]
        bound = [p for p in pods if p["spec"].get("nodeName")]
        assert len(pods) == 2 and len(bound) == 1
        groups = json.loads(
            replay.kubectl("get", "podgroups.scheduling.x-k8s.io", "-A", "-o", "json")
        )["items"]
        assert len(groups) == 1
        claim = bound[0]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
        assert claim == groups[0]["metadata"]["name"]  # renamed consistently
        if anonymise:
            assert bound[0]["spec"]["nodeName"].startswith("node-")
            assert bound[0]["spec"]["containers"][0]["image"] == "image"
            assert claim.startswith("group-")
        else:
            assert bound[0]["spec"]["nodeName"] == "node-00001"
            assert claim == "g"
