"""A snapshot of a real cluster replayed into the simulator (``--from-snapshot``).

Objects go in through the API's own create path (admission included), in the order a cluster
builds them: namespaces, PriorityClasses, nodes, disruption budgets, group objects, pods. A pod
is created bound (``spec.nodeName`` set, as a kubelet-free benchmark does) and then its status
is written back through ``pods/status``, so a Running pod stays Running, its start time (from
which gang estimates when it ends) kept. ResourceClaims come after the pods: their owners and
consumers are the replay's pods of the same names, and their allocations are written back, so
the devices in use stay in use. Creation times are the replay's own, but objects are
created in their original order, so the order of gangs in the queue holds. Objects the
simulator does not serve, and objects that exist already (the default namespaces, the system
PriorityClasses), are counted and skipped.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from gang.sim.api import SimApi
from gang.sim.errors import ApiError
from gang.sim.resources import ResourceType

Obj = dict[str, Any]
#: the order objects are created in; anything else (group objects) comes before pods
ORDER = {
    "Namespace": 0,
    "PriorityClass": 1,
    "Node": 2,
    "PodDisruptionBudget": 3,
    "Queue": 4,
    "ElasticQuota": 4,
    "DeviceClass": 4,
    "ResourceSlice": 4,
    "Pod": 9,
    "ResourceClaim": 10,
}
#: kinds whose status the replay restores after creating them (a create drops it): a pod's
#: phase, a queue's state (a Closed Volcano queue takes no gangs), a claim's allocation
STATUS_KEPT = frozenset({"Pod", "Queue", "ResourceClaim"})


def load_into(api: SimApi, snapshot: Obj) -> Counter[str]:
    """Create the snapshot's objects; per outcome (``created``, ``exists``, ``unserved``) how
    many."""
    counts: Counter[str] = Counter()
    # creation times are the replay's own; created in the original order, queue order holds
    items = sorted(
        snapshot["items"],
        key=lambda o: (
            ORDER.get(o.get("kind", ""), 5),
            str((o.get("metadata") or {}).get("creationTimestamp") or ""),
        ),
    )
    pod_uids: dict[tuple[str, str], str] = {}  # the replay's pods: (namespace, name) → new uid
    for obj in items:
        rt = resource_of(api, obj)
        if rt is None:
            counts["unserved"] += 1
            continue
        body = copy.deepcopy(obj)
        namespace = body["metadata"].get("namespace") if rt.namespaced else None
        if rt.kind == "ResourceClaim":
            _follow_pods(body, str(namespace or ""), pod_uids)
        status = body.get("status") if rt.kind in STATUS_KEPT and rt.has_status else None
        try:
            created = api.create(rt, namespace, body)
        except ApiError as err:
            if err.code == 409:
                counts["exists"] += 1
                continue
            raise ValueError(
                f"snapshot {obj['kind']} {body['metadata'].get('name')}: {err.message}"
            ) from None
        counts["created"] += 1
        if rt.kind == "Pod":
            pod_uids[(str(namespace or ""), created["metadata"]["name"])] = created["metadata"][
                "uid"
            ]
        if status:
            meta = created["metadata"]
            api.update(
                rt,
                namespace,
                meta["name"],
                {**created, "status": status},
                subresource="status",
            )
    return counts


def _follow_pods(claim: Obj, namespace: str, pod_uids: dict[tuple[str, str], str]) -> None:
    """A claim names its pods by uid (owner, consumers), and a snapshot drops uids: point them
    at the replay's pods of the same names, and drop consumers the snapshot has no pod for (a
    finished pod's entry the resourceclaim controller would remove anyway)."""
    for ref in claim["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Pod" and (namespace, ref.get("name")) in pod_uids:
            ref["uid"] = pod_uids[(namespace, ref["name"])]
    status = claim.get("status") or {}
    if status.get("reservedFor"):
        status["reservedFor"] = [
            {**entry, "uid": pod_uids[(namespace, entry.get("name"))]}
            for entry in status["reservedFor"]
            if entry.get("resource") == "pods" and (namespace, entry.get("name")) in pod_uids
        ]


def resource_of(api: SimApi, obj: Obj) -> ResourceType | None:
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    for rt in api.registry.in_group_version(group, version):
        if rt.kind == obj.get("kind"):
            return rt
    return None
