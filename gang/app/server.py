"""The process's own HTTP endpoint: health, readiness, metrics, and why each gang is pending.

Read-only by design: nothing served here can change cluster state, so it needs no
authentication (Kubernetes probes and Prometheus scrape it without credentials). It answers
GET/HEAD only (any other method is 405, its body unread), never shows credentials, and never
reads more than ``MAX_REQUEST_BYTES`` of a request body: a GET needs none, so a body is read up
to that limit and ignored, and a larger one is a 413 (unread when its length is declared).

- ``/healthz``: the event loop is alive (liveness).
- ``/readyz``: 200 when this replica is doing its job — the leader once its informers have
  synced, a standby while it waits for the lease — else 503 with the reason (readiness).
- ``/metrics``: Prometheus text format.
- ``/debug/gangs``: every gang the scheduler knows and why it is not (fully) placed; JSON for
  ``?format=json`` or ``Accept: application/json``, else a small HTML page.
- ``/debug/queues``: every queue (Volcano, KAI, ElasticQuota, ``default``): quota, limit,
  fair share, what it holds and asks for, its standing and problem (``gang queues`` prints it);
- ``/debug/explain/{namespace}/{name}``: one gang explained (``gang.app.explain``): its state,
  queue position, the rule stopping it, reservation or preemption, what would unblock it; JSON,
  404 with a message for a gang the scheduler does not know.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from gang.app.explain import explain, find_gang
from gang.app.scheduler import GangScheduler
from gang.binding.queuestatus import quantities
from gang.queue.fairshare import share_text
from gang.queue.tree import display_name
from gang.scheduling.gang import Reservation

#: the largest request body accepted (and ignored): no endpoint here takes one
MAX_REQUEST_BYTES = 1024
READ_METHODS = frozenset({"GET", "HEAD"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def queue_report(scheduler: GangScheduler) -> list[dict[str, Any]]:
    """One JSON-able entry per queue (amounts as quantities), sorted by key."""
    views = scheduler.state.ledger.views(scheduler.pending_by_queue())
    return [
        {
            "queue": v.key,
            "name": v.name,
            "api": v.api,
            "parent": display_name(v.parent) if v.parent else None,
            "leaf": v.leaf,
            "priority": v.priority,
            "weight": v.weight,
            "quota": quantities(v.quota),
            "guarantee": quantities(v.guarantee),
            "limit": quantities(v.limit),
            "fair_share": quantities(v.fair),
            "allocated": quantities(v.held),
            "demand": quantities(v.demand),
            "standing": round(v.standing, 3) if v.standing != float("inf") else None,
            "borrowing": {
                "share": v.borrowing.share,
                "precise": share_text(v.borrowing.precise),
                "dominant": v.borrowing.dominant,
            },
            "gangs": v.gangs,
            "pending_gangs": v.pending_gangs,
            "open": v.open,
            "problem": v.problem,
        }
        for v in views
    ]


def gang_report(scheduler: GangScheduler) -> list[dict[str, Any]]:
    """One JSON-able entry per gang, sorted by namespace and name."""
    loop_time = asyncio.get_running_loop().time()
    out = []
    for gang in sorted(scheduler.state.gangs.values(), key=lambda g: tuple(g.key)):
        pending = gang.pending()
        bound = gang.bound()
        deadline = gang.permit_deadline
        out.append(
            {
                "namespace": gang.key.namespace,
                "name": gang.key.group or gang.key.pod,
                "kind": "pod" if gang.single else "podgroup",
                "min_member": gang.min_member,
                "members": len(gang.members),
                "pending": len(pending),
                "reserved": len(gang.reserved),
                "placeholders": len(gang.placeholders),
                "binding": len(gang.binding),
                "bound": len(bound),
                "queue": scheduler.queue.where(gang.key),
                "permit_wait_seconds_left": round(deadline - loop_time, 1)
                if deadline is not None
                else None,
                "why_pending": gang.last_failure if (pending or gang.reserved) else None,
                "reservation": _reservation(gang.reservation),
                "not_reserved_because": gang.reservation_refused
                if pending and gang.reservation is None
                else None,
            }
        )
    return out


def _reservation(res: Reservation | None) -> dict[str, Any] | None:
    """A reservation as /debug shows it: its nodes, expected start, and the backfill
    decisions into it (epoch seconds, and seconds from now)."""
    if res is None:
        return None
    now = time.time()
    return {
        "nodes": res.nodes,
        "expected_start": round(res.start, 3),
        "starts_in_seconds": round(res.start - now, 1),
        "planned_start": round(res.planned, 3),
        "moves": res.moves,
        "waiting_for_pods": res.waiting_for,
        "made": round(res.made, 3),
        "expires_in_seconds": round(res.expires - now, 1),
        "backfills": [
            {
                "gang": b.gang,
                "nodes": b.nodes,
                "run_seconds": b.run_seconds,
                "at": round(b.at, 3),
                "ends_by": round(b.ends_by, 3),
                "reservation_start": round(b.start, 3),
            }
            for b in res.backfills
        ],
    }


def _html(rows: list[dict[str, Any]]) -> str:
    columns = [
        "namespace",
        "name",
        "kind",
        "min_member",
        "members",
        "pending",
        "reserved",
        "bound",
        "queue",
        "why_pending",
    ]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape('' if r[c] is None else str(r[c]))}</td>" for c in columns)
        + "</tr>"
        for r in rows
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>gang: gangs</title>"
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}</style></head>"
        f"<body><h1>gangs ({len(rows)})</h1><table><tr>{head}</tr>{body}</table></body></html>"
    )


def _too_large() -> web.Response:
    return web.Response(
        status=413, text=f"request body over the limit of {MAX_REQUEST_BYTES} bytes\n"
    )


@web.middleware
async def _bounded_bodies(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A body sent with a GET is read (up to the limit) and ignored; a larger one is a 413.
    Other methods reach the router's 405 without their body being read at all."""
    if request.method in READ_METHODS and request.body_exists:
        length = request.content_length
        if length is not None and length > MAX_REQUEST_BYTES:
            return _too_large()
        try:
            await request.read()
        except web.HTTPRequestEntityTooLarge:  # chunked, no declared length
            return _too_large()
    return await handler(request)


class StatusServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        current: Callable[[], GangScheduler | None],
        readiness: Callable[[], tuple[bool, str]],
    ) -> None:
        self.registry = registry
        self.current = current
        self.readiness = readiness
        self._runner: web.AppRunner | None = None
        self.port = 0

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES, middlewares=[_bounded_bodies])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/debug/gangs", self._gangs)
        app.router.add_get("/debug/explain/{namespace}/{name}", self._explain)
        app.router.add_get("/debug/queues", self._queues)
        return app

    async def start(self, host: str, port: int) -> None:
        runner = web.AppRunner(self.make_app(), handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, why = self.readiness()
        return web.Response(text=why, status=200 if ready else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _explain(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        scheduler = self.current()
        if scheduler is None or not scheduler.ready.is_set():
            return _json({"error": "not leading, or not synced yet"}, 503)
        gang = find_gang(scheduler, namespace, name)
        if gang is None:
            return _json({"error": f"no gang {namespace}/{name} known to the scheduler"}, 404)
        return _json(explain(scheduler, gang))

    async def _queues(self, request: web.Request) -> web.Response:
        scheduler = self.current()
        if scheduler is None or not scheduler.ready.is_set():
            return _json({"error": "not leading, or not synced yet"}, 503)
        return _json(queue_report(scheduler))

    async def _gangs(self, request: web.Request) -> web.Response:
        scheduler = self.current()
        rows = gang_report(scheduler) if scheduler is not None and scheduler.ready.is_set() else []
        wants_json = request.query.get(
            "format"
        ) == "json" or "application/json" in request.headers.get("Accept", "")
        if wants_json:
            return web.Response(body=orjson.dumps(rows), content_type="application/json")
        return web.Response(text=_html(rows), content_type="text/html")


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(body), status=status, headers={"Content-Type": "application/json"}
    )
