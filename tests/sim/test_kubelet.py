"""The kubelet stand-in, observed over HTTP: start, run, finish (or hit the active deadline),
and confirm graceful kills."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gang.sim.cluster import SimCluster
from gang.sim.kubelet import KubeletConfig
from tests.conftest import Raw, binding, pod

PODS = "/api/v1/namespaces/default/pods"
DEADLINE = 3.0
POLL = 0.02


@pytest.fixture
async def kube() -> AsyncIterator[tuple[SimCluster, Raw]]:
    config = KubeletConfig(start_delay=0.05, termination_delay=0.05)
    async with SimCluster("2", kubelet=config) as cluster, aiohttp.ClientSession() as session:
        yield cluster, Raw(session, cluster.url)


def annotated(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    manifest = pod(name)
    manifest["metadata"]["annotations"] = annotations
    return manifest


async def create_and_bind(raw: Raw, manifest: dict[str, Any], node: str) -> None:
    status, body, _ = await raw.post(PODS, manifest)
    assert status == 201, body
    name = manifest["metadata"]["name"]
    status, body, _ = await raw.post(f"{PODS}/{name}/binding", binding(name, node))
    assert status == 201, body


async def get_pod(raw: Raw, name: str) -> dict[str, Any]:
    status, body, _ = await raw.get(f"{PODS}/{name}")
    assert status == 200, body
    result: dict[str, Any] = body
    return result


async def poll_pod(raw: Raw, name: str, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """GET the pod every POLL seconds until ``until(pod)`` holds; fail after DEADLINE."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while True:
        current = await get_pod(raw, name)
        if until(current):
            return current
        assert loop.time() < deadline, f"pod {name} never got there: {current.get('status')}"
        await asyncio.sleep(POLL)


def phase_is(phase: str) -> Callable[[dict[str, Any]], bool]:
    return lambda p: (p.get("status") or {}).get("phase") == phase


def conditions(p: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in p["status"].get("conditions") or []}


async def test_bound_pod_becomes_running(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    await create_and_bind(raw, pod("p"), "node-00001")
    running = await poll_pod(raw, "p", phase_is("Running"))
    status = running["status"]
    assert conditions(running) == {
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert status["startTime"].endswith("Z")
    assert status["podIP"].startswith("10.")
    _, node, _ = await raw.get("/api/v1/nodes/node-00001")
    internal = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
    assert status["hostIP"] == internal[0]
    [container] = status["containerStatuses"]
    assert container["name"] == "c" and container["image"] == "busybox:1.36"
    assert container["ready"] is True and container["started"] is True
    assert container["restartCount"] == 0
    assert set(container["state"]) == {"running"}
    assert container["state"]["running"]["startedAt"] == status["startTime"]
    # without run-seconds it keeps running
    await asyncio.sleep(0.2)
    assert (await get_pod(raw, "p"))["status"]["phase"] == "Running"


async def test_pod_created_with_node_name_also_starts(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    assert (await raw.post(PODS, pod("direct", nodeName="node-00000")))[0] == 201
    running = await poll_pod(raw, "direct", phase_is("Running"))
    assert conditions(running)["Ready"] == "True"


async def test_kubelet_changes_are_watch_events(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    _, listed, _ = await raw.get(PODS)
    since = listed["metadata"]["resourceVersion"]
    await create_and_bind(raw, annotated("w", {"gang.sim/run-seconds": "0.1"}), "node-00000")
    events = await raw.watch_lines(
        f"{PODS}?watch=1&resourceVersion={since}", max_events=4, seconds=DEADLINE
    )
    assert [(e["type"], e["object"]["status"]["phase"]) for e in events] == [
        ("ADDED", "Pending"),
        ("MODIFIED", "Pending"),  # bound
        ("MODIFIED", "Running"),
        ("MODIFIED", "Succeeded"),
    ]


async def test_pod_on_unknown_node_stays_pending(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    await create_and_bind(raw, pod("lost"), "no-such-node")
    await create_and_bind(raw, pod("found"), "node-00000")
    await poll_pod(raw, "found", phase_is("Running"))  # the kubelet had its chance...
    await asyncio.sleep(0.2)
    lost = await get_pod(raw, "lost")
    assert lost["spec"]["nodeName"] == "no-such-node"
    assert lost["status"]["phase"] == "Pending"  # ...and no kubelet runs this one
    assert "startTime" not in lost["status"]


async def test_run_seconds_then_succeeded(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    loop = asyncio.get_running_loop()
    start = loop.time()
    await create_and_bind(raw, annotated("job", {"gang.sim/run-seconds": "0.2"}), "node-00000")
    running = await poll_pod(raw, "job", lambda p: p["status"]["phase"] != "Pending")
    assert running["status"]["phase"] == "Running"
    done = await poll_pod(raw, "job", phase_is("Succeeded"))
    # start_delay (0.05) + run-seconds (0.2), minus a little for timer granularity
    assert loop.time() - start >= 0.24
    assert conditions(done)["Ready"] == "False"
    assert conditions(done)["ContainersReady"] == "False"
    [container] = done["status"]["containerStatuses"]
    assert container["ready"] is False
    terminated = container["state"]["terminated"]
    assert set(container["state"]) == {"terminated"}
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    assert terminated["startedAt"] == running["status"]["startTime"]
    assert terminated["finishedAt"] >= terminated["startedAt"]


async def test_exit_code_then_failed(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    loop = asyncio.get_running_loop()
    start = loop.time()
    manifest = annotated("bad", {"gang.sim/run-seconds": "0.2", "gang.sim/exit-code": "3"})
    await create_and_bind(raw, manifest, "node-00001")
    failed = await poll_pod(raw, "bad", phase_is("Failed"))
    assert loop.time() - start >= 0.24
    [container] = failed["status"]["containerStatuses"]
    terminated = container["state"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"
    assert conditions(failed)["Ready"] == "False"
    # a finished pod stays put; nothing restarts it
    await asyncio.sleep(0.1)
    assert (await get_pod(raw, "bad"))["status"]["phase"] == "Failed"


async def test_graceful_delete_is_confirmed_by_the_kubelet(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    await create_and_bind(raw, pod("victim"), "node-00000")
    await poll_pod(raw, "victim", phase_is("Running"))
    loop = asyncio.get_running_loop()
    status, deleted, _ = await raw.delete(f"{PODS}/victim")
    start = loop.time()
    assert status == 200
    # default grace: the pod is only marked, as a real apiserver does for a running pod
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 30
    assert deleted["metadata"]["deletionTimestamp"].endswith("Z")
    status, terminating, _ = await raw.get(f"{PODS}/victim")
    assert status == 200 and "deletionTimestamp" in terminating["metadata"]
    # ...and the kubelet stand-in confirms the kill after termination_delay, not 30 s
    while (await raw.get(f"{PODS}/victim"))[0] != 404:
        assert loop.time() - start < DEADLINE, "the kubelet never confirmed the deletion"
        await asyncio.sleep(POLL)
    status, listed, _ = await raw.get(PODS)
    assert listed["items"] == []


async def test_unbound_pods_never_start(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    assert (await raw.post(PODS, pod("waiting")))[0] == 201
    await create_and_bind(raw, pod("bound"), "node-00000")
    await poll_pod(raw, "bound", phase_is("Running"))
    await asyncio.sleep(0.2)  # four start delays more
    waiting = await get_pod(raw, "waiting")
    assert "nodeName" not in waiting["spec"]
    assert waiting["status"]["phase"] == "Pending" and "startTime" not in waiting["status"]
    # an unbound pod is deleted at once: no kubelet has to confirm anything
    status, _, _ = await raw.delete(f"{PODS}/waiting")
    assert status == 200
    assert (await raw.get(f"{PODS}/waiting"))[0] == 404


async def test_without_kubelet_bound_pods_stay_pending() -> None:
    async with SimCluster("1") as cluster, aiohttp.ClientSession() as session:
        assert cluster.kubelet is None
        raw = Raw(session, cluster.url)
        await create_and_bind(raw, annotated("p", {"gang.sim/run-seconds": "0"}), "node-00000")
        await asyncio.sleep(0.3)
        still = await get_pod(raw, "p")
        assert still["status"]["phase"] == "Pending" and "startTime" not in still["status"]
        # and a graceful delete waits for a kubelet that never comes
        assert (await raw.delete(f"{PODS}/p"))[0] == 200
        await asyncio.sleep(0.1)
        status, terminating, _ = await raw.get(f"{PODS}/p")
        assert status == 200 and terminating["metadata"]["deletionGracePeriodSeconds"] == 30


async def test_active_deadline_fails_a_pod_that_runs_longer(kube: tuple[SimCluster, Raw]) -> None:
    """As a real kubelet: counted from the start, Failed with reason DeadlineExceeded, the
    containers killed; run-seconds never gets its turn."""
    _, raw = kube
    loop = asyncio.get_running_loop()
    manifest = annotated("long", {"gang.sim/run-seconds": "30"})
    manifest["spec"]["activeDeadlineSeconds"] = 1
    await create_and_bind(raw, manifest, "node-00000")
    running = await poll_pod(raw, "long", phase_is("Running"))
    started = loop.time()
    failed = await poll_pod(raw, "long", phase_is("Failed"))
    assert 0.9 <= loop.time() - started < 2.0
    status = failed["status"]
    assert status["reason"] == "DeadlineExceeded"
    assert status["message"] == "Pod was active on the node longer than the specified deadline"
    assert conditions(failed)["Ready"] == "False"
    [container] = status["containerStatuses"]
    terminated = container["state"]["terminated"]
    assert terminated["exitCode"] == 137 and terminated["reason"] == "Error"
    assert terminated["startedAt"] == running["status"]["startTime"]
    await asyncio.sleep(0.1)
    assert (await get_pod(raw, "long"))["status"]["phase"] == "Failed"  # and it stays so


async def test_a_job_ending_before_its_deadline_succeeds(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    manifest = annotated("short", {"gang.sim/run-seconds": "0.15"})
    manifest["spec"]["activeDeadlineSeconds"] = 1
    await create_and_bind(raw, manifest, "node-00001")
    done = await poll_pod(raw, "short", lambda p: p["status"]["phase"] in ("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    assert "reason" not in done["status"]


async def test_a_deadline_alone_ends_a_pod(kube: tuple[SimCluster, Raw]) -> None:
    """No run-seconds (a pod that would run forever): the deadline still ends it."""
    _, raw = kube
    await create_and_bind(raw, pod("forever", activeDeadlineSeconds=1), "node-00000")
    failed = await poll_pod(raw, "forever", phase_is("Failed"))
    assert failed["status"]["reason"] == "DeadlineExceeded"


async def test_a_deadline_set_on_a_running_pod_is_enforced(kube: tuple[SimCluster, Raw]) -> None:
    """activeDeadlineSeconds may be set on a running pod; the kubelet re-plans its end."""
    _, raw = kube
    loop = asyncio.get_running_loop()
    await create_and_bind(raw, annotated("late", {"gang.sim/run-seconds": "30"}), "node-00000")
    await poll_pod(raw, "late", phase_is("Running"))
    started = loop.time()
    status, body, _ = await raw.patch(f"{PODS}/late", {"spec": {"activeDeadlineSeconds": 1}})
    assert status == 200, body
    failed = await poll_pod(raw, "late", phase_is("Failed"))
    assert loop.time() - started < 2.0
    assert failed["status"]["reason"] == "DeadlineExceeded"


async def test_fractional_run_seconds(kube: tuple[SimCluster, Raw]) -> None:
    _, raw = kube
    loop = asyncio.get_running_loop()
    await create_and_bind(raw, annotated("frac", {"gang.sim/run-seconds": "0.35"}), "node-00000")
    await poll_pod(raw, "frac", phase_is("Running"))
    started = loop.time()
    await poll_pod(raw, "frac", phase_is("Succeeded"))
    assert 0.3 <= loop.time() - started < 1.0


def test_sim_serve_kubelet_start_delay_flag(tmp_path: Path) -> None:
    from gang.cli import build_parser
    from gang.cli.sim_serve import UsageError, cluster_from_args

    def parsed(*flags: str) -> argparse.Namespace:
        return build_parser().parse_args(
            ["sim", "serve", "--nodes", "2", "--kubeconfig", str(tmp_path / "k"), *flags]
        )

    cluster = cluster_from_args(parsed("--kubelet", "--kubelet-start-delay", "0.1"))
    assert cluster.kubelet is not None and cluster.kubelet.config.start_delay == 0.1
    cluster = cluster_from_args(parsed("--kubelet"))
    assert cluster.kubelet is not None
    assert cluster.kubelet.config.start_delay == KubeletConfig().start_delay
    assert cluster_from_args(parsed()).kubelet is None
    with pytest.raises(UsageError, match="needs --kubelet"):
        cluster_from_args(parsed("--kubelet-start-delay", "0.1"))
    with pytest.raises(UsageError, match="negative"):
        cluster_from_args(parsed("--kubelet", "--kubelet-start-delay=-1"))
