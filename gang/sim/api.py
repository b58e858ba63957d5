"""The verbs of the simulated apiserver: create, update, patch, delete, bind — with their rules.

This is the "registry strategy" layer of a kube-apiserver, reduced to what schedulers and their
operators observe: defaulting of uid / creationTimestamp / generation, the status subresource
split (a main-resource write never changes status and vice versa), optimistic concurrency on
``metadata.resourceVersion``, no-op writes that do not bump the version, graceful deletion of
bound pods, finalizers, and ``pods/binding`` exactly as recorded from a real server. Transport
(HTTP, selectors, watch streams) is ``gang.sim.server``'s business, storage is ``gang.sim.store``'s.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gang.sim import dra, errors, events, pods, storage, workloads
from gang.sim.errors import ApiError
from gang.sim.patch import JSON_PATCH, PatchError, UnsupportedPatchType, apply_patch
from gang.sim.resources import DRA_API, Registry, ResourceType
from gang.sim.store import Obj, Store

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# apimachinery's validation messages for names, regular expressions and examples included
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    r"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
SYSTEM_PRIORITY_CLASSES = (
    ("system-node-critical", 2000001000),
    ("system-cluster-critical", 2000000000),
)
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: a PodDisruptionBudgetStatus{} as policy/v1 writes it (the counts have no omitempty)
EMPTY_PDB_STATUS = {
    "disruptionsAllowed": 0,
    "currentHealthy": 0,
    "desiredHealthy": 0,
    "expectedPods": 0,
}
#: the label every namespace carries, set (and reset) by the server on every write
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None


class SimApi:
    """Apply the verbs to the store. Every method raises ApiError on a refusal."""

    def __init__(
        self,
        store: Store,
        registry: Registry | None = None,
        *,
        clock: Callable[[], float] = time.time,
        node_controller: bool = True,
    ) -> None:
        self.store = store
        self.registry = registry or Registry()
        self.clock = clock
        #: when on, a new node whose Ready condition is True loses the admission-added
        #: not-ready taint right after creation, as a node lifecycle controller would do.
        self.node_controller = node_controller
        self.rt_namespaces = self.registry.by_key("/v1/namespaces")
        self.rt_pods = self.registry.by_key("/v1/pods")
        self.rt_nodes = self.registry.by_key("/v1/nodes")
        self.rt_priority = self.registry.by_key("scheduling.k8s.io/v1/priorityclasses")
        self.rt_events = self.registry.by_key("/v1/events")
        self.rt_services = self.registry.by_key("/v1/services")
        self.rt_jobs = self.registry.by_key("batch/v1/jobs")
        self.rt_statefulsets = self.registry.by_key("apps/v1/statefulsets")
        self.rt_pvcs = self.registry.by_key("/v1/persistentvolumeclaims")
        self.rt_pvs = self.registry.by_key("/v1/persistentvolumes")
        self.rt_storage_classes = self.registry.by_key("storage.k8s.io/v1/storageclasses")
        self.rt_csinodes = self.registry.by_key("storage.k8s.io/v1/csinodes")
        self.rt_pdbs = self.registry.by_key("policy/v1/poddisruptionbudgets")
        #: resource.k8s.io/v1 (None on a version that does not serve it)
        self.rt_device_classes = self.registry.find(DRA_API, "v1", "deviceclasses")
        self.rt_resource_claims = self.registry.find(DRA_API, "v1", "resourceclaims")
        self.rt_claim_templates = self.registry.find(DRA_API, "v1", "resourceclaimtemplates")
        self.rt_resource_slices = self.registry.find(DRA_API, "v1", "resourceslices")

    def bootstrap(self) -> None:
        """What a fresh cluster has: the standard namespaces and system priority classes."""
        for ns in INITIAL_NAMESPACES:
            if self.store.get(self.rt_namespaces.storage_key, "", ns) is None:
                self.create(self.rt_namespaces, None, {"metadata": {"name": ns}})
        for name, value in SYSTEM_PRIORITY_CLASSES:
            if self.store.get(self.rt_priority.storage_key, "", name) is None:
                self.create(
                    self.rt_priority,
                    None,
                    {
                        "metadata": {"name": name},
                        "value": value,
                        "description": "Used for system critical pods that must not be moved.",
                    },
                )

    # --- views -------------------------------------------------------------------------

    def to_view(self, rt: ResourceType, obj: Obj) -> Obj:
        """The stored object as this REST view shows it."""
        if rt.storage_of is None:
            return obj
        if rt.storage_of == self.rt_events.key:
            return events.to_events_v1(obj)
        # another version of the same kind (scheduling.k8s.io v1alpha3 ↔ v1beta1): the
        # fields are the same, only the apiVersion differs
        return {**obj, "apiVersion": rt.api_version}

    def _to_storage(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt.storage_of is None:
            return obj
        if rt.storage_of == self.rt_events.key:
            return events.to_core(obj)
        return {**obj, "apiVersion": rt.storage_api_version}

    def _now(self) -> str:
        return rfc3339(self.clock())

    # --- reads -------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.store.get(rt.storage_key, namespace or "", name)
        if obj is None:
            raise errors.not_found(rt, name)
        return self.to_view(rt, obj)

    def list_objects(self, rt: ResourceType, namespace: str | None) -> list[Obj]:
        return [self.to_view(rt, o) for o in self.store.items(rt.storage_key, namespace)]

    # --- create ------------------------------------------------------------------------

    def _check_body(self, rt: ResourceType, body: Any) -> Obj:
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            raise errors.bad_request(
                f"the body of the request was in an unknown format: expected a {rt.kind} object"
            )
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if kind not in (None, "", rt.kind):
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        if api_version not in (None, "", rt.api_version):
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({rt.api_version})"
            )
        return {
            **body,
            "apiVersion": rt.api_version,
            "kind": rt.kind,
            "metadata": dict(body.get("metadata") or {}),
        }

    def _check_namespace(self, rt: ResourceType, namespace: str | None, meta: Obj) -> str:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return ""
        assert namespace is not None
        given = meta.get("namespace")
        if given not in (None, "", namespace):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
        if self.store.get(self.rt_namespaces.storage_key, "", namespace) is None:
            raise errors.namespace_not_found(namespace)
        return namespace

    def _check_name(self, rt: ResourceType, name: Any) -> None:
        pattern, limit, message = (
            (_LABEL, 63, _LABEL_MESSAGE)
            if rt is self.rt_namespaces
            else (_SUBDOMAIN, 253, _SUBDOMAIN_MESSAGE)
        )
        if rt.storage_key == "/v1/events":
            return  # event names are generated from object names and may carry any suffix
        text = str(name)
        problems = []
        if len(text) > limit:
            problems.append(f"must be no more than {limit} characters")
        if not isinstance(name, str) or not pattern.match(name):
            problems.append(message)
        if problems:
            raise errors.invalid(
                rt, text, [("metadata.name", f'Invalid value: "{text}": {p}') for p in problems]
            )

    def create(self, rt: ResourceType, namespace: str | None, body: Any) -> Obj:
        obj = self._to_storage(rt, self._check_body(rt, body))
        meta = obj["metadata"]
        ns = self._check_namespace(rt, namespace, meta)
        given_rv = meta.pop("resourceVersion", None)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise errors.invalid(
                    rt, "", [("metadata.name", "Required value: name or generateName is required")]
                )
            meta["name"] = self._generate_name(rt, ns, str(prefix))
        self._check_name(rt, meta["name"])
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self._now()
        for transient in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(transient, None)
        if rt.tracks_generation or not rt.builtin:
            meta["generation"] = 1
        obj = self._admit_create(rt, obj)
        # what etcd3's store checks last: a set resourceVersion (a plain error: HTTP 500), then
        # whether the key exists
        if _is_set_resource_version(given_rv):
            raise errors.storage_error("resourceVersion should not be set on objects to be created")
        if self.store.get(rt.storage_key, ns, meta["name"]) is not None:
            raise errors.already_exists(rt, meta["name"])
        stored = self.store.commit(rt.storage_key, obj)
        if rt is self.rt_nodes:
            self._schedule_node_controller(stored)
        return self.to_view(rt, stored)

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        for _ in range(8):
            name = prefix + "".join(random.choices(_GENERATE_ALPHABET, k=5))
            if self.store.get(rt.storage_key, ns, name) is None:
                return name
        raise errors.already_exists(rt, prefix)

    def _admit_create(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt is self.rt_pods:
            return self._admit_pod(obj)
        if rt is self.rt_nodes:
            spec = dict(obj.get("spec") or {})
            taints = list(spec.get("taints") or [])
            if not any(t.get("key") == NOT_READY_TAINT["key"] for t in taints):
                taints.append(dict(NOT_READY_TAINT))
            spec["taints"] = taints
            return {**obj, "spec": spec}
        if rt is self.rt_namespaces:
            _label_namespace(obj["metadata"])
            return {**obj, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
        if rt in (self.rt_pvcs, self.rt_pvs, self.rt_storage_classes):
            return self._admit_storage(rt, obj)
        if rt is self.rt_priority:
            obj.setdefault("preemptionPolicy", DEFAULT_PREEMPTION_POLICY)
            self._validate_priority_class(obj)
        if rt is self.rt_pdbs:
            # PrepareForCreate: a new budget's status is empty until the disruption controller
            # has looked at it (observedGeneration 0 < generation 1: evictions get a 429)
            return {**obj, "status": dict(EMPTY_PDB_STATUS)}
        admit = _WORKLOAD_ADMISSION.get(rt.key)
        if rt.group == DRA_API:
            admit = dra.ADMISSION.get(rt.kind)
        if admit is not None:
            try:
                return admit(obj)
            except workloads.WorkloadRejected as rejected:
                raise errors.invalid(rt, obj["metadata"]["name"], rejected.causes) from None
        if rt.has_status and (not rt.builtin or rt.drops_status_on_create):
            obj.pop("status", None)  # custom resources with a status subresource drop it on create
        return obj

    def _admit_storage(self, rt: ResourceType, obj: Obj) -> Obj:
        try:
            if rt is self.rt_pvcs:
                classes = self.store.items(self.rt_storage_classes.storage_key)
                return storage.admit_claim(obj, storage.default_class(classes))
            if rt is self.rt_pvs:
                return storage.admit_volume(obj, self._now())
            return storage.admit_storage_class(obj)
        except workloads.WorkloadRejected as rejected:
            raise errors.invalid(rt, obj["metadata"]["name"], rejected.causes) from None

    def _admit_pod(self, obj: Obj) -> Obj:
        name = obj["metadata"]["name"]
        try:
            obj = pods.default_pod(obj)
            obj = pods.admit_priority(obj, self._priority_class, self._default_priority_class())
            pods.validate_pod(obj)
        except pods.PodRejected as rejected:
            raise self._pod_error(name, rejected) from None
        obj["status"] = {"phase": "Pending", "qosClass": pods.qos_class(obj)}
        return obj

    def _pod_error(self, name: str, rejected: pods.PodRejected) -> ApiError:
        if isinstance(rejected.causes, list):
            return errors.invalid(self.rt_pods, name, rejected.causes)
        if rejected.code == 403:
            return ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: {rejected.causes}',
                {"name": name, "kind": "pods"},
            )
        return errors.bad_request(
            f'Pod in version "v1" cannot be handled as a Pod: {rejected.causes}'
        )

    def _priority_class(self, name: str) -> Obj | None:
        return self.store.get(self.rt_priority.storage_key, "", name)

    def _default_priority_class(self) -> Obj | None:
        defaults = [
            pc for pc in self.store.items(self.rt_priority.storage_key) if pc.get("globalDefault")
        ]
        return min(defaults, key=lambda pc: pc.get("value", 0)) if defaults else None

    def _validate_priority_class(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        value = obj.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            raise errors.invalid(
                self.rt_priority, name, [("value", "Required value: an integer is required")]
            )
        if obj.get("globalDefault"):
            # the Priority admission plugin: one default only (403, not a validation error)
            current = self._default_priority_class()
            if current is not None and current["metadata"]["name"] != name:
                raise errors.forbidden(
                    self.rt_priority,
                    name,
                    f"PriorityClass {current['metadata']['name']} is already marked as default. "
                    "Only one default can exist",
                )

    # --- the node lifecycle stand-in ------------------------------------------------------

    def _schedule_node_controller(self, node: Obj) -> None:
        if not self.node_controller or not _node_ready(node):
            return
        name = node["metadata"]["name"]
        try:
            asyncio.get_running_loop().call_soon(self._clear_not_ready, name)
        except RuntimeError:
            self._clear_not_ready(name)

    def _clear_not_ready(self, name: str) -> None:
        node = self.store.get(self.rt_nodes.storage_key, "", name)
        if node is None or not _node_ready(node):
            return
        taints = (node.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if t.get("key") != NOT_READY_TAINT["key"]]
        if len(kept) != len(taints):
            spec = {**node["spec"], "taints": kept}
            if not kept:
                del spec["taints"]
            self.store.commit(self.rt_nodes.storage_key, {**node, "spec": spec})

    # --- update / patch ------------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None = None,
    ) -> Obj:
        obj = self._to_storage(rt, self._check_body(rt, body))
        meta = obj["metadata"]
        if meta.get("name") not in (None, "", name):
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        ns = self._check_namespace(rt, namespace, meta)
        current = self.store.get(rt.storage_key, ns, name)
        if current is None:
            if rt.create_on_update and subresource is None:
                meta.pop("resourceVersion", None)
                return self.create(rt, namespace, self.to_view(rt, obj))
            raise errors.not_found(rt, name)
        given_uid = meta.get("uid")
        if given_uid and given_uid != current["metadata"]["uid"]:
            # the object's uid is a storage precondition of a PUT (DefaultUpdatedObjectInfo)
            raise errors.conflict(
                rt,
                name,
                f"Precondition failed: UID in precondition: {given_uid}, "
                f"UID in object meta: {current['metadata']['uid']}",
            )
        given_rv = meta.get("resourceVersion")
        if given_rv and given_rv != current["metadata"]["resourceVersion"]:
            raise errors.stale(rt, name)
        return self._replace(rt, current, obj, subresource)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        subresource: str | None = None,
        decode: Callable[[Obj], Obj] | None = None,
    ) -> Obj:
        """Apply a patch; ``decode`` (server-side field validation) checks the patched object."""
        current = self.store.get(rt.storage_key, namespace or "", name)
        if current is None:
            raise errors.not_found(rt, name)
        view = self.to_view(rt, current)
        try:
            patched = apply_patch(content_type, view, body, strategic=rt.builtin)
        except UnsupportedPatchType as err:
            raise errors.unsupported_media_type(str(err)) from None
        except PatchError as err:
            media_type = content_type.split(";", 1)[0].strip().lower()
            if (
                media_type == JSON_PATCH
                and isinstance(body, list)
                and all(isinstance(op, dict) for op in body)
            ):
                raise errors.unprocessable(str(err)) from None  # decoded, but did not apply
            raise errors.bad_request(str(err)) from None
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patch produced an object without metadata")
        if decode is not None:
            patched = decode(patched)
        patched_rv = patched["metadata"].get("resourceVersion")
        if patched_rv and patched_rv != current["metadata"]["resourceVersion"]:
            raise errors.stale(rt, name)
        if patched["metadata"].get("name") != name:
            raise errors.bad_request("the name of the object cannot be changed by a patch")
        patched_uid = patched["metadata"].get("uid")
        if (
            patched_uid
            and patched_uid != current["metadata"]["uid"]
            and (subresource is None or rt.builtin)
        ):
            raise errors.invalid(
                rt, name, [("metadata.uid", f'Invalid value: "{patched_uid}": field is immutable')]
            )
        obj = self._to_storage(rt, self._check_body(rt, patched))
        self._check_namespace(rt, namespace, obj["metadata"])
        return self._replace(rt, current, obj, subresource)

    def _replace(self, rt: ResourceType, current: Obj, obj: Obj, subresource: str | None) -> Obj:
        """Common tail of update and patch: the status split, immutables, no-op detection."""
        cur_meta = current["metadata"]
        name = cur_meta["name"]
        meta = obj["metadata"]
        for immutable in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if immutable in cur_meta:
                meta[immutable] = cur_meta[immutable]
            else:
                meta.pop(immutable, None)
        if subresource == "status":
            status = obj.get("status")
            if rt.builtin and rt is not self.rt_resource_claims:
                # pods/status, nodes/status: the spec is kept, metadata (labels, annotations)
                # may change; pods keep their ownerReferences
                obj = {**current, "metadata": meta}
                if rt is self.rt_pods:
                    if "ownerReferences" in cur_meta:
                        meta["ownerReferences"] = cur_meta["ownerReferences"]
                    else:
                        meta.pop("ownerReferences", None)
            else:
                # a custom resource's status write changes status only; so does a claim's
                # (ResetObjectMetaForStatus keeps labels, annotations, finalizers, owners)
                obj = {**current}
            if status is None:
                obj.pop("status", None)
            else:
                obj["status"] = status
        else:
            if rt is self.rt_priority:
                obj.setdefault("preemptionPolicy", DEFAULT_PREEMPTION_POLICY)
            if rt.has_status:
                if "status" in current:
                    obj["status"] = current["status"]
                else:
                    obj.pop("status", None)
            if rt is self.rt_pods:
                try:
                    pods.check_spec_update(current, obj)
                except pods.PodRejected as rejected:
                    raise self._pod_error(name, rejected) from None
            if "generation" in cur_meta and _spec_of(obj) != _spec_of(current):
                meta["generation"] = cur_meta["generation"] + 1
            self._default_on_update(rt, obj)
        if rt is self.rt_namespaces:
            obj["metadata"] = _label_namespace(dict(obj["metadata"]))
        if rt.group == DRA_API:
            self._validate_dra_update(rt, current, obj, subresource)
        obj["metadata"] = {**obj["metadata"], "resourceVersion": cur_meta["resourceVersion"]}
        if obj == current:
            return self.to_view(rt, current)  # a no-op write does not bump the resourceVersion
        if rt is self.rt_priority:
            if obj.get("value") != current.get("value"):
                raise errors.invalid(
                    rt, name, [("value", "Forbidden: may not be changed in an update.")]
                )
            self._validate_priority_class(obj)
        if (
            obj["metadata"].get("deletionTimestamp")
            and not obj["metadata"].get("finalizers")
            and not cur_meta.get("deletionGracePeriodSeconds")
        ):
            # the last finalizer is gone: the deletion that was waiting for it completes (a
            # graceful deletion still waits for its grace period, as shouldDeleteDuringUpdate)
            return self.to_view(rt, self.store.commit(rt.storage_key, obj, deleted=True))
        return self.to_view(rt, self.store.commit(rt.storage_key, obj))

    def _validate_dra_update(
        self, rt: ResourceType, current: Obj, obj: Obj, subresource: str | None
    ) -> None:
        """ValidateUpdate of resource.k8s.io objects (``gang.sim.dra``): 422 on a refusal."""
        if subresource == "status":
            causes = dra.claim_status_causes(obj, current)
        else:
            causes = dra.update_causes(rt.kind, obj, current)
        if causes:
            raise errors.invalid(rt, current["metadata"]["name"], causes)

    def _default_on_update(self, rt: ResourceType, obj: Obj) -> None:
        """The v1 defaults a real server applies when it decodes any write, not only a create."""
        if rt.group == DRA_API:
            dra.default_on_update(rt.kind, obj)
        elif rt in (self.rt_pvcs, self.rt_pvs):
            spec = obj["spec"] = dict(obj.get("spec") or {})
            spec.setdefault("volumeMode", "Filesystem")
            if rt is self.rt_pvs:
                spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        elif rt is self.rt_storage_classes:
            obj.setdefault("reclaimPolicy", "Delete")
            obj.setdefault("volumeBindingMode", "Immediate")

    # --- delete --------------------------------------------------------------------------

    def delete(
        self, rt: ResourceType, namespace: str | None, name: str, options: DeleteOptions
    ) -> Obj:
        """Delete one object; answer the object or a Status, as the real resource does."""
        current = self.store.get(rt.storage_key, namespace or "", name)
        if current is None:
            raise errors.not_found(rt, name)
        meta = current["metadata"]
        if options.precondition_uid and options.precondition_uid != meta["uid"]:
            raise errors.conflict(
                rt,
                name,
                (
                    f"Precondition failed: UID in precondition: {options.precondition_uid}, "
                    f"UID in object meta: {meta['uid']}"
                ),
            )
        if (
            options.precondition_resource_version
            and options.precondition_resource_version != meta["resourceVersion"]
        ):
            raise errors.conflict(
                rt,
                name,
                (
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{options.precondition_resource_version}, ResourceVersion in object meta: "
                    f"{meta['resourceVersion']}"
                ),
            )
        result = self._delete(rt, current, options.grace_period_seconds)
        if rt.return_deleted_object:
            return self.to_view(rt, result)
        details: dict[str, Any] = {"name": name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details["uid"] = meta["uid"]
        # finalizeDelete's Status carries no code (the Go field is empty and omitted)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }

    def _delete(self, rt: ResourceType, current: Obj, grace: int | None) -> Obj:
        meta = current["metadata"]
        if rt is self.rt_pods:
            spec = current.get("spec") or {}
            if grace is None:
                grace = int(spec.get("terminationGracePeriodSeconds", 30))
            if not spec.get("nodeName") or pods.is_terminal(current):
                grace = 0  # nothing runs it: no kubelet needs to confirm the kill
            if grace > 0:
                if (
                    meta.get("deletionTimestamp")
                    and meta.get("deletionGracePeriodSeconds", 0) <= grace
                ):
                    return current
                deadline = self.clock() + grace
                obj = {
                    **current,
                    "metadata": {
                        **meta,
                        "deletionTimestamp": rfc3339(deadline),
                        "deletionGracePeriodSeconds": grace,
                    },
                }
                return self.store.commit(rt.storage_key, obj)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp") and not meta.get("deletionGracePeriodSeconds"):
                return current  # (a pending graceful deletion is cut short to 0 below)
            obj = {
                **current,
                "metadata": {
                    **meta,
                    "deletionTimestamp": self._now(),
                    "deletionGracePeriodSeconds": 0,
                },
            }
            return self.store.commit(rt.storage_key, obj)
        if rt is self.rt_namespaces:
            self._empty_namespace(meta["name"])
        return self.store.commit(rt.storage_key, {**current}, deleted=True)

    def _empty_namespace(self, namespace: str) -> None:
        storages = {t.storage_key for t in self.registry.types if t.namespaced}
        for storage_key in storages:
            for obj in list(self.store.items(storage_key, namespace)):
                obj_meta = obj["metadata"]
                if obj_meta.get("finalizers"):
                    obj = {
                        **obj,
                        "metadata": {k: v for k, v in obj_meta.items() if k != "finalizers"},
                    }
                self.store.commit(storage_key, {**obj}, deleted=True)

    def delete_collection(
        self, rt: ResourceType, victims: list[Obj], options: DeleteOptions
    ) -> list[Obj]:
        return [
            self.to_view(
                rt,
                self._delete(
                    rt,
                    self.store.get(
                        rt.storage_key, v["metadata"].get("namespace", ""), v["metadata"]["name"]
                    )
                    or v,
                    options.grace_period_seconds,
                ),
            )
            for v in victims
        ]

    # --- binding -------------------------------------------------------------------------

    def bind(self, namespace: str, pod_name: str | None, body: Any) -> Obj:
        """POST pods/{name}/binding (or the bindings collection): 201 + Status on success."""
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            raise errors.bad_request(
                "the body of the request was in an unknown format: expected a Binding"
            )
        body_name = (body.get("metadata") or {}).get("name")
        name = pod_name or body_name
        if not name:
            raise errors.bad_request("name is required for a Binding")
        if pod_name and body_name and body_name != pod_name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({pod_name})"
            )
        target = body.get("target")
        node_name = target.get("name") if isinstance(target, dict) else None
        binding_rt = self.registry.by_key("/v1/bindings")
        if not node_name or not isinstance(node_name, str):
            raise errors.invalid(binding_rt, name, [("target.name", "Required value")])
        pod = self.store.get(self.rt_pods.storage_key, namespace, name)
        if pod is None:
            raise errors.not_found(self.rt_pods, name)
        spec = pod.get("spec") or {}
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.conflict(
                self.rt_pods,
                name,
                f"pod {name} is being deleted, cannot be assigned to a host",
                kind="pods/binding",
            )
        if spec.get("nodeName"):
            raise errors.conflict(
                self.rt_pods,
                name,
                f'pod {name} is already assigned to node "{spec["nodeName"]}"',
                kind="pods/binding",
            )
        status = dict(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self._now(),
            }
        )
        status["conditions"] = conditions
        meta = pod["metadata"]
        annotations = (body.get("metadata") or {}).get("annotations")
        if isinstance(annotations, dict) and annotations:
            meta = {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations}}
        self.store.commit(
            self.rt_pods.storage_key,
            {**pod, "metadata": meta, "spec": {**spec, "nodeName": node_name}, "status": status},
        )
        return errors.status_body(201, status="Success")


_WORKLOAD_ADMISSION: dict[str, Callable[[Obj], Obj]] = {
    "batch/v1/jobs": workloads.admit_job,
    "apps/v1/statefulsets": workloads.admit_statefulset,
    "/v1/services": workloads.admit_service,
}


def _is_set_resource_version(rv: Any) -> bool:
    """What etcd3's Create refuses: a resourceVersion that parses as a non-zero uint64."""
    return isinstance(rv, str) and rv.isascii() and rv.isdigit() and 0 < int(rv) < 2**64


def _label_namespace(meta: Obj) -> Obj:
    """SetDefaults_Namespace: the ``kubernetes.io/metadata.name`` label is always the name."""
    meta["labels"] = {**(meta.get("labels") or {}), NAMESPACE_NAME_LABEL: meta["name"]}
    return meta


def _spec_of(obj: Obj) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _node_ready(node: Obj) -> bool:
    """Ready=True; False for a status of the wrong shape (this runs after the node is stored,
    so it must not raise on what the untyped store kept)."""
    status = node.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )
