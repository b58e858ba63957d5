"""``SimCluster``: the simulator as one object — store, API, HTTP server, kubeconfig, kubelet.

Tests, the demo, benchmarks and what-if runs all want the same thing: "give me a cluster with
these nodes, and a kubeconfig for it", then reach behind the API to inject faults or restart
the server while the store (the "etcd") survives. Clients get nothing but a kubeconfig and talk
HTTP, exactly as to a real cluster; nothing in the scheduler imports this package.

    async with SimCluster(nodes="100:gpu=8,zones=4") as cluster:
        async with cluster.api_client() as client:   # kubernetes_asyncio ApiClient
            ...

Like a real cluster it runs the Job and StatefulSet controllers (``gang.sim.controllers``) by
default, so ``batch/v1`` Jobs and ``apps/v1`` StatefulSets turn into pods, and a PV controller
with a dynamic provisioner (``gang.sim.volumes``), so PersistentVolumeClaims get bound, and the
disruption controller (``gang.sim.disruption``), so PodDisruptionBudgets have a current status
for the Eviction API to check, and the resource claim controller (``gang.sim.resourceclaims``),
so pods asking for devices through ResourceClaimTemplates get their claims and finished pods give
their devices back; ``controllers=False`` leaves them all inert (only the objects are
stored, and evictions of Running pods under a budget get 429: its status is never processed).
The kubelet stand-in is off by default, and so is the write latency model (``latency=``, an
``ApiLatency``: bounded apiserver workers, ``gang.sim.latency``). ``kubernetes_version`` (1.35,
1.36 or 1.37, the default) picks the release whose APIs are served: the native
``scheduling.k8s.io`` gang API and the pod field that joins a pod to it differ between them
(``gang.sim.resources``).
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from gang.sim.api import SimApi
from gang.sim.audit import Audit
from gang.sim.controllers import Controllers
from gang.sim.disruption import DisruptionController
from gang.sim.faults import Faults
from gang.sim.kubelet import Kubelet, KubeletConfig
from gang.sim.latency import ApiLatency
from gang.sim.nodespec import NodePool, node_objects, parse_pools
from gang.sim.resourceclaims import ResourceClaimController
from gang.sim.resources import DEFAULT_KUBERNETES_VERSION, Registry
from gang.sim.server import ServerConfig, SimServer
from gang.sim.snapshot import load_into
from gang.sim.store import Store
from gang.sim.volumes import VolumeController


def kubeconfig_document(
    server: str, token: str | None = None, name: str = "gang-sim"
) -> dict[str, Any]:
    user: dict[str, Any] = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": user}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
        ],
    }


class SimCluster:
    """An in-process simulated Kubernetes API served over HTTP on loopback."""

    def __init__(
        self,
        nodes: str | Sequence[NodePool] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        kubelet: KubeletConfig | bool | None = None,
        faults: Faults | None = None,
        latency: ApiLatency | None = None,
        history_size: int = 10_000,
        bookmark_interval: float = 60.0,
        token: str | None = None,
        kubeconfig_path: str | Path | None = None,
        node_controller: bool = True,
        controllers: bool = True,
        provisioning_delay: float = 0.0,
        kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
        snapshot: dict[str, Any] | None = None,
    ) -> None:
        self.store = Store(history_size=history_size)
        #: a cluster snapshot (``gang snapshot``) replayed at start, before any pool's nodes
        self.snapshot = snapshot
        #: which release's APIs are served (the native scheduling.k8s.io gang API differs)
        self.kubernetes_version = kubernetes_version
        self.api = SimApi(
            self.store,
            Registry(kubernetes_version=kubernetes_version),
            node_controller=node_controller,
        )
        self.faults = faults or Faults()
        #: binding POSTs per pod, conflicts, eviction POSTs (``audit.evictions``), and (with
        #: ``record_requests``) every API request
        self.audit = Audit()
        self.server = SimServer(
            self.api,
            ServerConfig(token=token, bookmark_interval=bookmark_interval),
            self.faults,
            self.audit,
            latency,
        )
        self.host = host
        self.port = port
        self.token = token
        self._pools = parse_pools(nodes) if isinstance(nodes, str) else list(nodes or [])
        kubelet_config = KubeletConfig() if kubelet is True else (kubelet or None)
        self.kubelet = Kubelet(self.api, kubelet_config) if kubelet_config else None
        #: the Job and StatefulSet controller stand-ins (None with ``controllers=False``)
        self.controllers = Controllers(self.api) if controllers else None
        #: the PV controller and provisioner stand-in (None with ``controllers=False``); its
        #: ``provisioning_delay`` (seconds before a provisioned volume appears) may change live
        self.volumes = VolumeController(self.api, provisioning_delay) if controllers else None
        #: the PodDisruptionBudget status controller stand-in (None with ``controllers=False``)
        self.disruption = DisruptionController(self.api) if controllers else None
        #: the resource claim controller stand-in (None with ``controllers=False`` or on a
        #: version without resource.k8s.io/v1)
        self.resource_claims = (
            ResourceClaimController(self.api)
            if controllers and self.api.rt_resource_claims is not None
            else None
        )
        self._kubeconfig_path = Path(kubeconfig_path) if kubeconfig_path else None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._runner: web.AppRunner | None = None

    # --- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> SimCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        self.api.bootstrap()
        if self.snapshot is not None:
            load_into(self.api, self.snapshot)
        if self._pools:
            self.add_nodes(self._pools)
        if self.controllers is not None:
            self.controllers.start()
        if self.volumes is not None:
            self.volumes.start()
        if self.disruption is not None:
            self.disruption.start()
        if self.resource_claims is not None:
            self.resource_claims.start()
        if self.port == 0:
            self.port = _free_port(self.host)
        await self.start_server()
        if self.kubelet is not None:
            self.kubelet.start()
        self._write_kubeconfig()

    async def close(self) -> None:
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.controllers is not None:
            self.controllers.stop()
        if self.volumes is not None:
            self.volumes.stop()
        if self.disruption is not None:
            self.disruption.stop()
        if self.resource_claims is not None:
            self.resource_claims.stop()
        await self.stop_server()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    async def start_server(self) -> None:
        """(Re)start HTTP serving on the same address; the store is untouched."""
        if self._runner is not None:
            return
        runner = web.AppRunner(self.server.make_app(), handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        await site.start()
        self._runner = runner

    async def stop_server(self) -> None:
        """Stop serving: open watches end, connections drop, requests are refused meanwhile."""
        runner, self._runner = self._runner, None
        if runner is not None:
            self.store.close_all_watches()
            await asyncio.sleep(0)
            await runner.cleanup()

    async def restart_server(self, downtime: float = 0.0) -> None:
        await self.stop_server()
        self.faults.counts.restarts += 1
        if downtime > 0:
            await asyncio.sleep(downtime)
        await self.start_server()

    # --- knobs ---------------------------------------------------------------------------

    @property
    def latency(self) -> ApiLatency | None:
        """The API server's write latency model (``gang.sim.latency``); None: writes are free."""
        return self.server.latency

    @latency.setter
    def latency(self, latency: ApiLatency | None) -> None:
        self.server.latency = latency

    def expire_history(self) -> None:
        """Compact history: every watch resumed from an older resourceVersion gets a 410."""
        self.store.expire_history()
        self.faults.counts.history_expiries += 1

    def drop_watches(self) -> int:
        """Cut every open watch stream now (clients must resume from their last version)."""
        cut = self.store.close_all_watches()
        self.faults.counts.watches_cut += cut
        return cut

    def add_nodes(self, pools: str | Sequence[NodePool]) -> list[str]:
        """Create nodes through the API's create path (admission included), without HTTP."""
        parsed = parse_pools(pools) if isinstance(pools, str) else list(pools)
        names = []
        for node in node_objects(parsed):
            created = self.api.create(self.api.rt_nodes, None, node)
            names.append(created["metadata"]["name"])
        return names

    # --- client side ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def kubeconfig_path(self) -> Path:
        assert self._kubeconfig_path is not None, "the cluster is not started"
        return self._kubeconfig_path

    def _write_kubeconfig(self) -> None:
        if self._kubeconfig_path is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="gang-sim-")
            self._kubeconfig_path = Path(self._tmpdir.name) / "kubeconfig"
        # whole or not at all: a reader polling for the file (``gang bench`` waits for it to
        # appear) must never load it half written
        partial = self._kubeconfig_path.with_name(self._kubeconfig_path.name + ".partial")
        partial.write_text(yaml.safe_dump(kubeconfig_document(self.url, self.token)))
        partial.replace(self._kubeconfig_path)

    @asynccontextmanager
    async def api_client(self) -> AsyncIterator[Any]:
        """A kubernetes_asyncio ApiClient configured from this cluster's kubeconfig."""
        from kubernetes_asyncio import config

        client = await config.new_client_from_config(config_file=str(self.kubeconfig_path))
        try:
            yield client
        finally:
            await client.close()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
