"""``gang bench``: the real scheduler against a cluster, measured from outside.

Three processes, so none steals another's event loop: the API simulator (``gang sim serve``, or a
real cluster given ``--kubeconfig``), the scheduler (``gang run``), and this driver. On a real
cluster the driver first creates kubelet-free Nodes for the benchmark, pins every benchmark pod to
them, and removes all it created afterwards (see ``gang.bench.cluster``). The driver
creates the workload, watches pods to timestamp every binding, samples the scheduler process's
CPU time and peak RSS, and at the end checks the invariants on what the API holds: no gang
partially bound, no node over-committed.

Figures: pods/s and gangs/s from the first to the last binding; time-to-full-gang per gang (from
when it could first be scheduled — its creation, or the scheduler's first binding when everything
was created up front — to its last member's binding) as p50/p95/p99; scheduler CPU seconds per
1,000 pods bound; scheduler peak RSS.

The process and watch plumbing (``ChildProcesses``, ``watch_pods``, ``scheduler_env``...) is
shared with the mixed-stream driver (``gang.bench.streamrun``), so both run the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import tempfile
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil

from gang.bench.ceiling import assign
from gang.bench.cluster import NODE_SELECTOR, BenchCluster, BenchClusterError
from gang.bench.invariants import free_capacity, overcommitted, parse_pods
from gang.bench.supervisor import log_tail
from gang.bench.workload import (
    NAMESPACE,
    PREEMPTOR,
    PREEMPTOR_PRIORITY,
    BenchConfig,
    GangSpec,
    plan,
    podgroup,
    pods,
    preemptor_gang,
    queue_objects,
    services,
)
from gang.models.podgroup import (
    POD_GROUP_GROUP,
    POD_GROUP_LABEL,
    POD_GROUP_PLURAL,
    POD_GROUP_VERSION,
)

Obj = dict[str, Any]


@dataclass(slots=True)
class BenchResult:
    nodes: int
    pods_total: int
    gangs_total: int
    pods_bound: int = 0
    gangs_bound: int = 0
    seconds: float = 0.0  # first to last binding
    pods_per_second: float = 0.0
    gangs_per_second: float = 0.0
    time_to_full_gang_p50: float = 0.0
    time_to_full_gang_p95: float = 0.0
    time_to_full_gang_p99: float = 0.0
    scheduler_cpu_seconds: float = 0.0  # from the scheduler's start: imports and lists too
    cpu_seconds_per_1000_pods: float = 0.0
    #: scheduler CPU from the first to the last binding per 1,000 pods: the cost of scheduling
    #: itself, without start-up and the initial list (which grow with the nodes, not the pods)
    binding_cpu_seconds_per_1000_pods: float = 0.0
    #: the same for the scheduler's post workers together (0 where it runs none)
    worker_cpu_seconds_per_1000_pods: float = 0.0
    #: seconds from the scheduler's process start to the first binding (imports, lists, the
    #: first cycles), and the scheduler's CPU seconds in that time
    first_binding_seconds: float = 0.0
    startup_cpu_seconds: float = 0.0
    #: the scheduler's own start-up marks (``gang.app.startup``): step → [wall s, CPU s]
    #: since its process began
    startup_steps: dict[str, list[float]] = field(default_factory=dict)
    #: the scheduler's writes besides bindings until the last binding (its /metrics)
    status_writes: int = 0
    events_posted: int = 0
    pod_condition_writes: int = 0
    #: group status changes not yet written at the last binding (they go behind bindings)
    status_backlog: int = 0
    #: bindings in flight the scheduler allowed itself at the end (bind_concurrency: auto)
    bind_concurrency_limit: int = 0
    scheduler_peak_rss_mb: float = 0.0
    partial_gangs: int = 0
    overcommitted_nodes: int = 0
    #: benchmark pods bound outside the benchmark's nodes (a real cluster's own nodes)
    pods_on_other_nodes: int = 0
    machine: str = ""
    #: the preemption phase (``preemptor`` > 0): decision seconds (the scheduler's own metric),
    #: seconds from the preemptor's creation to its last binding, workload pods evicted
    preemptor_members: int = 0
    preemptor_bound: int = 0
    preemption_decision_seconds: float = 0.0
    preemptor_seconds: float = 0.0
    preempted_pods: int = 0
    #: the same pods bound by a binder that knows the answer, in the same sitting
    #: (gang.bench.ceiling): its best rate, at how many bindings in flight, every segment
    ceiling_pods_per_second: float = 0.0
    #: the ceiling binder's CPU microseconds per binding (gang's own: its binding CPU per pod)
    ceiling_cpu_us_per_pod: float = 0.0
    ceiling_concurrency: int = 0
    #: the ceiling's bindings the driver's pod watch saw: it watches the ceiling's run as it
    #: watches gang's, so both pay the server the same observer (a watcher's share of a
    #: 2-core server is large: one more pod watcher cost the ceiling binder a quarter there)
    ceiling_observed: int = 0
    ceiling_segments: list[dict[str, float]] = field(default_factory=list)
    #: the simulator's API latency model ("" against a real cluster)
    api_latency: str = ""
    #: the Services around the workload (``BenchConfig.services``)
    services: str = "none"
    #: seconds since the first binding → pods bound by then (for the chart)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    full_gang_seconds: list[float] = field(default_factory=list)
    #: pods that should have been bound: all of them when a first-fit binder places every one
    #: on the benchmark's nodes; None when the workload is larger than the cluster
    pods_expected: int | None = None
    #: why fewer were bound than should have been ("" when none were missing), and the tail of
    #: the scheduler's log then
    shortfall: str = ""
    log_tail: str = ""

    @property
    def percent_of_ceiling(self) -> float | None:
        """gang's pods/s as a percentage of the ceiling (None: no ceiling measured)."""
        if self.ceiling_pods_per_second <= 0:
            return None
        return 100.0 * self.pods_per_second / self.ceiling_pods_per_second

    @property
    def ceiling_whole_run(self) -> float:
        """The ceiling binder's rate over its whole run (every segment's pods over their summed
        spans; 0: no ceiling). The ceiling itself is its best segment, the upper edge of the
        server's run-to-run noise where gang's figure is a whole run: this one sets the two
        side by side as they were measured."""
        timed = [s for s in self.ceiling_segments if s["pods"] and s["pods_per_second"] > 0]
        spans = sum(s["pods"] / s["pods_per_second"] for s in timed)
        pods = sum(s["pods"] for s in timed)
        return pods / spans if spans > 0 else 0.0

    @property
    def invariants_hold(self) -> bool:
        return (
            self.partial_gangs == 0
            and self.overcommitted_nodes == 0
            and self.pods_on_other_nodes == 0
        )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def machine() -> str:
    return f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, Python {sys.version.split()[0]}"


def _cpu_seconds(process: psutil.Process) -> float:
    """The CPU time of the process's threads: to the nanosecond from each thread's schedstat
    where Linux has it, since the user and system times are counted in clock ticks (10 ms),
    a tick or two per process at the sizes tests run; psutil's ticks elsewhere."""
    precise = _schedstat_seconds(process.pid)
    if precise is not None:
        return precise
    times = process.cpu_times()
    return float(times.user + times.system)


def _schedstat_seconds(pid: int) -> float | None:
    """The on-CPU time of ``pid``'s running threads, or None where /proc has no schedstat."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    nanoseconds = 0
    for task in tasks:
        try:
            nanoseconds += int((task / "schedstat").read_text().split()[0])
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        except (OSError, ValueError, IndexError):
            return None
    return nanoseconds / 1e9 if tasks else None


class _SchedulerExited(Exception):
    """The scheduler process ended before the run did."""


def _children_cpu_seconds(process: psutil.Process) -> float:
    """CPU of the scheduler's running children (its post workers)."""
    total = 0.0
    try:
        children = process.children()
    except psutil.Error:
        return 0.0
    for child in children:
        with contextlib.suppress(psutil.Error):
            total += _cpu_seconds(child)
    return total


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def stop_process(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM (a graceful shutdown), SIGKILL after 20 s."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()


class ChildProcesses:
    """A benchmark's child processes (``python -m gang ...``): the simulator, the scheduler.

    Their stderr goes to ``log`` (an unread pipe would block them once it fills up); with
    ``GANG_BENCH_PROFILE=DIR`` they run under cProfile, writing ``DIR/<subcommand>.prof``.
    """

    def __init__(self) -> None:
        self.procs: list[asyncio.subprocess.Process] = []
        #: where the children's stderr goes (a file opened by the caller)
        self.log: Any = asyncio.subprocess.DEVNULL

    async def spawn(
        self, *args: str, env: dict[str, str] | None = None
    ) -> asyncio.subprocess.Process:
        profiler: list[str] = []
        if os.environ.get("GANG_BENCH_PROFILE"):
            # GANG_BENCH_PROFILE=DIR: run the scheduler and the simulator under cProfile, writing
            # DIR/run.prof and DIR/sim.prof (see README, Performance)
            profiler = [
                "-m",
                "cProfile",
                "-o",
                str(Path(os.environ["GANG_BENCH_PROFILE"]) / f"{args[0]}.prof"),
            ]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *profiler,
            "-m",
            "gang",
            *args,
            env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=self.log,
        )
        self.procs.append(proc)
        return proc

    async def start_simulator(self, workdir: Path, nodes: str, *extra: str) -> str:
        """``gang sim serve`` with ``nodes`` (and ``extra`` flags); its kubeconfig's path."""
        kubeconfig = workdir / "sim.kubeconfig"
        await self.spawn(
            "sim",
            "serve",
            "--nodes",
            nodes,
            "--port",
            str(free_port()),
            "--kubeconfig",
            str(kubeconfig),
            "--history-size",
            "200000",
            *extra,
        )
        for _ in range(600):
            if kubeconfig.exists():
                return str(kubeconfig)
            await asyncio.sleep(0.05)
        raise RuntimeError("the simulator did not start")

    async def stop_all(self) -> None:
        """Stop every child, the newest first (the scheduler before its API)."""
        for proc in reversed(self.procs):
            await stop_process(proc)


def process_log_path(workdir: Path) -> Path:
    """Where the children's stderr goes: ``GANG_BENCH_LOG``, else a file in ``workdir``."""
    return Path(os.environ.get("GANG_BENCH_LOG") or workdir / "processes.log")


@contextlib.contextmanager
def cancel_on_sigterm() -> Iterator[None]:
    """SIGTERM, like Ctrl-C, cancels the current task, so a run ends through its cleanup."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    on_sigterm = threading.current_thread() is threading.main_thread()
    if on_sigterm:  # (only the main thread may handle signals)
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        yield
    finally:
        if on_sigterm:
            loop.remove_signal_handler(signal.SIGTERM)


def scheduler_env(overrides: Mapping[str, Any]) -> dict[str, str]:
    """The environment passing ``overrides`` (scheduler settings) to ``gang run``. Nothing
    else: the benchmark measures gang's defaults (its client rate limit included) against the
    ceiling of the same server."""
    return {f"GANG_SCHEDULER__{k.upper()}": str(v) for k, v in overrides.items()}


def scheduler_args(kubeconfig: str, port: int) -> list[str]:
    """``gang run``'s arguments in a benchmark: metrics on ``port``, warnings only (or the
    level in ``GANG_BENCH_LOG_LEVEL``, e.g. INFO to see each reservation made and dropped;
    the log goes where ``process_log_path`` says)."""
    level = os.environ.get("GANG_BENCH_LOG_LEVEL", "WARNING")
    return ["run", "--kubeconfig", kubeconfig, "--port", str(port), "--log-level", level]


async def pods_version(core: Any, namespace: str) -> str:
    """The resourceVersion a watch of ``namespace``'s pods starts from: now (a one-item list)."""
    listed = await (
        await core.list_namespaced_pod(namespace, limit=1, _preload_content=False)
    ).json()
    version: str = listed["metadata"]["resourceVersion"]
    return version


async def watch_pods(
    core: Any, namespace: str, rv: str, on_event: Callable[[str, Obj], None]
) -> None:
    """Watch ``namespace``'s pods from ``rv`` until cancelled, calling ``on_event(type, pod)``
    for every event (bookmarks too: their object carries only a resourceVersion)."""
    while True:
        resp = await core.list_namespaced_pod(
            namespace,
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=300,
            _preload_content=False,
        )
        try:
            async for line in resp.content:
                event = orjson.loads(line)
                obj = event["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                on_event(event["type"], obj)
        finally:
            resp.release()


class Driver:
    def __init__(self, config: BenchConfig, kubeconfig: str | None, progress: bool = True) -> None:
        self.config = config
        self.kubeconfig = kubeconfig
        self.progress = progress
        self.gangs = plan(config)
        self.bound_at: dict[str, float] = {}
        self.created_at: dict[str, float] = {}
        self.children = ChildProcesses()
        #: on a real cluster the benchmark pods may only land on the benchmark's own nodes
        self.node_selector = dict(NODE_SELECTOR) if kubeconfig else None
        self.cluster: BenchCluster | None = None
        self._scheduler_ps: psutil.Process | None = None
        #: the scheduler's CPU seconds when the first binding was seen
        self._cpu_at_first_bind: float | None = None
        self._workers_at_first_bind = 0.0
        self.scheduler_exit: int | None = None
        #: the preemption phase: its members' bindings (kept apart), and workload pods deleted
        self.preemptor_bound_at: dict[str, float] = {}
        self.deleted = 0

    def _say(self, text: str, end: str = "\n") -> None:
        if self.progress:
            print(text, end=end, file=sys.stderr, flush=True)

    # --- the run --------------------------------------------------------------------------------

    async def run(self) -> BenchResult:
        from gang.kube.client import make_api_client

        with tempfile.TemporaryDirectory(prefix="gang-bench-") as tmp:
            log_path = process_log_path(Path(tmp))
            with log_path.open("wb") as log:  # (opened once, before any work)
                self.children.log = log
                latency = (
                    ["--api-latency", self.config.api_latency]
                    if self.config.api_latency != "none"
                    else []
                )
                kubeconfig = self.kubeconfig or await self.children.start_simulator(
                    Path(tmp), self.config.nodes, *latency
                )
                client = await make_api_client(kubeconfig)
                self.cluster = BenchCluster(client, self._say)
                try:
                    with cancel_on_sigterm():
                        result = await self._run(client, kubeconfig)
                    if result.shortfall:
                        log.flush()
                        result.log_tail = log_tail(log_path, 40)
                    return result
                finally:
                    if self.kubeconfig is not None:
                        # the scheduler first, then what the run created (a simulator ends
                        # with its process; a real cluster has to be cleaned up)
                        await self.children.stop_all()
                        await self._cleanup(self.cluster)
                    await client.close()
                    await self.children.stop_all()

    async def _cleanup(self, cluster: BenchCluster) -> None:
        self._say("cleaning up")
        try:
            await cluster.cleanup()
        except BenchClusterError as err:  # reported, not raised: the result stays valid
            print(f"gang bench: warning: {err}", file=sys.stderr, flush=True)

    async def _run(self, client: Any, kubeconfig: str) -> BenchResult:
        from kubernetes_asyncio import client as k8s

        core: Any = k8s.CoreV1Api(client)
        custom: Any = k8s.CustomObjectsApi(client)
        cluster = self.cluster
        assert cluster is not None
        where = machine()
        await cluster.create_namespace(NAMESPACE)
        for queue in queue_objects(self.config):  # (the KAI Queue API: the simulator serves it)
            await custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue)
        await cluster.create_priority_classes(
            [*self.config.priorities, *([PREEMPTOR_PRIORITY] if self.config.preemptor else [])]
        )
        if self.kubeconfig is not None:
            where = f"{where}; apiserver {await cluster.server_version()}"
            # the benchmark's own nodes: the only ones its pods may use and the invariants cover
            nodes = await cluster.create_nodes(self.config.nodes)  # (and their heartbeats)
        else:
            nodes = (await (await core.list_node(_preload_content=False)).json())["items"]
        result = BenchResult(
            nodes=len(nodes),
            pods_total=self.config.pods,
            gangs_total=len(self.gangs),
            machine=where,
            api_latency="" if self.kubeconfig else self.config.api_latency,
            services=self.config.services,
        )
        loop = asyncio.get_running_loop()
        if self.config.arrival == "all":
            await self._create(self.gangs)
        rv = await pods_version(core, NAMESPACE)
        watcher = asyncio.create_task(self._watch(core, rv))
        port = free_port()
        scheduler = await self.children.spawn(
            *scheduler_args(kubeconfig, port), env=scheduler_env(self.config.scheduler)
        )
        sched_ps = self._scheduler_ps = psutil.Process(scheduler.pid)
        started = loop.time()
        creator = None
        if self.config.arrival == "stream":
            creator = asyncio.create_task(self._stream())
        cpu_start = _cpu_seconds(sched_ps)
        cpu_end: float | None = None
        workers_end: float | None = None
        try:
            await self._wait(loop, started, scheduler)
            if scheduler.returncode is not None:  # it died: what was bound is summarised below
                self.scheduler_exit = scheduler.returncode
                raise _SchedulerExited
            cpu_end = _cpu_seconds(sched_ps)
            workers_end = _children_cpu_seconds(sched_ps)
            result.status_writes = int(await _metric(port, "gang_status_writes_total"))
            result.status_backlog = int(await _metric(port, "gang_status_backlog"))
            result.events_posted = int(await _metric(port, "gang_events_posted_total"))
            result.pod_condition_writes = int(
                await _metric(port, "gang_pod_condition_writes_total")
            )
            result.bind_concurrency_limit = int(await _metric(port, "gang_bind_concurrency_limit"))
            result.startup_steps = startup_steps(await metrics_text(port))
            if self.config.preemptor:
                await self._preempt(result, port)
            result.scheduler_peak_rss_mb = _peak_rss_mb(scheduler.pid)
        except _SchedulerExited:
            pass
        finally:
            watcher.cancel()
            if creator is not None:
                creator.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await stop_process(scheduler)
        if cpu_end is None or workers_end is None:  # no CPU to read from a process that is gone
            await self._summarize(core, result, nodes)
            result.shortfall = (
                f"the scheduler exited (code {self.scheduler_exit}) after binding "
                f"{result.pods_bound} of {self.config.pods} pods"
            )
            return result
        result.scheduler_cpu_seconds = cpu_end - cpu_start
        if self._cpu_at_first_bind is not None and self.bound_at:
            result.binding_cpu_seconds_per_1000_pods = (
                (cpu_end - self._cpu_at_first_bind) / len(self.bound_at) * 1000
            )
            result.worker_cpu_seconds_per_1000_pods = (
                (workers_end - self._workers_at_first_bind) / len(self.bound_at) * 1000
            )
            result.first_binding_seconds = min(self.bound_at.values()) - started
            result.startup_cpu_seconds = self._cpu_at_first_bind - cpu_start
        await self._summarize(core, result, nodes)
        if self.config.ceiling_levels:
            await self._ceiling(core, kubeconfig, result)
        return result

    async def _ceiling(self, core: Any, kubeconfig: str, result: BenchResult) -> None:
        """The same pods again, bound by a binder that knows the answer (gang's scheduler is
        stopped by now): every pod of the run is deleted, created again, and bound — watched
        by the driver as gang's run was, so the server carries the same observer in both."""
        self._say("ceiling: the same pods, bound with no decisions")
        assert self.cluster is not None
        await self.cluster.delete_pods(NAMESPACE)
        await self._create(self.gangs, with_groups=False)
        rv = await pods_version(core, NAMESPACE)
        observed: set[str] = set()
        bound: int | None = None  # the ceiling's bindings, once its binder has reported
        all_seen = asyncio.Event()

        def on_event(kind: str, obj: Obj) -> None:
            if kind in ("ADDED", "MODIFIED") and obj["spec"].get("nodeName"):
                observed.add(obj["metadata"]["name"])
                if bound is not None and len(observed) >= bound:
                    all_seen.set()

        observer = asyncio.create_task(watch_pods(core, NAMESPACE, rv, on_event))
        try:
            await self._bind_ceiling(kubeconfig, result)
            bound = int(sum(s["pods"] for s in result.ceiling_segments))
            if len(observed) >= bound:
                all_seen.set()
            with contextlib.suppress(TimeoutError):  # the last events are on their way
                await asyncio.wait_for(all_seen.wait(), 10)
        finally:
            observer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await observer
        result.ceiling_observed = len(observed)

    async def _bind_ceiling(self, kubeconfig: str, result: BenchResult) -> None:
        """Run the answer-knowing binder (``gang.bench.ceiling``) and keep what it reports."""
        args = ["--kubeconfig", kubeconfig, "--namespace", NAMESPACE]
        args += ["--levels", ",".join(map(str, self.config.ceiling_levels))]
        for key, value in (self.node_selector or {}).items():
            args += ["--node-label", f"{key}={value}"]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gang.bench.ceiling",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=self.children.log,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            self._say(f"ceiling: the binder failed (exit {proc.returncode}); no ceiling")
            return
        body = orjson.loads(out)
        result.ceiling_pods_per_second = float(body["pods_per_second"])
        if body.get("pods"):
            result.ceiling_cpu_us_per_pod = float(body["cpu_seconds"]) / body["pods"] * 1e6
        result.ceiling_concurrency = int(body["best_concurrency"])
        result.ceiling_segments = [
            {
                "concurrency": s["concurrency"],
                "pods": s["pods"],
                "pods_per_second": s["pods_per_second"],
            }
            for s in body["segments"]
        ]

    async def _create(
        self,
        gangs: list[GangSpec],
        shape: BenchConfig | None = None,
        with_groups: bool = True,
    ) -> None:
        limit = asyncio.Semaphore(128)  # (creation is not measured; a latency model slows it)
        done = 0
        total = sum(g.size for g in gangs)

        cluster = self.cluster
        assert cluster is not None
        pod_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        group_path = (
            f"/apis/{POD_GROUP_GROUP}/{POD_GROUP_VERSION}/namespaces/{NAMESPACE}/{POD_GROUP_PLURAL}"
        )
        service_path = f"/api/v1/namespaces/{NAMESPACE}/services"

        async def one(body: Obj, path: str) -> None:
            async with limit:
                await cluster.create(path, body)

        if with_groups:  # (and the Services: both outlive the pods a ceiling run recreates)
            await asyncio.gather(
                *(one(podgroup(g), group_path) for g in gangs),
                *(one(s, service_path) for g in gangs for s in services(g, shape or self.config)),
            )
        now = asyncio.get_running_loop().time()
        for start in range(0, len(gangs), 50):
            batch = gangs[start : start + 50]
            await asyncio.gather(
                *(
                    one(p, pod_path)
                    for g in batch
                    for p in pods(g, shape or self.config, node_selector=self.node_selector)
                )
            )
            for g in batch:
                self.created_at[g.name] = (
                    now if self.config.arrival == "all" else asyncio.get_running_loop().time()
                )
            done += sum(g.size for g in batch)
            self._say(f"\rcreating pods: {done}/{total}", end="")
        self._say("")

    async def _stream(self) -> None:
        for gang in self.gangs:
            await self._create([gang])
            await asyncio.sleep(1.0 / self.config.rate)

    async def _watch(self, core: Any, rv: str) -> None:
        loop = asyncio.get_running_loop()

        def on_event(kind: str, obj: Obj) -> None:
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                return  # a BOOKMARK (every minute on a long run) names no pod
            if kind == "DELETED":
                self.deleted += 1
            elif obj["metadata"]["name"].startswith(f"{PREEMPTOR}-"):
                if obj["spec"].get("nodeName"):
                    self.preemptor_bound_at.setdefault(obj["metadata"]["name"], loop.time())
            elif kind in ("ADDED", "MODIFIED") and obj["spec"].get("nodeName"):
                if not self.bound_at and self._scheduler_ps is not None:
                    self._cpu_at_first_bind = _cpu_seconds(self._scheduler_ps)
                    self._workers_at_first_bind = _children_cpu_seconds(self._scheduler_ps)
                self.bound_at.setdefault(obj["metadata"]["name"], loop.time())

        await watch_pods(core, NAMESPACE, rv, on_event)

    async def _wait(self, loop: asyncio.AbstractEventLoop, started: float, scheduler: Any) -> None:
        total = self.config.pods
        last_count, last_change = 0, loop.time()
        while True:
            await asyncio.sleep(0.5)
            count = len(self.bound_at)
            now = loop.time()
            rate = count / max(1e-9, now - min(self.bound_at.values())) if count else 0.0
            self._say(
                f"\rbound {count}/{total} pods  {rate:7.0f} pods/s  {now - started:6.1f}s", end=""
            )
            if count != last_count:
                last_count, last_change = count, now
            if count >= total or scheduler.returncode is not None:
                break
            idle = 15.0 if count else 120.0  # nothing more fits, or nothing starts
            if now - last_change > idle or now - started > self.config.timeout_seconds:
                break
        self._say("")

    async def _preempt(self, result: BenchResult, port: int) -> None:
        """The preemption phase: a higher-priority gang arrives at the full cluster."""
        gang, shape = preemptor_gang(self.config)
        result.preemptor_members = gang.size
        loop = asyncio.get_running_loop()
        deleted_before = self.deleted
        created = loop.time()
        await self._create([gang], shape)
        while len(self.preemptor_bound_at) < gang.size:
            await asyncio.sleep(0.05)
            self._say(f"\rpreemptor: {len(self.preemptor_bound_at)}/{gang.size} bound", end="")
            if loop.time() - created > self.config.timeout_seconds:
                break
        self._say("")
        result.preemptor_bound = len(self.preemptor_bound_at)
        if self.preemptor_bound_at:
            result.preemptor_seconds = max(self.preemptor_bound_at.values()) - created
        result.preempted_pods = self.deleted - deleted_before
        result.preemption_decision_seconds = await _metric(
            port, "gang_preemption_decision_seconds_sum"
        )

    async def _summarize(self, core: Any, result: BenchResult, nodes: list[Obj]) -> None:
        raw = (await (await core.list_namespaced_pod(NAMESPACE, _preload_content=False)).json())[
            "items"
        ]
        everything = (
            await (await core.list_pod_for_all_namespaces(_preload_content=False)).json()
        )["items"]
        raw = [p for p in raw if p["metadata"]["labels"][POD_GROUP_LABEL] != PREEMPTOR]
        result.pods_bound = sum(1 for p in raw if p["spec"].get("nodeName"))
        ours = {n["metadata"]["name"] for n in nodes}
        result.pods_on_other_nodes = sum(
            1 for p in raw if p["spec"].get("nodeName") and p["spec"]["nodeName"] not in ours
        )
        per_gang: dict[str, int] = defaultdict(int)
        for p in raw:
            if p["spec"].get("nodeName"):
                per_gang[p["metadata"]["labels"][POD_GROUP_LABEL]] += 1
        sizes = {g.name: g.size for g in self.gangs}
        result.gangs_bound = sum(1 for g, n in per_gang.items() if n >= sizes.get(g, 0))
        result.partial_gangs = sum(1 for g, n in per_gang.items() if 0 < n < sizes.get(g, 0))
        result.overcommitted_nodes = _overcommitted(nodes, everything)
        if self.bound_at:
            first, last = min(self.bound_at.values()), max(self.bound_at.values())
            result.seconds = last - first
            span = max(result.seconds, 1e-9)
            result.pods_per_second = len(self.bound_at) / span
            result.gangs_per_second = result.gangs_bound / span
            members: dict[str, list[float]] = defaultdict(list)
            for name, at in self.bound_at.items():
                members[name.rsplit("-", 1)[0]].append(at)
            full = []
            for gang, times in members.items():
                if len(times) >= sizes.get(gang, 0):
                    start = max(self.created_at.get(gang, first), first)
                    full.append(max(times) - start)
            result.full_gang_seconds = full
            result.time_to_full_gang_p50 = _percentile(full, 0.50)
            result.time_to_full_gang_p95 = _percentile(full, 0.95)
            result.time_to_full_gang_p99 = _percentile(full, 0.99)
            stamps = sorted(t - first for t in self.bound_at.values())
            step = max(1, len(stamps) // 200)
            result.timeline = [(round(stamps[i], 4), i + 1) for i in range(0, len(stamps), step)]
            result.timeline.append((round(stamps[-1], 4), len(stamps)))
        if result.pods_bound:
            result.cpu_seconds_per_1000_pods = (
                result.scheduler_cpu_seconds / result.pods_bound * 1000
            )
        _, unplaced = assign(nodes, raw)
        result.pods_expected = len(raw) if unplaced == 0 else None
        if result.pods_expected is not None and result.pods_bound < result.pods_expected:
            result.shortfall = (
                f"bound {result.pods_bound} of {result.pods_expected} pods, though every one "
                "fits the benchmark's nodes" + await _why_pending(core)
            )


async def _why_pending(core: Any) -> str:
    """The scheduler's most frequent FailedScheduling messages in the benchmark's namespace."""
    events = (await (await core.list_namespaced_event(NAMESPACE, _preload_content=False)).json())[
        "items"
    ]
    said = Counter(e.get("message", "") for e in events if e.get("reason") == "FailedScheduling")
    if not said:
        return "; the scheduler gave no reason (no FailedScheduling Event)"
    return "; the scheduler says: " + " | ".join(
        f"{message} ({count}x)" for message, count in said.most_common(3)
    )


async def metrics_text(port: int) -> str:
    """The scheduler's /metrics page (Prometheus text format)."""
    import aiohttp

    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        return await resp.text()


def startup_steps(metrics: str) -> dict[str, list[float]]:
    """``gang_startup_seconds`` from a /metrics page: step → [wall s, CPU s], in step order."""
    from prometheus_client.parser import text_string_to_metric_families

    from gang.app.startup import STEPS

    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(metrics):
        if family.name == "gang_startup_seconds":
            for sample in family.samples:
                found.setdefault(sample.labels["step"], {})[sample.labels["clock"]] = sample.value
    return {
        step: [found[step].get("wall", 0.0), found[step].get("cpu", 0.0)]
        for step in STEPS
        if step in found
    }


async def _metric(port: int, name: str) -> float:
    """One sample's value from the scheduler's /metrics (0 if absent)."""
    text = await metrics_text(port)
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _overcommitted(nodes: list[Obj], all_pods: list[Obj]) -> int:
    """How many of the benchmark's ``nodes`` hold more than they have (anyone's pods)."""
    free = free_capacity(nodes, parse_pods(all_pods))
    return len(overcommitted(free, among=[node["metadata"]["name"] for node in nodes]))


def result_json(result: BenchResult) -> bytes:
    body = asdict(result)
    body["invariants_hold"] = result.invariants_hold
    body["ceiling_whole_run_pods_per_second"] = result.ceiling_whole_run
    return orjson.dumps(body, option=orjson.OPT_INDENT_2)


def run_bench(
    config: BenchConfig, kubeconfig: str | None = None, progress: bool = True
) -> BenchResult:
    return asyncio.run(Driver(config, kubeconfig, progress).run())
