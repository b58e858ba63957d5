"""Bad or unusual input gets a clear Event or condition, and everyone else keeps being served."""

from __future__ import annotations

import asyncio

from tests.scheduler.conftest import eventually, gang_env, gang_pod, podgroup


async def test_missing_podgroup_waits_with_an_event_then_binds() -> None:
    async with gang_env("2:gpu=8") as env:
        api = env.api
        await api.create_pods([gang_pod(f"ghost-{i}", "ghost", gpu=1) for i in range(2)])
        await api.create_pods([gang_pod("solo", None, gpu=1)])

        async def told() -> bool:
            return any(
                "PodGroup default/ghost not found" in e["message"] for e in await api.events()
            )

        await eventually(told)

        async def solo_bound() -> bool:
            return set(await api.bound()) == {"solo"}

        await eventually(solo_bound)  # the lone pod is served while the gang waits
        await asyncio.sleep(0.3)
        assert set(await api.bound()) == {"solo"}
        await api.create_podgroup(podgroup("ghost", 2))

        async def bound() -> bool:
            return {"ghost-0", "ghost-1"} <= set(await api.bound())

        await eventually(bound)


async def test_invalid_podgroups_are_reported_and_others_served() -> None:
    async with gang_env("2:gpu=8") as env:
        api = env.api
        bad = {
            "zero": podgroup("zero", 0),
            "words": podgroup("words", "three"),
            "neg": podgroup("neg", 2, timeout=-5),
            "frac": podgroup("frac", 2.5),
            "res": podgroup("res", 1, minResources={"cpu": "lots"}),
        }
        for body in bad.values():
            await api.create_podgroup(body)
        await api.create_pods([gang_pod(f"{g}-0", g, gpu=1) for g in bad])
        await api.create_podgroup(podgroup("good", 2))
        await api.create_pods([gang_pod(f"good-{i}", "good", gpu=1) for i in range(2)])

        async def good_bound() -> bool:
            return {"good-0", "good-1"} <= set(await api.bound())

        await eventually(good_bound)

        async def all_reported() -> bool:
            invalid = {
                e["involvedObject"]["name"]
                for e in await api.events()
                if e["reason"] == "InvalidPodGroup"
            }
            return invalid == set(bad)

        await eventually(all_reported)
        events = {
            e["involvedObject"]["name"]: e["message"]
            for e in await api.events()
            if e["reason"] == "InvalidPodGroup"
        }
        assert "minMember" in events["zero"] and "greater than or equal to 1" in events["zero"]
        assert "minMember" in events["words"]
        assert "scheduleTimeoutSeconds" in events["neg"]
        assert "minResources" in events["res"] and "quantities must match" in events["res"]
        assert set(await api.bound()) == {"good-0", "good-1"}

        async def condition_written() -> bool:
            status = (await api.get_podgroup("zero")).get("status") or {}
            return any(
                c["type"] == "Valid" and c["status"] == "False"
                for c in status.get("conditions", [])
            )

        await eventually(condition_written)


async def test_taints_selectors_and_affinity() -> None:
    nodes = "2:gpu=8,prefix=ml,label:pool=ml,taint:dedicated=ml:NoSchedule;2:gpu=8,prefix=gen,label:pool=general"
    async with gang_env(nodes) as env:
        api = env.api
        await api.create_pods([gang_pod("wants-ml", None, gpu=1, nodeSelector={"pool": "ml"})])

        async def told() -> bool:
            return any(e["reason"] == "FailedScheduling" for e in await api.events())

        await eventually(told)
        failure = next(e for e in await api.events() if e["reason"] == "FailedScheduling")
        assert failure["message"] == (
            "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
            "2 node(s) had untolerated taint {dedicated: ml}."
        )
        toleration = [
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
        ]
        await api.create_pods(
            [gang_pod("tolerant", None, gpu=1, nodeSelector={"pool": "ml"}, tolerations=toleration)]
        )
        avoid_ml = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "pool", "operator": "NotIn", "values": ["ml"]}
                            ]
                        }
                    ]
                }
            }
        }
        await api.create_pods([gang_pod("elsewhere", None, gpu=1, affinity=avoid_ml)])

        async def placed() -> bool:
            return {"tolerant", "elsewhere"} <= set(await api.bound())

        await eventually(placed)
        bound = await api.bound()
        assert bound["tolerant"].startswith("ml-") and bound["elsewhere"].startswith("gen-")
        assert "wants-ml" not in bound


async def test_cordoned_node_is_skipped() -> None:
    async with gang_env("2:gpu=8") as env:
        await env.api.core.patch_node("node-00000", {"spec": {"unschedulable": True}})
        await asyncio.sleep(0.2)
        await env.api.create_pods([gang_pod(f"p{i}", None, gpu=1) for i in range(3)])

        async def bound() -> bool:
            return len(await env.api.bound()) == 3

        await eventually(bound)
        assert set((await env.api.bound()).values()) == {"node-00001"}


async def test_our_own_podgroup_status_does_not_send_a_waiting_gang_round_again() -> None:
    """kube-scheduler requeues no pod for a status-only update. A gang that cannot fit gets
    its PodGroup status written; the watch brings that write back, and that echo must not
    send the gang through another cycle (on a backlog it doubled the failed attempts)."""
    async with gang_env("2:gpu=8") as env:
        api = env.api
        await api.create_pods([gang_pod("blocker", None, gpu=8)])

        async def blocker_bound() -> bool:
            return "blocker" in await api.bound()

        await eventually(blocker_bound)
        # the members first: the gang waits for its PodGroup, then has one reason to be tried
        await api.create_pods([gang_pod(f"wide-{i}", "wide", gpu=8) for i in range(2)])

        async def told() -> bool:
            return any(
                "PodGroup default/wide not found" in e["message"] for e in await api.events()
            )

        async def settled() -> bool:  # the members' arrivals have been tried
            seen = env.scheduler.stats.attempts.get("unschedulable", 0)
            await asyncio.sleep(0.3)
            return env.scheduler.stats.attempts.get("unschedulable", 0) == seen

        await eventually(told)
        await eventually(settled)
        before = env.scheduler.stats.attempts.get("unschedulable", 0)
        await api.create_podgroup(podgroup("wide", 2))

        async def status_says_why() -> bool:
            status = (await api.get_podgroup("wide")).get("status") or {}
            return any(c.get("status") == "False" for c in status.get("conditions") or [])

        await eventually(status_says_why)
        await asyncio.sleep(1.0)  # the status write's echo has long come back
        assert env.scheduler.stats.attempts.get("unschedulable", 0) - before == 1
        assert not (await api.bound()).keys() & {"wide-0", "wide-1"}
