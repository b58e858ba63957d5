"""Throttling seen from the server's side: Retry-After is waited out, the client rate limit holds.

Every timing here is a request's arrival at the simulator (its audit trail), not what the client
believes it did. The bounds have generous margins, but each one fails for a client that ignores
Retry-After (its own backoff starts at tenths of a second) or one without a rate limit (which
sends a gang's bindings within a fraction of a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gang.kube.client import make_api_client
from gang.kube.informer import Informer, Key, Obj
from gang.kube.transport import NODES, Kube, KubeError
from gang.sim.audit import RequestRecord
from gang.sim.cluster import SimCluster
from gang.sim.faults import Faults
from tests.reliability.conftest import bound, create_gang, until
from tests.scheduler.conftest import running_scheduler

RETRY_AFTER = 1.0
EARLY = 0.005  # clock granularity between the client's sleep and the server's timestamps
INFORMER_PATHS = (
    "/api/v1/pods",
    "/api/v1/nodes",
    "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
)


def follow_ups(records: list[RequestRecord]) -> list[tuple[RequestRecord, RequestRecord]]:
    """(429 answer, the same client's next request) for the requests one client issues in
    sequence: an informer's lists and watches, and the bindings of one pod."""
    pairs = []
    last: dict[tuple[str, str], RequestRecord] = {}
    for record in sorted(records, key=lambda r: r.at):
        key = (record.method, record.path)
        sequential = record.path in INFORMER_PATHS or record.path.endswith("/binding")
        if not sequential:
            continue
        previous = last.get(key)
        if previous is not None and previous.status == 429:
            pairs.append((previous, record))
        last[key] = record
    return pairs


async def test_the_next_attempt_after_a_429_waits_retry_after() -> None:
    faults = Faults(throttle_rate=1.0, retry_after_seconds=int(RETRY_AFTER))
    async with SimCluster("1", faults=faults) as cluster:
        cluster.audit.record_requests = True
        api_client = await make_api_client(str(cluster.kubeconfig_path))
        kube = Kube(api_client, max_retries=2)
        try:
            with pytest.raises(KubeError) as info:
                await kube.list(NODES)
        finally:
            await kube.close()
            await api_client.close()
        assert info.value.status == 429 and info.value.retry_after == RETRY_AFTER
        arrivals = [r.at for r in cluster.audit.requests if r.path == "/api/v1/nodes"]
        assert len(arrivals) == 3  # the first attempt and two retries
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        assert min(gaps) >= RETRY_AFTER - EARLY, gaps


class _Nodes:
    def __init__(self) -> None:
        self.names: set[str] = set()

    def upsert(self, obj: Obj) -> None:
        self.names.add(obj["metadata"]["name"])

    def delete(self, key: Key, obj: Obj | None) -> None:
        self.names.discard(key[1])

    def synced(self) -> None:
        pass


@contextlib.asynccontextmanager
async def node_informer(cluster: SimCluster) -> AsyncIterator[tuple[Informer, _Nodes]]:
    """A nodes informer running against ``cluster`` with no retries of its own in the client,
    so every retry seen at the server is the informer's."""
    api_client = await make_api_client(str(cluster.kubeconfig_path))
    kube = Kube(api_client, max_retries=0)
    handler = _Nodes()
    informer = Informer(kube, NODES, handler, resync_period=60)
    task = asyncio.create_task(informer.run())
    try:
        yield informer, handler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kube.close()
        await api_client.close()


async def test_an_informer_relists_no_sooner_than_retry_after() -> None:
    """Lists and watches have no retry loop of their own: the informer's backoff must honour
    the server's Retry-After too (its own backoff would retry within 0.4 s)."""
    faults = Faults(throttle_rate=1.0, retry_after_seconds=int(RETRY_AFTER))
    async with SimCluster("3", faults=faults) as cluster:
        cluster.audit.record_requests = True
        async with node_informer(cluster) as (informer, handler):
            await until(lambda: faults.counts.throttled >= 3, 10, "three throttled lists")
            faults.throttle_rate = 0.0
            await asyncio.wait_for(informer.has_synced.wait(), 5)
        assert len(handler.names) == 3
        pairs = follow_ups(list(cluster.audit.requests))
        assert len(pairs) >= 3
        for refused, retried in pairs:
            assert retried.at - refused.at >= RETRY_AFTER - EARLY, (refused, retried)


async def test_a_throttled_or_broken_watch_resumes_without_a_relist() -> None:
    """client-go's reflector semantics: a watch refused with 429, or cut, is re-opened from the
    last resourceVersion (after Retry-After) and loses nothing; only a 410 costs a relist."""
    faults = Faults()
    async with SimCluster("2", faults=faults) as cluster:
        cluster.audit.record_requests = True
        async with node_informer(cluster) as (informer, handler):
            await asyncio.wait_for(informer.has_synced.wait(), 5)
            faults.throttle_rate = 1.0
            faults.retry_after_seconds = int(RETRY_AFTER)
            cluster.drop_watches()
            await until(lambda: faults.counts.throttled >= 2, 10, "two throttled watches")
            cluster.add_nodes("1:prefix=late")  # while the watch is refused
            faults.throttle_rate = 0.0
            await until(lambda: len(handler.names) == 3, 10, "the late node seen")
            cluster.drop_watches()
            cluster.add_nodes("1:prefix=later")  # while the watch is being re-opened
            await until(lambda: len(handler.names) == 4, 10, "the later node seen")
        assert informer.relists == 1 and informer.rewatches >= 2
        lists = [r for r in cluster.audit.requests if r.path == "/api/v1/nodes" and not r.watch]
        assert len(lists) == 1
        for refused, retried in follow_ups(list(cluster.audit.requests)):
            assert retried.at - refused.at >= RETRY_AFTER - EARLY, (refused, retried)


def _checked(cluster: SimCluster) -> set[str]:
    """What the refused-then-retried pairs so far were for: "binding" or an informer's path."""
    pairs = follow_ups(list(cluster.audit.requests))
    return {("binding" if r.path.endswith("/binding") else r.path) for r, _ in pairs}


async def test_the_scheduler_waits_out_retry_after_on_lists_watches_and_bindings() -> None:
    faults = Faults(
        seed=5, throttle_rate=0.25, retry_after_seconds=int(RETRY_AFTER), watch_drop_after=1.0
    )
    async with SimCluster("4:gpu=8,zones=2", faults=faults) as cluster:
        cluster.audit.record_requests = True
        async with running_scheduler(cluster):
            # enough bindings that some draw a 429 (0.75**25: 1 run in 1,300 would see none)
            members = create_gang(cluster, "job", 24) + create_gang(cluster, "solo", 1)
            await until(lambda: set(members) <= set(bound(cluster)), 30, "all bound")
            # Watches are cut every second and a quarter of their re-opens draw a 429, so an
            # informer's refused-then-retried pair comes within seconds; waiting for one (not a
            # fixed sleep) keeps the check from hanging on which requests the draws fell on.
            await until(
                lambda: bool(_checked(cluster) & set(INFORMER_PATHS)),
                20,
                "an informer's request refused with 429 and then retried",
            )
        pairs = follow_ups(list(cluster.audit.requests))
        checked = _checked(cluster)
        assert "binding" in checked and checked & set(INFORMER_PATHS), checked
        for refused, retried in pairs:
            assert retried.at - refused.at >= RETRY_AFTER - EARLY, (refused, retried)


def _max_excess(times: list[float], qps: float, burst: int) -> float:
    """The largest ``count - (burst + qps * window)`` over all windows of consecutive
    arrivals: at most 0 for a perfect token bucket."""
    times = sorted(times)
    worst = float("-inf")
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            worst = max(worst, (j - i + 1) - (burst + qps * (times[j] - start)))
    return worst


async def test_the_client_rate_limit_bounds_the_write_rate_the_server_sees() -> None:
    qps, burst, pods = 20.0, 5, 50
    async with SimCluster("4:cpu=64,memory=256Gi") as cluster:
        cluster.audit.record_requests = True
        async with running_scheduler(cluster, qps=qps, burst=burst):
            members = create_gang(cluster, "wide", pods, gpu=0, cpu="100m")
            await until(lambda: set(members) <= set(bound(cluster)), 20, "all bound")
            await asyncio.sleep(0.3)  # the status write after the last binding

        def limited(record: RequestRecord) -> bool:  # the writes that take a token
            return (record.method == "POST" and record.path.endswith("/binding")) or (
                record.method == "PATCH" and "/podgroups/" in record.path
            )

        writes: list[Any] = [r.at for r in cluster.audit.select(predicate=limited)]
        assert len(writes) >= pods
        # generous: 25% over the rate plus 3 requests of slack for arrival jitter
        assert _max_excess(writes, qps * 1.25, burst + 3) <= 0, _max_excess(writes, qps, burst)
        assert max(writes) - min(writes) >= (pods - burst) / qps * 0.8
