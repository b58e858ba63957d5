"""The ``gang run`` process: settings → client → status server → (leader election →) scheduler.

It owns the process lifecycle an operator relies on:
- with leader election on, only the Lease holder schedules; a standby waits, ready;
- losing the lease stops scheduling at once and ends the process with status 1, so Kubernetes
  restarts it as a clean standby (kube-scheduler does the same);
- SIGTERM (a rolling update, a node drain) shuts down gracefully: stop taking gangs, release
  what is only reserved, let binds in flight finish, release the lease so the standby takes
  over immediately, then exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import uuid

from gang.app import gcpolicy
from gang.app.metrics import make_registry
from gang.app.scheduler import GangScheduler
from gang.app.server import StatusServer
from gang.app.startup import StartupClock
from gang.kube.client import make_api_client
from gang.kube.leader import LeaderElector, LeadershipLost
from gang.kube.transport import Kube
from gang.models.settings import Settings

log = logging.getLogger(__name__)


def identity() -> str:
    """Unique per process, readable in the Lease: ``<hostname>_<random>`` like kube-scheduler."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class Process:
    def __init__(
        self, settings: Settings, tune_gc: bool = False, startup: StartupClock | None = None
    ) -> None:
        self.settings = settings
        #: the process is ``gang run`` itself (not a test embedding it): the collector runs
        #: rarely, and the listed cache is frozen out of it once synced (gang.app.gcpolicy)
        self.tune_gc = tune_gc
        self.identity = identity()
        self.scheduler: GangScheduler | None = None
        self.elector: LeaderElector | None = None
        self.server: StatusServer | None = None
        self.stopping = asyncio.Event()
        #: where start-up went (``gang.app.startup``); ``gang run`` passes one with its imports
        self.startup = startup or StartupClock.of_this_process()

    def _is_leader(self) -> bool:
        if self.elector is None:
            return self.scheduler is not None
        return self.elector.is_leader

    def readiness(self) -> tuple[bool, str]:
        if self.stopping.is_set():
            return False, "shutting down"
        if self.elector is not None and not self.elector.is_leader:
            return True, "standby: waiting for the lease"
        if self.scheduler is None or not self.scheduler.ready.is_set():
            return False, "informers not synced yet"
        return True, "ok"

    async def _when_synced(self, scheduler: GangScheduler) -> None:
        await scheduler.ready.wait()
        self.startup.mark("lists")
        if self.tune_gc:
            gcpolicy.freeze_listed()

    def _first_binding(self) -> None:
        if "first_binding" not in self.startup.marks:  # (a later leadership term's: not again)
            self.startup.mark("first_binding")
            log.info("start-up: %s", self.startup.summary())

    async def run(self) -> int:
        settings = self.settings
        api_client = await make_api_client(settings.kubeconfig)
        self.startup.mark("api_client")
        if settings.server.enabled:
            registry = make_registry(lambda: self.scheduler, self._is_leader, self.startup)
            self.server = StatusServer(registry, lambda: self.scheduler, self.readiness)
            await self.server.start(settings.server.host, settings.server.port)
            log.info("serving /healthz /readyz /metrics /debug/gangs on port %d", self.server.port)

        async def lead() -> None:
            self.startup.mark("leading")
            scheduler = GangScheduler(api_client, settings.scheduler, instance=self.identity)
            scheduler.on_first_binding = self._first_binding
            self.scheduler = scheduler
            synced = asyncio.create_task(self._when_synced(scheduler))
            try:
                await scheduler.run()
            finally:
                synced.cancel()

        if self.tune_gc:
            gcpolicy.collect_rarely()

        if settings.leader_election.enabled:
            self.elector = LeaderElector(Kube(api_client), settings.leader_election, self.identity)
            work = asyncio.create_task(self.elector.run(lead), name="leader election")
        else:
            work = asyncio.create_task(lead(), name="scheduler")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)
        stop = asyncio.create_task(self.stopping.wait())
        code = 0
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
            if stop.done():
                log.info(
                    "shutting down: finishing binds in flight, releasing reservations and the lease"
                )
                work.cancel()
            try:
                await work
            except asyncio.CancelledError:
                pass
            except LeadershipLost as err:
                log.error("leader election lost: %s; exiting so a restart rejoins as standby", err)
                code = 1
            except Exception:
                log.exception("scheduler stopped on an error")
                code = 1
            if self.elector is not None and stop.done():
                await self.elector.release()
        finally:
            stop.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            if self.server is not None:
                await self.server.stop()
            with contextlib.suppress(Exception):
                await api_client.close()
        return code
