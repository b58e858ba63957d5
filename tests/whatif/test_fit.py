"""``gang fit`` against a live (simulated) cluster, then ``gang run`` doing it for real.

Each scenario sets a cluster up with the real scheduler running, asks ``gang fit`` (snapshot of
the live cluster over HTTP, replayed with gang's own scheduler, nothing written), checks its
answer and exit code, then creates the same manifests on the live cluster and checks that the
running scheduler does what ``gang fit`` said: binds (on the same nodes), preempts the same
gang, reserves, says it can never fit, or is stopped by the same rule.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gang import whatif
from gang.cli import build_parser
from gang.cli import fit as fit_cli
from tests.scheduler.conftest import Env, eventually, gang_pod, podgroup
from tests.scheduler.test_preemption import cluster, run_gang

Obj = dict[str, Any]


def manifests(
    tmp_path: Path,
    name: str,
    size: int,
    gpu: int,
    annotations: dict[str, str] | None = None,
    **pod_extra: Any,
) -> Path:
    priority = pod_extra.pop("priority_class", None)
    docs = [podgroup(name, size, timeout=30)] + [
        gang_pod(f"{name}-{i}", name, gpu=gpu, cpu="100m", priority_class=priority, **pod_extra)
        for i in range(size)
    ]
    for doc in docs[1:]:
        doc.setdefault("apiVersion", "v1")
        doc.setdefault("kind", "Pod")
        if annotations:
            doc["metadata"]["annotations"] = dict(annotations)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


async def gang_fit(
    env: Env, path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, Obj]:
    """Run ``gang fit -o json`` in-process against the live cluster: exit code, the answer."""
    args = build_parser().parse_args(
        ["fit", "-f", str(path), "--kubeconfig", str(env.cluster.kubeconfig_path), "-o", "json",
         *extra]
    )  # fmt: skip
    capsys.readouterr()
    code = await fit_cli.command(args)
    [answer] = json.loads(capsys.readouterr().out)
    return code, answer


def documents(path: Path) -> list[Obj]:
    return list(yaml.safe_load_all(path.read_text()))


async def apply(env: Env, path: Path) -> None:
    docs = documents(path)
    await env.api.create_podgroup(docs[0])
    await env.api.create_pods(docs[1:])


async def test_fits_now_and_gang_run_binds_it_on_those_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster("4:gpu=8") as (env, _):
        await run_gang(env, "running", 2, "low", gpu=8)
        path = manifests(tmp_path, "train", 3, 4)
        code, answer = await gang_fit(env, path, capsys)
        assert (code, answer["answer"]) == (whatif.FITS_NOW, "fits now"), answer
        assert answer["state"] == "placed" and len(answer["nodes"]) >= 2
        before = await env.api.bound()
        assert not any(p.startswith("train-") for p in before), "gang fit wrote to the cluster"

        await apply(env, path)

        async def bound() -> bool:
            pods = await env.api.bound()
            return all(f"train-{i}" in pods for i in range(3))

        await eventually(bound)
        nodes = {n for p, n in (await env.api.bound()).items() if p.startswith("train-")}
        assert nodes == set(answer["nodes"])


async def test_fits_after_preempting_the_gang_gang_run_then_preempts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster("4:gpu=8") as (env, _):
        await run_gang(env, "filler", 4, "low", gpu=8)
        path = manifests(tmp_path, "urgent", 2, 8, priority_class="high")
        code, answer = await gang_fit(env, path, capsys)
        assert (code, answer["answer"]) == (
            whatif.AFTER_PREEMPTION,
            "fits after preempting",
        ), answer
        assert "default/filler" in answer["preemption"]["evicting"]
        assert len(await env.api.bound()) == 4  # nothing evicted by the dry run

        await apply(env, path)

        async def urgent_bound() -> bool:
            pods = await env.api.bound()
            return "urgent-0" in pods and "urgent-1" in pods

        await eventually(urgent_bound, within=20)
        reasons = {e["reason"] for e in await env.api.events()}
        assert "Preempted" in reasons


async def test_fits_once_pods_finish_gang_run_then_reserves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster("4:gpu=8") as (env, _):
        await run_gang(env, "filler", 4, "low", gpu=8)
        path = manifests(tmp_path, "waiter", 2, 8, priority_class="low")
        code, answer = await gang_fit(env, path, capsys)
        assert (code, answer["answer"]) == (
            whatif.AFTER_RESERVATION,
            "fits once running pods finish",
        ), answer
        assert len(answer["reservation"]["nodes"]) == 2
        assert answer["reservation"]["waiting_for_pods"] >= 2

        await apply(env, path)

        async def reserved() -> bool:
            status = (await env.api.get_podgroup("waiter")).get("status") or {}
            return any(c["type"] == "Reserved" for c in status.get("conditions") or [])

        await eventually(reserved)


async def test_never_fits_gang_run_then_says_never(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster("4:gpu=8") as (env, _):
        path = manifests(tmp_path, "huge", 5, 8)
        code, answer = await gang_fit(env, path, capsys)
        assert (code, answer["answer"]) == (whatif.NEVER_FITS, "never fits"), answer
        assert answer["never"]["members_that_fit_empty"] == 4
        assert "lower minMember to 4 (4 member(s) fit)" in answer["unblock"]

        await apply(env, path)

        async def said_never() -> bool:
            status = (await env.api.get_podgroup("huge")).get("status") or {}
            scheduled = {c["type"]: c for c in status.get("conditions") or []}.get("Scheduled")
            return scheduled is not None and scheduled["reason"] == "NeverFits"

        await eventually(said_never)
        events = [e["message"] for e in await env.api.events() if e["reason"] == "FailedScheduling"]
        assert any("can never fit this cluster" in m for m in events), events


async def test_rule_blocked_gang_run_then_is_stopped_by_the_same_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"scheduler": {"reservations": False}}))
    away = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    async with cluster("4:gpu=8", reservations=False) as (env, _):
        await env.api.create_pods(  # one db per node (they keep away from each other)
            [
                gang_pod(f"db-{i}", None, cpu="100m", labels={"app": "db"}, affinity=away)
                for i in range(4)
            ]
        )

        async def spread() -> bool:
            return len(set((await env.api.bound()).values())) == 4

        await eventually(spread)
        path = manifests(tmp_path, "apart", 2, 1, affinity=away)
        code, answer = await gang_fit(env, path, capsys, "--config", str(config))
        assert (code, answer["answer"]) == (whatif.NOT_NOW, "does not fit now"), answer
        assert answer["state"] == "rule-blocked"
        reasons = answer["blocked_member"]["nodes_rejecting"]
        assert reasons == {"node(s) didn't match pod anti-affinity rules": 4}

        await apply(env, path)
        await asyncio.sleep(0.5)

        async def same_rule() -> bool:
            return any(
                "4 node(s) didn't match pod anti-affinity rules" in e["message"]
                for e in await env.api.events()
                if e["reason"] == "FailedScheduling"
            )

        await eventually(same_rule)
        assert not any(p.startswith("apart-") for p in await env.api.bound())


async def test_bench_from_snapshot_plans_capacity_with_nodes_added(tmp_path: Path) -> None:
    """``gang snapshot`` of a full cluster, then ``gang bench --from-snapshot``: without new
    nodes the gang waits for the running ones (a reservation, with its expected start); with
    two nodes added it fits at once. The live cluster is not touched."""
    async with cluster("4:gpu=8") as (env, _):
        await run_gang(env, "filler", 4, "low", gpu=8)
        snap = tmp_path / "snap.json.gz"
        done = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gang", "snapshot", "--kubeconfig",
            str(env.cluster.kubeconfig_path), "-o", str(snap),
        )  # fmt: skip
        assert await done.wait() == 0
        path = manifests(tmp_path, "next", 2, 8, priority_class="low")

        async def plan(*extra: str) -> str:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gang", "bench", "--from-snapshot", str(snap),
                "-f", str(path), *extra, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, _ = await proc.communicate()
            assert proc.returncode == 0
            return out.decode()

        as_is = await plan()
        assert "default/next: fits once running pods finish (expected to start in" in as_is
        grown = await plan("--nodes", "2:gpu=8,prefix=added")
        assert "capacity plan: 6 nodes" in grown
        assert "default/next: fits now" in grown
        assert not any(p.startswith("next-") for p in await env.api.bound())


async def test_fit_counts_queues_a_gang_past_its_queues_limit_does_not_fit_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The copy carries the cluster's queues: a gang that would take its KAI queue past its
    limit is 'not now' (queue-blocked) though the GPUs are free; in no queue, it fits now."""
    async with cluster("4:gpu=8") as (env, client):
        from kubernetes_asyncio import client as k8s

        queue = {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "capped"},
            "spec": {"resources": {"gpu": {"quota": 0, "limit": 8}}},
        }
        await k8s.CustomObjectsApi(client).create_cluster_custom_object(
            "scheduling.run.ai", "v2", "queues", queue
        )
        labels = {"kai.scheduler/queue": "capped"}
        await run_gang(env, "running", 1, "low", gpu=8, labels=labels)
        capped = manifests(tmp_path, "more", 1, 8, labels=labels)
        code, answer = await gang_fit(env, capped, capsys)
        assert (code, answer["answer"]) == (whatif.NOT_NOW, "does not fit now"), answer
        assert answer["state"] == "queue-blocked"
        assert "queue capped at its limit: holds 8 GPUs of its limit 8 GPUs" in answer["summary"]
        free = manifests(tmp_path, "free", 1, 8)
        code, answer = await gang_fit(env, free, capsys)
        assert (code, answer["answer"]) == (whatif.FITS_NOW, "fits now"), answer


async def test_fit_keeps_a_gang_inside_its_rack_and_says_why_a_bigger_one_never_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gang fit`` on a cluster of 4 racks x 4 hosts with a Kueue Topology: a gang requiring
    a rack fits in one rack; one of 5 never fits, in the words the scheduler then says."""
    from gang.models.topologyapis import KUEUE_REQUIRED
    from gang.sim.nodespec import RACK_LABEL
    from tests.scheduler.test_topology import topology_object

    async with cluster("16:gpu=1,blocks=1,racks=4,prefix=host") as (env, _):
        await env.api.custom.create_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "topologies", topology_object("kueue")
        )
        ask = {KUEUE_REQUIRED: RACK_LABEL}
        racks = {
            n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL]
            for n in await env.api.raw_nodes()
        }
        four = manifests(tmp_path, "four", 4, 1, annotations=ask)
        code, answer = await gang_fit(env, four, capsys)
        assert (code, answer["answer"]) == (whatif.FITS_NOW, "fits now"), answer
        assert len({racks[n] for n in answer["nodes"]}) == 1 and len(answer["nodes"]) == 4
        five = manifests(tmp_path, "five", 5, 1, annotations=ask)
        code, answer = await gang_fit(env, five, capsys)
        assert (code, answer["answer"]) == (whatif.NEVER_FITS, "never fits"), answer
        assert "required rack: the best rack fits 4 of 5 members" in answer["never"]["why"]


async def test_fit_counts_the_devices_that_claims_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DRA: two nodes with one GPU each, and a running pod whose claim holds one of them. The
    snapshot carries the slices and that allocation, so ``gang fit`` says a gang of two
    one-GPU members fits only once the holder ends, and a gang of one fits now, on the other
    node."""
    from tests.scheduler.test_dra import claimed_pod, create, setup_devices, template
    from tests.scheduler.test_dra import wait_bound as dra_bound

    async with cluster("2:cpu=8,memory=32Gi,zones=1") as (env, _):
        await setup_devices(env, per_node=1)
        await create(env, "resourceclaimtemplates", template("one-gpu"))
        await env.api.create_pods([claimed_pod("holder", None, "one-gpu")])
        held = (await dra_bound(env, ["holder"]))["holder"]

        def dra_gang(name: str, size: int) -> Path:
            docs = [podgroup(name, size, timeout=30)]
            docs += [claimed_pod(f"{name}-{i}", name, "one-gpu") for i in range(size)]
            for doc in docs[1:]:
                doc.setdefault("apiVersion", "v1")
                doc.setdefault("kind", "Pod")
            path = tmp_path / f"{name}.yaml"
            path.write_text(yaml.safe_dump_all(docs))
            return path

        code, answer = await gang_fit(env, dra_gang("pair", 2), capsys)
        assert code == whatif.AFTER_RESERVATION, answer  # when the holder ends: its GPU
        code, answer = await gang_fit(env, dra_gang("single", 1), capsys)
        assert code == whatif.FITS_NOW, answer
        assert answer["nodes"] and held not in answer["nodes"], answer


async def test_a_profile_whose_plugin_cannot_load_is_bad_input_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``gang run`` does: the plugin named, exit 2, before any cluster is asked (here none
    is reachable at all: the kubeconfig points nowhere)."""
    config = tmp_path / "profile.yaml"
    config.write_text(
        yaml.safe_dump({"scheduler": {"plugin_paths": ["no_such_module_for_gang:P"]}})
    )
    path = manifests(tmp_path, "train", 2, 1)
    args = build_parser().parse_args(
        ["fit", "-f", str(path), "--kubeconfig", str(tmp_path / "missing"), "--config", str(config)]
    )
    code = await asyncio.wait_for(fit_cli.command(args), 10)
    assert code == whatif.BAD_INPUT
    assert "no_such_module_for_gang" in capsys.readouterr().err
