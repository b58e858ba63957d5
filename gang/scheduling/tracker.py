"""The scheduler's picture of the cluster, fed by the informers: cache, gangs, PodGroups, queue.

Informer callbacks land here, synchronously and in order. Each one updates the capacity
accounting (every pod, whoever scheduled it), the gang a pod of ours belongs to, and tells the
queue who might now fit: a gang whose own members or PodGroup changed is activated, and any
event that could free room or add nodes re-activates every gang parked as unschedulable
(instead of polling them). Whatever the Permit stage must react to — a reserved member deleted
or relabelled away, a node holding reservations removed, cordoned or newly tainted, a PodGroup
deleted or its minMember changed — is passed to ``on_disruption``, after this module has dropped
what is lost: the reservations of departed members, and those on a node that is gone or that
Filter would now reject (re-checked only when a node's taints or schedulability change, with the
gang's own static Filter plugins, so the rule cannot drift from Filter). Members already being
bound are past the point of no return and keep their node.

Bad input never stops the flow: a pod or PodGroup that cannot be parsed is reported once
(``Reporter``) and otherwise ignored, and everyone else keeps being served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol

from gang.kube.decoding import DIGESTED_PODS, LEAN, WHOLE, Decoding, whole
from gang.models.groupapis import GROUP_APIS, WORKLOAD, GroupApi, for_replica
from gang.models.podgroup import PodGroupInfo
from gang.models.queueapis import KAI_QUEUE_LABEL, QUEUE_APIS, QueueApi, QueueSpec
from gang.models.topologyapis import (
    TOPOLOGY_APIS,
    VOLCANO_TOPOLOGY,
    TopologyApi,
    parse_topology,
)
from gang.queue.gangqueue import GangQueue
from gang.queue.tree import QueueTree
from gang.scheduling.framework import PluginError, QueueSortPlugin, StaticFilterPlugin, call
from gang.scheduling.gang import Gang, GangKey, gang_key_of
from gang.scheduling.plugins import PrioritySort, default_filters
from gang.scheduling.queues import QueueLedger
from gang.scheduling.reservation import ReservationBook
from gang.state.cache import ClusterCache
from gang.state.dra import DRA_KINDS
from gang.state.hypernodes import HyperNode, parse_hypernode
from gang.state.nodefacts import NodeFacts
from gang.state.podinfo import PodInfo, PodParseError, bound_copy, parse_pod
from gang.state.topologybook import TopologyBook

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]
STORAGE_KINDS = ("claims", "volumes", "classes", "csinodes")
SELECTING_KINDS = ("Service", "ReplicaSet", "StatefulSet", "ReplicationController")


class Catalog(Protocol):
    """What the informers feed besides pods, nodes and PodGroups (volumes, selectors)."""

    def upsert(self, kind: str, raw: Obj) -> bool: ...
    def remove(self, kind: str, namespace: str, name: str) -> None: ...


class Reporter(Protocol):
    """Where the scheduling side sends what users should see (Events, PodGroup status)."""

    def pod_event(self, pod: Key, uid: str, kind: str, reason: str, message: str) -> None: ...
    def podgroup_event(self, group: PodGroupInfo, kind: str, reason: str, message: str) -> None: ...
    def gang_changed(self, gang: Gang) -> None: ...

    def group_changed(self, group: PodGroupInfo) -> None: ...


class ClusterState:
    def __init__(
        self,
        scheduler_names: str | Collection[str],
        cache: ClusterCache,
        queue: GangQueue,
        reporter: Reporter,
        on_disruption: Callable[[Gang, str], None],
        queue_sort: QueueSortPlugin | None = None,
        topologies: TopologyBook | None = None,
    ) -> None:
        #: pods whose spec.schedulerName is one of these are ours (one per profile)
        self.scheduler_names = frozenset(
            [scheduler_names] if isinstance(scheduler_names, str) else scheduler_names
        )
        self.cache = cache
        self.queue = queue
        self.reporter = reporter
        self.on_disruption = on_disruption
        self.queue_sort = queue_sort or PrioritySort()
        defaults = default_filters()
        #: the static Filter plugins serving a gang (the cycle installs its profiles' own)
        self.filters_for: Callable[[Gang], Sequence[StaticFilterPlugin]] = lambda gang: defaults
        self.gangs: dict[GangKey, Gang] = {}
        #: the queues (Volcano, KAI, ElasticQuota objects) and each gang's place among them
        self.queue_tree = QueueTree()
        self.ledger = QueueLedger(self.queue_tree, cache, self.gangs)
        queue.rank = self._rank
        #: gangs holding capacity nominated by a preemption (see ``Gang.nominated``)
        self.nominating: set[GangKey] = set()
        #: capacity held for gangs that fit the cluster but not now (limits set by the cycle)
        self.reservations = ReservationBook()
        self.podgroups: dict[Key, PodGroupInfo] = {}
        #: groups whose members a preemption or reclaim evicted, until placed again or deleted:
        #: (namespace, gang key's group) → (by whom and why, whether it was a reclaim); a gang
        #: made again for the group (its operator recreated the pods) says so too
        self.disrupted: dict[Key, tuple[str, bool]] = {}
        self._gang_of: dict[Key, GangKey] = {}
        self._unparsable: dict[Key, str] = {}
        #: pods whose malformed hint (e.g. the expected run time) was reported, and the error
        self._hints_reported: dict[Key, str] = {}
        self.pods = _Handler(self._upsert_pod, self._delete_pod, DIGESTED_PODS)
        self.nodes = _Handler(self._upsert_node, self._delete_node, LEAN)
        #: per gang API (``gang.models.groupapis``): its objects, read as pod groups
        self.groups = {api.name: self._group_handler(api) for api in GROUP_APIS}
        #: per queue API (``gang.models.queueapis``): its objects, read as queues
        self.queue_objects = {api.name: self._queue_handler(api) for api in QUEUE_APIS}
        #: topologies (settings, Kueue's and KAI's Topology objects) gangs ask levels of
        self.topologies = topologies or TopologyBook()
        #: per topology API: its objects (Volcano's HyperNodes make one topology together)
        self.topology_objects = {
            api.name: (
                _Handler(self._upsert_hypernode, self._delete_hypernode)
                if api.name == VOLCANO_TOPOLOGY
                else self._topology_handler(api)
            )
            for api in TOPOLOGY_APIS
        }
        #: Volcano's HyperNodes, by name (their tiers are a topology's levels)
        self._hypernodes: dict[str, HyperNode] = {}
        #: the pod groups each watched object described (a 1.35 Workload describes several)
        self._described: dict[tuple[str, str, str], list[Key]] = {}
        self.namespaces = _Handler(self._upsert_namespace, self._delete_namespace)
        #: PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes
        self.storage = {
            kind: self._catalog_handler(cache.volumes, kind, wakes=True) for kind in STORAGE_KINDS
        }
        #: DeviceClasses, ResourceSlices, ResourceClaims (dynamic resource allocation)
        self.devices = {
            kind: self._catalog_handler(cache.devices, kind, wakes=True) for kind in DRA_KINDS
        }
        #: PodDisruptionBudgets (preemption prefers victims that keep them)
        self.budgets = self._catalog_handler(cache.budgets, "PodDisruptionBudget", wakes=True)
        #: Services, ReplicaSets, StatefulSets, ReplicationControllers (default spreading: a
        #: preference only, so a change wakes no waiting gang)
        self.selecting = {
            kind: self._catalog_handler(cache.selecting, kind, wakes=False)
            for kind in SELECTING_KINDS
        }

    # --- pods ----------------------------------------------------------------------------

    def _binding_confirmed(self, raw: Obj) -> tuple[PodInfo, Gang] | None:
        """The one update seen for every pod we bind: the same pod, now on the node we reserved
        (and not finished). Everything but node, phase and version is as we parsed it before (a
        pod's spec cannot change), so the known PodInfo is reused instead of parsing the whole
        pod again; returned with its gang.

        It reads only what a ``LazyPod`` holds (``gang.kube.decoding``): a field read here
        that the digest does not keep would read as None for every MODIFIED pod."""
        meta = raw.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        gang_key = self._gang_of.get(key)
        gang = self.gangs.get(gang_key) if gang_key is not None else None
        if gang is None:
            return None
        old = gang.members.get(key)
        node = (raw.get("spec") or {}).get("nodeName")
        if (
            old is None
            or old.assigned
            or not node
            or gang.reserved.get(key) != node
            or meta.get("uid") != old.uid
            or meta.get("deletionTimestamp")
            or (meta.get("labels") or {}) != old.labels
        ):
            return None
        try:
            version = int(meta.get("resourceVersion") or 0)
        except ValueError:
            return None
        phase = (raw.get("status") or {}).get("phase") or old.phase
        info = bound_copy(old, node, version, phase)
        return None if info.terminal else (info, gang)

    def _confirm_binding(self, info: PodInfo, gang: Gang) -> None:
        """What ``_upsert_pod`` does with a ``_binding_confirmed`` update, and only that: the
        pod's name, uid, labels and spec are the member's own, so its gang, queue and
        scheduler stay, and it is assigned, alive and not deleting (the steps for those
        changes have nothing to do)."""
        self._unparsable.pop(info.key, None)
        self.cache.upsert_pod(info)  # ASSUMED → BOUND
        gang.members.now_bound(info)  # (``_binding_confirmed``: it was waiting, now bound)
        gang.bound_seen(info.key)
        if not gang.reserved and not gang.binding:
            self._may_be_a_victim(gang)
        self.reporter.gang_changed(gang)

    def _upsert_pod(self, raw: Obj) -> None:
        confirmed = self._binding_confirmed(raw)
        if confirmed is not None:
            self._confirm_binding(*confirmed)
            return
        raw = whole(raw)  # a MODIFIED line was decoded only as far as the check reads
        try:
            info = parse_pod(raw)
        except PodParseError as err:
            self._reject_pod(raw, str(err))
            return
        self._unparsable.pop(info.key, None)
        before = self.cache.pods.get(info.key)
        was_counted = before is not None
        record = self.cache.upsert_pod(info)
        if was_counted and record is None:
            self.queue.activate_unschedulable()  # a pod finished: its node has room again
        if info.scheduler_name not in self.scheduler_names and info.key not in self._gang_of:
            return
        if info.group_conflict and not info.assigned:
            self._refuse_ambiguous(info)
            return
        key = gang_key_of(info)
        old_key = self._gang_of.get(info.key)
        if old_key is not None and old_key != key:
            self._leave_gang(info.key, old_key, "its pod-group label changed")
        gang = self.gangs.get(key)
        joined = gang is None
        if gang is None:
            podgroup = (
                for_replica(self.podgroups, (key.namespace, key.group)) if key.group else None
            )
            gang = self.gangs[key] = Gang(key, podgroup, scheduler_name=info.scheduler_name)
            disrupted = self.disrupted.get((key.namespace, key.group)) if key.group else None
            if disrupted is not None:  # its members came back after a preemption or reclaim
                gang.preempted_by, gang.reclaimed = disrupted
        previous = gang.members.get(info.key)
        gang.members[info.key] = info
        if joined or _queue_label(info) != (_queue_label(previous) if previous else None):
            self.ledger.place(gang)
        self._gang_of[info.key] = key
        if info.declared_run_error and not info.assigned:
            self._report_hint(info)
        if info.assigned:
            was_reserved = info.key in gang.reserved
            gang.bound_seen(info.key)
            if was_reserved and not gang.reserved and not gang.binding:
                self._may_be_a_victim(gang)
        if info.deleting and info.key in gang.reserved:
            self._unreserve_member(gang, info.key)
            gang.member_left = True
            self.on_disruption(gang, f"member {info.name} is being deleted")
        if gang.is_pending(info) and not _status_note_only(previous, info):
            self.enqueue(gang)  # a member to place (others' updates need no new cycle)
        self.reporter.gang_changed(gang)

    def _may_be_a_victim(self, gang: Gang) -> None:
        """The gang's last placed member is seen bound. A gang with members in Permit or
        binding is never a victim (preemption or reclaim would leave it partial), so a
        preemptor or reclaimer that failed while it was binding tried nothing since: the
        parked gangs that could take its place try again now."""
        self.queue.activate_outranking(gang.priority, gang.membership.queue or "")

    def _refuse_ambiguous(self, info: PodInfo) -> None:
        """A pod naming two groups is scheduled with neither (guessing could split a gang) and
        reported once per distinct reason."""
        old_key = self._gang_of.get(info.key)
        if old_key is not None:
            self._leave_gang(info.key, old_key, "it now names more than one pod group")
        if self._unparsable.get(info.key) != info.group_conflict:
            self._unparsable[info.key] = info.group_conflict
            self.reporter.pod_event(
                info.key, info.uid, "Warning", "AmbiguousPodGroup", info.group_conflict
            )

    def _report_hint(self, info: PodInfo) -> None:
        """A malformed scheduling hint is ignored, and said once per pod (not per update)."""
        if self._hints_reported.get(info.key) == info.declared_run_error:
            return
        self._hints_reported[info.key] = info.declared_run_error
        self.reporter.pod_event(
            info.key, info.uid, "Warning", "InvalidAnnotation", info.declared_run_error
        )

    def _reject_pod(self, raw: Obj, why: str) -> None:
        meta = raw.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        spec = raw.get("spec") or {}
        ours = isinstance(spec, dict) and spec.get("schedulerName") in self.scheduler_names
        if ours and self._unparsable.get(key) != why:
            self._unparsable[key] = why
            message = f"pod cannot be scheduled: {why}"
            self.reporter.pod_event(
                key, str(meta.get("uid") or ""), "Warning", "FailedScheduling", message
            )
        log.warning("ignoring pod %s/%s: %s", key[0], key[1], why)

    def _delete_pod(self, key: Key, raw: Obj | None) -> None:
        self._unparsable.pop(key, None)
        self._hints_reported.pop(key, None)
        record = self.cache.remove_pod(key)
        if record is not None:
            self.queue.activate_unschedulable()
        gang_key = self._gang_of.get(key)
        if gang_key is not None:
            self._leave_gang(key, gang_key, "a member was deleted")

    def _leave_gang(self, pod: Key, gang_key: GangKey, why: str) -> None:
        self._gang_of.pop(pod, None)
        gang = self.gangs.get(gang_key)
        if gang is None:
            return
        gang.members.pop(pod, None)
        gang.binding_over(pod)  # gone: a bind in flight for it ends with a 404
        if gang.nominated.pop(pod, None) is not None:
            self.cache.forget(pod)
        if pod in gang.reserved:
            self._unreserve_member(gang, pod)
            gang.member_left = True
            self.on_disruption(gang, why)
        if not gang.members:
            self.drop_gang(gang)
        else:
            self.ledger.place(gang)  # the member that left may have named its queue
            self.ledger.refresh(gang)  # ... and it no longer asks for its room
            self.reporter.gang_changed(gang)

    def _unreserve_member(self, gang: Gang, pod: Key) -> None:
        gang.reserved.pop(pod, None)
        self.cache.forget(pod)

    def drop_placeholders(
        self, gang: Gang, only: Collection[Key] | None = None
    ) -> dict[Key, tuple[PodInfo, str]]:
        """Forget the placeholder reservations (every one, or those in ``only``); returns what
        was held (to restore it). ``only`` is looked up, not every placeholder scanned: a
        member taking its placeholder's node drops one of up to a job's worth."""
        placeholders = gang.placeholders
        keys = placeholders.keys() if only is None else [k for k in only if k in placeholders]
        held = {k: placeholders[k] for k in keys}
        for key in held:
            del gang.placeholders[key]
            self.cache.forget(key)
        return held

    def drop_nominations(self, gang: Gang) -> dict[Key, tuple[PodInfo, str]]:
        """Forget the capacity nominated for the gang; returns what was held."""
        held, gang.nominated = gang.nominated, {}
        for key in held:
            self.cache.forget(key)
        self.nominating.discard(gang.key)
        return held

    def drop_gang(self, gang: Gang) -> None:
        if gang.permit_timer is not None:
            gang.permit_timer.cancel()
        if gang.preempting is not None:
            gang.preempting.cancel()
            gang.preempting = None
        for pod in list(gang.reserved):
            self._unreserve_member(gang, pod)
        self.drop_placeholders(gang)
        self.drop_nominations(gang)
        if self.reservations.drop(gang) is not None:
            self.queue.activate_unschedulable()
        self.gangs.pop(gang.key, None)
        self.ledger.forget(gang)
        self.queue.remove(gang.key)

    # --- nodes ---------------------------------------------------------------------------

    def _upsert_node(self, raw: Obj) -> None:
        name = str((raw.get("metadata") or {}).get("name") or "")
        known = self.cache.nodes.get(name)
        before = known.facts if known is not None else None
        if not self.cache.upsert_node(raw):
            return
        self.queue.activate_unschedulable()
        after = self.cache.nodes[name].facts
        if before is not None and (
            before.unschedulable != after.unschedulable or before.taints != after.taints
        ):
            self._recheck_reservations(name, after)

    def _recheck_reservations(self, name: str, facts: NodeFacts) -> None:
        """Node ``name`` was cordoned, uncordoned or re-tainted: what it holds that Filter would
        now reject loses its node, as if the node were gone."""
        for gang in self._holding(name):
            held = [
                (key, gang.members.get(key), node)
                for key, node in gang.reserved.items()
                if key not in gang.binding
            ]
            held += [(key, shape, node) for key, (shape, node) in gang.placeholders.items()]
            reasons: dict[Key, str] = {}
            for key, pod, node in held:
                reason = self._rejection(gang, pod, facts) if node == name and pod else None
                if reason is not None:
                    reasons[key] = reason
            if reasons:
                why = next(iter(reasons.values()))
                self._lose_node(gang, name, set(reasons), f"became unfit for them ({why})")

    def _rejection(self, gang: Gang, pod: PodInfo, facts: NodeFacts) -> str | None:
        """The first rejection of ``pod`` on the node by the gang's static Filter plugins."""
        for plugin in self.filters_for(gang):
            try:
                reason = call(plugin, "Filter", None, plugin.filter, pod.constraints, facts)
            except PluginError as err:  # cannot tell: the reservation stays
                log.warning("%s; keeping the reservation on %s", err, facts.name)
                continue
            if reason is not None:
                return reason
        return None

    def _delete_node(self, key: Key, raw: Obj | None) -> None:
        name = key[1]
        if not self.cache.remove_node(name):
            return
        for gang in self._holding(name):
            lost = {pod for pod, node in gang.reserved.items() if node == name}
            lost |= {k for k, (_, node) in gang.placeholders.items() if node == name}
            self._lose_node(gang, name, lost, "was deleted")

    def _holding(self, name: str) -> Iterator[Gang]:
        """Gangs holding a reservation (a member's or a placeholder's) on node ``name``."""
        for gang in list(self.gangs.values()):
            if name in gang.reserved.values() or any(
                node == name for _, node in gang.placeholders.values()
            ):
                yield gang

    def _lose_node(self, gang: Gang, name: str, lost: set[Key], what: str) -> None:
        """Drop the reservations in ``lost`` on node ``name`` (members being bound keep theirs)
        and have the members and placeholders re-planned."""
        members = [pod for pod in lost if pod in gang.reserved and pod not in gang.binding]
        for pod in members:
            self._unreserve_member(gang, pod)
        placeholders = self.drop_placeholders(gang, only=lost)
        count = len(members) + len(placeholders)
        if not count:
            return
        self.on_disruption(gang, f"node {name} holding {count} reservation(s) {what}")
        self.enqueue(gang)

    # --- namespaces (their labels, for affinity terms' namespaceSelector) ----------------------

    def _upsert_namespace(self, raw: Obj) -> None:
        meta = raw.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            return
        labels = meta.get("labels")
        labels = labels if isinstance(labels, dict) else {}
        clean = {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
        if self.cache.upsert_namespace(meta["name"], clean):
            self.queue.activate_unschedulable()

    def _delete_namespace(self, key: Key, raw: Obj | None) -> None:
        self.cache.remove_namespace(key[1])

    # --- storage (for the volume rules) -----------------------------------------------------

    def _catalog_handler(self, catalog: Catalog, kind: str, wakes: bool) -> _Handler:
        """Feed one kind of informer object into a catalog; ``wakes``: a change may let a
        waiting gang fit (a claim bound, a volume appeared, ...)."""

        def upsert(raw: Obj) -> None:
            if catalog.upsert(kind, raw) and wakes:
                self.queue.activate_unschedulable()

        def delete(key: Key, raw: Obj | None) -> None:
            catalog.remove(kind, key[0], key[1])

        return _Handler(upsert, delete)

    # --- PodGroups -----------------------------------------------------------------------

    def _group_handler(self, api: GroupApi) -> _Handler:
        def upsert(raw: Obj) -> None:
            meta = raw.get("metadata") or {}
            version = str(raw.get("apiVersion") or "").rpartition("/")[2] or api.versions[0]
            infos = api.parse(raw, version)
            source = (api.name, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            before = self._described.get(source, [])
            self._described[source] = [i.key for i in infos]
            for key in before:
                if key not in self._described[source]:
                    self._delete_podgroup(key)
            for info in infos:
                self._upsert_podgroup(info)

        def delete(key: Key, raw: Obj | None) -> None:
            for described in self._described.pop((api.name, key[0], key[1]), []):
                self._delete_podgroup(described)

        return _Handler(upsert, delete)

    def _upsert_podgroup(self, info: PodGroupInfo) -> None:
        previous = self.podgroups.get(info.key)
        self.podgroups[info.key] = info
        if info.error is not None and (previous is None or previous.error != info.error):
            self.reporter.podgroup_event(info, "Warning", "InvalidPodGroup", info.error)
        gangs = self._gangs_of(info)
        if not gangs:
            self.reporter.group_changed(info)  # a group without pods yet (Volcano: Inqueue?)
        # only the status changed (mostly our own write, coming back): nothing a new cycle
        # could use, and retrying on it would loop with the writer, as for a pod's condition
        status_only = previous is not None and info == replace(
            previous, status=info.status, resource_version=info.resource_version
        )
        for gang in gangs:
            self._podgroup_changed(
                gang,
                for_replica(self.podgroups, (info.namespace, gang.key.group)),
                previous,
                retry=not status_only,
            )

    def _gangs_of(self, info: PodGroupInfo) -> list[Gang]:
        """The gangs a pod group describes: one, or a Workload pod group's replica keys."""
        if info.api != WORKLOAD:
            gang = self.gangs.get(GangKey(info.namespace, info.group))
            return [gang] if gang is not None else []
        return [g for k, g in self.gangs.items() if _described_by(info, k)]

    def _podgroup_changed(
        self,
        gang: Gang,
        info: PodGroupInfo | None,
        previous: PodGroupInfo | None,
        retry: bool = True,
    ) -> None:
        if info is None:
            return
        quorum = gang.min_member
        gang.podgroup = info
        self.ledger.place(gang)
        self.ledger.refresh(gang)  # minMember decides the members it holds room for
        if (gang.reserved or gang.placeholders) and previous is not None:
            if info.error is not None and previous.error is None:
                self.on_disruption(gang, f"its PodGroup became invalid: {info.error}")
            elif gang.min_member != quorum:
                self.on_disruption(gang, f"minMember changed from {quorum} to {gang.min_member}")
        if retry and gang.any_pending():
            self.enqueue(gang)
            self.queue.activate(gang.key)
        self.reporter.gang_changed(gang)

    def _delete_podgroup(self, key: Key) -> None:
        info = self.podgroups.pop(key, None)
        self.disrupted.pop(key, None)
        if info is None:
            return
        for gang in self._gangs_of(info):
            gang.podgroup = None
            if gang.reserved or gang.placeholders:
                self.on_disruption(gang, "its PodGroup was deleted")

    # --- queues ---------------------------------------------------------------------------

    def _queue_handler(self, api: QueueApi) -> _Handler:
        def upsert(raw: Obj) -> None:
            self._queue_changed(api.parse(raw), None)

        def delete(key: Key, raw: Obj | None) -> None:
            self._queue_changed(None, api.key(key[0] if api.namespaced else key[1]))

        return _Handler(upsert, delete)

    def _queue_changed(self, spec: QueueSpec | None, removed: str | None) -> None:
        """A queue appeared, changed or went: every gang's queue is decided again (a parent
        may have become valid, a queue its gangs named may exist now), the shares follow, and
        parked gangs get another look (a limit may have been raised)."""
        changed = self.queue_tree.upsert(spec) if spec is not None else False
        if removed is not None:
            changed = self.queue_tree.remove(removed) or changed
        if not changed:
            return
        for gang in self.ledger.replace_all():
            if gang.any_pending():
                self.enqueue(gang)
                self.queue.activate(gang.key)
        self.queue.activate_unschedulable()

    # --- topologies -----------------------------------------------------------------------

    def _topology_handler(self, api: TopologyApi) -> _Handler:
        def upsert(raw: Obj) -> None:
            topology = parse_topology(raw, api.name)
            if topology.error is not None:  # its gangs' Events say so too
                log.warning("topology %s is invalid: %s", topology.key, topology.error)
            self._topologies_changed(self.topologies.upsert(topology))

        def delete(key: Key, raw: Obj | None) -> None:
            self._topologies_changed(self.topologies.remove(f"{api.name}/{key[1]}"))

        return _Handler(upsert, delete)

    def _upsert_hypernode(self, raw: Obj) -> None:
        hypernode = parse_hypernode(raw)
        if hypernode.error is not None:  # left out of the tree; gangs asking see the rest
            log.warning("HyperNode %s is invalid: %s", hypernode.name, hypernode.error)
        self._hypernodes[hypernode.name] = hypernode
        self._hypernodes_changed()

    def _delete_hypernode(self, key: Key, raw: Obj | None) -> None:
        if self._hypernodes.pop(key[1], None) is not None:
            self._hypernodes_changed()

    def _hypernodes_changed(self) -> None:
        hypernodes = tuple(sorted(self._hypernodes.values(), key=lambda h: h.name))
        changed = self.cache.set_hypernodes(hypernodes)
        self._topologies_changed(self.topologies.set_hypernodes(hypernodes) or changed)

    def _topologies_changed(self, changed: bool) -> None:
        """A level a waiting gang asked for may exist now, or be gone: look again."""
        if changed:
            self.queue.activate_unschedulable()

    def _rank(self, queue: str) -> tuple[float, int]:
        """GangQueue's order among queues: the one furthest below its fair share first."""
        return self.ledger.rank(queue)

    # --- helpers for the cycle -------------------------------------------------------------

    def enqueue(self, gang: Gang) -> None:
        """Offer the gang to the queue under its current QueueSort key, in its queue's heap."""
        self.ledger.refresh(gang)
        self.queue.add(
            gang.key,
            self.queue_sort.sort_key(gang),
            gang.membership.queue or "",
            gang.priority,
        )

    def register_vectors(self, pods: list[PodInfo]) -> None:
        """Give every requested resource a column before a snapshot is taken."""
        for pod in pods:
            self.cache.index.requests_vector(pod.requests)


def _status_note_only(before: PodInfo | None, after: PodInfo) -> bool:
    """The update only carried a scheduler's note to the pod (our own ``PodScheduled``
    condition): nothing a new cycle could use, and retrying on it would loop with the writer."""
    return before is not None and before == replace(
        after,
        resource_version=before.resource_version,
        unschedulable_message=before.unschedulable_message,
    )


def _queue_label(info: PodInfo) -> str | None:
    return info.labels.get(KAI_QUEUE_LABEL)


def _described_by(info: PodGroupInfo, key: GangKey) -> bool:
    """The gang ``key`` is the group ``info`` describes (or, for a 1.35 Workload's pod group,
    one of its replica keys)."""
    return key.namespace == info.namespace and (
        key.group == info.group or key.group.startswith(info.group + "/")
    )


class _Handler:
    """Adapts ClusterState's methods to the informer Handler protocol."""

    def __init__(
        self,
        upsert: Callable[[Obj], None],
        delete: Callable[[Key, Obj | None], None],
        decoding: Decoding = WHOLE,
    ) -> None:
        self.upsert = upsert
        self.delete = delete
        #: how the informer decodes this kind's lists and watch lines (``upsert`` reads them)
        self.decoding = decoding
        self.sync_count = 0

    def synced(self) -> None:
        self.sync_count += 1
