"""examples/*.yaml applied to a cluster and the gang scheduler's answer checked.

Each test runs twice through the ``cluster`` fixture: on the simulator (always) and on a real
cluster (when ``GANG_E2E_KUBECONFIG`` is set), with the same scenario code and assertions, so a
difference between the simulator and Kubernetes shows up as one of the pair failing.
"""

from __future__ import annotations

import pytest

from tests.e2e.scenarios import (
    VOLCANO,
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


# --- what job operators create (see each file's header for the object the user writes) ------


async def test_trainer_v2_trainjob_with_coscheduling_binds_whole(cluster: Target) -> None:
    await example_fits(cluster, "trainjob-coscheduling.yaml")


async def test_mpi_operator_mpijob_binds_launcher_with_workers(cluster: Target) -> None:
    """The operator writes scheduleTimeoutSeconds: 0; it must mean the default, not a refusal."""
    namespace = await example_fits(cluster, "mpijob-v2.yaml")
    roles = sorted(
        p["metadata"]["labels"]["training.kubeflow.org/job-role"]
        for p in await gang_pods(cluster, namespace, "osu-allreduce")
    )
    assert roles == ["launcher", "worker", "worker"]


async def test_training_operator_pytorchjob_with_volcano_goes_inqueue_then_binds(
    cluster: Target,
) -> None:
    namespace = await example_fits(cluster, "pytorchjob-volcano.yaml")
    tasks = sorted(
        p["metadata"]["annotations"]["volcano.sh/task-spec"]
        for p in await gang_pods(cluster, namespace, "mnist-ddp", VOLCANO)
    )
    assert tasks == ["master", "worker", "worker"]


@pytest.mark.needs_kubernetes(
    "1.27", "StatefulSet spec.ordinals (LeaderWorkerSet numbers a group's workers from 1)"
)
async def test_leaderworkerset_with_volcano_binds_each_replica_group(cluster: Target) -> None:
    namespace = await example_fits(cluster, "leaderworkerset-volcano.yaml")
    for group in (0, 1):
        pods = await gang_pods(cluster, namespace, f"vllm-llama-{group}-6c9f7d4b8", VOLCANO)
        names = sorted(p["metadata"]["name"] for p in pods)
        assert names == [f"vllm-llama-{group}", f"vllm-llama-{group}-1", f"vllm-llama-{group}-2"]


@pytest.mark.needs_kubernetes("1.36", "the native scheduling.k8s.io PodGroup")
async def test_jobset_with_a_native_podgroup_binds_whole(cluster: Target) -> None:
    await example_fits(cluster, "jobset-native-podgroup.yaml")
