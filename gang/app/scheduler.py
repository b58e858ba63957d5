"""The running scheduler: informers, the scheduling loop, binding, reporting — supervised.

``GangScheduler.run()`` is the whole process minus the CLI: it lists and watches nodes, PodGroups
and pods, waits until all three have synced (scheduling on a partial picture would over-commit),
then pops gangs from the queue one at a time and runs the serial scheduling cycle, while binding
and reporting proceed concurrently. All long-lived tasks run in one TaskGroup: if any of them
dies, everything stops and the exception surfaces, so a supervisor (Kubernetes) restarts a
process that is whole rather than one that is half-alive. After a restart nothing is assumed:
bound members are facts read from the API, and half-bound gangs are placed first.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gang.app.cpus import post_workers
from gang.app.profiles import build_profiles
from gang.binding.adaptive import bind_limit
from gang.binding.binder import Binder
from gang.binding.evictor import Evictor
from gang.binding.queuestatus import QueueStatusWriter
from gang.binding.reporter import KubeReporter
from gang.kube.informer import Informer
from gang.kube.ratelimit import TokenBucket
from gang.kube.transport import (
    CSI_NODES,
    NAMESPACES,
    NODES,
    PDBS,
    PODS,
    PVCS,
    PVS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    Kind,
    Kube,
)
from gang.models.dra import DRA_GROUP, DRA_VERSION
from gang.models.groupapis import COSCHEDULING, GROUP_APIS, NATIVE, WORKLOAD, GroupApi
from gang.models.queueapis import QUEUE_APIS
from gang.models.settings import SchedulerConfig
from gang.models.topologyapis import TOPOLOGY_APIS
from gang.queue.gangqueue import GangQueue
from gang.scheduling.cycle import Cycle
from gang.scheduling.framework import PluginContext
from gang.scheduling.gang import Gang
from gang.scheduling.histogram import DurationHistogram
from gang.scheduling.placement import Placer
from gang.scheduling.tracker import ClusterState
from gang.state.cache import ClusterCache
from gang.state.dra import DRA_KINDS
from gang.state.topologybook import TopologyBook

log = logging.getLogger(__name__)

Key = tuple[str, str]


@dataclass(slots=True)
class Stats:
    """What the scheduler has done: read by tests, the demo and the /metrics collector."""

    attempts: dict[str, int] = field(default_factory=dict)  # scheduling cycles by outcome
    gangs_completed: int = 0
    #: seconds from a gang's first waiting member to its quorum being bound
    time_to_full_gang: DurationHistogram = field(default_factory=DurationHistogram)


class GangScheduler:
    def __init__(
        self, api_client: Any, config: SchedulerConfig | None = None, instance: str | None = None
    ) -> None:
        self.api_client = api_client
        self.config = config or SchedulerConfig()
        self.instance = instance or socket.gethostname()
        self.ready = asyncio.Event()
        self.stats = Stats()
        self._started = False
        #: called once, when the first binding is accepted (the start-up clock's last step)
        self.on_first_binding: Callable[[], None] | None = None

    def _build(self) -> None:
        cfg = self.config
        self.kube = Kube(
            self.api_client,
            TokenBucket(cfg.qps, cfg.burst),
            event_limiter=TokenBucket(cfg.event_qps, cfg.event_burst),
            post_workers=post_workers(cfg.post_workers),
        )
        self.cache = ClusterCache()
        self.queue = GangQueue(
            backoff_initial=cfg.backoff_initial_seconds,
            backoff_max=cfg.backoff_max_seconds,
            flush_after=cfg.unschedulable_flush_seconds,
        )
        self.profiles = build_profiles(
            cfg, PluginContext(cfg, self.cache.index, self.kube, self.cache)
        )
        names = list(self.profiles)
        self.reporter = KubeReporter(
            self.kube, names[0], self.instance, fits=self.cache.fits_allocatable
        )
        self.state = ClusterState(
            names,
            self.cache,
            self.queue,
            self.reporter,
            self._disrupted,
            queue_sort=self.profiles[names[0]].queue_sort,
            topologies=TopologyBook(self.config.topologies),
        )
        self.placers = {
            name: Placer.for_profile(self.cache.index, p, cfg.topology_key)
            for name, p in self.profiles.items()
        }
        self.binder = Binder(
            self.kube,
            self.state,
            bind_limit(cfg.bind_concurrency, cfg.max_bind_concurrency),
            on_bound=self._bound,
            profiles=self.profiles,
        )
        self.reporter.yield_to = self.binder.slots.no_backlog
        self.evictor = Evictor(self.kube, self.state, names[0])
        self.queue_status = QueueStatusWriter(
            self.kube, self.state.ledger, self.reporter, pending=self.pending_by_queue
        )
        self.cycle = Cycle(
            self.state,
            self.profiles,
            self.placers,
            cfg,
            on_permitted=self.binder.bind_gang,
            on_preempt=self.evictor.preempt,
            on_nominate=self.evictor.nominate,
        )
        self.informers = [
            Informer(
                self.kube,
                kind,
                handler,
                resync_period=cfg.resync_period_seconds,
                watch_timeout=cfg.watch_timeout_seconds,
            )
            for kind, handler in (
                (NAMESPACES, self.state.namespaces),
                (PVCS, self.state.storage["claims"]),
                (PVS, self.state.storage["volumes"]),
                (STORAGE_CLASSES, self.state.storage["classes"]),
                (CSI_NODES, self.state.storage["csinodes"]),
                (SERVICES, self.state.selecting["Service"]),
                (REPLICA_SETS, self.state.selecting["ReplicaSet"]),
                (STATEFUL_SETS, self.state.selecting["StatefulSet"]),
                (REPLICATION_CONTROLLERS, self.state.selecting["ReplicationController"]),
                (PDBS, self.state.budgets),
                (NODES, self.state.nodes),
                (PODS, self.state.pods),
            )
        ]

    async def _watch_group_apis(self) -> None:
        """Discovery: watch each gang API the server serves, in the first version of it gang
        understands (``gang.models.groupapis``). Coscheduling's is always watched (gang ships
        its CRD); the 1.35 Workload only where no native PodGroup is served (from 1.36 pods
        name PodGroups, and Workloads only hold their templates)."""
        cfg = self.config
        watched: list[tuple[GroupApi, str]] = []
        for api in GROUP_APIS:
            if api.name == COSCHEDULING:
                watched.append((api, api.versions[0]))
                continue
            if api.name == WORKLOAD and any(w.name == NATIVE for w, _ in watched):
                continue
            for version in api.versions:
                if await self.kube.serves(api.group, version, api.plural):
                    watched.append((api, version))
                    break
        for api, version in watched:
            log.info("watching %s.%s %s", api.plural, api.group, version)
            name = api.plural if api.name == COSCHEDULING else f"{api.plural}.{api.group}"
            informer = Informer(
                self.kube,
                Kind(name, api.group, version, api.plural),
                self.state.groups[api.name],
                resync_period=cfg.resync_period_seconds,
                watch_timeout=cfg.watch_timeout_seconds,
            )
            self.informers.insert(len(self.informers) - 1, informer)  # before the pods'

    async def _watch_queue_apis(self) -> None:
        """Discovery: watch each queue API the server serves (Volcano and KAI Queues,
        ElasticQuotas). A gang naming a queue of an API not served waits, saying so."""
        cfg = self.config
        for api in QUEUE_APIS:
            if not await self.kube.serves(api.group, api.version, api.plural):
                continue
            log.info("watching %s.%s %s", api.plural, api.group, api.version)
            self.state.queue_tree.served.add(api.name)
            informer = Informer(
                self.kube,
                Kind(f"{api.plural}.{api.group}", api.group, api.version, api.plural),
                self.state.queue_objects[api.name],
                resync_period=cfg.resync_period_seconds,
                watch_timeout=cfg.watch_timeout_seconds,
            )
            self.informers.insert(len(self.informers) - 1, informer)  # before the pods'

    async def _watch_topology_apis(self) -> None:
        """Discovery: watch Kueue's and KAI's ``Topology`` objects and Volcano's HyperNodes
        where served (the first version gang understands). A gang asking for a level no
        topology has waits, saying so."""
        cfg = self.config
        for api in TOPOLOGY_APIS:
            for version in api.versions:
                if await self.kube.serves(api.group, version, api.plural):
                    log.info("watching %s.%s %s", api.plural, api.group, version)
                    informer = Informer(
                        self.kube,
                        Kind(f"{api.plural}.{api.group}", api.group, version, api.plural),
                        self.state.topology_objects[api.name],
                        resync_period=cfg.resync_period_seconds,
                        watch_timeout=cfg.watch_timeout_seconds,
                    )
                    self.informers.insert(len(self.informers) - 1, informer)
                    break

    async def _watch_device_apis(self) -> None:
        """Discovery: where the server serves ``resource.k8s.io/v1`` (Kubernetes 1.34+), watch
        DeviceClasses, ResourceSlices and ResourceClaims. Elsewhere a pod with
        ``spec.resourceClaims`` waits, saying the API is not served."""
        if not await self.kube.serves(DRA_GROUP, DRA_VERSION, "resourceclaims"):
            return
        log.info("watching %s %s", DRA_GROUP, DRA_VERSION)
        self.cache.devices.served = True
        for plural in DRA_KINDS:
            informer = Informer(
                self.kube,
                Kind(f"{plural}.{DRA_GROUP}", DRA_GROUP, DRA_VERSION, plural),
                self.state.devices[plural],
                resync_period=self.config.resync_period_seconds,
                watch_timeout=self.config.watch_timeout_seconds,
            )
            self.informers.insert(len(self.informers) - 1, informer)  # before the pods'

    def pending_by_queue(self) -> dict[str, int]:
        """Per queue, its gangs with members waiting for placement."""
        out: dict[str, int] = {}
        for gang in self.state.gangs.values():
            queue = gang.membership.queue
            if queue is not None and gang.any_pending():
                out[queue] = out.get(queue, 0) + 1
        return out

    async def run(self) -> None:
        """Run until cancelled (or until a task fails, which is raised)."""
        if self._started:
            raise RuntimeError("a GangScheduler runs once")
        self._started = True
        self._build()
        await self._watch_group_apis()
        await self._watch_queue_apis()
        await self._watch_topology_apis()
        await self._watch_device_apis()
        try:
            async with asyncio.TaskGroup() as tasks:
                for informer in self.informers:
                    tasks.create_task(informer.run(), name=f"informer {informer.kind.name}")
                tasks.create_task(self.reporter.run_events(), name="events")
                tasks.create_task(self.reporter.run_status(), name="podgroup status")
                tasks.create_task(self.queue_status.run(), name="queue status")
                tasks.create_task(self._schedule_loop(), name="scheduling loop")
                tasks.create_task(self.kube.start_post_workers(), name="post workers")
        finally:
            await asyncio.shield(self._settle())
            await self.kube.close()

    async def _settle(self) -> None:
        """On the way out: release what is only reserved, let binds in flight finish, and
        write what users should see."""
        for gang in list(self.state.gangs.values()):
            self.cycle.settle(gang)
        try:
            await asyncio.wait_for(self.binder.drain(), 10)
            await asyncio.wait_for(self.evictor.drain(), 5)
            await self.reporter.flush(2)
        except (
            TimeoutError,
            Exception,
        ) as err:  # shutting down: report, never raise over the cause
            log.warning("shutdown settle incomplete: %s", err)

    async def _schedule_loop(self) -> None:
        await asyncio.gather(*(i.has_synced.wait() for i in self.informers))
        log.info(
            "informers synced: %d nodes, %d pods, %d podgroups",
            len(self.cache.nodes),
            len(self.cache.pods),
            len(self.state.podgroups),
        )
        self.evictor.recover()  # preemptions a previous run marked but did not finish
        self.ready.set()
        while True:
            key = await self.queue.pop()
            gang = self.state.gangs.get(key)  # type: ignore[call-overload]
            if gang is None:
                continue
            outcome = self.cycle.schedule(gang)
            self.stats.attempts[outcome] = self.stats.attempts.get(outcome, 0) + 1
            self.queue.done(key, outcome)
            self.state.ledger.refresh(gang)  # what it still asks its queue for
            await asyncio.sleep(0)  # let informers and binds run between cycles

    # --- callbacks -----------------------------------------------------------------------

    def _disrupted(self, gang: Gang, why: str) -> None:
        self.cycle.disrupted(gang, why)

    def _bound(self, gang: Gang, key: Key, node: str) -> None:
        if self.on_first_binding is not None:
            first, self.on_first_binding = self.on_first_binding, None
            first()
        if (
            gang.waiting_since is not None
            and len(gang.binding) <= len(gang.bound_unseen) + 1  # no set built for most answers
            and gang.binding <= gang.bound_unseen | {key}  # the last one in flight
            and not gang.any_pending()
        ):
            loop = asyncio.get_running_loop()
            self.stats.time_to_full_gang.observe(loop.time() - gang.waiting_since)
            self.stats.gangs_completed += 1
            gang.waiting_since = None
        self.reporter.gang_changed(gang)
