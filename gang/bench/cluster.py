"""What ``gang bench`` creates in the cluster it measures, and how it removes it again.

On the simulator (``gang sim serve``) the benchmark only needs its namespace and PriorityClasses:
the simulator's nodes come from ``--nodes`` and everything ends with its process. On a real
cluster (``gang bench --kubeconfig``) it creates the cluster shape itself, the way scheduler
benchmarks do — kubelet-free Node objects — and cleans up after itself:

- Nodes from ``BenchConfig.nodes`` (the simulator's pool spec), named ``gang-bench-<prefix>-NNNNN``
  so they never collide with real nodes, labelled ``gang-bench: "1"``. Each Node is created, then
  given capacity/allocatable and a Ready condition through ``nodes/status``; the
  ``node.kubernetes.io/not-ready`` taint the admission plugin adds is removed, and a Lease in
  ``kube-node-lease`` is created and renewed every 10 s while the benchmark runs (each node's at
  its own moment, spread over the 10 s as kubelets' are), so the node lifecycle controller keeps
  the nodes Ready. Their only address is a Hostname: no InternalIP that a metrics scraper could
  take for a real machine.
- Every benchmark pod gets ``nodeSelector: {gang-bench: "1"}`` (see ``workload.pods``), so no
  benchmark pod can ever land on a real node; a pod that did anyway is counted as a broken
  invariant.
- Afterwards (in a ``finally``): the ``bench`` namespace is deleted, its pods force-deleted with
  grace 0 (no kubelet will ever confirm them gone), then the PriorityClasses the run created, the
  Nodes and their Leases.

What is not the benchmark's is never touched: the namespace, PriorityClasses and Leases it creates
carry the ``gang-bench`` label too. A ``bench`` namespace without it belongs to someone else and
the run refuses to start; one with it is a leftover of an interrupted run and is deleted first,
as are leftover Nodes (label *and* name prefix). A PriorityClass that already exists without the
label is used and left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp

from gang.kube.transport import Kube, KubeError
from gang.models.podgroup import POD_GROUP_GROUP, POD_GROUP_PLURAL, POD_GROUP_VERSION
from gang.sim.nodespec import NodePool, node_objects, parse_pools

Obj = dict[str, Any]
T = TypeVar("T")

BENCH_LABEL = "gang-bench"
NODE_PREFIX = "gang-bench-"
#: the nodeSelector every benchmark pod carries on a real cluster
NODE_SELECTOR = {BENCH_LABEL: "1"}
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
LEASE_DURATION_SECONDS = 40
LEASE_RENEW_SECONDS = 10.0  # as a kubelet: a quarter of the lease duration
#: how often the heartbeat wakes to renew the next few Leases (their beats spread over a period)
HEARTBEAT_TICK = 0.1
#: a few beats that take longer than this (or a whole period, if longer) are given up till the
#: next round, so a stuck request holds back no other node's beat
STUCK_BEAT_SECONDS = 2.0
MERGE_PATCH = "application/merge-patch+json"
#: requests in flight while creating or deleting nodes
CONCURRENCY = 32
#: seconds one request may take: an API server whose etcd stalls can time a handler out and
#: never answer on the connection (seen on a 2-core control plane), and without a limit the run
#: would wait for ever
REQUEST_TIMEOUT = 60.0
#: a create that timed out or was refused for load is tried again this often (then it fails)
CREATE_TRIES = 8
#: answers after which a create is worth trying again: throttled, or the server in trouble
RETRYABLE = frozenset({429, 500, 502, 503, 504})
#: delete with no grace: no kubelet will ever confirm a benchmark pod gone
FORCE_DELETE = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
#: seconds after a namespace's deletion with no word from a namespace controller (a status
#: condition) after which the benchmark finishes the deletion itself
NO_NAMESPACE_CONTROLLER_AFTER = 10.0


class BenchClusterError(RuntimeError):
    """The cluster holds something that stops the benchmark, or a cleanup step failed."""


class ApiStatusError(BenchClusterError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status


def bench_pools(spec: str) -> list[NodePool]:
    """``spec``'s pools with the benchmark's name prefix and label."""
    return [
        pool.model_copy(
            update={
                "prefix": f"{NODE_PREFIX}{pool.prefix}",
                "labels": {**pool.labels, **NODE_SELECTOR},
            }
        )
        for pool in parse_pools(spec)
    ]


def bench_node_objects(spec: str) -> list[Obj]:
    """The Node objects (status included) a real-cluster run creates for ``spec``."""
    nodes = node_objects(bench_pools(spec))
    for node in nodes:
        name = node["metadata"]["name"]
        node["status"]["addresses"] = [{"type": "Hostname", "address": name}]
    return nodes


def _now(micro: bool = False) -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def _is_ours(obj: Obj) -> bool:
    return (obj.get("metadata", {}).get("labels") or {}).get(BENCH_LABEL) == "1"


async def _for_each(
    items: Iterable[T], fn: Callable[[T], Awaitable[None]], limit: int = CONCURRENCY
) -> None:
    """``fn`` on every item, ``limit`` at a time; the first failure cancels the rest."""
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> None:
        async with gate:
            await fn(item)

    try:
        async with asyncio.TaskGroup() as group:
            for item in items:
                group.create_task(one(item))
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None


class BenchCluster:
    """The benchmark's objects in one cluster, through a kubernetes-asyncio ApiClient."""

    def __init__(
        self,
        api_client: Any,
        say: Callable[..., None] = lambda _text, end="\n": None,
        renew_every: float = LEASE_RENEW_SECONDS,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.client = api_client
        self.request_timeout = request_timeout
        #: progress output: ``say(text, end="\n")``, as the driver's
        self.say = say
        self.renew_every = renew_every
        self.namespace: str | None = None  # set once the run owns it
        self.priority_classes: list[str] = []
        self.nodes: dict[str, str] = {}  # name -> uid
        self._heartbeat: asyncio.Task[None] | None = None
        #: gang's own transport, for the heartbeats' Lease patches (closed by ``cleanup``)
        self._kube = Kube(api_client, max_retries=0)

    # --- REST ----------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        """The decoded JSON answer; ``ApiStatusError`` on an HTTP error, ``BenchClusterError``
        when no answer came within ``request_timeout``."""
        try:  # (asyncio.timeout: Python 3.11's wait_for can lose a cancellation, see _heartbeats)
            async with asyncio.timeout(self.request_timeout):
                return await self._request(method, path, body, query, content_type)
        except TimeoutError:
            raise BenchClusterError(
                f"{method} {path}: no answer within {self.request_timeout:g}s"
            ) from None

    async def create(self, path: str, body: Obj) -> None:
        """POST ``body``, trying again after a timeout or a retryable answer; a 409 on a retry
        means an earlier try landed. Any other error fails the run: a benchmark that silently
        created fewer pods would measure something else."""
        delay = 0.5
        for attempt in range(CREATE_TRIES):
            try:
                await self.request("POST", path, body)
                return
            except ApiStatusError as err:
                if err.status == 409 and attempt > 0:
                    return
                if err.status not in RETRYABLE or attempt == CREATE_TRIES - 1:
                    raise
            except BenchClusterError:
                if attempt == CREATE_TRIES - 1:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 8.0)

    async def _request(
        self,
        method: str,
        path: str,
        body: Any,
        query: dict[str, Any] | None,
        content_type: str,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        resp = await self.client.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        try:
            if resp.status >= 400:
                raise ApiStatusError(method, path, resp.status, await resp.text())
            return await resp.json(content_type=None)
        finally:
            resp.release()

    async def _ignore_missing(self, method: str, path: str, body: Any = None) -> None:
        try:
            await self.request(method, path, body)
        except ApiStatusError as err:
            if err.status != 404:
                raise

    async def server_version(self) -> str:
        """The apiserver's ``/version`` gitVersion."""
        version = await self.request("GET", "/version")
        return str(version.get("gitVersion") or "unknown")

    # --- namespace and PriorityClasses ---------------------------------------------------------

    async def create_namespace(self, namespace: str, within: float = 300.0) -> None:
        """Create the benchmark's namespace; an earlier run's leftover is deleted first."""
        body = {"metadata": {"name": namespace, "labels": dict(NODE_SELECTOR)}}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            if loop.time() > deadline:
                raise BenchClusterError(f"namespace {namespace!r} is still terminating")
            try:
                await self.request("POST", "/api/v1/namespaces", body)
                self.namespace = namespace
                return
            except ApiStatusError as err:
                if err.status != 409:
                    raise
            try:
                current = await self.request("GET", f"/api/v1/namespaces/{namespace}")
            except ApiStatusError as err:
                if err.status == 404:
                    continue  # gone in between
                raise
            if not _is_ours(current):
                raise BenchClusterError(
                    f"namespace {namespace!r} already exists and was not created by gang bench "
                    f"(no label {BENCH_LABEL}=1); the benchmark creates and deletes it, so it "
                    "refuses to use one that is not its own"
                )
            if not current["metadata"].get("deletionTimestamp"):
                self.say(f"deleting namespace {namespace!r} left over from an earlier run")
            await self.delete_namespace(namespace, within=max(1.0, deadline - loop.time()))

    async def create_priority_classes(self, values: Iterable[int]) -> None:
        for value in sorted(set(values)):
            name = f"bench-p{value}"
            body = {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name, "labels": dict(NODE_SELECTOR)},
                "value": value,
            }
            path = "/apis/scheduling.k8s.io/v1/priorityclasses"
            try:
                await self.request("POST", path, body)
            except ApiStatusError as err:
                if err.status != 409:
                    raise
                if not _is_ours(await self.request("GET", f"{path}/{name}")):
                    continue  # someone else's: used, never deleted
            self.priority_classes.append(name)

    async def delete_namespace(self, namespace: str, within: float = 300.0) -> None:
        """Delete ``namespace`` and wait until it is gone, force-deleting its pods.

        The namespace controller (kube-controller-manager) empties a deleted namespace and then
        removes it. On a server without one (a bare apiserver, as scheduler benchmarks run)
        nothing would: when, ``NO_NAMESPACE_CONTROLLER_AFTER`` seconds on, no controller has
        said anything of the namespace (no status condition), the benchmark empties it of what
        it and the scheduler wrote there — pods, PodGroups, Events; nothing else is created in
        a namespace where no controller runs — and finalizes it itself.

        Answers worth another try (a 504 from a collection delete of 20,000 pods that outlasted
        the server's request timeout on a 2-core control plane, half done; a 429; no answer) are
        tried again each second until ``within`` has passed: the step is the same each time."""
        pods = f"/api/v1/namespaces/{namespace}/pods"
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + within
        asked = False  # the namespace's own DELETE has been answered
        while True:
            try:
                if not asked:
                    await self._ignore_missing("DELETE", pods, FORCE_DELETE)
                    await self._ignore_missing(
                        "DELETE",
                        f"/api/v1/namespaces/{namespace}",
                        {"propagationPolicy": "Background"},
                    )
                    asked = True
                try:
                    current = await self.request("GET", f"/api/v1/namespaces/{namespace}")
                except ApiStatusError as err:
                    if err.status == 404:
                        return
                    raise
                unattended = not (current.get("status") or {}).get("conditions")
                if unattended and loop.time() - started > NO_NAMESPACE_CONTROLLER_AFTER:
                    self.say(f"no namespace controller answers: finishing namespace {namespace!r}")
                    await self._finish_namespace(namespace, current)
                else:  # the namespace controller deletes pods gracefully; none has a kubelet
                    await self._ignore_missing("DELETE", pods, FORCE_DELETE)
            except (ApiStatusError, BenchClusterError, aiohttp.ClientError) as err:
                if isinstance(err, ApiStatusError) and err.status not in RETRYABLE:
                    raise
                if loop.time() > deadline:
                    raise BenchClusterError(f"namespace {namespace!r}: {err}") from err
            if loop.time() > deadline:
                raise BenchClusterError(
                    f"namespace {namespace!r} still terminating after {within:.0f} s"
                )
            await asyncio.sleep(1.0)

    async def delete_pods(self, namespace: str) -> None:
        """Force-delete every pod of ``namespace`` and wait until they are gone. A collection
        delete of thousands of pods can outlast the server's request timeout on a small control
        plane and stop half way, so it is sent again while pods remain."""
        pods = f"/api/v1/namespaces/{namespace}/pods"
        loop = asyncio.get_running_loop()
        while True:
            with contextlib.suppress(BenchClusterError, aiohttp.ClientError):  # (tried again)
                await self.request("DELETE", pods, FORCE_DELETE)
            sent = loop.time()
            while loop.time() - sent < 10:
                if not (await self.request("GET", pods, query={"limit": 1}))["items"]:
                    return
                await asyncio.sleep(0.2)

    async def _finish_namespace(self, namespace: str, current: dict[str, Any]) -> None:
        """What the namespace controller would do for the benchmark's namespace: delete its
        contents (the kinds the run writes there), then drop the ``kubernetes`` finalizer."""
        base = f"/apis/{POD_GROUP_GROUP}/{POD_GROUP_VERSION}/namespaces/{namespace}"
        for collection in (
            f"/api/v1/namespaces/{namespace}/pods",
            f"{base}/{POD_GROUP_PLURAL}",
            f"/api/v1/namespaces/{namespace}/events",
        ):
            await self._ignore_missing("DELETE", collection)
        left = (await self.request("GET", f"/api/v1/namespaces/{namespace}/pods"))["items"]
        if left:  # (force-deleted above: only a finalizer on a pod can keep one)
            return
        body = {**current, "spec": {**(current.get("spec") or {}), "finalizers": []}}
        await self._ignore_missing("PUT", f"/api/v1/namespaces/{namespace}/finalize", body)

    # --- nodes and their leases ----------------------------------------------------------------

    async def create_nodes(self, spec: str) -> list[Obj]:
        """Create the kubelet-free Nodes for ``spec``; answer them as the API now holds them."""
        await self.delete_stale_nodes()
        wanted = bench_node_objects(spec)
        # beating from the first node on: creating thousands can outlast a lease
        self.start_heartbeats()
        done = 0

        async def one(body: Obj) -> None:
            nonlocal done
            status = body.pop("status")
            name = body["metadata"]["name"]
            now = _now()
            for condition in status["conditions"]:
                condition.update(lastHeartbeatTime=now, lastTransitionTime=now)
            created = await self.request("POST", "/api/v1/nodes", body)
            self.nodes[name] = created["metadata"]["uid"]
            node = await self.request(
                "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, None, MERGE_PATCH
            )
            await self.renew_lease(name, create=True)
            taints = (node.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
            if kept != taints:  # what the node lifecycle controller does for a Ready node
                await self.request(
                    "PATCH",
                    f"/api/v1/nodes/{name}",
                    {"spec": {"taints": kept or None}},
                    None,
                    MERGE_PATCH,
                )
            done += 1
            if done % 50 == 0 or done == len(wanted):
                self.say(f"\rcreating nodes: {done}/{len(wanted)}", end="")

        await _for_each(wanted, one)
        self.say("")
        listed = await self.request(
            "GET", "/api/v1/nodes", query={"labelSelector": f"{BENCH_LABEL}=1"}
        )
        return [n for n in listed["items"] if n["metadata"]["name"] in self.nodes]

    async def delete_stale_nodes(self) -> None:
        """Nodes (and Leases) an interrupted earlier run left: the label *and* the name prefix."""
        listed = await self.request(
            "GET", "/api/v1/nodes", query={"labelSelector": f"{BENCH_LABEL}=1"}
        )
        stale = [
            n["metadata"]["name"]
            for n in listed["items"]
            if n["metadata"]["name"].startswith(NODE_PREFIX)
        ]
        if stale:
            self.say(f"deleting {len(stale)} nodes left over from an earlier run")
            await self._delete_nodes(stale)

    async def renew_lease(self, node: str, create: bool = False) -> None:
        """The kubelet's heartbeat: without it the nodes would turn NotReady after ~40 s."""
        spec = {
            "holderIdentity": node,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": _now(micro=True),
        }
        metadata = {
            "name": node,
            "labels": dict(NODE_SELECTOR),
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": self.nodes[node]}
            ],
        }
        if not create:
            try:  # the lean pool: thousands of these every period, beside the measured runs
                await self._kube.patch_lease(LEASE_NAMESPACE, node, {"spec": spec})
                return
            except KubeError as err:
                if err.status != 404:
                    raise
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }
        try:
            await self.request("POST", LEASE_PATH, lease)
        except ApiStatusError as err:
            if err.status != 409:
                raise
            # an earlier run's: take it over (its owner reference names a deleted Node)
            await self.request(
                "PATCH",
                f"{LEASE_PATH}/{node}",
                {"metadata": metadata, "spec": spec},
                None,
                MERGE_PATCH,
            )

    async def _renew(self, names: list[str]) -> None:
        async def one(node: str) -> None:
            with contextlib.suppress(Exception):  # a missed beat is retried a period later
                await self.renew_lease(node)

        await _for_each(names, one)

    async def _heartbeats(self) -> None:
        """Each node's Lease once every ``renew_every`` seconds, the nodes' beats spread evenly
        over that period, as kubelets' are (each on its own timer). Renewing every Lease at once
        put a burst of thousands of writes (2,000 nodes: 2,000 PATCHes every 10 s) into whichever
        measured window it fell in: on a 2-core server one such burst took more than a second of
        its CPU, and gang's run or the ceiling's segment that met it bound far slower. Spread
        out, both runs carry the same steady load, as a real cluster's kubelets put on it."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            names = list(self.nodes)  # nodes created meanwhile join at the next round
            if not names:
                due += min(self.renew_every, HEARTBEAT_TICK)
                await asyncio.sleep(max(0.0, due - loop.time()))
                continue
            # a few beats per wake-up: thousands of nodes need not mean thousands of sleeps
            chunk = min(len(names), math.ceil(len(names) * HEARTBEAT_TICK / self.renew_every))
            pause = self.renew_every * chunk / len(names)
            for start in range(0, len(names), chunk):
                due += pause  # on schedule; a round that fell behind catches up at once
                await asyncio.sleep(max(0.0, due - loop.time()))
                # a stuck beat holds back no other. asyncio.timeout, not wait_for: on Python
                # 3.11 a cancel that met a round finishing in the same turn was lost there (it
                # returned the round's result), and the heartbeats went on for ever
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(self.renew_every, STUCK_BEAT_SECONDS)):
                        await self._renew(names[start : start + chunk])

    def start_heartbeats(self) -> None:
        """Renew every node's Lease each ``renew_every`` seconds until ``cleanup``."""
        if self._heartbeat is None:
            self._heartbeat = asyncio.create_task(self._heartbeats())

    async def stop_heartbeats(self) -> None:
        """Cancel the heartbeats and wait until they have ended: cancelled again each second
        while they run (a cancellation lost inside them must not hold the clean-up for ever),
        and once more if this wait is itself cancelled."""
        task, self._heartbeat = self._heartbeat, None
        if task is None:
            return
        try:
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
        finally:
            task.cancel()
        if not task.cancelled():
            task.exception()  # (retrieved: a failed heartbeat is not the clean-up's error)

    async def _delete_nodes(self, names: list[str]) -> None:
        async def one(name: str) -> None:
            await self._ignore_missing("DELETE", f"/api/v1/nodes/{name}")
            await self._ignore_missing("DELETE", f"{LEASE_PATH}/{name}")

        await _for_each(names, one)

    # --- cleanup -------------------------------------------------------------------------------

    async def cleanup(self) -> None:
        """Remove everything this run created; every step is tried, failures are reported."""
        await self.stop_heartbeats()
        await self._kube.close()
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        if self.namespace is not None:
            namespace = self.namespace
            steps.append((f"namespace {namespace}", lambda: self.delete_namespace(namespace)))
        steps.append(("PriorityClasses", self._delete_priority_classes))
        steps.append(("Nodes and Leases", lambda: self._delete_nodes(list(self.nodes))))
        failed: list[str] = []
        for what, step in steps:
            try:
                await step()
            except Exception as err:  # keep going: the other steps still have to run
                failed.append(f"{what}: {err}")
        if failed:
            raise BenchClusterError(
                "cleanup incomplete ("
                + "; ".join(failed)
                + f"); what the benchmark created carries the label {BENCH_LABEL}=1"
            )

    async def _delete_priority_classes(self) -> None:
        for name in self.priority_classes:
            await self._ignore_missing(
                "DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}"
            )
