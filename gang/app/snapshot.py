"""A cluster's shape in one file: what placement reads, for what-if runs away from the cluster.

``gang fit`` and ``gang explain`` (with no scheduler running) answer on a copy of the live
cluster; ``gang sim serve --from-snapshot`` and ``gang bench --from-snapshot`` replay a real
cluster's shape for capacity planning. All of them start from the same file: the objects
placement reads — namespaces (their labels feed namespaceSelectors), PriorityClasses, nodes,
PodDisruptionBudgets, every gang API's group objects, every queue API's queues and every
topology API's objects (Volcano's HyperNodes too) the server serves, DeviceClasses,
ResourceSlices, ResourceClaims and their templates where DRA is served, and every pod that is not
finished — as the API server returned them, minus what only the server may write again
(``managedFields``, ``resourceVersion``, ``uid``).

``anonymise`` renames namespaces, nodes, pods and groups (consistently: a pod's ``nodeName``
and group claim follow its node's and group's new names) and drops what identifies a workload
but no placement rule reads: annotations other than the gang ones, container images, commands,
arguments and environment. Labels are kept: selectors, affinity and spread rules match them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from gang.kube.client import make_api_client
from gang.kube.transport import NAMESPACES, NODES, PDBS, PODS, Kind, Kube
from gang.models.dra import DRA_GROUP, DRA_VERSION, POD_CLAIM_NAME_ANNOTATION
from gang.models.groupapis import GROUP_APIS
from gang.models.podgroup import POD_GROUP_LABEL
from gang.models.queueapis import KAI_QUEUE_LABEL, QUEUE_APIS, VOLCANO_DEFAULT_QUEUE
from gang.models.snapshot import SNAPSHOT_KIND, SNAPSHOT_VERSION, load
from gang.models.topologyapis import TOPOLOGY_ANNOTATIONS, TOPOLOGY_APIS
from gang.state.podinfo import EXPECTED_RUN_ANNOTATION, SIGS_LEGACY_LABELS, VOLCANO_ANNOTATIONS

Obj = dict[str, Any]
#: dynamic resource allocation: the devices, the classes that select them, and the claims
#: (with their allocations) and templates pods name
DRA_SNAPSHOT_KINDS = (
    ("deviceclasses", "DeviceClass"),
    ("resourceslices", "ResourceSlice"),
    ("resourceclaimtemplates", "ResourceClaimTemplate"),
    ("resourceclaims", "ResourceClaim"),
)
DRA_KINDS_ANONYMISED = frozenset({"ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"})
PRIORITY_CLASSES = Kind("priorityclasses", "scheduling.k8s.io", "v1", "priorityclasses")
#: metadata only the API server writes; a replay gets its own
SERVER_FIELDS = ("managedFields", "resourceVersion", "uid", "selfLink", "generation")
#: annotations placement or the gang APIs read, kept by ``anonymise``
KEPT_ANNOTATIONS = frozenset(
    {*VOLCANO_ANNOTATIONS, "volcano.sh/task-spec", EXPECTED_RUN_ANNOTATION, *TOPOLOGY_ANNOTATIONS}
)


async def snapshot_of(path: Path | None = None, kubeconfig: str | None = None) -> Obj:
    """The snapshot in ``path`` if given, else one taken of the cluster ``kubeconfig`` (or the
    in-cluster config, or ``~/.kube/config``) names."""
    if path is not None:
        return load(path)
    client = await make_api_client(kubeconfig)
    try:
        return await take(Kube(client))
    finally:
        await client.close()


async def take(kube: Kube) -> Obj:
    """List everything placement reads; the snapshot document."""
    items: list[Obj] = []
    for kind in (NAMESPACES, PRIORITY_CLASSES, NODES, PDBS):
        items += [_typed(kind, o) for o in (await kube.list(kind))[0]]
    seen: set[tuple[str, str]] = set()
    for api in GROUP_APIS:
        if (api.group, api.plural) in seen:
            continue
        for version in api.versions:
            if await kube.serves(api.group, version, api.plural):
                kind = Kind(api.plural, api.group, version, api.plural)
                items += [_typed(kind, o, api.kind) for o in (await kube.list(kind))[0]]
                seen.add((api.group, api.plural))
                break
    for queues in QUEUE_APIS:
        if await kube.serves(queues.group, queues.version, queues.plural):
            kind = Kind(queues.plural, queues.group, queues.version, queues.plural)
            items += [_typed(kind, o, queues.kind) for o in (await kube.list(kind))[0]]
    for topologies in TOPOLOGY_APIS:
        for version in topologies.versions:
            if await kube.serves(topologies.group, version, topologies.plural):
                kind = Kind(topologies.plural, topologies.group, version, topologies.plural)
                items += [_typed(kind, o, topologies.kind) for o in (await kube.list(kind))[0]]
                break
    if await kube.serves(DRA_GROUP, DRA_VERSION, "resourceclaims"):
        for plural, kind_name in DRA_SNAPSHOT_KINDS:
            kind = Kind(plural, DRA_GROUP, DRA_VERSION, plural)
            items += [_typed(kind, o, kind_name) for o in (await kube.list(kind))[0]]
    pods = (await kube.list(PODS))[0]
    items += [_typed(PODS, p) for p in pods if _unfinished(p)]
    return {
        "kind": SNAPSHOT_KIND,
        "version": SNAPSHOT_VERSION,
        "taken": time.time(),
        "items": [_clean(o) for o in items],
    }


def _typed(kind: Kind, obj: Obj, kind_name: str | None = None) -> Obj:
    """List items come without apiVersion and kind: put them back."""
    api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
    names = {"pods": "Pod", "nodes": "Node", "namespaces": "Namespace"}
    names |= {"priorityclasses": "PriorityClass", "poddisruptionbudgets": "PodDisruptionBudget"}
    return {"apiVersion": api_version, "kind": kind_name or names[kind.plural], **obj}


def _unfinished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _clean(obj: Obj) -> Obj:
    meta = dict(obj.get("metadata") or {})
    for name in SERVER_FIELDS:
        meta.pop(name, None)
    return {**obj, "metadata": meta}


# --- anonymising --------------------------------------------------------------------------------


class _Names:
    """One new name per old name, per kind of name: ``prefix-1``, ``prefix-2``, ..."""

    def __init__(self, prefix: str, keep: Iterable[str] = ()) -> None:
        self.prefix = prefix
        self.names: dict[str, str] = {k: k for k in keep}

    def __call__(self, old: str) -> str:
        if old not in self.names:
            self.names[old] = f"{self.prefix}-{len(self.names) + 1}"
        return self.names[old]


def anonymise(snapshot: Obj) -> Obj:
    """The snapshot with namespaces, nodes, pods and groups renamed, workload details dropped."""
    system = ("default", "kube-system", "kube-public", "kube-node-lease")
    ns, node, pod, group = (
        _Names("ns", system),
        _Names("node"),
        _Names("pod"),
        _Names("group"),
    )
    queue = _Names("queue", (VOLCANO_DEFAULT_QUEUE, "root"))
    claim = _Names("claim")  # ResourceClaims and their templates (a generated name holds the pod's)
    piece = _Names("slice")  # ResourceSlices (named after their node)
    nodes = [o["metadata"]["name"] for o in snapshot["items"] if o.get("kind") == "Node"]
    out = []
    for obj in snapshot["items"]:
        obj = orjson.loads(orjson.dumps(obj))  # a deep copy
        meta = obj["metadata"]
        kind = obj["kind"]
        if kind == "Namespace":
            meta["name"] = ns(meta["name"])
        elif kind == "Node":
            meta["name"] = node(meta["name"])
            labels = meta.get("labels") or {}
            if "kubernetes.io/hostname" in labels:
                labels["kubernetes.io/hostname"] = meta["name"]
        elif kind == "Pod":
            _anonymise_pod(obj, pod, node, group)
        elif kind == "Queue":  # Volcano's or KAI's: its name, and its parent's
            meta["name"] = queue(meta["name"])
            spec = obj.get("spec") or {}
            for parent in ("parent", "parentQueue"):
                if spec.get(parent):
                    spec[parent] = queue(spec[parent])
        elif kind == "ElasticQuota":
            pass  # one per namespace: the namespace is renamed below
        elif kind == "Topology":
            pass  # levels are label keys; a KAI pod names its topology by this name
        elif kind == "HyperNode":
            _anonymise_hypernode(obj, nodes, node)
        elif kind in DRA_KINDS_ANONYMISED:
            _anonymise_devices(obj, nodes, node, pod, claim, piece)
        elif kind not in ("PriorityClass", "DeviceClass"):
            meta["name"] = group(meta["name"]) if kind != "PodDisruptionBudget" else meta["name"]
        if "namespace" in meta:
            meta["namespace"] = ns(meta["namespace"])
        _anonymise_queue_claims(obj, queue)
        if kind == "Pod":
            _anonymise_pod_claims(obj, claim)
        elif kind == "ResourceClaim":  # its pod: owner and consumer, renamed above
            annotations = meta.get("annotations") or {}
            meta["annotations"] = {
                k: v for k, v in annotations.items() if k == POD_CLAIM_NAME_ANNOTATION
            }
        else:
            meta.pop("annotations", None)
        if kind != "ResourceClaim":
            meta.pop("ownerReferences", None)
        out.append(obj)
    return {**snapshot, "items": out, "anonymised": True}


def _anonymise_hypernode(obj: Obj, nodes: list[str], node: Callable[[str], str]) -> None:
    """A HyperNode's node members follow their nodes' new names: an exact name is renamed, a
    pattern (which the new names would not match) becomes the nodes it matched, by name."""
    spec = obj.get("spec") or {}
    members = []
    for member in spec.get("members") or []:
        selector = member.get("selector") or {}
        if member.get("type") == "Node" and (selector.get("exactMatch") or {}).get("name"):
            selector["exactMatch"]["name"] = node(selector["exactMatch"]["name"])
        elif member.get("type") == "Node" and selector.get("regexMatch") is not None:
            try:
                pattern = re.compile(str(selector["regexMatch"].get("pattern") or ""))
            except re.error:
                pattern = None
            for name in nodes:
                if pattern is not None and pattern.search(name):
                    members.append(
                        {"type": "Node", "selector": {"exactMatch": {"name": node(name)}}}
                    )
            continue
        members.append(member)
    spec["members"] = members


def _anonymise_devices(
    obj: Obj,
    nodes: list[str],
    node: Callable[[str], str],
    pod: Callable[[str], str],
    claim: Callable[[str], str],
    piece: Callable[[str], str],
) -> None:
    """ResourceSlices, ResourceClaims and templates: node names (a slice's node, a pool named
    after its node, an allocation's results and node selector), pod names (a claim's owner and
    consumers) and claim names follow their new names; device names and attributes stay."""
    meta, spec, kind = obj["metadata"], obj.get("spec") or {}, obj["kind"]
    known = set(nodes)

    def renamed(name: Any) -> Any:
        return node(name) if isinstance(name, str) and name in known else name

    if kind == "ResourceSlice":
        meta["name"] = piece(meta["name"])
        spec["nodeName"] = renamed(spec.get("nodeName"))
        pool = spec.get("pool") or {}
        pool["name"] = renamed(pool.get("name"))
        return
    meta["name"] = claim(meta["name"])
    if kind == "ResourceClaimTemplate":
        return
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Pod":
            ref["name"] = pod(str(ref.get("name")))
    status = obj.get("status") or {}
    for entry in status.get("reservedFor") or []:
        if entry.get("resource") == "pods":
            entry["name"] = pod(str(entry.get("name")))
    allocation = status.get("allocation") or {}
    for result in (allocation.get("devices") or {}).get("results") or []:
        result["pool"] = renamed(result.get("pool"))
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for requirement in term.get("matchFields") or []:
            requirement["values"] = [renamed(v) for v in requirement.get("values") or []]


def _anonymise_pod_claims(obj: Obj, claim: Callable[[str], str]) -> None:
    """The claims and templates a pod names follow their new names."""
    for entry in (obj.get("spec") or {}).get("resourceClaims") or []:
        for field in ("resourceClaimName", "resourceClaimTemplateName"):
            if entry.get(field):
                entry[field] = claim(entry[field])
    for entry in (obj.get("status") or {}).get("resourceClaimStatuses") or []:
        if entry.get("resourceClaimName"):
            entry["resourceClaimName"] = claim(entry["resourceClaimName"])


def _anonymise_queue_claims(obj: Obj, queue: Callable[[str], str]) -> None:
    """The queue a pod or group names (KAI's label, a Volcano PodGroup's spec.queue) follows
    its queue's new name."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(KAI_QUEUE_LABEL):
        labels[KAI_QUEUE_LABEL] = queue(labels[KAI_QUEUE_LABEL])
    spec = obj.get("spec") or {}
    if obj.get("kind") == "PodGroup" and isinstance(spec.get("queue"), str) and spec["queue"]:
        spec["queue"] = queue(spec["queue"])


def _anonymise_pod(
    obj: Obj, pod: Callable[[str], str], node: Callable[[str], str], group: Callable[[str], str]
) -> None:
    meta, spec = obj["metadata"], obj.setdefault("spec", {})
    meta["name"] = pod(meta["name"])
    meta.pop("generateName", None)
    labels = meta.get("labels") or {}
    for key in (POD_GROUP_LABEL, *SIGS_LEGACY_LABELS):
        if key in labels:
            labels[key] = group(labels[key])
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k in KEPT_ANNOTATIONS
    }
    for key in VOLCANO_ANNOTATIONS:
        if key in annotations:
            annotations[key] = group(annotations[key])
    meta["annotations"] = annotations
    if spec.get("nodeName"):
        spec["nodeName"] = node(spec["nodeName"])
    scheduling_group = spec.get("schedulingGroup") or {}
    if scheduling_group.get("podGroupName"):
        scheduling_group["podGroupName"] = group(scheduling_group["podGroupName"])
    ref = spec.get("workloadRef") or {}
    if ref.get("name"):
        ref["name"] = group(ref["name"])
    for field in ("hostname", "subdomain", "serviceAccountName", "serviceAccount"):
        spec.pop(field, None)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            for private in ("command", "args", "env", "envFrom", "workingDir"):
                container.pop(private, None)
            container["image"] = "image"
    status = obj.get("status") or {}
    for private in ("podIP", "podIPs", "hostIP", "hostIPs", "containerStatuses", "message"):
        status.pop(private, None)
