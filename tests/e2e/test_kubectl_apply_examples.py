"""``kubectl apply -f examples/``, validation on, against ``gang sim serve`` with ``gang run``.

What a new user does first: start the simulator and the scheduler as examples/README.md says,
apply every example with the real kubectl (which reads the server's OpenAPI and has it validate
every object strictly), and watch. Every gang of every fitting example, whatever API its
operator uses, must be bound whole; the too-big gang binds nothing and holds nothing.

"Everything fits at once" must hold in whatever order the gangs arrive: ``kubectl apply -f
examples/`` creates the files in name order, but the gangs whose pods come from the simulator's
Job and StatefulSet controllers complete in whatever order those run. The worst order is the
MPI job last (its four workers need four nodes with room for one each, one per host), so this
test applies the MPI job after every other gang is bound. When each worker took 4 GPUs, 2 of
about 110 runs under CPU load placed the others (each in its first cycle) so that only 3 nodes
had 4 GPUs free: the MPI gang then rightly held a reservation for running pods that never end,
and the test failed. Its workers take 2 GPUs each now, and on 6 nodes as on 7 it binds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.e2e.scenarios import EXAMPLES, FITTING, TOO_BIG, claimed_group
from tests.sim.kubectl_server import Served, gang_run, gang_sim_serve

NAMESPACE = "examples"
PATIENCE = 60.0
#: the cluster examples/README.md tells users to apply the examples to
NODES = "7:gpu=8,zones=2"
#: the example whose gang is the hardest to place once the others are bound
LAST = "mpi-job.yaml"


def pods_by_gang(served: Served) -> dict[tuple[str, str], list[dict[str, Any]]]:
    status, body = served.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert status == 200, body
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in body["items"]:
        group = claimed_group(pod)
        if group is not None:
            out.setdefault(group, []).append(pod)
    return out


def reports_scheduled(served: Served, api_version: str, name: str) -> bool:
    path = f"/apis/{api_version}/namespaces/{NAMESPACE}/podgroups/{name}"
    status = served.request("GET", path)[1].get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    if api_version.startswith("scheduling.x-k8s.io"):
        return status.get("phase") in ("Scheduled", "Running") and status.get("scheduled") == 3
    if api_version.startswith("scheduling.volcano.sh"):
        return status.get("phase") == "Running" and conditions.get("Scheduled") == "True"
    return conditions.get("PodGroupInitiallyScheduled") == "True"


def test_kubectl_apply_examples_binds_every_example_gang(tmp_path: Path) -> None:
    expected = {(g.api, g.name): g.size for gangs in FITTING.values() for g in gangs}
    last = {(g.api, g.name) for g in FITTING[LAST]}
    first = {key: size for key, size in expected.items() if key not in last}
    _, too_big, too_big_size = TOO_BIG
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert EXAMPLES / LAST in files
    with gang_sim_serve(tmp_path, nodes=NODES) as served:
        log = tmp_path / "gang-run.log"
        with gang_run(served.kubeconfig, log) as scheduler:
            served.kubectl("create", "namespace", NAMESPACE)
            deadline = time.monotonic() + PATIENCE
            for batch, wanted in (
                ([f for f in files if f.name != LAST], first),
                ([EXAMPLES / LAST], expected),
            ):
                args = [arg for f in batch for arg in ("-f", str(f))]
                applied = served.run("apply", "-n", NAMESPACE, *args, "-v=6")
                assert applied.returncode == 0, applied.stderr
                assert "fieldValidation=Strict" in applied.stderr  # validated, server-side
                while True:
                    assert scheduler.poll() is None, log.read_text()
                    gangs = pods_by_gang(served)
                    bound = {
                        key: sum(1 for p in gangs.get(key, []) if p["spec"].get("nodeName"))
                        for key in wanted
                    }
                    if bound == wanted:
                        break
                    assert time.monotonic() < deadline, (bound, wanted, log.read_text()[-5000:])
                    time.sleep(0.2)
            for key, size in expected.items():  # whole: exactly the members, all bound
                assert len(gangs[key]) == size, (key, [p["metadata"]["name"] for p in gangs[key]])
            left_out = gangs[("coscheduling", too_big)]
            assert len(left_out) == too_big_size
            assert not [p for p in left_out if p["spec"].get("nodeName")], "too-big gang bound"
            # each API's group object says so, in its own words (status is written after binding)
            for api_version, name in (
                ("scheduling.x-k8s.io/v1alpha1", "osu-allreduce"),
                ("scheduling.volcano.sh/v1beta1", "mnist-ddp"),
                ("scheduling.k8s.io/v1beta1", "jax-pretrain"),
            ):
                while not reports_scheduled(served, api_version, name):
                    assert time.monotonic() < deadline, (api_version, name, "status")
                    time.sleep(0.2)
