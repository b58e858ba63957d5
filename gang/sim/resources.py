"""The resource types the simulator serves, and how each behaves.

A kube-apiserver's behaviour differs per resource in a handful of ways that a scheduler notices:
whether it is namespaced, which field selectors it supports, whether a status subresource splits
spec from status writes, whether DELETE answers with the object or a Status, and whether it can
be created by a PUT. Writing those facts down once, as data, keeps the HTTP layer generic and
lets discovery (`/api/v1`, `/apis/...`) and the OpenAPI documents (``gang.sim.openapi``) be
generated from the same table that routes requests.

Which gang APIs a cluster serves depends on its Kubernetes version: the native
``scheduling.k8s.io`` Workload/PodGroup API changed shape in every release from 1.35 to 1.37, so
the table is chosen per version (:func:`resource_types`). The PodGroup CRDs that job operators
emit (scheduler-plugins' old ``scheduling.sigs.k8s.io`` and Volcano's ``scheduling.volcano.sh``)
are served by every version, beside gang's own ``scheduling.x-k8s.io``.
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
    #: and out (events.k8s.io/v1 events are core/v1 events in one store, as in a real server;
    #: scheduling.k8s.io/v1alpha3 PodGroups are the v1beta1 ones with another apiVersion).
    storage_of: str | None = None
    verbs: tuple[str, ...] = ALL_VERBS
    #: a built-in whose PrepareForCreate clears status (native PodGroups); custom resources
    #: with a status subresource always do
    drops_status_on_create: bool = False
    #: which server-side table printer ``kubectl get`` gets (``gang.sim.tables``); None: by plural
    printer: str | None = None
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
    def storage_api_version(self) -> str:
        """The apiVersion objects carry in storage (this view's own unless ``storage_of``)."""
        if self.storage_of is None:
            return self.api_version
        group, version, _ = self.storage_of.split("/")
        return version if not group else f"{group}/{version}"

    @property
    def printer_key(self) -> str:
        return self.printer or self.plural

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
#: the native gang API group (built in, beside ``v1`` PriorityClasses)
NATIVE_SCHEDULING_API = "scheduling.k8s.io"
#: scheduler-plugins' PodGroup CRD before it moved to scheduling.x-k8s.io (v0.25.7)
SIGS_POD_GROUP_API = "scheduling.sigs.k8s.io"
#: Volcano's PodGroup CRD (Kubeflow Trainer, MPI Operator, Training Operator, LWS emit it)
VOLCANO_POD_GROUP_API = "scheduling.volcano.sh"
#: the Kubernetes versions whose native gang API the simulator serves (``--kubernetes-version``)
KUBERNETES_VERSIONS = ("1.35", "1.36", "1.37")
DEFAULT_KUBERNETES_VERSION = "1.37"

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
    # What job operators create beside their pods (the MPI Operator's hostfile and ssh keys).
    ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True, short_names=("cm",)),
    ResourceType("", "v1", "secrets", "Secret", namespaced=True),
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


def _native(
    version: str, plural: str, kind: str, *, status: bool, storage_of: str | None = None
) -> ResourceType:
    return ResourceType(
        NATIVE_SCHEDULING_API,
        version,
        plural,
        kind,
        namespaced=True,
        subresources=("status",) if status else (),
        tracks_generation=True,
        drops_status_on_create=status,
        storage_of=storage_of,
        printer="default",
    )


def _v1beta1(plural: str) -> str:
    return f"{NATIVE_SCHEDULING_API}/v1beta1/{plural}"


#: the native gang API per Kubernetes version: 1.35 a v1alpha1 Workload embedding its pod
#: groups; 1.36 a v1alpha2 Workload and a standalone PodGroup; 1.37 v1alpha3 and v1beta1, two
#: views of one storage, v1beta1 listed first so that clients prefer it)
NATIVE_GANG_TYPES: dict[str, tuple[ResourceType, ...]] = {
    "1.35": (_native("v1alpha1", "workloads", "Workload", status=False),),
    "1.36": (
        _native("v1alpha2", "workloads", "Workload", status=False),
        _native("v1alpha2", "podgroups", "PodGroup", status=True),
    ),
    "1.37": (
        _native("v1beta1", "workloads", "Workload", status=False),
        _native("v1beta1", "podgroups", "PodGroup", status=True),
        _native(
            "v1alpha3", "workloads", "Workload", status=False, storage_of=_v1beta1("workloads")
        ),
        _native("v1alpha3", "podgroups", "PodGroup", status=True, storage_of=_v1beta1("podgroups")),
    ),
}


def _custom_type(
    group: str, version: str, plural: str, kind: str, namespaced: bool
) -> ResourceType:
    """A custom resource as its CRD serves it, with a status subresource."""
    return ResourceType(
        group,
        version,
        plural,
        kind,
        namespaced=namespaced,
        subresources=("status",),
        builtin=False,
        return_deleted_object=True,
        tracks_generation=True,
        printer="default",
    )


#: PodGroup CRDs of other schedulers, served by every version. No short names: ``pg`` stays
#: gang's own scheduling.x-k8s.io (their CRDs, ``manifests/extra-apis/``, say the same).
OPERATOR_POD_GROUP_TYPES: tuple[ResourceType, ...] = (
    _custom_type(SIGS_POD_GROUP_API, "v1alpha1", "podgroups", "PodGroup", namespaced=True),
    ResourceType(
        VOLCANO_POD_GROUP_API,
        "v1beta1",
        "podgroups",
        "PodGroup",
        namespaced=True,
        # like upstream's CRD: no status subresource (status is written with the object)
        builtin=False,
        return_deleted_object=True,
        tracks_generation=True,
        printer=f"podgroups.{VOLCANO_POD_GROUP_API}",
    ),
)


#: the queue APIs of shared clusters (Volcano and KAI Queues, scheduler-plugins' ElasticQuota),
#: served by every version; CRDs in ``manifests/extra-apis/``, each with a status subresource
QUEUE_TYPES: tuple[ResourceType, ...] = (
    _custom_type(VOLCANO_POD_GROUP_API, "v1beta1", "queues", "Queue", namespaced=False),
    _custom_type("scheduling.run.ai", "v2", "queues", "Queue", namespaced=False),
    _custom_type(POD_GROUP_API, "v1alpha1", "elasticquotas", "ElasticQuota", namespaced=True),
)


#: Dynamic Resource Allocation (``resource.k8s.io``), served as v1 from Kubernetes 1.34 on:
#: the kinds ``gang.models.dra`` reads, the claim controller stand-in
#: (``gang.sim.resourceclaims``) and the kubelet stand-in act on, and the server-side rules
#: ``gang.sim.dra`` applies. No short names, as upstream; every DELETE answers the object.
DRA_API = "resource.k8s.io"
DRA_SINCE = (1, 34)
DRA_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        DRA_API,
        "v1",
        "deviceclasses",
        "DeviceClass",
        namespaced=False,
        return_deleted_object=True,
        tracks_generation=True,
    ),
    ResourceType(
        DRA_API,
        "v1",
        "resourceclaims",
        "ResourceClaim",
        namespaced=True,
        subresources=("status",),
        return_deleted_object=True,
    ),
    ResourceType(
        DRA_API,
        "v1",
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        namespaced=True,
        return_deleted_object=True,
    ),
    ResourceType(
        DRA_API,
        "v1",
        "resourceslices",
        "ResourceSlice",
        namespaced=False,
        return_deleted_object=True,
        tracks_generation=True,
        extra_field_selectors=frozenset({"spec.nodeName", "spec.driver"}),
    ),
)


def serves_dra(kubernetes_version: str) -> bool:
    """Whether a cluster of this version serves ``resource.k8s.io/v1`` (1.34 and newer)."""
    major, minor = (int(part) for part in kubernetes_version.split(".")[:2])
    return (major, minor) >= DRA_SINCE


#: the topology APIs (Kueue's and KAI's Topology, as upstream's with no status subresource;
#: Volcano's HyperNode, with one), served by every version; CRDs in ``manifests/extra-apis/``
TOPOLOGY_TYPES: tuple[ResourceType, ...] = (
    *(
        ResourceType(
            group,
            version,
            "topologies",
            "Topology",
            namespaced=False,
            builtin=False,
            return_deleted_object=True,
            tracks_generation=True,
            printer="default",
        )
        for group, version in (("kueue.x-k8s.io", "v1beta2"), ("kai.scheduler", "v1alpha1"))
    ),
    _custom_type("topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", namespaced=False),
)


def resource_types(
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
) -> tuple[ResourceType, ...]:
    """Every type a cluster of ``kubernetes_version`` serves, in discovery order.

    The native gang types join their group right after ``v1`` PriorityClasses (the group's
    preferred version stays ``v1``, as on a real server), the DRA types (1.34 and newer) follow
    the built-in groups; the CRDs come last, as aggregated CRD groups do.
    """
    if kubernetes_version not in NATIVE_GANG_TYPES:
        raise ValueError(
            f"unsupported Kubernetes version {kubernetes_version!r}: "
            f"one of {', '.join(KUBERNETES_VERSIONS)}"
        )
    out: list[ResourceType] = []
    dra = DRA_TYPES if serves_dra(kubernetes_version) else ()
    for rt in RESOURCE_TYPES:
        if not rt.builtin:
            out.extend(dra)
            dra = ()
        out.append(rt)
        if rt.group == NATIVE_SCHEDULING_API:
            out.extend(NATIVE_GANG_TYPES[kubernetes_version])
    out.extend(dra)
    out.extend(OPERATOR_POD_GROUP_TYPES)
    out.extend(QUEUE_TYPES)
    out.extend(TOPOLOGY_TYPES)
    return tuple(out)


class Registry:
    """Lookup of resource types by the coordinates that appear in a URL."""

    def __init__(
        self,
        types: Iterable[ResourceType] | None = None,
        *,
        kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    ) -> None:
        self.kubernetes_version = kubernetes_version
        self.types = tuple(types) if types is not None else resource_types(kubernetes_version)
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
