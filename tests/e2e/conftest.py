"""The ``cluster`` fixture: the examples' scenarios on the simulator, and on a real cluster.

``sim``: a ``SimCluster`` (6 nodes x 8 GPUs, 2 zones; its Job and StatefulSet controller
stand-ins turn the examples' workloads into pods) with the real ``GangScheduler`` started
in-process, over HTTP — always run.

``real``: a real cluster, when ``GANG_E2E_KUBECONFIG`` names its kubeconfig (skipped otherwise,
with the reason in the test summary). Per test it

1. creates ``manifests/crd-podgroups.yaml`` (skipped if the file does not exist), the CRDs
   of ``manifests/extra-apis/`` (Volcano's PodGroup, for the operator examples), and any
   ``manifests/*rbac*.yaml``, keeping what already exists, and waits for the CRD to be served;
2. starts ``python -m gang run --kubeconfig $GANG_E2E_KUBECONFIG --port 0`` as a subprocess
   (``GANG_E2E_RUN_ARGS``, if set, replaces ``--port 0``) — the cluster must not run another
   ``gang-scheduler`` meanwhile;
3. creates 6 kubelet-free Nodes named ``gang-e2e-<random>-0000N`` the way scheduler benchmarks
   do: the Node object, then capacity/allocatable (cpu, memory, pods, ``nvidia.com/gpu: 8``) and
   a Ready condition through ``nodes/status``; removes the admission-added ``not-ready`` taint
   and renews each node's Lease so the node lifecycle controller keeps them Ready;
4. after the test, deletes what it created: the namespaces (force-deleting their pods, which no
   kubelet will confirm), the Nodes and their Leases, and the CRD/RBAC objects it created.

A test that needs what only newer Kubernetes has says so with
``@pytest.mark.needs_kubernetes("1.27", "StatefulSet spec.ordinals")``: on a real cluster whose
``/version`` (read once per session) is older it is skipped before anything is created, the
reason naming both versions. The simulator serves every API and always runs it.

The examples' pods are pinned to the test Nodes (see ``scenarios``), so nothing runs on a real
node. Pods bound to kubelet-free Nodes stay Pending, so PodGroups there reach phase Scheduled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import sys
import tempfile
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from gang.sim.cluster import SimCluster
from gang.sim.nodespec import node_objects, parse_pools
from tests.e2e.scenarios import (
    NAME_PREFIX,
    ROOT,
    Kube,
    Target,
    load_documents,
    node_pool,
    random_suffix,
)
from tests.scheduler.conftest import running_scheduler

E2E_ENV = "GANG_E2E_KUBECONFIG"
RUN_ARGS_ENV = "GANG_E2E_RUN_ARGS"
DEFAULT_RUN_ARGS = "--port 0"  # health/metrics on any free port, not the default 8080
MANIFESTS = ROOT / "manifests"
CRD_FILE = MANIFESTS / "crd-podgroups.yaml"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_RENEW_SECONDS = 10.0
MERGE_PATCH = "application/merge-patch+json"


NEEDS_KUBERNETES = "needs_kubernetes"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{NEEDS_KUBERNETES}(version, what): on a real cluster older than Kubernetes `version` "
        "(e.g. '1.27'), skip the test: the server cannot do `what`",
    )


class ServerVersion(NamedTuple):
    """A server's ``/version``: (major, minor) to compare, and the gitVersion to name it by."""

    major: int
    minor: int
    text: str

    @classmethod
    def parse(cls, info: dict[str, Any]) -> ServerVersion:
        """From ``/version``: gitVersion ``v1.23.0`` (or a vendor's ``v1.29.4-eks-…``), else
        major/minor, which vendors write as ``29+``."""
        text = str(info.get("gitVersion") or f"{info.get('major')}.{info.get('minor')}")
        found = re.match(r"v?(\d+)\.(\d+)", text)
        if found is None:
            found = re.match(r"(\d+)\D*\.(\d+)", f"{info.get('major')}.{info.get('minor')}")
        assert found is not None, f"unreadable server version: {info}"
        return cls(int(found[1]), int(found[2]), text)


def needed_version(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


async def _read_version(kubeconfig: str) -> dict[str, Any]:
    from kubernetes_asyncio import config

    api_client = await config.new_client_from_config(config_file=kubeconfig)
    try:
        info: dict[str, Any] = await Kube(api_client).request("GET", "/version")
        return info
    finally:
        await api_client.close()


@pytest.fixture(scope="session")
def server_version() -> ServerVersion | None:
    """The real cluster's version (discovery's ``/version``), once per session; None without
    one. Read on a thread of its own, so no test's event loop is touched."""
    kubeconfig = os.environ.get(E2E_ENV)
    if not kubeconfig:
        return None
    with ThreadPoolExecutor(1) as thread:
        info = thread.submit(asyncio.run, _read_version(kubeconfig)).result(timeout=60)
    return ServerVersion.parse(info)


def skip_if_too_old(node: pytest.Item, server: ServerVersion) -> None:
    """Skip ``node`` if it needs a Kubernetes newer than ``server`` (its needs_kubernetes
    marks), naming what it needs, the version that has it, and the server's."""
    for mark in node.iter_markers(NEEDS_KUBERNETES):
        version, what = mark.args
        if (server.major, server.minor) < needed_version(version):
            pytest.skip(
                reason=f"real-cluster e2e: {what} needs Kubernetes {version}+; "
                f"the server is {server.text}"
            )


@pytest.fixture(params=["sim", "real"])
async def cluster(
    request: pytest.FixtureRequest, server_version: ServerVersion | None
) -> AsyncIterator[Target]:
    if request.param == "sim":
        async with sim_target() as target:
            yield target
        return
    kubeconfig = os.environ.get(E2E_ENV)
    if not kubeconfig or server_version is None:
        pytest.skip(
            reason=f"real-cluster e2e: set {E2E_ENV} to the kubeconfig of a disposable cluster "
            "to run the examples there too (the tests create Nodes, namespaces and the PodGroup "
            "CRD, and run `gang run` against it)"
        )
    skip_if_too_old(request.node, server_version)  # before anything is created there
    if not CRD_FILE.exists():
        pytest.skip(reason=f"real-cluster e2e: {CRD_FILE.relative_to(ROOT)} does not exist yet")
    async with real_target(kubeconfig) as target:
        yield target


@asynccontextmanager
async def sim_target() -> AsyncIterator[Target]:
    prefix = f"{NAME_PREFIX}-{random_suffix()}"
    async with (
        SimCluster(node_pool(prefix)) as sim,
        running_scheduler(sim),
        sim.api_client() as api_client,
    ):
        kube = Kube(api_client)
        nodes = tuple(n["metadata"]["name"] for n in await kube.nodes())
        yield Target("sim", kube, nodes, patience=10.0)


# --- the real cluster ----------------------------------------------------------------------


def _now(micro: bool = False) -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def _status(err: ApiException) -> int:
    return int(getattr(err, "status", 0) or 0)


async def _ignore_missing(call: Any) -> None:
    try:
        await call
    except ApiException as err:
        if _status(err) != 404:
            raise


class RealCluster:
    """What one real-cluster test created, so that it can all be removed afterwards."""

    def __init__(self, kube: Kube, kubeconfig: str) -> None:
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.created: list[str] = []  # object paths, deleted in reverse order
        self.nodes: list[str] = []
        self.process: asyncio.subprocess.Process | None = None
        self.log = tempfile.NamedTemporaryFile(prefix="gang-e2e-", suffix=".log", delete=False)  # noqa: SIM115
        self.heartbeat: asyncio.Task[None] | None = None

    async def create_or_keep(self, doc: dict[str, Any], namespace: str | None = None) -> None:
        """Create ``doc``; an existing object is kept and left alone afterwards."""
        ns = doc.get("metadata", {}).get("namespace") or namespace
        if ns:
            await self.create_or_keep(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
        path = await self.kube.collection_path(doc["apiVersion"], doc["kind"], ns)
        try:
            await self.kube.request("POST", path, doc)
        except ApiException as err:
            if _status(err) != 409:
                raise
            return
        self.created.append(f"{path}/{doc['metadata']['name']}")

    async def install(self) -> None:
        crds = load_documents(CRD_FILE)
        for extra in sorted((MANIFESTS / "extra-apis").glob("crd-*.yaml")):
            crds += load_documents(extra)  # Volcano's and the older scheduler-plugins PodGroup
        for doc in crds:
            await self.create_or_keep(doc)
        for doc in crds:
            await self.wait_served(doc)
        for rbac in sorted(MANIFESTS.glob("*rbac*.yaml")):
            for doc in load_documents(rbac):
                await self.create_or_keep(doc)

    async def wait_served(self, crd: dict[str, Any], within: float = 60.0) -> None:
        if crd.get("kind") != "CustomResourceDefinition":
            return
        name = crd["metadata"]["name"]
        versions = [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)]
        deadline = asyncio.get_running_loop().time() + within
        while True:
            try:
                got = await self.kube.request(
                    "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                )
                conditions = {
                    c["type"]: c["status"]
                    for c in (got.get("status") or {}).get("conditions") or []
                }
                if conditions.get("Established") == "True":
                    for version in versions:  # discovery, too
                        await self.kube.request("GET", f"/apis/{crd['spec']['group']}/{version}")
                    return
            except ApiException as err:
                if _status(err) != 404:
                    raise
            assert asyncio.get_running_loop().time() < deadline, f"CRD {name} never established"
            await asyncio.sleep(0.5)

    async def start_scheduler(self) -> None:
        extra = shlex.split(os.environ.get(RUN_ARGS_ENV, DEFAULT_RUN_ARGS))
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gang",
            "run",
            "--kubeconfig",
            self.kubeconfig,
            *extra,
            stdout=self.log,
            stderr=asyncio.subprocess.STDOUT,
            cwd=ROOT,
        )
        await asyncio.sleep(1.0)
        assert self.process.returncode is None, f"gang run exited:\n{self.scheduler_log()}"

    def scheduler_log(self) -> str:
        return Path(self.log.name).read_text(errors="replace")[-20_000:]

    def close_log(self) -> None:
        print(f"gang run log:\n{self.scheduler_log()}")  # pytest shows it when a test fails
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)

    async def create_nodes(self, prefix: str) -> list[str]:
        """Kubelet-free Nodes with capacity, as kube-scheduler's benchmarks create them."""
        for body in node_objects(parse_pools(node_pool(prefix))):
            status = body.pop("status")
            name = body["metadata"]["name"]
            now = _now()
            for condition in status["conditions"]:
                condition.update(lastHeartbeatTime=now, lastTransitionTime=now)
            created = await self.kube.request("POST", "/api/v1/nodes", body)
            self.nodes.append(name)
            await self.kube.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": status},
                content_type=MERGE_PATCH,
            )
            await self.renew_lease(name, created["metadata"]["uid"])
            taints = (created.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
            if kept != taints:  # what the node lifecycle controller does for a Ready node
                await self.kube.request(
                    "PATCH",
                    f"/api/v1/nodes/{name}",
                    {"spec": {"taints": kept or None}},
                    content_type=MERGE_PATCH,
                )
        return list(self.nodes)

    async def renew_lease(self, node: str, uid: str | None = None) -> None:
        """The kubelet's heartbeat: without it the nodes would turn NotReady after ~40 s."""
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
        spec = {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": _now(True)}
        if uid is not None:
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": node,
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
                    ],
                },
                "spec": spec,
            }
            try:
                await self.kube.request("POST", path, lease)
                return
            except ApiException as err:
                if _status(err) != 409:
                    raise
        await self.kube.request("PATCH", f"{path}/{node}", {"spec": spec}, content_type=MERGE_PATCH)

    async def heartbeats(self) -> None:
        while True:
            await asyncio.sleep(LEASE_RENEW_SECONDS)
            for node in self.nodes:
                with contextlib.suppress(ApiException):
                    await self.renew_lease(node)

    async def delete_namespace(self, namespace: str, within: float = 90.0) -> None:
        """Delete a test namespace; force the pods no kubelet will ever confirm dead."""
        await _ignore_missing(
            self.kube.request(
                "DELETE", f"/api/v1/namespaces/{namespace}", {"propagationPolicy": "Background"}
            )
        )
        loop = asyncio.get_running_loop()
        start = loop.time()
        while loop.time() - start < within:
            try:
                await self.kube.request("GET", f"/api/v1/namespaces/{namespace}")
            except ApiException as err:
                if _status(err) == 404:
                    return
                raise
            for pod in await self.kube.pods(namespace):
                path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}"
                if pod["metadata"].get("finalizers") and loop.time() - start > 10:
                    await _ignore_missing(
                        self.kube.request(
                            "PATCH",
                            path,
                            {"metadata": {"finalizers": None}},
                            content_type=MERGE_PATCH,
                        )
                    )
                await _ignore_missing(self.kube.request("DELETE", path, {"gracePeriodSeconds": 0}))
            await asyncio.sleep(1.0)
        print(f"gang e2e: namespace {namespace} still terminating after {within}s")

    async def teardown(self, namespaces: list[str]) -> None:
        if self.heartbeat is not None:
            self.heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.heartbeat
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        self.close_log()
        for namespace in namespaces:
            await self.delete_namespace(namespace)
        for node in self.nodes:
            await _ignore_missing(self.kube.request("DELETE", f"/api/v1/nodes/{node}"))
            await _ignore_missing(
                self.kube.request(
                    "DELETE",
                    f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{node}",
                )
            )
        for path in reversed(self.created):
            if "/namespaces/" in path and path.count("/") == 4:
                await self.delete_namespace(path.rsplit("/", 1)[1])
            else:
                await _ignore_missing(self.kube.request("DELETE", path))


@asynccontextmanager
async def real_target(kubeconfig: str) -> AsyncIterator[Target]:
    from kubernetes_asyncio import config

    api_client = await config.new_client_from_config(config_file=kubeconfig)
    kube = Kube(api_client)
    real = RealCluster(kube, kubeconfig)
    target = Target("real", kube, (), patience=60.0)
    try:
        await real.install()
        await real.start_scheduler()
        target.nodes = tuple(await real.create_nodes(f"{NAME_PREFIX}-{random_suffix()}"))
        real.heartbeat = asyncio.create_task(real.heartbeats())
        yield target
    finally:
        try:
            await real.teardown(target.namespaces)
        finally:
            await api_client.close()
