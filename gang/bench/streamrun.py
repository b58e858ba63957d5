"""``gang bench --workload mixed-stream``: the mixed-stream workload run against the real
scheduler and the simulator, watched from outside.

The same three processes as ``gang bench`` (``gang.bench.runner``, whose process helpers this
reuses): the simulator with its kubelet stand-in (so pods start, run their declared time and
finish), the scheduler, and this driver. The driver waits for the scheduler to be ready, then
creates each gang at its planned time, one after another in plan order (so creation order is
queue order), and timestamps from its pod watch every binding (the first event with a node)
and every finish (Succeeded, Failed or deleted). The run ends once no gang is left to arrive
and every big gang is bound, or at the timeout. Everything computed from those timestamps
lives in ``gang.bench.streamstats``; this module only observes.

Reservations can only be switched off by a scheduler setting (``reservations``), passed as
``GANG_SCHEDULER__RESERVATIONS`` only when it differs from the setting's default: the scheduler
refuses unknown settings, so a scheduler without the setting (which reserves nothing anyway)
is run unchanged, and the result says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic.fields import FieldInfo

from gang.bench.cluster import BenchCluster
from gang.bench.invariants import free_capacity, overcommitted, parse_pods
from gang.bench.runner import (
    ChildProcesses,
    cancel_on_sigterm,
    free_port,
    machine,
    metrics_text,
    pods_version,
    process_log_path,
    scheduler_args,
    scheduler_env,
    stop_process,
    watch_pods,
)
from gang.bench.streams import MixedStreamConfig, StreamGang, plan, pods, stream_podgroup
from gang.bench.streamstats import GangRun, PodSpan, StreamFigures, Targets, analyse
from gang.bench.workload import NAMESPACE
from gang.models.podgroup import (
    POD_GROUP_GROUP,
    POD_GROUP_LABEL,
    POD_GROUP_PLURAL,
    POD_GROUP_VERSION,
)
from gang.models.quantity import resource_units
from gang.models.settings import SchedulerConfig
from gang.state.podinfo import pod_requests

Obj = dict[str, Any]
#: the scheduler's reservation metrics (absent until the scheduler has them: reported as 0)
RESERVATIONS_GAUGE = "gang_reservations"
RESERVATION_WAIT = "gang_reservation_wait_seconds"
BACKFILLS = "gang_backfills_total"


@dataclass(slots=True)
class StreamResult:
    #: "on" or "off": what was asked for
    reservations: str
    #: how it was passed: "default", "GANG_SCHEDULER__RESERVATIONS=False", or why not
    reservations_setting: str
    nodes: int
    gpus: int
    seed: int
    duration: float
    gangs_planned: int = 0
    pods_created: int = 0
    pods_bound: int = 0
    #: seconds from the first creation to the end of observation
    seconds: float = 0.0
    #: the latest a gang was created after its planned time (a slow driver or API)
    creation_lag_max: float = 0.0
    figures: StreamFigures = field(default_factory=StreamFigures)
    #: what "bound on target" meant for this run
    targets: Targets = field(default_factory=Targets)
    #: the scheduler's metrics: the most reservations seen at once (sampled every second),
    #: backfills, and reservations whose gang placed (count) with their mean wait
    reservations_peak: float = 0.0
    backfills: float = 0.0
    reservation_waits: float = 0.0
    reservation_wait_mean: float = 0.0
    partial_gangs: int = 0
    #: nodes over-committed by unfinished pods at the end (what the API holds)
    overcommitted_nodes: int = 0
    #: set if the scheduler exited during the run
    scheduler_exit: int | None = None
    machine: str = ""

    @property
    def invariants_hold(self) -> bool:
        return (
            self.partial_gangs == 0
            and self.overcommitted_nodes == 0
            and not self.figures.overcommitted_during_run
        )

    @property
    def ok(self) -> bool:
        return self.invariants_hold and self.scheduler_exit is None


def reservations_override(
    wanted: bool, fields: Mapping[str, FieldInfo] | None = None
) -> tuple[dict[str, Any], str]:
    """The scheduler setting to pass for reservations on/off, and a note saying what it was.

    Only a value that differs from the setting's default is passed; a scheduler that does not
    know the setting (``fields``: the scheduler settings' fields) would refuse to start on it,
    and it reserves nothing anyway.
    """
    known = (SchedulerConfig.model_fields if fields is None else fields).get("reservations")
    if known is None:
        return {}, "not passed: this scheduler has no reservations setting"
    if wanted == known.default:
        return {}, "default"
    return {"reservations": wanted}, f"GANG_SCHEDULER__RESERVATIONS={wanted}"


def check_scheduler_overrides(overrides: Mapping[str, Any]) -> None:
    """Refuse settings the scheduler would refuse, before spending a run on them."""
    SchedulerConfig.model_validate(dict(overrides))


class StreamDriver:
    def __init__(self, config: MixedStreamConfig, progress: bool = True) -> None:
        self.config = config
        self.progress = progress
        self.gangs = plan(config)
        self.children = ChildProcesses()
        #: seconds since the start (``t0``): creations by gang, bindings and finishes by pod
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.lag = 0.0
        self.t0 = 0.0
        self.reservations_peak = 0.0

    def _say(self, text: str, end: str = "\n") -> None:
        if self.progress:
            print(text, end=end, file=sys.stderr, flush=True)

    def _now(self) -> float:
        return asyncio.get_running_loop().time() - self.t0

    async def run(self) -> StreamResult:
        from gang.kube.client import make_api_client

        overrides, note = reservations_override(self.config.reservations)
        settings = {**self.config.scheduler, **overrides}
        check_scheduler_overrides(settings)
        with (
            tempfile.TemporaryDirectory(prefix="gang-bench-") as tmp,
            process_log_path(Path(tmp)).open("wb") as log,  # (opened once, before any work)
        ):
            self.children.log = log
            kubeconfig = await self.children.start_simulator(
                Path(tmp),
                self.config.nodes,
                "--kubelet",
                "--kubelet-start-delay",
                str(self.config.start_delay),
            )
            client = await make_api_client(kubeconfig)
            try:
                with cancel_on_sigterm():
                    result = await self._run(client, kubeconfig, settings)
            finally:
                await client.close()
                await self.children.stop_all()
        result.reservations_setting = note
        return result

    async def _run(self, client: Any, kubeconfig: str, settings: dict[str, Any]) -> StreamResult:
        from kubernetes_asyncio import client as k8s

        core: Any = k8s.CoreV1Api(client)
        custom: Any = k8s.CustomObjectsApi(client)
        await BenchCluster(client, self._say).create_namespace(NAMESPACE)
        nodes = (await (await core.list_node(_preload_content=False)).json())["items"]
        allocatable = {
            n["metadata"]["name"]: {
                k: resource_units(k, v) for k, v in (n["status"].get("allocatable") or {}).items()
            }
            for n in nodes
        }
        result = StreamResult(
            reservations="on" if self.config.reservations else "off",
            reservations_setting="",
            nodes=len(nodes),
            gpus=sum(a.get("nvidia.com/gpu", 0) for a in allocatable.values()),
            seed=self.config.seed,
            duration=self.config.duration,
            gangs_planned=len(self.gangs),
            machine=machine(),
        )
        rv = await pods_version(core, NAMESPACE)
        watcher = asyncio.create_task(watch_pods(core, NAMESPACE, rv, self._on_event))
        port = free_port()
        scheduler = await self.children.spawn(
            *scheduler_args(kubeconfig, port), env=scheduler_env(settings)
        )
        tasks: list[asyncio.Task[None]] = [watcher]
        try:
            await self._until_ready(port, scheduler)
            self.t0 = asyncio.get_running_loop().time()
            creator = asyncio.create_task(self._create_all(core, custom))
            tasks += [creator, asyncio.create_task(self._sample_metrics(port))]
            await self._wait(creator, watcher, scheduler)
            end = self._now()
            await self._final_metrics(port, result)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            result.scheduler_exit = scheduler.returncode
            await stop_process(scheduler)
        self._say("")
        result.creation_lag_max = self.lag
        result.pods_created = sum(g.size for g in self.gangs if g.name in self.created)
        result.pods_bound = len(self.bound)
        result.seconds = end
        result.targets = Targets(self.config.target_factor, self.config.latency_allowance)
        result.figures = analyse(self.observed(), allocatable, end, result.targets)
        await self._check_invariants(core, nodes, result)
        return result

    # --- the scheduler -------------------------------------------------------------------------

    async def _until_ready(self, port: int, scheduler: asyncio.subprocess.Process) -> None:
        """Arrivals start once the scheduler has listed the cluster: its start-up is no wait."""
        import aiohttp

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        async with aiohttp.ClientSession() as session:
            while loop.time() < deadline:
                if scheduler.returncode is not None:
                    raise RuntimeError(
                        f"the scheduler exited at start-up ({scheduler.returncode}); "
                        "GANG_BENCH_LOG=FILE keeps its log"
                    )
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
                        if resp.status == 200:
                            return
                await asyncio.sleep(0.1)
        raise RuntimeError("the scheduler did not get ready within 60 s")

    async def _sample_metrics(self, port: int) -> None:
        while True:
            with contextlib.suppress(Exception):  # a missed sample is no result
                samples = metric_sums(await metrics_text(port))
                self.reservations_peak = max(
                    self.reservations_peak, samples.get(RESERVATIONS_GAUGE, 0.0)
                )
            await asyncio.sleep(1.0)

    async def _final_metrics(self, port: int, result: StreamResult) -> None:
        with contextlib.suppress(Exception):
            samples = metric_sums(await metrics_text(port))
            self.reservations_peak = max(
                self.reservations_peak, samples.get(RESERVATIONS_GAUGE, 0.0)
            )
            result.backfills = samples.get(BACKFILLS, 0.0)
            result.reservation_waits = samples.get(f"{RESERVATION_WAIT}_count", 0.0)
            if result.reservation_waits:
                result.reservation_wait_mean = (
                    samples.get(f"{RESERVATION_WAIT}_sum", 0.0) / result.reservation_waits
                )
        result.reservations_peak = self.reservations_peak

    # --- arrivals and observation ----------------------------------------------------------------

    async def _create_all(self, core: Any, custom: Any) -> None:
        for gang in self.gangs:
            delay = gang.at - self._now()
            if delay > 0:
                await asyncio.sleep(delay)
            self.lag = max(self.lag, self._now() - gang.at)
            await self._create(core, custom, gang)

    async def _create(self, core: Any, custom: Any, gang: StreamGang) -> None:
        await custom.create_namespaced_custom_object(
            POD_GROUP_GROUP,
            POD_GROUP_VERSION,
            NAMESPACE,
            POD_GROUP_PLURAL,
            stream_podgroup(gang),
            _preload_content=False,
        )
        await asyncio.gather(
            *(
                core.create_namespaced_pod(NAMESPACE, body, _preload_content=False)
                for body in pods(gang, self.config)
            )
        )
        # (the gang can be placed once its last member exists)
        self.created[gang.name] = self._now()

    def _on_event(self, kind: str, pod: Obj) -> None:
        name = pod["metadata"].get("name")
        if kind not in ("ADDED", "MODIFIED", "DELETED") or not name:
            return  # bookmarks
        node = (pod.get("spec") or {}).get("nodeName")
        if node and name not in self.bound:
            self.bound[name] = self._now()
            self.node_of[name] = node
        phase = (pod.get("status") or {}).get("phase")
        if kind == "DELETED" or phase in ("Succeeded", "Failed"):
            self.finished.setdefault(name, self._now())

    async def _wait(
        self,
        creator: asyncio.Task[None],
        watcher: asyncio.Task[None],
        scheduler: asyncio.subprocess.Process,
    ) -> None:
        big = [g for g in self.gangs if g.big]
        while True:
            await asyncio.sleep(0.25)
            if watcher.done():
                watcher.result()  # a failed watch ends the run with its error, not a timeout
                raise RuntimeError("the pod watch ended")
            now = self._now()
            whole = sum(1 for g in big if self._bound_at(g) is not None)
            running = len(self.bound) - len(self.finished)
            self._say(
                f"\r{now:6.1f}s  gangs created {len(self.created)}/{len(self.gangs)}  "
                f"big bound {whole}/{len(big)}  pods holding nodes {running:5d}",
                end="",
            )
            if scheduler.returncode is not None:
                return
            if creator.done():
                creator.result()  # a failed creation ends the run with its error
                if whole == len(big):
                    return
            if now > self.config.timeout_seconds:
                return

    def _bound_at(self, gang: StreamGang) -> float | None:
        times = [self.bound.get(f"{gang.name}-{i:03d}") for i in range(gang.size)]
        return None if any(t is None for t in times) else max(t for t in times if t is not None)

    def observed(self) -> list[GangRun]:
        """The gangs created, in creation order, with their pods' observed intervals."""
        runs: list[GangRun] = []
        for gang in self.gangs:
            if gang.name not in self.created:
                continue
            request = pod_requests(pods(gang, self.config)[0]["spec"])
            spans = tuple(
                PodSpan(self.node_of[name], request, self.bound[name], self.finished.get(name))
                for name in (f"{gang.name}-{i:03d}" for i in range(gang.size))
                if name in self.bound
            )
            runs.append(
                GangRun(
                    gang.name,
                    gang.big,
                    self.created[gang.name],
                    gang.size,
                    request,
                    self._bound_at(gang),
                    spans,
                )
            )
        return runs

    async def _check_invariants(self, core: Any, nodes: list[Obj], result: StreamResult) -> None:
        """What the API holds at the end: no gang partly bound, no node over-committed by its
        unfinished pods (anyone's)."""
        everything = (
            await (await core.list_pod_for_all_namespaces(_preload_content=False)).json()
        )["items"]
        per_gang: dict[str, int] = defaultdict(int)
        for p in everything:
            group = (p["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)
            if p["metadata"].get("namespace") == NAMESPACE and group and p["spec"].get("nodeName"):
                per_gang[group] += 1
        sizes = {g.name: g.size for g in self.gangs}
        result.partial_gangs = sum(1 for g, n in per_gang.items() if 0 < n < sizes.get(g, 0))
        free = free_capacity(nodes, parse_pods(everything))
        result.overcommitted_nodes = len(
            overcommitted(free, among=[n["metadata"]["name"] for n in nodes])
        )


def metric_sums(text: str) -> dict[str, float]:
    """Every sample in a Prometheus text page, summed over its labels, by sample name
    (``_sum``/``_count``/``_bucket`` samples under their own names)."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                continue
            sums[sample.name] += sample.value
    return dict(sums)


def result_json(results: Iterable[StreamResult]) -> bytes:
    body = []
    for result in results:
        entry = asdict(result)
        entry["invariants_hold"] = result.invariants_hold
        body.append(entry)
    return orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def run_stream(config: MixedStreamConfig, progress: bool = True) -> StreamResult:
    return asyncio.run(StreamDriver(config, progress).run())
