"""The real kubectl against ``gang sim serve``: discovery, server-side tables, short names, JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import pod
from tests.sim.kubectl_server import Served, gang_sim_serve

PG_API = "scheduling.x-k8s.io/v1alpha1"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with gang_sim_serve(tmp_path) as server:
        yield server


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
