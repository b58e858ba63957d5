"""The resource types the simulator serves, and how each behaves.

A kube-apiserver's behaviour differs per resource in a handful of ways that a scheduler notices:
whether it is namespaced, which field selectors it supports, whether a status subresource splits
spec from status writes, whether DELETE answers with the object or a Status, and whether it can
be created by a PUT. Writing those facts down once, as data, keeps the HTTP layer generic and
lets discovery (`/api/v1`, `/apis/...`) be generated from the same table that routes requests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
BASE_FIELD_SELECTORS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One REST resource (group, version, plural) and the server behaviours attached to it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: subresources served besides the object itself ("status", "binding", "eviction").
    subresources: tuple[str, ...] = ()
    #: extra fields accepted in fieldSelector besides metadata.name / metadata.namespace.
    extra_field_selectors: frozenset[str] = frozenset()
    #: built-in types accept strategic merge patch; custom resources answer 415 to it.
    builtin: bool = True
    #: DELETE answers with the deleted object (pods, namespaces, CRs) instead of a Status.
    return_deleted_object: bool = False
    #: PUT of a missing object creates it (events, leases).
    create_on_update: bool = False
    #: metadata.generation is kept and bumped on spec changes.
    tracks_generation: bool = False
    #: objects of this type are stored under another type's key and converted on the way in
    #: and out (events.k8s.io/v1 events are core/v1 events in one store, as in a real server).
    storage_of: str | None = None
    verbs: tuple[str, ...] = ALL_VERBS
    field_selectors: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "field_selectors", BASE_FIELD_SELECTORS | self.extra_field_selectors
        )

    @property
    def api_version(self) -> str:
        return self.version if not self.group else f"{self.group}/{self.version}"

    @property
    def key(self) -> str:
        """Identity of this REST view: group/version/plural."""
        return f"{self.group}/{self.version}/{self.plural}"

    @property
    def storage_key(self) -> str:
        """Where objects live in the store; several views may share one storage."""
        return self.storage_of or self.key

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def qualified_plural(self) -> str:
        """How error messages name the resource: ``pods`` or ``podgroups.scheduling.x-k8s.io``."""
        return self.plural if not self.group else f"{self.plural}.{self.group}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


POD_GROUP_API = "scheduling.x-k8s.io"

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        subresources=("status",),
        return_deleted_object=True,
        extra_field_selectors=frozenset({"status.phase"}),
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "Node",
        namespaced=False,
        short_names=("no",),
        subresources=("status",),
        extra_field_selectors=frozenset({"spec.unschedulable"}),
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        namespaced=True,
        short_names=("po",),
        categories=("all",),
        subresources=("status", "binding", "eviction"),
        return_deleted_object=True,
        extra_field_selectors=frozenset(
            {
                "spec.nodeName",
                "spec.schedulerName",
                "status.phase",
                "spec.restartPolicy",
                "spec.serviceAccountName",
                "status.podIP",
                "status.nominatedNodeName",
            }
        ),
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        namespaced=True,
        short_names=("svc",),
        categories=("all",),
        subresources=("status",),
    ),
    # Storage, for the volume controller stand-in (``gang.sim.volumes``).
    ResourceType(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        namespaced=True,
        short_names=("pvc",),
        subresources=("status",),
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        namespaced=False,
        short_names=("pv",),
        subresources=("status",),
    ),
    ResourceType(
        "",
        "v1",
        "events",
        "Event",
        namespaced=True,
        short_names=("ev",),
        create_on_update=True,
        extra_field_selectors=frozenset(
            {
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            }
        ),
    ),
    # The apiserver also serves the binding subresource as a namespaced create-only collection.
    ResourceType("", "v1", "bindings", "Binding", namespaced=True, verbs=("create",)),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        namespaced=True,
        short_names=("ev",),
        create_on_update=True,
        storage_of="/v1/events",
        extra_field_selectors=frozenset(
            {
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "reason",
                "reportingController",
                "type",
            }
        ),
    ),
    ResourceType(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        namespaced=True,
        create_on_update=True,
    ),
    ResourceType(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        namespaced=False,
        short_names=("pc",),
    ),
    ResourceType(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        namespaced=False,
        short_names=("sc",),
    ),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", namespaced=False),
    # Workloads, for the Job and StatefulSet controller stand-ins (``gang.sim.controllers``).
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "Job",
        namespaced=True,
        categories=("all",),
        subresources=("status",),
        tracks_generation=True,
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        namespaced=True,
        short_names=("sts",),
        categories=("all",),
        subresources=("status",),
        tracks_generation=True,
    ),
    # Served (stored, listed, watched) without a controller: schedulers read their selectors.
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        namespaced=True,
        short_names=("rs",),
        categories=("all",),
        subresources=("status",),
        tracks_generation=True,
    ),
    ResourceType(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        namespaced=True,
        short_names=("rc",),
        categories=("all",),
        subresources=("status",),
        tracks_generation=True,
    ),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        namespaced=True,
        short_names=("pdb",),
        subresources=("status",),
        tracks_generation=True,
    ),
    ResourceType(
        POD_GROUP_API,
        "v1alpha1",
        "podgroups",
        "PodGroup",
        namespaced=True,
        short_names=("pg", "pgs"),
        subresources=("status",),
        builtin=False,
        return_deleted_object=True,
        tracks_generation=True,
    ),
)


class Registry:
    """Lookup of resource types by the coordinates that appear in a URL."""

    def __init__(self, types: Iterable[ResourceType] = RESOURCE_TYPES) -> None:
        self.types = tuple(types)
        self._by_path = {(t.group, t.version, t.plural): t for t in self.types}

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_key(self, key: str) -> ResourceType:
        group, version, plural = key.split("/")
        found = self.find(group, version, plural)
        if found is None:
            raise KeyError(key)
        return found

    def group_versions(self) -> dict[str, list[str]]:
        """Group name → its versions, in registration order; "" is the core group."""
        out: dict[str, list[str]] = {}
        for t in self.types:
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self.types if t.group == group and t.version == version]
