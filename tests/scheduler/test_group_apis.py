"""Every gang API job operators emit, over HTTP: each gang bound whole, status in its API's words.

The real scheduler runs against the simulator serving the API (the native Kubernetes versions
are chosen by the simulated release), and discovers at start-up which APIs there are to watch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from gang.app.explain import explain, find_gang
from gang.sim.cluster import SimCluster
from tests.scheduler.conftest import Api, Env, eventually, gang_pod, running_scheduler

NS = "default"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
SIGS = ("scheduling.sigs.k8s.io", "v1alpha1")
NODES = "4:gpu=8,cpu=32,memory=128Gi"


@asynccontextmanager
async def env_of(
    kubernetes_version: str = "1.37", nodes: str = NODES, **config: Any
) -> AsyncIterator[Env]:
    async with (
        SimCluster(nodes, kubernetes_version=kubernetes_version) as cluster,
        running_scheduler(cluster, **config) as scheduler,
        cluster.api_client() as client,
    ):
        yield Env(cluster, scheduler, Api(client))


async def create(api: Api, gv: tuple[str, str], plural: str, body: dict[str, Any]) -> None:
    await api.custom.create_namespaced_custom_object(gv[0], gv[1], NS, plural, body)


async def get(api: Api, gv: tuple[str, str], plural: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = await api.custom.get_namespaced_custom_object(
        gv[0], gv[1], NS, plural, name
    )
    return found


def pod(name: str, gpu: int = 1, labels: Any = None, annotations: Any = None, **spec: Any) -> Any:
    manifest = gang_pod(name, None, gpu=gpu, cpu="1", memory="1Gi", labels=labels, **spec)
    if annotations:
        manifest["metadata"]["annotations"] = annotations
    return manifest


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def all_bound(api: Api, names: list[str]) -> bool:
    bound = await api.bound(NS)
    return all(n in bound for n in names)


# --- Volcano ---------------------------------------------------------------------------------


def volcano_group(name: str, min_member: int, gpus: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "/".join(VOLCANO),
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {
            "minMember": min_member,
            "queue": "default",
            "minResources": {"nvidia.com/gpu": str(gpus)},
            **spec,
        },
    }


def volcano_pod(name: str, group: str, gpu: int = 2, task: str = "worker") -> Any:
    return pod(
        name,
        gpu,
        annotations={"scheduling.k8s.io/group-name": group, "volcano.sh/task-spec": task},
    )


async def test_volcano_group_goes_inqueue_before_its_pods_exist_then_runs_whole() -> None:
    """The Training Operator v1 makes no pod until its PodGroup leaves Pending."""
    async with env_of() as env:
        await create(env.api, VOLCANO, "podgroups", volcano_group("pt", 3, 6))

        async def inqueue() -> bool:
            group = await get(env.api, VOLCANO, "podgroups", "pt")
            return (group.get("status") or {}).get("phase") == "Inqueue"

        await eventually(inqueue)
        names = ["pt-master-0", "pt-worker-0", "pt-worker-1"]
        await env.api.create_pods(
            [volcano_pod(names[0], "pt", task="master")] + [volcano_pod(n, "pt") for n in names[1:]]
        )
        await eventually(lambda: all_bound(env.api, names))

        async def running() -> bool:
            group = await get(env.api, VOLCANO, "podgroups", "pt")
            return (group.get("status") or {}).get("phase") == "Running"

        await eventually(running)
        scheduled = conditions(await get(env.api, VOLCANO, "podgroups", "pt"))["Scheduled"]
        assert scheduled["status"] == "True"
        assert scheduled["reason"] == "tasks in gang are ready to be scheduled"
        assert scheduled["transitionID"]
        await env.api.assert_not_overcommitted()


async def test_volcano_group_that_can_never_fit_stays_pending_and_says_why() -> None:
    async with env_of() as env:
        await create(env.api, VOLCANO, "podgroups", volcano_group("huge", 2, 64))
        await create(env.api, VOLCANO, "podgroups", volcano_group("ok", 2, 4))

        async def said() -> bool:
            group = await get(env.api, VOLCANO, "podgroups", "huge")
            return "Unschedulable" in conditions(group)

        await eventually(said)
        huge = await get(env.api, VOLCANO, "podgroups", "huge")
        assert huge["status"]["phase"] == "Pending"
        unschedulable = conditions(huge)["Unschedulable"]
        assert unschedulable["reason"] == "NeverFits"
        assert "never" in unschedulable["message"]
        ok = await get(env.api, VOLCANO, "podgroups", "ok")
        assert ok["status"]["phase"] == "Inqueue"


async def test_volcano_gang_short_of_min_member_binds_nothing_and_reports_tasks() -> None:
    async with env_of() as env:
        await create(env.api, VOLCANO, "podgroups", volcano_group("g", 3, 6))
        # 3 of the 4 whole nodes are taken: 1 of its 3 members fits
        await env.api.create_pods([pod(f"other-{i}", 8) for i in range(3)])
        await eventually(lambda: all_bound(env.api, [f"other-{i}" for i in range(3)]))
        names = [f"g-{i}" for i in range(3)]
        await env.api.create_pods([volcano_pod(n, "g", gpu=8) for n in names])

        async def reported() -> bool:
            group = await get(env.api, VOLCANO, "podgroups", "g")
            return "Unschedulable" in conditions(group)

        await eventually(reported)
        bound = await env.api.bound(NS)
        assert not any(n in bound for n in names)
        message = conditions(await get(env.api, VOLCANO, "podgroups", "g"))["Unschedulable"]
        assert message["message"].startswith("3/3 tasks in gang unschedulable: ")


async def one_master_short(env: Env, min_gpus: int) -> None:
    """Group ``t`` (minMember 2, both masters required, minResources ``min_gpus`` GPUs) with a
    worker and one master, until it says it waits for the other master."""
    group = volcano_group("t", 2, min_gpus, minTaskMember={"master": 2})
    await create(env.api, VOLCANO, "podgroups", group)
    await env.api.create_pods(
        [volcano_pod("t-w", "t", gpu=2), volcano_pod("t-m0", "t", gpu=4, task="master")]
    )

    async def waiting() -> bool:
        found = conditions(await get(env.api, VOLCANO, "podgroups", "t"))
        return "task master needs 1 more" in found.get("Unschedulable", {}).get("message", "")

    await eventually(waiting)


async def test_volcano_min_task_member_holds_per_task() -> None:
    """minMember 2, but both masters are required: a worker and one master (minMember met) is
    never bound; with the second master there, the two masters are."""
    async with env_of(nodes="1:gpu=8,cpu=32,memory=128Gi") as env:
        await one_master_short(env, min_gpus=4)
        assert not await env.api.bound(NS)
        await env.api.create_pods([volcano_pod("t-m1", "t", gpu=4, task="master")])
        await eventually(lambda: all_bound(env.api, ["t-m0", "t-m1"]))
        assert "t-w" not in await env.api.bound(NS)  # 10 GPUs asked, 8 there: the worker waits


async def test_volcano_min_task_members_are_placed_before_the_bigger_members() -> None:
    """Bigger members first would put the worker and one master on 10 of 11 GPUs, and the
    second master would fit nowhere beside them. The members each task needs go first: both
    masters (4 GPUs) are placed, and the worker waits for room."""
    async with env_of(nodes="1:gpu=11,cpu=32,memory=128Gi") as env:
        group = volcano_group("t", 2, 4, minTaskMember={"master": 2})
        await create(env.api, VOLCANO, "podgroups", group)
        await env.api.create_pods(
            [
                volcano_pod("t-w", "t", gpu=8),
                volcano_pod("t-m0", "t", gpu=2, task="master"),
                volcano_pod("t-m1", "t", gpu=2, task="master"),
            ]
        )
        await eventually(lambda: all_bound(env.api, ["t-m0", "t-m1"]))
        assert "t-w" not in await env.api.bound(NS)  # 12 GPUs asked, 11 there: it waits
        await env.api.assert_not_overcommitted()


async def test_volcano_min_member_is_filled_up_around_the_task_minimums() -> None:
    """minMember 3, one master required: the master and two of the three workers (10 GPUs)
    fill the node; the three workers alone (12) would not fit, nor would all four."""
    async with env_of(nodes="1:gpu=10,cpu=32,memory=128Gi") as env:
        group = volcano_group("f", 3, 10, minTaskMember={"master": 1})
        await create(env.api, VOLCANO, "podgroups", group)
        workers = [f"f-w{i}" for i in range(3)]
        await env.api.create_pods(
            [volcano_pod("f-m", "f", gpu=2, task="master")]
            + [volcano_pod(n, "f", gpu=4) for n in workers]
        )

        async def three_bound() -> bool:
            bound = await env.api.bound(NS)
            return "f-m" in bound and sum(n in bound for n in workers) == 2

        await eventually(three_bound)
        await env.api.assert_not_overcommitted()


async def test_volcano_gang_that_fits_only_task_minimums_first_is_not_called_never_fitting() -> (
    None
):
    """The three workers alone (12 GPUs) never fit the 10-GPU node, but the master and two
    workers do: while another pod holds 4 GPUs the gang is unschedulable for now, not
    NeverFits, and it binds once that pod is gone."""
    async with env_of(nodes="1:gpu=10,cpu=32,memory=128Gi") as env:
        await env.api.create_pods([pod("other", 4)])
        await eventually(lambda: all_bound(env.api, ["other"]))
        await create(
            env.api, VOLCANO, "podgroups", volcano_group("f", 3, 10, minTaskMember={"master": 1})
        )
        workers = [f"f-w{i}" for i in range(3)]
        await env.api.create_pods(
            [volcano_pod("f-m", "f", gpu=2, task="master")]
            + [volcano_pod(n, "f", gpu=4) for n in workers]
        )

        async def reported() -> bool:
            group = await get(env.api, VOLCANO, "podgroups", "f")
            return "Unschedulable" in conditions(group)

        await eventually(reported)
        unschedulable = conditions(await get(env.api, VOLCANO, "podgroups", "f"))["Unschedulable"]
        assert unschedulable["reason"] != "NeverFits", unschedulable
        assert "never" not in unschedulable["message"]
        await env.api.core.delete_namespaced_pod("other", NS, grace_period_seconds=0)

        async def three_bound() -> bool:
            bound = await env.api.bound(NS)
            return "f-m" in bound and sum(n in bound for n in workers) == 2

        await eventually(three_bound)


async def test_volcano_group_short_of_a_task_minimum_waits_for_members_and_holds_nothing() -> None:
    """Its minResources (10 GPUs) are more than the node has free (8 of 16), but the group
    lacks a required master anyway: it waits for members, as Volcano holds such a job invalid,
    and no capacity is reserved for it."""
    async with env_of(nodes="1:gpu=16,cpu=32,memory=128Gi") as env:
        await env.api.create_pods([pod("other", 8)])
        await eventually(lambda: all_bound(env.api, ["other"]))
        await one_master_short(env, min_gpus=10)
        found = conditions(await get(env.api, VOLCANO, "podgroups", "t"))
        assert found.get("Reserved", {}).get("status") != "True", found
        assert not env.scheduler.state.reservations.by_gang


async def test_explain_asks_to_free_what_the_task_minimums_need() -> None:
    """Two 1-GPU workers come first, but the group cannot start without its 4-GPU master:
    with 2 GPUs free, ``gang explain`` asks for 3 more (for the master and a worker), not for
    the two workers, which already fit. (No reservations: a held node would be the answer.)"""
    async with env_of(nodes="1:gpu=8,cpu=32,memory=128Gi", reservations=False) as env:
        await env.api.create_pods([pod("other", 6)])
        await eventually(lambda: all_bound(env.api, ["other"]))
        group = volcano_group("t", 2, 1, minTaskMember={"master": 1})
        await create(env.api, VOLCANO, "podgroups", group)
        await env.api.create_pods(
            [volcano_pod("t-w0", "t", gpu=1), volcano_pod("t-w1", "t", gpu=1),
             volcano_pod("t-m0", "t", gpu=4, task="master")]
        )  # fmt: skip

        async def refused() -> bool:
            gang = find_gang(env.scheduler, NS, "t")
            return gang is not None and gang.last_unplaceable is not None

        await eventually(refused)
        gang = find_gang(env.scheduler, NS, "t")
        assert gang is not None
        answer = explain(env.scheduler, gang)
        assert answer["state"] == "capacity", answer
        assert "free 3 nvidia.com/gpu (free now: 2)" in answer["unblock"], answer["unblock"]
        assert "other" in await env.api.bound(NS) and len(await env.api.bound(NS)) == 1


# --- Coscheduling (scheduling.x-k8s.io) ------------------------------------------------------

COSCHEDULING = ("scheduling.x-k8s.io", "v1alpha1")


async def test_coscheduling_group_that_can_never_fit_says_so_until_the_cluster_grows() -> None:
    """3 members x 8 GPUs on 2 nodes of 8: not even the empty cluster holds it. Coscheduling's
    phase stays Scheduling, so the condition ``Unschedulable`` (True, NeverFits) says it will
    not run as things are; a third node makes it fit, and it binds and the condition goes."""
    async with env_of(nodes="2:gpu=8,cpu=32,memory=128Gi") as env:
        body = {
            "apiVersion": "/".join(COSCHEDULING),
            "kind": "PodGroup",
            "metadata": {"name": "huge"},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 30},
        }
        await create(env.api, COSCHEDULING, "podgroups", body)
        names = [f"huge-{i}" for i in range(3)]
        label = {"scheduling.x-k8s.io/pod-group": "huge"}
        await env.api.create_pods([pod(n, 8, labels=label) for n in names])

        async def never() -> bool:
            found = conditions(await get(env.api, COSCHEDULING, "podgroups", "huge"))
            return found.get("Unschedulable", {}).get("status") == "True"

        await eventually(never)
        huge = await get(env.api, COSCHEDULING, "podgroups", "huge")
        assert huge["status"]["phase"] == "Scheduling"
        assert huge["status"]["scheduled"] == 0
        unschedulable = conditions(huge)["Unschedulable"]
        assert unschedulable["reason"] == "NeverFits"
        assert unschedulable["message"].startswith("will not run on the cluster as it is, ")
        assert "only 2 fit" in unschedulable["message"], unschedulable
        assert "Insufficient nvidia.com/gpu" in unschedulable["message"], unschedulable
        assert conditions(huge)["Scheduled"]["status"] == "False"
        assert not await env.api.bound(NS)

        env.cluster.add_nodes("1:gpu=8,cpu=32,memory=128Gi,prefix=grown")
        await eventually(lambda: all_bound(env.api, names))

        async def placed() -> bool:
            status = (await get(env.api, COSCHEDULING, "podgroups", "huge")).get("status") or {}
            return status.get("phase") in ("Scheduled", "Running") and status["scheduled"] == 3

        await eventually(placed)
        found = conditions(await get(env.api, COSCHEDULING, "podgroups", "huge"))
        assert "Unschedulable" not in found, found
        assert found["Scheduled"]["status"] == "True"
        await env.api.assert_not_overcommitted()


# --- scheduler-plugins before 0.25 -----------------------------------------------------------


async def test_older_scheduler_plugins_group_binds_whole() -> None:
    async with env_of() as env:
        body = {
            "apiVersion": "/".join(SIGS),
            "kind": "PodGroup",
            "metadata": {"name": "old"},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 30},
        }
        await create(env.api, SIGS, "podgroups", body)
        names = [f"old-{i}" for i in range(3)]
        label = {"pod-group.scheduling.sigs.k8s.io": "old"}
        await env.api.create_pods([pod(n, 2, labels=label) for n in names])
        await eventually(lambda: all_bound(env.api, names))

        async def phase() -> bool:
            status = (await get(env.api, SIGS, "podgroups", "old")).get("status") or {}
            return status.get("phase") in ("Scheduled", "Running") and status["scheduled"] == 3

        await eventually(phase)


# --- native Kubernetes -----------------------------------------------------------------------


def native_group(version: str, name: str, policy: dict[str, Any], **spec: Any) -> Any:
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": policy, **spec},
    }


def native_pod(name: str, group: str, gpu: int = 2) -> Any:
    return pod(name, gpu, schedulingGroup={"podGroupName": group})


async def native_gang_binds_and_says_so(kubernetes_version: str, version: str, kind: str) -> None:
    gv = ("scheduling.k8s.io", version)
    async with env_of(kubernetes_version) as env:
        await create(
            env.api, gv, "podgroups", native_group(version, "n", {"gang": {"minCount": 3}})
        )
        names = [f"n-{i}" for i in range(3)]
        await env.api.create_pods([native_pod(p, "n") for p in names])
        await eventually(lambda: all_bound(env.api, names))

        async def scheduled() -> bool:
            found = conditions(await get(env.api, gv, "podgroups", "n")).get(kind)
            return found is not None and found["status"] == "True"

        await eventually(scheduled)
        assert conditions(await get(env.api, gv, "podgroups", "n"))[kind]["reason"] == "Scheduled"


async def test_native_podgroup_v1alpha2_of_kubernetes_1_36() -> None:
    await native_gang_binds_and_says_so("1.36", "v1alpha2", "PodGroupScheduled")


async def test_native_podgroup_v1beta1_of_kubernetes_1_37() -> None:
    await native_gang_binds_and_says_so("1.37", "v1beta1", "PodGroupInitiallyScheduled")


async def test_native_gang_that_does_not_fit_binds_nothing_and_basic_pods_go_one_by_one() -> None:
    gv = ("scheduling.k8s.io", "v1beta1")
    async with env_of("1.37") as env:
        await create(
            env.api, gv, "podgroups", native_group("v1beta1", "big", {"gang": {"minCount": 5}})
        )
        await create(env.api, gv, "podgroups", native_group("v1beta1", "solo", {"basic": {}}))
        big = [f"big-{i}" for i in range(5)]
        solo = [f"solo-{i}" for i in range(6)]
        await env.api.create_pods([native_pod(p, "big", gpu=8) for p in big])
        await env.api.create_pods([native_pod(p, "solo", gpu=8) for p in solo])

        async def refused() -> bool:
            found = conditions(await get(env.api, gv, "podgroups", "big"))
            kind = found.get("PodGroupInitiallyScheduled")
            return kind is not None and kind["status"] == "False"

        await eventually(refused)
        assert (
            conditions(await get(env.api, gv, "podgroups", "big"))["PodGroupInitiallyScheduled"][
                "reason"
            ]
            == "Unschedulable"
        )
        bound = await env.api.bound(NS)
        assert not any(p in bound for p in big)
        # basic: as many as fit (4 nodes of 8 GPUs), one by one
        await eventually(lambda: _count_bound(env.api, solo, 4))


async def _count_bound(api: Api, names: list[str], count: int) -> bool:
    bound = await api.bound(NS)
    return sum(1 for n in names if n in bound) == count


async def test_workload_of_kubernetes_1_35_one_gang_per_replica_key() -> None:
    gv = ("scheduling.k8s.io", "v1alpha1")
    async with env_of("1.35") as env:
        workload = {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "wl"},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
        }
        await create(env.api, gv, "workloads", workload)

        def ref(key: str) -> Any:
            return {"name": "wl", "podGroup": "workers", "podGroupReplicaKey": key}

        # replica "a": 2 members fit; replica "b": 2 members of 8 GPUs, but 3 nodes are taken
        await env.api.create_pods([pod(f"x-{i}", 8) for i in range(3)])
        await eventually(lambda: all_bound(env.api, [f"x-{i}" for i in range(3)]))
        await env.api.create_pods(
            [pod(f"b-{i}", 8, workloadRef=ref("b")) for i in range(2)]
            + [pod(f"a-{i}", 0, workloadRef=ref("a")) for i in range(2)]
        )
        await eventually(lambda: all_bound(env.api, ["a-0", "a-1"]))
        bound = await env.api.bound(NS)
        assert "b-0" not in bound and "b-1" not in bound  # one fits, the gang needs two


# --- a pod claimed twice ---------------------------------------------------------------------


async def test_pod_naming_two_groups_is_reported_and_not_scheduled() -> None:
    async with env_of() as env:
        await create(env.api, VOLCANO, "podgroups", volcano_group("v", 1, 1))
        await env.api.create_podgroup(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "c"},
                "spec": {"minMember": 1},
            }
        )
        both = pod(
            "both",
            1,
            labels={"scheduling.x-k8s.io/pod-group": "c"},
            annotations={"scheduling.k8s.io/group-name": "v"},
        )
        await env.api.create_pods([both, volcano_pod("fine", "v", gpu=1)])
        await eventually(lambda: all_bound(env.api, ["fine"]))

        async def reported() -> bool:
            return any(
                e["reason"] == "AmbiguousPodGroup" and e["involvedObject"]["name"] == "both"
                for e in await env.api.events(NS)
            )

        await eventually(reported)
        event = next(e for e in await env.api.events(NS) if e["reason"] == "AmbiguousPodGroup")
        assert "scheduling.x-k8s.io/pod-group" in event["message"]
        assert "scheduling.k8s.io/group-name" in event["message"]
        assert "both" not in await env.api.bound(NS)
