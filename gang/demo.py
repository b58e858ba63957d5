"""``gang demo``: the product on an embedded simulated cluster, in one command, on any machine.

It starts the Kubernetes API simulator with a few GPU nodes, submits a gang (a PodGroup and its
pods) and a lone pod through kubernetes-asyncio over HTTP — exactly as a user's tooling would —
and prints what the cluster serves. The demo grows as the scheduler does.
"""

from __future__ import annotations

from typing import Any

from gang.sim.cluster import SimCluster

DEMO_NAMESPACE = "demo"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def _pod(name: str, group: str | None, gpus: int) -> dict[str, Any]:
    labels = {POD_GROUP_LABEL: group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": "gang-scheduler",
            "containers": [
                {
                    "name": "worker",
                    "image": "trainer:1.0",
                    "resources": {
                        "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus)}
                    },
                }
            ],
        },
    }


async def run_demo(nodes: str) -> int:
    from kubernetes_asyncio import client

    async with SimCluster(nodes) as cluster, cluster.api_client() as api_client:
        core: Any = client.CoreV1Api(api_client)  # accepts plain dicts as bodies
        custom = client.CustomObjectsApi(api_client)
        print(f"simulated cluster at {cluster.url}  (kubeconfig: {cluster.kubeconfig_path})")
        version = await client.VersionApi(api_client).get_code()
        print(f"server version {version.git_version}")

        await core.create_namespace({"metadata": {"name": DEMO_NAMESPACE}})
        await custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io",
            "v1alpha1",
            DEMO_NAMESPACE,
            "podgroups",
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "train"},
                "spec": {"minMember": 4, "scheduleTimeoutSeconds": 30},
            },
        )
        for i in range(4):
            await core.create_namespaced_pod(DEMO_NAMESPACE, _pod(f"train-{i}", "train", 8))
        await core.create_namespaced_pod(DEMO_NAMESPACE, _pod("notebook", None, 1))

        node_list = await core.list_node()
        print(f"\n{len(node_list.items)} nodes:")
        for node in node_list.items[:6]:
            alloc = node.status.allocatable
            zone = node.metadata.labels.get("topology.kubernetes.io/zone")
            print(
                f"  {node.metadata.name:<14} {zone:<8} cpu={alloc['cpu']:<4} "
                f"memory={alloc['memory']:<7} gpu={alloc.get('nvidia.com/gpu', '0')}"
            )
        if len(node_list.items) > 6:
            print(f"  ... and {len(node_list.items) - 6} more")

        groups = await custom.list_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", DEMO_NAMESPACE, "podgroups"
        )
        print("\npod groups:")
        for pg in groups["items"]:
            print(f"  {pg['metadata']['name']}: minMember={pg['spec']['minMember']}")
        pods = await core.list_namespaced_pod(DEMO_NAMESPACE)
        print("\npods (no scheduler is running yet, so all are Pending and unassigned):")
        for pod in pods.items:
            group = (pod.metadata.labels or {}).get(POD_GROUP_LABEL, "-")
            print(
                f"  {pod.metadata.name:<10} group={group:<6} phase={pod.status.phase:<8} "
                f"qos={pod.status.qos_class:<10} node={pod.spec.node_name or '<none>'}"
            )
        print(
            f"\nlist resourceVersion {pods.metadata.resource_version}; "
            f"try: gang sim serve, then kubectl --kubeconfig gang-sim.kubeconfig get nodes"
        )
    return 0
