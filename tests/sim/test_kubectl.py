"""The real kubectl against ``gang sim serve``: discovery, server-side tables, short names, JSON."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import pod

PG_API = "scheduling.x-k8s.io/v1alpha1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str, kubeconfig: Path, cache: Path):
        self.proc = proc
        self.url = url
        self.kubeconfig = kubeconfig
        self.cache = cache

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": ctype}
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def kubectl(self, *args: str) -> str:
        kubectl = shutil.which("kubectl")
        assert kubectl is not None
        done = subprocess.run(
            [kubectl, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache), *args],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (not on PATH); the kubectl tests need the real one")
    port = _free_port()
    kubeconfig = tmp_path / "kc"
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gang",
            "sim",
            "serve",
            "--port",
            str(port),
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            "3:gpu=8",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, proc.communicate()
            if kubeconfig.exists():
                try:
                    with urllib.request.urlopen(url + "/version", timeout=1) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
            assert time.monotonic() < deadline, "gang sim serve did not come up"
            time.sleep(0.05)
        yield Served(proc, url, kubeconfig, tmp_path / "kube-cache")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 0, (proc.returncode, err)
    assert f"gang sim: serving {url} with 3 nodes" in out
    assert f"kubeconfig written to {kubeconfig}" in out


def _rows(output: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[0].split(), [line.split() for line in lines[1:]]


def test_kubectl_against_gang_sim_serve(served: Served) -> None:
    # setup through plain HTTP, the way any client would
    assert served.request("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})[0] == 201
    assert served.request("POST", "/api/v1/namespaces/default/pods", pod("web"))[0] == 201
    assert served.request("POST", "/api/v1/namespaces/team/pods", pod("job"))[0] == 201
    status, body = served.request(
        "POST",
        "/api/v1/namespaces/default/pods/web/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "web"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-00001"},
        },
    )
    assert status == 201, body
    pg_path = f"/apis/{PG_API}/namespaces/team/podgroups"
    status, body = served.request(
        "POST",
        pg_path,
        {
            "apiVersion": PG_API,
            "kind": "PodGroup",
            "metadata": {"name": "trainers"},
            "spec": {"minMember": 4},
        },
    )
    assert status == 201, body
    status, body = served.request(
        "PATCH", f"{pg_path}/trainers/status", {"status": {"phase": "Scheduling", "scheduled": 1}}
    )
    assert status == 200, body

    header, rows = _rows(served.kubectl("get", "nodes"))
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [r[0] for r in rows] == ["node-00000", "node-00001", "node-00002"]
    for row in rows:
        assert row[1:3] == ["Ready", "<none>"]
        assert row[4] == "v1.30.0-gang-sim"

    header, rows = _rows(served.kubectl("get", "pods", "-A", "-o", "wide"))
    assert header == [
        "NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
        "NOMINATED", "NODE", "READINESS", "GATES",
    ]  # fmt: skip
    by_name = {r[1]: r for r in rows}
    assert set(by_name) == {"web", "job"}
    web, job = by_name["web"], by_name["job"]
    assert web[0] == "default" and job[0] == "team"
    for row in (web, job):
        assert len(row) == 10
        assert row[2:5] == ["0/1", "Pending", "0"]
        assert row[6] == "<none>"  # no pod IP without a kubelet
    assert web[7] == "node-00001"
    assert job[7] == "<none>"

    header, rows = _rows(served.kubectl("get", "pg", "-A"))
    assert header == ["NAMESPACE", "NAME", "PHASE", "MINMEMBER", "SCHEDULED", "RUNNING", "AGE"]
    assert len(rows) == 1
    assert rows[0][:6] == ["team", "trainers", "Scheduling", "4", "1", "0"]

    nodes = json.loads(served.kubectl("get", "nodes", "-o", "json"))
    assert nodes["kind"] == "List"
    assert [n["metadata"]["name"] for n in nodes["items"]] == [
        "node-00000",
        "node-00001",
        "node-00002",
    ]
    for node in nodes["items"]:
        assert node["kind"] == "Node" and node["apiVersion"] == "v1"
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
