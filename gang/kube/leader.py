"""Leader election on a coordination.k8s.io/v1 Lease, as kube-scheduler does it.

Two replicas run so that one can die; only one may schedule, or both would place pods on the
same free capacity. The replicas agree through a Lease: the holder renews it every retry period;
a standby takes it over once the holder has not renewed for a lease duration; a holder that
cannot renew within its renew deadline stops scheduling at once (it may already have been
replaced). As in client-go, expiry is judged by when *this* process last saw the lease record
change, not by the timestamps in it, so clock skew between nodes cannot cause two leaders.

Guarantees, with D = lease duration, R = retry period: a standby takes over at most D + R after
the leader's last renewal; a leader that cannot renew stops within its renew deadline (< D),
so two leaders never schedule at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from gang.kube.transport import Kube, KubeError
from gang.models.settings import LeaderElection

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeadershipLost(Exception):
    """The lease could not be renewed in time; scheduling has stopped."""


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        config: LeaderElection,
        identity: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.config = config
        self.identity = identity
        self._clock = clock
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.is_leader = False
        self.transitions = 0

    # --- one attempt -----------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One round: True if we hold the lease afterwards."""
        ns, name = self.config.lease_namespace, self.config.lease_name
        now = _micro_time()
        duration = math.ceil(self.config.lease_duration_seconds)
        lease = await self.kube.get_lease(ns, name)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": duration,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                },
            }
            try:
                written = await self.kube.write_lease(ns, body, create=True)
            except KubeError as err:
                if err.status == 409:
                    return False  # someone else created it first
                raise
            self._observe(written)
            return True
        spec = lease.get("spec") or {}
        self._observe(lease)
        holder = spec.get("holderIdentity") or ""
        held_by_other = holder not in ("", self.identity)
        lease_seconds = float(spec.get("leaseDurationSeconds") or duration)
        if held_by_other and self._clock() < self._observed_at + lease_seconds:
            return False
        new_spec = dict(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = now
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new_spec.update(holderIdentity=self.identity, renewTime=now, leaseDurationSeconds=duration)
        try:
            written = await self.kube.write_lease(ns, {**lease, "spec": new_spec}, create=False)
        except KubeError as err:
            if err.status == 409:
                return False  # changed under us: look again next round
            raise
        self._observe(written)
        return True

    def _observe(self, lease: Obj) -> None:
        spec = lease.get("spec") or {}
        record = (
            spec.get("holderIdentity"),
            spec.get("renewTime"),
            spec.get("leaseDurationSeconds"),
        )
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except KubeError as err:
            log.warning("leader election: %s", err)
            return False

    # --- the loop ----------------------------------------------------------------------------

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Wait for the lease, run ``lead()`` while holding it; raise LeadershipLost when a renewal
        misses its deadline (``lead`` is cancelled first). Returns if ``lead`` returns."""
        # polling is the protocol: the lease is the only signal there is
        while not await self._attempt():  # noqa: ASYNC110
            await asyncio.sleep(self.config.retry_period_seconds)
        self.is_leader = True
        self.transitions += 1
        log.info(
            "leader election: %s acquired %s/%s",
            self.identity,
            self.config.lease_namespace,
            self.config.lease_name,
        )
        task = asyncio.create_task(lead(), name="leading")
        last_renew = self._clock()
        try:
            while not task.done():
                done, _ = await asyncio.wait({task}, timeout=self.config.retry_period_seconds)
                if done:
                    break
                if await self._attempt():
                    last_renew = self._clock()
                elif self._clock() - last_renew > self.config.renew_deadline_seconds:
                    raise LeadershipLost(
                        f"could not renew the lease within {self.config.renew_deadline_seconds:g}s"
                    )
            task.result()  # lead() ended: surface its exception, if any
        finally:
            self.is_leader = False
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def release(self) -> None:
        """Give the lease up on a clean shutdown so a standby takes over at once."""
        ns, name = self.config.lease_namespace, self.config.lease_name
        try:
            lease = await self.kube.get_lease(ns, name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            now = _micro_time()
            spec = {
                **lease["spec"],
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "renewTime": now,
                "acquireTime": now,
            }
            await self.kube.write_lease(ns, {**lease, "spec": spec}, create=False)
            log.info("leader election: released %s/%s", ns, name)
        except KubeError as err:
            log.warning("leader election: could not release the lease: %s", err)
