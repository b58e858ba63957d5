"""Devices claimed through ResourceClaims (DRA), allocated for whole gangs, over HTTP.

The scheduler runs against the simulator serving ``resource.k8s.io/v1``: its resourceclaim
controller makes each pod's claim from the template and names it in the pod's status, and its
kubelet starts a pod only when its claims are reserved for it. The scenarios are the issue's:
devices spread over nodes, a gang that does not fit until a node is added, a claim shared by a
gang, a conflict while committing, MIG partitions of one GPU, and a selector that errs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gang.app.explain import explain, find_gang
from tests.scheduler.conftest import Env, eventually, gang_env, gang_pod, podgroup
from tests.scheduler.test_preemption import HIGH, LOW
from tests.scheduler.test_preemption import cluster as preemption_cluster

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
API = ("resource.k8s.io", "v1")
NODES = "2:cpu=8,memory=32Gi,zones=1"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples/dra-gang.yaml"


def device_class(
    name: str = CLASS, expression: str = f'device.driver == "{DRIVER}"'
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def gpu(name: str, **attributes: Any) -> dict[str, Any]:
    typed = {k: {"int": v} if isinstance(v, int) else {"string": v} for k, v in attributes.items()}
    return {"name": name, "attributes": typed, "capacity": {"memory": {"value": "80Gi"}}}


def node_slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """The devices one node's driver publishes: a pool named after the node."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def template(name: str, count: int = 1, **exactly: Any) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": count, **exactly}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def one_gpu_claim(name: str) -> dict[str, Any]:
    """A ResourceClaim made by hand (not from a template), for one GPU."""
    request = {"name": "gpu", "exactly": {"deviceClassName": CLASS}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def claimed_pod(name: str, group: str | None, template_name: str, **extra: Any) -> dict[str, Any]:
    claims = [{"name": "gpu", "resourceClaimTemplateName": template_name}]
    pod = gang_pod(name, group, resourceClaims=claims, **extra)
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pod


async def create(env: Env, plural: str, body: dict[str, Any], ns: str | None = "default") -> None:
    if ns is None:
        await env.api.custom.create_cluster_custom_object(*API, plural, body)
    else:
        await env.api.custom.create_namespaced_custom_object(*API, ns, plural, body)


async def claims(env: Env) -> dict[str, dict[str, Any]]:
    """The namespace's ResourceClaims by the pod they were made for."""
    listed = await env.api.custom.list_namespaced_custom_object(*API, "default", "resourceclaims")
    out = {}
    for claim in listed["items"]:
        owners = claim["metadata"].get("ownerReferences") or [{"name": claim["metadata"]["name"]}]
        out[owners[0]["name"]] = claim
    return out


def devices_of(claim: dict[str, Any]) -> list[tuple[str, str]]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results"
    ) or []
    return [(r["pool"], r["device"]) for r in results]


def reserved_for(claim: dict[str, Any]) -> list[str]:
    return [r["name"] for r in (claim.get("status") or {}).get("reservedFor") or []]


async def setup_devices(env: Env, per_node: int, nodes: list[str] | None = None) -> None:
    await create(env, "deviceclasses", device_class(), ns=None)
    for node in nodes or await node_names(env):
        devices = [gpu(f"gpu-{i}", index=i, model="H100") for i in range(per_node)]
        await create(env, "resourceslices", node_slice(node, devices), ns=None)


async def node_names(env: Env) -> list[str]:
    nodes = await env.api.core.list_node()
    return sorted(n.metadata.name for n in nodes.items)


async def pod_message(env: Env, name: str) -> str:
    pod = await env.api.core.read_namespaced_pod(name, "default")
    for c in pod.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False":
            return str(c.message)
    return ""


async def wait_bound(env: Env, names: list[str], within: float = 10.0) -> dict[str, str]:
    async def all_bound() -> bool:
        return set(names) <= set(await env.api.bound())

    await eventually(all_bound, within=within)
    bound = await env.api.bound()
    return {n: bound[n] for n in names}


async def test_three_one_gpu_pods_on_two_one_gpu_nodes() -> None:
    """Two bind, on different nodes, each claim allocated the GPU of its pod's node and reserved
    for it; the third waits, saying it cannot allocate its claim."""
    async with gang_env(NODES) as env:
        await setup_devices(env, per_node=1)
        await create(env, "resourceclaimtemplates", template("one-gpu"))
        names = ["solo-0", "solo-1", "solo-2"]
        await env.api.create_pods([claimed_pod(n, None, "one-gpu") for n in names])

        async def two_bound_one_told() -> bool:
            bound = await env.api.bound()
            waiting = [n for n in names if n not in bound]
            return (
                len(bound) == 2
                and len(waiting) == 1
                and "cannot allocate all claims" in (await pod_message(env, waiting[0]))
            )

        await eventually(two_bound_one_told)
        bound = await env.api.bound()
        assert len(set(bound.values())) == 2
        made = await claims(env)
        for name, node in bound.items():
            assert devices_of(made[name]) == [(node, "gpu-0")]
            assert reserved_for(made[name]) == [name]
        (waiting,) = set(names) - set(bound)
        assert devices_of(made[waiting]) == [] and reserved_for(made[waiting]) == []


async def test_a_gang_that_needs_a_fourth_node_takes_nothing_until_it_comes() -> None:
    """4 members x 2 GPUs on 3 nodes x 2 GPUs: nothing allocated, nothing bound (no member
    holds GPUs the gang cannot use); a fourth node with 2 GPUs → all four bind, one per node."""
    async with gang_env("3:cpu=8,memory=32Gi,zones=1") as env:
        await setup_devices(env, per_node=2)
        await create(env, "resourceclaimtemplates", template("two-gpus", count=2))
        await env.api.create_podgroup(podgroup("train", 4))
        names = [f"train-{i}" for i in range(4)]
        await env.api.create_pods([claimed_pod(n, "train", "two-gpus") for n in names])

        async def told() -> bool:
            return "cannot allocate all claims" in await pod_message(env, names[0])

        await eventually(told)
        assert await env.api.bound() == {}
        made = await claims(env)
        assert len(made) == 4 and all(devices_of(c) == [] for c in made.values())
        gang = find_gang(env.scheduler, "default", "train")
        assert gang is not None
        answer = explain(env.scheduler, gang)  # 6 GPUs in all: not even the empty cluster
        assert answer["state"] == "never", answer
        assert "cannot allocate all claims" in str(answer), answer

        (added,) = env.cluster.add_nodes("1:cpu=8,memory=32Gi,zones=1,prefix=late")
        await create(
            env,
            "resourceslices",
            node_slice(added, [gpu("gpu-0", index=0), gpu("gpu-1", index=1)]),
            ns=None,
        )
        bound = await wait_bound(env, names)
        assert len(set(bound.values())) == 4
        made = await claims(env)
        for name, node in bound.items():
            assert sorted(devices_of(made[name])) == [(node, "gpu-0"), (node, "gpu-1")]
            assert reserved_for(made[name]) == [name]


async def test_a_claim_shared_by_a_gang_is_allocated_once_and_reserved_for_all() -> None:
    async with gang_env(NODES) as env:
        await setup_devices(env, per_node=1)
        await create(env, "resourceclaims", one_gpu_claim("shared-gpu"))
        await env.api.create_podgroup(podgroup("team", 4))
        names = [f"team-{i}" for i in range(4)]
        pods = []
        for name in names:
            pod = gang_pod(
                name, "team", resourceClaims=[{"name": "gpu", "resourceClaimName": "shared-gpu"}]
            )
            pods.append(pod)
        await env.api.create_pods(pods)
        bound = await wait_bound(env, names)
        assert len(set(bound.values())) == 1  # the one device is on one node
        claim = (await claims(env))["shared-gpu"]
        assert devices_of(claim) == [(next(iter(bound.values())), "gpu-0")]
        assert sorted(reserved_for(claim)) == names


async def test_a_conflict_on_one_members_claim_rolls_back_the_others_and_binds_nothing() -> None:
    """Committing member 3's claim is answered 409: the claims of members 1-2, already written,
    are rolled back (reservation, allocation, finalizer), no member is bound; once the conflict
    stops the gang binds whole."""
    async with gang_env(NODES) as env:
        env.cluster.audit.record_requests = True
        await setup_devices(env, per_node=2)
        await create(env, "resourceclaimtemplates", template("one-gpu"))
        await env.api.create_podgroup(podgroup("trio", 3))
        names = ["trio-0", "trio-1", "trio-2"]
        gated = [claimed_pod(n, "trio", "one-gpu") for n in names]
        for pod in gated:
            pod["spec"]["schedulingGates"] = [{"name": "test/hold"}]
        await env.api.create_pods(gated)

        async def three_claims() -> bool:
            return len(await claims(env)) == 3

        await eventually(three_claims)
        made = await claims(env)
        base = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
        paths = {n: f"{base}/{made[n]['metadata']['name']}/status" for n in names}
        faults = env.cluster.faults
        faults.conflicts[("PUT", paths["trio-2"])] = 1_000
        for name in names:
            await env.api.core.patch_namespaced_pod(
                name, "default", {"spec": {"schedulingGates": None}}
            )

        async def failed_twice() -> bool:
            told = [
                e
                for e in await env.api.events()
                if e["reason"] == "FailedBinding" and "resource claims failed" in e["message"]
            ]
            return faults.counts.conflicts >= 2 and len(told) >= 2

        await eventually(failed_twice)
        assert await env.api.bound() == {}
        faults.conflicts.clear()
        bound = await wait_bound(env, names)
        made = await claims(env)
        for name, node in bound.items():
            assert len(devices_of(made[name])) == 1 and devices_of(made[name])[0][0] == node
            assert reserved_for(made[name]) == [name]
        # member 1's claim was written, then undone, before the gang was committed again
        writes = [
            r for r in env.cluster.audit.requests if r.method == "PUT" and r.path == paths["trio-0"]
        ]
        assert len(writes) >= 3, [r.status for r in writes]


async def test_mig_partitions_of_one_gpu_are_matched_by_parent() -> None:
    """A claim for two MIG slices that must share a parent GPU (matchAttribute parentUUID): both
    come from one GPU, on the node that has two free slices of one parent."""
    async with gang_env(NODES) as env:
        nodes = await node_names(env)
        await create(env, "deviceclasses", device_class(), ns=None)
        await create(
            env,
            "resourceslices",
            node_slice(
                nodes[0], [gpu("mig-a", parentUUID="GPU-A"), gpu("mig-b", parentUUID="GPU-B")]
            ),
            ns=None,
        )
        await create(
            env,
            "resourceslices",
            node_slice(
                nodes[1], [gpu("mig-c", parentUUID="GPU-C"), gpu("mig-d", parentUUID="GPU-C")]
            ),
            ns=None,
        )
        mig = template("two-migs", count=2)
        mig["spec"]["spec"]["devices"]["constraints"] = [
            {"requests": ["gpu"], "matchAttribute": f"{DRIVER}/parentUUID"}
        ]
        await create(env, "resourceclaimtemplates", mig)
        await env.api.create_pods([claimed_pod("mig-user", None, "two-migs")])
        bound = await wait_bound(env, ["mig-user"])
        assert bound["mig-user"] == nodes[1]
        assert sorted(devices_of((await claims(env))["mig-user"])) == [
            (nodes[1], "mig-c"),
            (nodes[1], "mig-d"),
        ]


async def test_a_selector_on_a_missing_attribute_says_so_and_others_are_served() -> None:
    async with gang_env(NODES) as env:
        await setup_devices(env, per_node=1)
        await create(
            env,
            "deviceclasses",
            device_class("typo", 'device.attributes["gpu.example.com"].modle == "H100"'),
            ns=None,
        )
        wrong = template("wrong")
        wrong["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "typo"
        await create(env, "resourceclaimtemplates", wrong)
        await create(env, "resourceclaimtemplates", template("one-gpu"))
        await env.api.create_pods(
            [claimed_pod("typo-user", None, "wrong"), claimed_pod("fine", None, "one-gpu")]
        )
        await wait_bound(env, ["fine"])

        async def told() -> bool:
            message = await pod_message(env, "typo-user")
            return "modle" in message and "selector" in message

        await eventually(told)
        assert "typo-user" not in await env.api.bound()


async def test_a_missing_template_waits_with_the_reason_and_others_are_served() -> None:
    async with gang_env(NODES) as env:
        await setup_devices(env, per_node=1)
        await env.api.create_podgroup(podgroup("lost", 2))
        await env.api.create_pods(
            [claimed_pod(f"lost-{i}", "lost", "no-such-template") for i in range(2)]
        )
        await env.api.create_pods([gang_pod("plain", None)])
        await wait_bound(env, ["plain"])

        async def told() -> bool:
            return "ResourceClaim not created yet" in await pod_message(env, "lost-0")

        await eventually(told)
        assert not {"lost-0", "lost-1"} & set(await env.api.bound())


async def test_the_example_binds_on_nvidia_shaped_slices_and_takes_only_big_gpus() -> None:
    """examples/dra-gang.yaml as NVIDIA's driver would serve it: each node has two 80Gi GPUs
    and one 24Gi GPU; the 4 workers ask for at least 40Gi each and get the 80Gi ones."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    async with gang_env(NODES) as env:
        nvidia = "gpu.nvidia.com"
        for node in await node_names(env):
            devices = [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "productName": {
                            "string": "NVIDIA H100 80GB HBM3" if i < 2 else "NVIDIA L4"
                        },
                        "index": {"int": i},
                    },
                    "capacity": {"memory": {"value": "80Gi" if i < 2 else "24Gi"}},
                }
                for i in range(3)
            ]
            piece = node_slice(node, devices)
            piece["metadata"]["name"] = f"{node}-{nvidia}"
            piece["spec"]["driver"] = nvidia
            await create(env, "resourceslices", piece, ns=None)
        plurals = {
            "DeviceClass": "deviceclasses",
            "ResourceClaimTemplate": "resourceclaimtemplates",
        }
        pods = [d for d in docs if d["kind"] == "Pod"]
        for doc in docs:
            if doc["kind"] in plurals:
                scope = None if doc["kind"] == "DeviceClass" else "default"
                await create(env, plurals[doc["kind"]], doc, ns=scope)
            elif doc["kind"] == "PodGroup":
                await env.api.create_podgroup(doc)
        await env.api.create_pods(pods)
        bound = await wait_bound(env, [p["metadata"]["name"] for p in pods])
        made = await claims(env)
        taken = sorted(d for name in bound for d in devices_of(made[name]))
        assert sorted(device for _, device in taken) == ["gpu-0", "gpu-0", "gpu-1", "gpu-1"]


async def test_a_higher_priority_pod_preempts_the_holder_of_the_only_gpu() -> None:
    """The one GPU is claimed by a running low-priority pod; a high-priority pod claiming a GPU
    evicts it (the device counts as freed in the preemption trial), its claim is released and
    deallocated, and the GPU goes to the preemptor."""
    async with preemption_cluster("1:cpu=8,memory=32Gi,zones=1") as (env, _):
        await setup_devices(env, per_node=1)
        await create(env, "resourceclaimtemplates", template("one-gpu"))
        await env.api.create_pods([claimed_pod("holder", None, "one-gpu", priority_class=LOW)])
        await wait_bound(env, ["holder"])
        await env.api.create_pods([claimed_pod("urgent", None, "one-gpu", priority_class=HIGH)])

        async def holder_gone() -> bool:
            names = {p["metadata"]["name"] for p in await env.api.raw_pods()}
            return "holder" not in names

        await eventually(holder_gone, within=15)
        bound = await wait_bound(env, ["urgent"], within=15)
        claim = (await claims(env))["urgent"]
        assert devices_of(claim) == [(bound["urgent"], "gpu-0")]
        assert reserved_for(claim) == ["urgent"]


async def test_an_allocation_written_before_a_restart_is_a_fact_not_redone() -> None:
    """A claim allocated and reserved for a pod (a scheduler wrote it, then died before the
    binding): the restarted scheduler binds the pod to the allocation's node and writes
    nothing to the claim."""
    async with gang_env(NODES) as env:
        env.cluster.audit.record_requests = True
        nodes = await node_names(env)
        await setup_devices(env, per_node=1)
        await create(env, "resourceclaims", one_gpu_claim("kept"))
        pod = gang_pod(
            "resumed",
            None,
            resourceClaims=[{"name": "gpu", "resourceClaimName": "kept"}],
            schedulingGates=[{"name": "test/earlier-scheduler"}],
        )
        await env.api.create_pods([pod])
        # the claim as the earlier scheduler committed it: on the second node, reserved for the pod
        uid = (await env.api.core.read_namespaced_pod("resumed", "default")).metadata.uid
        path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/kept/status"
        claim = await env.api.custom.get_namespaced_custom_object(
            *API, "default", "resourceclaims", "kept"
        )
        claim["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": nodes[1], "device": "gpu-0"}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [nodes[1]]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": "resumed", "uid": uid}],
        }
        await env.api.custom.replace_namespaced_custom_object_status(
            *API, "default", "resourceclaims", "kept", claim
        )
        await env.api.core.patch_namespaced_pod(
            "resumed", "default", {"spec": {"schedulingGates": None}}
        )
        bound = await wait_bound(env, ["resumed"])
        assert bound["resumed"] == nodes[1]
        writes = [
            r
            for r in env.cluster.audit.requests
            if r.method in ("PUT", "PATCH") and r.path.startswith(path.removesuffix("/status"))
        ]
        assert len(writes) == 1  # the test's own
