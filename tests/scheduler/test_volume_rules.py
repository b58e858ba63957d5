"""Volume rules for whole gangs, against the simulator (and its volume controller) over HTTP:
a zonal volume pins its pods, WaitForFirstConsumer claims get their node from gang, local disks
are never shared by two members, CSI attach limits count a gang's own volumes, and claims that
are missing or waiting for an Immediate binding keep their pods waiting with kube-scheduler's
words."""

from __future__ import annotations

from typing import Any

from gang.models.settings import ScoreWeights
from gang.scheduling.gang import GangKey
from tests.scheduler.conftest import Env, eventually, gang_env, gang_pod, podgroup

ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


class Storage:
    """Storage objects through kubernetes-asyncio (the scheduler test's own API client)."""

    def __init__(self, env: Env) -> None:
        from kubernetes_asyncio import client as k8s

        self.core: Any = env.api.core
        self.storage: Any = k8s.StorageV1Api(env.api.core.api_client)

    async def storage_class(self, name: str, provisioner: str, mode: str) -> None:
        await self.storage.create_storage_class(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": mode,
            }
        )

    async def claim(self, name: str, storage_class: str, size: str = "10Gi") -> None:
        await self.core.create_namespaced_persistent_volume_claim(
            "default",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name},
                "spec": {
                    "storageClassName": storage_class,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": size}},
                },
            },
        )

    async def volume(
        self, name: str, storage_class: str, key: str, value: str, size: str = "10Gi"
    ) -> None:
        await self.core.create_persistent_volume(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "storageClassName": storage_class,
                    "capacity": {"storage": size},
                    "accessModes": ["ReadWriteOnce"],
                    "local": {"path": f"/mnt/{name}"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": key, "operator": "In", "values": [value]}
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
        )

    async def csi_limit(self, node: str, driver: str, count: int) -> None:
        await self.storage.create_csi_node(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": node},
                "spec": {
                    "drivers": [{"name": driver, "nodeID": node, "allocatable": {"count": count}}]
                },
            }
        )

    async def claims(self) -> dict[str, dict[str, Any]]:
        resp = await self.core.list_namespaced_persistent_volume_claim(
            "default", _preload_content=False
        )
        return {c["metadata"]["name"]: c for c in (await resp.json())["items"]}

    async def volumes(self) -> dict[str, dict[str, Any]]:
        resp = await self.core.list_persistent_volume(_preload_content=False)
        return {v["metadata"]["name"]: v for v in (await resp.json())["items"]}


def mounting(name: str, group: str | None, claim: str, **extra: Any) -> dict[str, Any]:
    return gang_pod(
        name,
        group,
        gpu=1,
        cpu="100m",
        memory="128Mi",
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        **extra,
    )


async def bound(env: Env, names: list[str], within: float = 15) -> dict[str, str]:
    async def all_bound() -> bool:
        return set(names) <= set(await env.api.bound())

    await eventually(all_bound, within=within)
    placed = await env.api.bound()
    return {n: placed[n] for n in names}


async def two_disks_on_two_nodes(env: Env) -> Storage:
    """Local disks ``node-00001-d0/d1`` and ``node-00003-d0/d1`` of a static-only
    ``WaitForFirstConsumer`` class, and four unbound claims ``scratch-0..3`` of it."""
    storage = Storage(env)
    await storage.storage_class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer")
    for node in ("node-00001", "node-00003"):
        for disk in range(2):
            await storage.volume(f"{node}-d{disk}", "local", "kubernetes.io/hostname", node)
    for i in range(4):
        await storage.claim(f"scratch-{i}", "local")
    return storage


async def each_on_its_own_disk(env: Env, storage: Storage) -> None:
    """``mpi-0..3`` bound, two per disk node, each claim on a disk of its own pod's node."""
    placed = await bound(env, [f"mpi-{i}" for i in range(4)])
    assert sorted(placed.values()) == ["node-00001"] * 2 + ["node-00003"] * 2
    claims = await storage.claims()
    disks = [claims[f"scratch-{i}"]["spec"]["volumeName"] for i in range(4)]
    assert len(set(disks)) == 4
    for i, disk in enumerate(disks):
        assert disk.startswith(placed[f"mpi-{i}"])


async def waits_in_permit(env: Env, group: str) -> None:
    """Until gang ``group`` holds reservations and placeholders: its members so far wait in
    Permit for the rest."""
    key = GangKey("default", group)

    async def waiting() -> bool:
        found = env.scheduler.state.gangs.get(key)
        return found is not None and bool(found.reserved) and bool(found.placeholders)

    await eventually(waiting)


async def one_disk_held_in_permit(env: Env, permit_seconds: int) -> Storage:
    """One local disk, on ``node-00001``; gang ``pair`` of two (``permit_seconds`` in Permit), one
    member created, mounting claim ``first``, reserved and waiting; then a lone pod ``lone``
    mounting claim ``lone`` of the same class."""
    storage = Storage(env)
    await storage.storage_class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer")
    await storage.volume("node-00001-d0", "local", "kubernetes.io/hostname", "node-00001")
    for name in ("first", "lone"):
        await storage.claim(name, "local")
    await env.api.create_podgroup(podgroup("pair", 2, timeout=permit_seconds))
    await env.api.create_pods([mounting("pair-0", "pair", "first")])
    await waits_in_permit(env, "pair")
    await env.api.create_pods([mounting("lone", None, "lone")])
    return storage


async def told(env: Env, pod: str | set[str], words: str) -> None:
    """A FailedScheduling Event with ``words`` reached ``pod`` (or one of a set of pods)."""
    pods = {pod} if isinstance(pod, str) else pod

    async def event_says() -> bool:
        return any(
            e["reason"] == "FailedScheduling"
            and e["involvedObject"]["name"] in pods
            and words in e["message"]
            for e in await env.api.events()
        )

    await eventually(event_says)


async def zones_of(env: Env) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in await env.api.raw_nodes()}


async def test_a_zonal_volume_pins_its_pods_to_its_zone() -> None:
    async with gang_env("8:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        storage = Storage(env)
        await storage.storage_class("manual", "kubernetes.io/no-provisioner", "Immediate")
        await storage.volume("disk-z2", "manual", ZONE, "zone-2")
        await storage.claim("data", "manual")  # bound at once by the volume controller
        await env.api.create_podgroup(podgroup("train", 2, timeout=30))
        await env.api.create_pods([mounting(f"train-{i}", "train", "data") for i in range(2)])
        placed = await bound(env, ["train-0", "train-1"])
        zones = await zones_of(env)
        assert {zones[n] for n in placed.values()} == {"zone-2"}


async def test_wait_for_first_consumer_claims_get_their_node_from_gang() -> None:
    """Each member's claim gets ``selected-node`` = its member's node; the controller provisions
    a volume there and binds the claim; only then is the member bound."""
    async with gang_env("8:gpu=8,cpu=64,memory=512Gi,zones=4") as env:
        storage = Storage(env)
        await storage.storage_class("fast", "csi.example.com", "WaitForFirstConsumer")
        for i in range(4):
            await storage.claim(f"ckpt-{i}", "fast")
        await env.api.create_podgroup(podgroup("job", 4, timeout=30))
        await env.api.create_pods([mounting(f"job-{i}", "job", f"ckpt-{i}") for i in range(4)])
        placed = await bound(env, [f"job-{i}" for i in range(4)])
        claims = await storage.claims()
        volumes = await storage.volumes()
        zones = await zones_of(env)
        for i in range(4):
            claim = claims[f"ckpt-{i}"]
            assert claim["metadata"]["annotations"][SELECTED_NODE] == placed[f"job-{i}"]
            assert claim["status"]["phase"] == "Bound"
            affinity = volumes[claim["spec"]["volumeName"]]["spec"]["nodeAffinity"]["required"]
            (term,) = affinity["nodeSelectorTerms"]
            assert term["matchExpressions"][0]["values"] == [zones[placed[f"job-{i}"]]]


async def test_local_disks_are_not_shared_by_two_members() -> None:
    """Two local disks on each of two nodes, four members with their own WaitForFirstConsumer
    claims of a static-only class: every member gets its own disk, two per node."""
    async with gang_env("4:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        storage = await two_disks_on_two_nodes(env)
        await env.api.create_podgroup(podgroup("mpi", 4, timeout=30))
        await env.api.create_pods([mounting(f"mpi-{i}", "mpi", f"scratch-{i}") for i in range(4)])
        await each_on_its_own_disk(env, storage)


async def test_a_reserved_member_s_local_disk_is_not_planned_for_another() -> None:
    """The same disks and gang, packing weights (no balanced allocation), and the first member
    created alone: it is reserved with placeholders and waits in Permit, its claim not bound
    yet. The three created after it are placed in a later cycle, which counts the disk Reserve
    assumed for the first (kube-scheduler's AssumePodVolumes): two per node again. Without the
    assumption the later cycle put two more on the first member's node, which has two disks,
    and the gang was left with three members bound and one waiting in PreBind for a disk."""
    packing = ScoreWeights(balanced_allocation=0)
    async with gang_env("4:gpu=8,cpu=64,memory=512Gi,zones=1", weights=packing) as env:
        storage = await two_disks_on_two_nodes(env)
        await env.api.create_podgroup(podgroup("mpi", 4, timeout=30))
        await env.api.create_pods([mounting("mpi-0", "mpi", "scratch-0")])
        await waits_in_permit(env, "mpi")
        await env.api.create_pods([mounting(f"mpi-{i}", "mpi", f"scratch-{i}") for i in (1, 2, 3)])
        await each_on_its_own_disk(env, storage)
        assert not env.scheduler.cycle.profiles["gang-scheduler"].pre_binds[0]._assumed


async def test_a_disk_assumed_for_a_gang_in_permit_is_not_another_gang_s() -> None:
    """One local disk in the cluster. A gang of two has one member created: it is reserved on
    the disk's node and waits in Permit, the disk assumed for its claim. A lone pod wanting a
    disk of the same class then finds none (it would have taken this one, and the gang's
    member would have waited in PreBind); once the gang's second member comes, the gang binds
    with the disk."""
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        storage = await one_disk_held_in_permit(env, permit_seconds=30)
        await told(env, "lone", "didn't find available persistent volumes to bind")
        assert "lone" not in await env.api.bound()
        await env.api.create_pods([gang_pod("pair-1", "pair", gpu=1, cpu="100m", memory="128Mi")])
        placed = await bound(env, ["pair-0", "pair-1"])
        assert placed["pair-0"] == "node-00001"
        claims = await storage.claims()
        assert claims["first"]["spec"]["volumeName"] == "node-00001-d0"
        assert "lone" not in await env.api.bound()


async def test_a_gang_that_times_out_in_permit_gives_its_assumed_disk_back() -> None:
    """The same one disk, held by a gang whose second member never comes: when its Permit wait
    times out it is unreserved, the disk's assumption with it, and the lone pod binds there."""
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        storage = await one_disk_held_in_permit(env, permit_seconds=2)
        assert (await bound(env, ["lone"]))["lone"] == "node-00001"
        claims = await storage.claims()
        assert claims["lone"]["spec"]["volumeName"] == "node-00001-d0"
        assert "pair-0" not in await env.api.bound()


async def test_csi_attach_limits_count_the_gang_s_own_volumes() -> None:
    """One attachable volume per node: a gang of 4, each with its own claim, lands on 4 nodes
    (bin-packing alone would stack them); with only 3 nodes it waits, saying why."""
    async with gang_env("3:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        storage = Storage(env)
        await storage.storage_class("ebs", "ebs.csi.example.com", "WaitForFirstConsumer")
        for node in ("node-00000", "node-00001", "node-00002"):
            await storage.csi_limit(node, "ebs.csi.example.com", 1)
        for i in range(4):
            await storage.claim(f"vol-{i}", "ebs")
        await env.api.create_podgroup(podgroup("wide", 4, timeout=30))
        await env.api.create_pods([mounting(f"wide-{i}", "wide", f"vol-{i}") for i in range(4)])
        # the first member to arrive may already hold a node in the Permit wait: the others
        # are the ones told
        await told(env, {f"wide-{i}" for i in range(4)}, "node(s) exceed max volume count")
        assert not await env.api.bound()
        env.cluster.add_nodes("1:gpu=8,cpu=64,memory=512Gi,prefix=extra")
        await storage.csi_limit("extra-00000", "ebs.csi.example.com", 1)
        placed = await bound(env, [f"wide-{i}" for i in range(4)])
        assert len(set(placed.values())) == 4


async def test_a_missing_claim_waits_with_its_name_then_binds() -> None:
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        storage = Storage(env)
        await storage.storage_class("fast", "csi.example.com", "WaitForFirstConsumer")
        await env.api.create_pods([mounting("solo", None, "later")])
        await told(env, "solo", 'persistentvolumeclaim "later" not found')
        await storage.claim("later", "fast")
        await bound(env, ["solo"])


async def test_an_unbound_immediate_claim_waits_in_kube_scheduler_s_words() -> None:
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        storage = Storage(env)
        await storage.storage_class("manual", "kubernetes.io/no-provisioner", "Immediate")
        await storage.claim("nothing-yet", "manual")
        await env.api.create_pods([mounting("waits", None, "nothing-yet")])
        await told(env, "waits", "pod has unbound immediate PersistentVolumeClaims")
        await storage.volume("late-disk", "manual", "kubernetes.io/hostname", "node-00001")
        assert (await bound(env, ["waits"]))["waits"] == "node-00001"


async def test_a_read_write_once_pod_claim_serves_one_pod_at_a_time() -> None:
    """Two members of one gang mounting the same ReadWriteOncePod claim: refused (one of them
    could never start); once they are gone a lone pod mounting it binds, and a second waits."""
    async with gang_env("2:gpu=8,cpu=64,memory=512Gi,zones=1") as env:
        storage = Storage(env)
        await storage.storage_class("fast", "csi.example.com", "Immediate")
        await env.api.core.create_namespaced_persistent_volume_claim(
            "default",
            {
                "metadata": {"name": "solo"},
                "spec": {
                    "storageClassName": "fast",
                    "accessModes": ["ReadWriteOncePod"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        await env.api.create_podgroup(podgroup("pair", 2, timeout=30))
        await env.api.create_pods([mounting(f"pair-{i}", "pair", "solo") for i in range(2)])
        await told(env, {"pair-0", "pair-1"}, "ReadWriteOncePod access mode")
        assert not await env.api.bound()
        for i in range(2):  # a reserved member counts as a user too: remove the pair first
            await env.api.core.delete_namespaced_pod(f"pair-{i}", "default")
        await env.api.create_pods([mounting("first", None, "solo")])
        await bound(env, ["first"])
        await env.api.create_pods([mounting("second", None, "solo")])
        await told(env, "second", "ReadWriteOncePod access mode")
