"""What users see of their queues: each queue object's status, and an Event when one is unusable.

Teams read their queue with the tools of the API they use — ``kubectl get queue`` (Volcano, KAI)
or ``kubectl get elasticquota`` — so gang writes each API's own status fields, as its scheduler
would: Volcano's ``state``, gang counts and ``allocated``; KAI's ``allocated``, ``requested``,
``childQueues`` and a ``Valid`` condition; an ElasticQuota's ``used``. A queue that cannot be
used (a bad quantity, a missing parent, a cycle) gets a Warning Event saying exactly what is
wrong, once per distinct problem, and — where its API's status has conditions (KAI) — a
condition with the same message.

Status is written at most every ``period`` seconds, and only what changed: a queue's status is a
summary, not a log, and a busy cluster changes it on every binding.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gang.binding.groupstatus import rfc3339_now
from gang.kube.transport import Kind, Kube, KubeError
from gang.models.quantity import units_text
from gang.models.queueapis import (
    DEFAULT_QUEUE,
    KAI_QUEUE,
    QUEUE_API_BY_NAME,
    VOLCANO_QUEUE,
    QueueSpec,
)
from gang.queue.tree import display_name
from gang.scheduling.queues import QueueLedger, QueueView

log = logging.getLogger(__name__)
#: the condition on a KAI queue saying whether gang can use it
VALID_CONDITION = "Valid"
STATUS_PERIOD_SECONDS = 1.0


class QueueEvents(Protocol):
    def queue_event(self, queue: QueueSpec, kind: str, reason: str, message: str) -> None: ...


def quantities(amounts: Mapping[str, float]) -> dict[str, str]:
    """Amounts in the scheduler's units as quantities (``{"cpu": "1500m"}``); -1 (KAI's "all
    of it") as ``-1``; zeros left out."""
    return {r: "-1" if v == -1 else units_text(r, int(v)) for r, v in sorted(amounts.items()) if v}


def queue_status(spec: QueueSpec, view: QueueView, children: list[str]) -> dict[str, Any]:
    """The status gang writes for one queue, merged over what the object carries."""
    previous = dict(spec.status)
    if spec.api == VOLCANO_QUEUE:
        return {
            **previous,
            "state": previous.get("state") or "Open",
            "allocated": quantities(view.held),
            "pending": view.pending_gangs,
            "running": max(0, view.gangs - view.pending_gangs),
        }
    if spec.api == KAI_QUEUE:
        valid = view.problem is None
        condition = {
            "type": VALID_CONDITION,
            "status": "True" if valid else "False",
            "reason": "Valid" if valid else "InvalidQueue",
            "message": "" if valid else view.problem,
        }
        conditions = [c for c in previous.get("conditions") or [] if isinstance(c, Mapping)]
        old = next((c for c in conditions if c.get("type") == VALID_CONDITION), None)
        same = old is not None and all(old.get(k) == v for k, v in condition.items())
        condition["lastTransitionTime"] = (
            old.get("lastTransitionTime") if same and old is not None else rfc3339_now()
        )
        others = [c for c in conditions if c.get("type") != VALID_CONDITION]
        return {
            **previous,
            "allocated": quantities(view.held),
            "requested": quantities(view.demand),
            "childQueues": [display_name(c) for c in children],
            "conditions": [*others, condition],
        }
    return {**previous, "used": quantities(view.held)}


class QueueStatusWriter:
    def __init__(
        self,
        kube: Kube,
        ledger: QueueLedger,
        events: QueueEvents,
        pending: Callable[[], Mapping[str, int]] | None = None,
        period: float = STATUS_PERIOD_SECONDS,
    ) -> None:
        self.kube = kube
        self.ledger = ledger
        self.events = events
        #: queue key → gangs waiting in it (the gang queue's count), for the status counts
        self.pending = pending or (lambda: {})
        self.period = period
        self._written: dict[str, dict[str, Any]] = {}
        self._reported: dict[str, str] = {}
        self.writes = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            await self.write_all()

    async def write_all(self) -> None:
        tree = self.ledger.tree
        if not tree.in_use:
            return
        views = {v.key: v for v in self.ledger.views(self.pending())}
        for key, spec in list(tree.specs.items()):
            if key == DEFAULT_QUEUE or key not in views:
                continue
            self._report(spec, views[key])
            await self._write(spec, views[key], tree.children(key))

    def _report(self, spec: QueueSpec, view: QueueView) -> None:
        problem = view.problem or ""
        if self._reported.get(spec.key, "") == problem:
            return
        self._reported[spec.key] = problem
        if problem:
            self.events.queue_event(spec, "Warning", "InvalidQueue", problem)

    async def _write(self, spec: QueueSpec, view: QueueView, children: list[str]) -> None:
        status = queue_status(spec, view, children)
        previous = self._written.get(spec.key) or dict(spec.status)
        if _without_times(status) == _without_times(previous):
            return
        api = QUEUE_API_BY_NAME[spec.api]
        kind = Kind(api.plural, api.group, api.version, api.plural)
        try:
            await self.kube.patch_custom_status(
                kind, spec.object_namespace, spec.object_name, status, api.status_subresource
            )
            self._written[spec.key] = status
            self.writes += 1
        except KubeError as err:
            if err.status != 404:
                log.warning("%s %s status not written: %s", api.kind, spec.name, err)


def _without_times(status: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(status)
    if isinstance(out.get("conditions"), list):
        out["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in out["conditions"]
            if isinstance(c, Mapping)
        ]
    return out
