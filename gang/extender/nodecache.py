"""The extender's own picture of the cluster, for ``nodeCacheCapable: true``.

With ``nodeCacheCapable`` kube-scheduler sends only node *names*, trusting the extender to know
the nodes. This module keeps that knowledge the way ``gang run`` does: informers list and watch
nodes and pods into a ``ClusterCache``, which then counts every pod bound to a node — by
kube-scheduler, by gang, by anyone — so gang's resource filter sees what is really left on each
node, GPUs included. Terminal and deleted pods release their share.

The cache is as fresh as the watch: kube-scheduler's own *assumed* pods (decided, binding in
flight) show up here only once they are bound. During that moment gang's resource filter is
less strict than kube-scheduler's, never stricter — and kube-scheduler's own NodeResourcesFit
still stands between a pod and an over-committed node.
"""

from __future__ import annotations

import asyncio
import logging

from gang.kube.informer import Informer, Key, Obj
from gang.kube.transport import NODES, PODS, Kube
from gang.state.cache import ClusterCache
from gang.state.podinfo import PodParseError, parse_pod

log = logging.getLogger(__name__)


class _Nodes:
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def upsert(self, obj: Obj) -> None:
        self.cache.upsert_node(obj)

    def delete(self, key: Key, obj: Obj | None) -> None:
        self.cache.remove_node(key[1])

    def synced(self) -> None:
        pass


class _Pods:
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self._unparsable: dict[Key, str] = {}

    def upsert(self, obj: Obj) -> None:
        try:
            info = parse_pod(obj)
        except PodParseError as err:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            self.cache.remove_pod(key)  # whatever it was, it can no longer be counted right
            if self._unparsable.get(key) != str(err):
                self._unparsable[key] = str(err)
                log.warning("node cache: ignoring pod %s/%s: %s", key[0], key[1], err)
            return
        self._unparsable.pop(info.key, None)
        self.cache.upsert_pod(info)

    def delete(self, key: Key, obj: Obj | None) -> None:
        self._unparsable.pop(key, None)
        self.cache.remove_pod(key)

    def synced(self) -> None:
        pass


class NodeCache:
    """Informers for nodes and pods feeding one ``ClusterCache``; ``run()`` until cancelled."""

    def __init__(
        self,
        kube: Kube,
        cache: ClusterCache | None = None,
        *,
        resync_period: float = 300.0,
        watch_timeout: int = 300,
    ) -> None:
        self.kube = kube
        self.cache = cache or ClusterCache()
        self.resync_period = resync_period
        self.watch_timeout = watch_timeout
        self.informers: list[Informer] = []
        self._synced = asyncio.Event()

    @property
    def synced(self) -> bool:
        """Both informers have applied a complete list at least once."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        """List and watch until cancelled; an unexpected failure is raised (the caller exits)."""
        if self.informers:
            raise RuntimeError("a NodeCache runs once")
        self.informers = [
            Informer(
                self.kube,
                kind,
                handler,
                resync_period=self.resync_period,
                watch_timeout=self.watch_timeout,
            )
            for kind, handler in ((NODES, _Nodes(self.cache)), (PODS, _Pods(self.cache)))
        ]
        async with asyncio.TaskGroup() as tasks:
            for informer in self.informers:
                tasks.create_task(informer.run(), name=f"extender informer {informer.kind.name}")
            await asyncio.gather(*(i.has_synced.wait() for i in self.informers))
            self._synced.set()
            log.info(
                "node cache synced: %d nodes, %d pods counted",
                len(self.cache.nodes),
                len(self.cache.pods),
            )
