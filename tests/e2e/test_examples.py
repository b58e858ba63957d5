"""examples/*.yaml applied to a cluster and the gang scheduler's answer checked.

Each test runs twice through the ``cluster`` fixture: on the simulator (always) and on a real
cluster (when ``GANG_E2E_KUBECONFIG`` is set), with the same scenario code and assertions, so a
difference between the simulator and Kubernetes shows up as one of the pair failing.
"""

from __future__ import annotations

from tests.e2e.scenarios import (
    Target,
    example_fits,
    gang_pods,
    too_big_waits_and_holds_nothing,
)


async def test_training_job_binds_whole(cluster: Target) -> None:
    await example_fits(cluster, "training-job.yaml")


async def test_mpi_job_launcher_and_workers_bind_as_one_gang(cluster: Target) -> None:
    namespace = await example_fits(cluster, "mpi-job.yaml")
    workers = [
        p["spec"]["nodeName"]
        for p in await gang_pods(cluster, namespace, "mpi-allreduce")
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"
    ]
    assert len(workers) == 4 and len(set(workers)) == 4, workers  # one rank per host


async def test_plain_pods_gang_binds_whole(cluster: Target) -> None:
    await example_fits(cluster, "plain-pods-gang.yaml")


async def test_too_big_gang_is_reported_and_holds_nothing(cluster: Target) -> None:
    await too_big_waits_and_holds_nothing(cluster)
