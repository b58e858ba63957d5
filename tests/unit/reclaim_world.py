"""One cluster in gang's own state and its scheduling cycle, with no API server (reference tables).

The reference tables (KAI's reclaim tests, Kueue's fair preemption tests) state a cluster and a
decision. This builds the cluster as the objects a real one holds — nodes, KAI Queues, PodGroups,
pods — fed through the scheduler's own informer handlers into the real ``ClusterState``, and runs
the real ``Cycle`` for the waiting gangs, so the tables check gang's decision code itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gang.app.profiles import build_profiles
from gang.models.groupapis import COSCHEDULING, POD_GROUP_GROUP, POD_GROUP_VERSION
from gang.models.queueapis import KAI_QUEUE_LABEL
from gang.models.settings import SchedulerConfig
from gang.queue.gangqueue import GangQueue
from gang.scheduling.cycle import Cycle
from gang.scheduling.framework import PluginContext
from gang.scheduling.gang import Gang
from gang.scheduling.placement import Placer
from gang.scheduling.preemption import GangPreemption, Plan, Request
from gang.scheduling.tracker import ClusterState
from gang.state.cache import ClusterCache


def kai_podgroup(
    name: str, queue: str, min_member: int, created: str | None = None
) -> dict[str, Any]:
    """A Coscheduling PodGroup in ``default``, labelled for a KAI queue."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"pg-{name}",
        "resourceVersion": "1",
        "labels": {KAI_QUEUE_LABEL: queue},
    }
    if created is not None:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {"minMember": min_member},
    }


class _Quiet:
    def pod_event(self, *args: Any) -> None: ...
    def podgroup_event(self, *args: Any) -> None: ...
    def gang_changed(self, gang: Gang) -> None: ...
    def group_changed(self, group: Any) -> None: ...
    def queue_event(self, *args: Any) -> None: ...


class _ReclaimOnly(GangPreemption):
    """The cycle's preemption step with only its reclaim half: KAI's reclaim action runs
    alone in these tests, with no priority preemption after it."""

    def preempt(self, request: Request) -> Plan | str | None:
        return super().preempt(request) if request.reclaim is not None else None


class World:
    """One case's cluster in gang's own state, and its cycle."""

    def __init__(
        self,
        nodes: Iterable[dict[str, Any]],
        queues: Iterable[dict[str, Any]],
        groups: Iterable[dict[str, Any]],
        pods: Iterable[dict[str, Any]],
        reclaim_only: bool = True,
    ) -> None:
        config = SchedulerConfig()
        self.cache = ClusterCache()
        queue = GangQueue()
        profiles = build_profiles(config, PluginContext(config, self.cache.index, None, self.cache))
        if reclaim_only:
            for profile in profiles.values():
                profile.preemptions = [_ReclaimOnly()]
        names = list(profiles)
        self.state = ClusterState(
            names,
            self.cache,
            queue,
            _Quiet(),
            lambda gang, why: None,
            queue_sort=profiles[names[0]].queue_sort,
        )
        placers = {
            name: Placer.for_profile(self.cache.index, p, config.topology_key)
            for name, p in profiles.items()
        }
        self.plans: list[tuple[Gang, Plan]] = []
        self.permitted: list[Gang] = []
        self.cycle = Cycle(
            self.state,
            profiles,
            placers,
            config,
            on_permitted=self.permitted.append,
            on_preempt=lambda gang, plan: self.plans.append((gang, plan)),
        )
        for node in nodes:
            self.state.nodes.upsert(node)
        for queue_object in queues:
            self.state.queue_objects["kai"].upsert(queue_object)
        for group in groups:
            self.state.groups[COSCHEDULING].upsert(group)
        for pod in pods:
            self.state.pods.upsert(pod)

    def run(self) -> None:
        """One pass over the waiting gangs, in gang's queue order (KAI's action: one pass)."""
        order = sorted(
            (g for g in self.state.gangs.values() if g.pending()),
            key=lambda g: (self.state.ledger.rank(g.membership.queue or ""), -g.priority, g.key),
        )
        for gang in order:
            self.cycle.schedule(gang)
            self.state.ledger.refresh(gang)

    def evicted(self) -> set[str]:
        return {p.name for _, plan in self.plans for v in plan.victims for p in v.pods}

    def placed(self) -> dict[str, str]:
        """Pending pods now placed (reserved) or nominated, and where."""
        out: dict[str, str] = {}
        for gang in self.state.gangs.values():
            for key, node in gang.reserved.items():
                out[key[1]] = node
            for key, (_, node) in gang.nominated.items():
                out[key[1]] = node
        return out
