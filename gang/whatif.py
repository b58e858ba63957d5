"""What would gang do? A copy of the cluster, the real scheduler on it, and its own answers.

``gang fit`` (would these manifests fit, and how?) and ``gang explain`` without a running
scheduler both need the answer ``gang run`` would give, not an estimate beside it. So they run
``gang run``'s code itself: the cluster's snapshot (``gang snapshot``) is replayed into an
in-process simulator, the real ``GangScheduler`` schedules it over HTTP, the manifests are
created there, and once every gang of interest has been judged and the queue is quiet, each is
read through ``gang.app.explain`` — placed, preempting, reserved, never, or why not. Nothing is
written to the real cluster: the copy is thrown away afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from gang.app.explain import INVALID, NEVER, PLACED, RESERVED, VICTIMS, explain, find_gang
from gang.app.scheduler import GangScheduler
from gang.kube.client import make_api_client
from gang.models.groupapis import GROUP_APIS
from gang.models.settings import SchedulerConfig
from gang.sim.api import SimApi
from gang.sim.cluster import SimCluster
from gang.sim.errors import ApiError
from gang.sim.nodespec import NodePool
from gang.sim.snapshot import resource_of
from gang.state.podinfo import group_claims

Obj = dict[str, Any]
#: consecutive quiet polls (every gang judged, nothing active in the queue) before answering
QUIET_POLLS = 3
POLL_SECONDS = 0.05
#: exit codes of ``gang fit``, worst last (the command exits with the worst of its gangs')
FITS_NOW, NEVER_FITS, BAD_INPUT, AFTER_PREEMPTION, AFTER_RESERVATION, NOT_NOW = 0, 1, 2, 3, 4, 5
EXIT_ORDER = (FITS_NOW, AFTER_PREEMPTION, AFTER_RESERVATION, NOT_NOW, NEVER_FITS, BAD_INPUT)
#: explain's states that ``gang fit`` answers by name; every other state is "not now"
ANSWERS = {
    PLACED: ("fits now", FITS_NOW),
    VICTIMS: ("fits after preempting", AFTER_PREEMPTION),
    RESERVED: ("fits once running pods finish", AFTER_RESERVATION),
    NEVER: ("never fits", NEVER_FITS),
    INVALID: ("invalid", BAD_INPUT),
}


@dataclass
class Copy:
    """The replayed cluster and the scheduler running on it."""

    cluster: SimCluster
    scheduler: GangScheduler

    def create(self, docs: Sequence[Obj], namespace: str) -> tuple[list[str], list[str]]:
        """Create manifests in the copy (admission included, as ``kubectl create`` would): the
        gangs among them (``ns/name``: group objects, and pods that name no group), and what
        was skipped because the copy does not serve its kind (an operator's own object)."""
        api = self.cluster.api
        gangs: list[str] = []
        skipped: list[str] = []
        for doc in docs:
            meta = doc.get("metadata") or {}
            rt = resource_of(api, doc)
            if rt is None:
                skipped.append(f"{doc.get('apiVersion')} {doc.get('kind')} {meta.get('name')}")
                continue
            ns = meta.get("namespace") or namespace
            _ensure_namespace(api, ns)
            try:
                created = api.create(rt, ns if rt.namespaced else None, doc)
            except ApiError as err:
                raise ValueError(f"{doc.get('kind')} {meta.get('name')}: {err.message}") from None
            name = f"{ns}/{created['metadata']['name']}"
            is_group = any((g.group, g.kind) == (rt.group, rt.kind) for g in GROUP_APIS)
            if is_group or (rt is api.rt_pods and not _claims_group(created)):
                gangs.append(name)
        return gangs, skipped

    async def judged(self, names: Sequence[str], within: float) -> dict[str, Obj]:
        """Wait until every gang named has been judged and the queue is quiet; each one's
        explanation (a gang never seen is answered as such)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        quiet = 0
        while True:
            answers = self.explain_all(names)
            counts = self.scheduler.queue.counts()
            settled = all(a.get("state") != "queued" for a in answers.values())
            quiet = quiet + 1 if settled and not counts["active"] and not counts["in_flight"] else 0
            if quiet >= QUIET_POLLS or loop.time() > deadline:
                return answers
            await asyncio.sleep(POLL_SECONDS)

    def pending_gangs(self) -> set[str]:
        """The gangs of the replayed cluster with a member waiting for a node."""
        return {str(g.key) for g in self.scheduler.state.gangs.values() if g.any_pending()}

    def explain_all(self, names: Sequence[str]) -> dict[str, Obj]:
        out: dict[str, Obj] = {}
        for full in names:
            namespace, _, name = full.partition("/")
            gang = find_gang(self.scheduler, namespace, name)
            out[full] = (
                explain(self.scheduler, gang)
                if gang is not None
                else {"gang": full, "state": "queued", "summary": "no pods for it yet"}
            )
        return out


def _claims_group(pod: Obj) -> bool:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return bool(group_claims(meta.get("labels") or {}, meta.get("annotations"), spec))


def _ensure_namespace(api: SimApi, namespace: str) -> None:
    with contextlib.suppress(ApiError):
        api.create(api.rt_namespaces, None, {"metadata": {"name": namespace}})


@asynccontextmanager
async def replay(
    snapshot: Obj, config: SchedulerConfig | None = None, pools: Sequence[NodePool] = ()
) -> AsyncIterator[Copy]:
    """The snapshot replayed in-process (with ``pools`` of nodes added) with the real
    scheduler running on it."""
    async with SimCluster(list(pools), snapshot=snapshot) as cluster:
        client = await make_api_client(str(cluster.kubeconfig_path))
        scheduler = GangScheduler(client, config or SchedulerConfig(), instance="what-if")
        task = asyncio.create_task(scheduler.run())
        try:
            await asyncio.wait_for(scheduler.ready.wait(), 30)
            yield Copy(cluster, scheduler)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await client.close()


def answer_of(explained: Obj) -> tuple[str, int]:
    """``gang fit``'s verdict for one gang: words and exit code."""
    return ANSWERS.get(explained.get("state", ""), ("does not fit now", NOT_NOW))


def worst(codes: Sequence[int]) -> int:
    return max(codes, key=EXIT_ORDER.index, default=FITS_NOW)


def plan_rows(answers: dict[str, Obj]) -> list[Obj]:
    """Capacity planning's table: per gang its answer, a detail, and the expected wait where
    the scheduler has one (0 when placed, a reservation's expected start otherwise)."""
    rows = []
    for name, explained in sorted(answers.items()):
        answer, _ = answer_of(explained)
        detail, wait = "", None
        if explained.get("state") == PLACED:
            wait = 0.0
        elif "reservation" in explained:
            wait = float(explained["reservation"]["starts_in_seconds"])
            detail = f" (expected to start in {wait:.0f}s)"
        elif "preemption" in explained:
            detail = f" (evicting {explained['preemption']['evicting']})"
        elif explained.get("summary"):
            detail = f" ({explained['summary']}"
            if explained.get("not_reserved_because"):
                detail += f"; no reservation: {explained['not_reserved_because']}"
            detail += ")"
        rows.append({"gang": name, "answer": answer, "detail": detail, "wait": wait})
    return rows
