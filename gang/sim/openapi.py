"""The simulator's OpenAPI documents: ``/openapi/v2`` and ``/openapi/v3``, as kube-apiserver's.

Why: kubectl reads them before it writes anything. ``kubectl apply``/``create`` (validation on,
the default) look for the ``fieldValidation`` parameter on the kind's PATCH operation in the v3
document to decide that the server validates fields itself (then it sends
``fieldValidation=Strict``); ``kubectl explain`` prints a kind's fields from its v3 schema; a
client-side ``apply`` computes strategic merge patches from the schemas' patch strategies.
Without the documents kubectl refuses to apply anything unless told ``--validate=false``.

What is served is generated, like discovery, from the resource table (``gang.sim.resources``):
one path item per REST path a type has, operations carrying ``x-kubernetes-action`` and
``x-kubernetes-group-version-kind``, and the write operations the parameters kube-apiserver
declares (``dryRun``, ``fieldManager``, ``fieldValidation``, ``force``). The schemas come from
``openapi_data.json.gz`` (built-in kinds of the chosen Kubernetes version, custom resources'
from their CRD manifests; see ``gang.sim.openapi_vendor``), so the documents say exactly what
``gang.sim.fieldvalidation`` enforces.

The v3 index (``/openapi/v3``) names each group version's document with a content hash, as the
real one does; clients cache a hashed URL forever, and a stale hash is redirected to the current
one. ``/openapi/v2`` is JSON only: clients that accept nothing but the protobuf encoding (client
go's ``OpenAPISchema``) get 406 Not Acceptable, and kubectl then works from the v3 documents.
"""

from __future__ import annotations

import copy
import functools
import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gang.sim.resources import Registry, ResourceType

DATA_PATH = Path(__file__).with_name("openapi_data.json.gz")
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
OBJECT_META = f"{META}.ObjectMeta"
LIST_META = f"{META}.ListMeta"
STATUS = f"{META}.Status"
DELETE_OPTIONS = f"{META}.DeleteOptions"
WATCH_EVENT = f"{META}.WatchEvent"
PATCH = f"{META}.Patch"
API_RESOURCE_LIST = f"{META}.APIResourceList"
EVICTION = "io.k8s.api.policy.v1.Eviction"
V2_REF = "#/definitions/"
V3_REF = "#/components/schemas/"
_OBJECT_META_DESCRIPTION = (
    "Standard object's metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
_LIST_META_DESCRIPTION = (
    "Standard list metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)
_PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
_PRODUCES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")


@functools.cache
def vendored() -> dict[str, Any]:
    """The vendored schemas (read once per process)."""
    data: dict[str, Any] = json.loads(gzip.decompress(DATA_PATH.read_bytes()))
    return data


def definition_name(group: str, version: str, kind: str) -> str:
    """How kube-apiserver names a custom resource's schema: the group reversed, then GV kind."""
    return ".".join([*reversed(group.split(".")), version, kind])


# --- parameters ------------------------------------------------------------------------------

#: name → (where, description); every query parameter is a string (as kube-openapi writes them)
_PARAMETERS: dict[str, tuple[str, str]] = {
    "name": ("path", "name of the {kind}"),
    "namespace": ("path", "object name and auth scope, such as for teams and projects"),
    "pretty": (
        "query",
        "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent "
        "indicates a browser or command-line HTTP tool (curl and wget).",
    ),
    "dryRun": (
        "query",
        "When present, indicates that modifications should not be persisted. An invalid or "
        "unrecognized dryRun directive will result in an error response and no further "
        "processing of the request. Valid values are: - All: all dry run stages will be processed",
    ),
    "fieldManager": (
        "query",
        "fieldManager is a name associated with the actor or entity that is making these "
        "changes. The value must be less than or 128 characters long, and only contain printable "
        "characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
    ),
    "fieldValidation": (
        "query",
        "fieldValidation instructs the server on how to handle objects in the request "
        "(POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: "
        "This will ignore any unknown fields that are silently dropped from the object, and will "
        "ignore all but the last duplicate field that the decoder encounters. This is the "
        "default behavior prior to v1.23. - Warn: This will send a warning via the standard "
        "warning response header for each unknown field that is dropped from the object, and for "
        "each duplicate field that is encountered. The request will still succeed if there are "
        "no other errors, and will only persist the last of any duplicate fields. This is the "
        "default in v1.23+ - Strict: This will fail the request with a BadRequest error if any "
        "unknown fields would be dropped from the object, or if any duplicate fields are present. "
        "The error returned from the server will contain all unknown and duplicate fields "
        "encountered.",
    ),
    "force": (
        "query",
        'Force is going to "force" Apply requests. It means user will re-acquire conflicting '
        "fields owned by other people. Force flag must be unset for non-apply patch requests.",
    ),
    "gracePeriodSeconds": (
        "query",
        "The duration in seconds before the object should be deleted. Value must be "
        "non-negative integer. The value zero indicates delete immediately.",
    ),
    "propagationPolicy": (
        "query",
        "Whether and how garbage collection will be performed. Either this field or "
        "OrphanDependents may be set, but not both.",
    ),
    "allowWatchBookmarks": (
        "query",
        'allowWatchBookmarks requests watch events with type "BOOKMARK".',
    ),
    "continue": (
        "query",
        "The continue option should be set when retrieving more results from the server.",
    ),
    "fieldSelector": (
        "query",
        "A selector to restrict the list of returned objects by their fields. Defaults to "
        "everything.",
    ),
    "labelSelector": (
        "query",
        "A selector to restrict the list of returned objects by their labels. Defaults to "
        "everything.",
    ),
    "limit": ("query", "limit is a maximum number of responses to return for a list call."),
    "resourceVersion": (
        "query",
        "resourceVersion sets a constraint on what resource versions a request may be served from.",
    ),
    "resourceVersionMatch": (
        "query",
        "resourceVersionMatch determines how resourceVersion is applied to list calls.",
    ),
    "timeoutSeconds": (
        "query",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of "
        "any activity or inactivity.",
    ),
    "watch": (
        "query",
        "Watch for changes to the described resources and return them as a stream of add, "
        "update, and remove notifications.",
    ),
}
_INTEGER_PARAMETERS = frozenset({"gracePeriodSeconds", "limit", "timeoutSeconds"})
_BOOLEAN_PARAMETERS = frozenset({"allowWatchBookmarks", "force", "watch"})
_LIST_PARAMETERS = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "watch",
)
_WRITE_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation")


def _param_type(name: str) -> str:
    if name in _INTEGER_PARAMETERS:
        return "integer"
    if name in _BOOLEAN_PARAMETERS:
        return "boolean"
    return "string"


def _parameter(name: str, kind: str, v3: bool) -> dict[str, Any]:
    where, description = _PARAMETERS[name]
    out: dict[str, Any] = {
        "name": name,
        "in": where,
        "description": description.format(kind=kind),
    }
    if where == "path":
        out["required"] = True
    schema: dict[str, Any] = {"type": _param_type(name), "uniqueItems": True}
    if v3:
        out["schema"] = schema
    else:
        out.update(schema)
    return out


# --- operations ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Op:
    method: str  # get, put, post, patch, delete
    action: str  # x-kubernetes-action: get, list, post, put, patch, delete, deletecollection
    verb: str  # operationId verb: read, list, create, replace, patch, delete, deletecollection
    description: str
    parameters: tuple[str, ...]
    body: str | None  # request body definition (short name), None for none
    response: str  # definition of the 200 answer
    suffix: str = ""  # of the operationId: Status, Binding, Eviction, ForAllNamespaces
    scoped: bool = True  # a namespaced type's operation under /namespaces/{namespace}


def _tag(rt: ResourceType) -> str:
    if not rt.group:
        return "core_v1"
    head = rt.group.removesuffix(".k8s.io") if rt.builtin else rt.group
    return re.sub(r"[.-]", "_", head) + "_" + rt.version


def _op_prefix(rt: ResourceType) -> str:
    """The GroupVersion part of an operationId: CoreV1, SchedulingV1beta1, SchedulingXK8sIoV1alpha1."""
    if not rt.group:
        return "CoreV1"
    head = rt.group.removesuffix(".k8s.io") if rt.builtin else rt.group
    words = re.split(r"[.-]", head)
    return "".join(w[:1].upper() + w[1:] for w in words) + rt.version[:1].upper() + rt.version[1:]


class _Definitions:
    """The schemas one simulator serves, in the v2 (``definitions``) and v3 forms."""

    def __init__(self, registry: Registry) -> None:
        data = vendored()
        pool = data["schemas"]
        names = data["kubernetes"][registry.kubernetes_version]
        self.v2: dict[str, Any] = {name: pool[digest] for name, digest in names.items()}
        self.crds: dict[tuple[str, str, str], dict[str, Any]] = {
            (c["group"], c["version"], c["kind"]): c for c in data["crds"]
        }
        #: full (v3) schemas of custom resources, with the ObjectMeta reference put in
        self.custom: dict[str, Any] = {}
        self.gvk: dict[tuple[str, str, str], str] = {}
        for name, schema in self.v2.items():
            for gvk in schema.get("x-kubernetes-group-version-kind") or []:
                self.gvk.setdefault((gvk.get("group", ""), gvk["version"], gvk["kind"]), name)
        for rt in registry.types:
            if rt.builtin:
                continue
            crd = self.crds.get((rt.group, rt.version, rt.kind))
            if crd is None:
                raise LookupError(f"no CRD schema for {rt.api_version} {rt.kind}")
            name = definition_name(rt.group, rt.version, rt.kind)
            self.custom[name] = _custom_schema(rt, rt.kind, crd["schema"])
            self.custom[name + "List"] = _custom_list_schema(rt, name)
            self.gvk[(rt.group, rt.version, rt.kind)] = name
            self.gvk[(rt.group, rt.version, rt.list_kind)] = name + "List"

    def kind_definition(self, rt: ResourceType, kind: str | None = None) -> str:
        return self.gvk[(rt.group, rt.version, kind or rt.kind)]

    def v2_schema(self, name: str) -> Any:
        if name in self.custom:
            return _to_structural_v2(self.custom[name])
        return self.v2[name]

    def v3_schema(self, name: str) -> Any:
        if name in self.custom:
            return _v3(self.custom[name], top=True)
        return _v3(self.v2[name], top=True)

    def reachable(self, roots: list[str]) -> list[str]:
        seen: set[str] = set()
        todo = list(roots)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            schema = self.custom.get(name) or self.v2[name]
            todo.extend(_refs(schema))
        return sorted(seen)


def _refs(schema: Any) -> list[str]:
    out: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                out.append(value.rsplit("/", 1)[-1])
            elif isinstance(value, dict | list):
                out.extend(_refs(value))
    elif isinstance(schema, list):
        for item in schema:
            out.extend(_refs(item))
    return out


def _gvk_list(rt: ResourceType, kind: str) -> list[dict[str, str]]:
    return [{"group": rt.group, "kind": kind, "version": rt.version}]


def _custom_schema(rt: ResourceType, kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A CRD's openAPIV3Schema as the apiserver publishes it: ObjectMeta referenced, GVK set."""
    out = copy.deepcopy(schema)
    props = out.setdefault("properties", {})
    props["metadata"] = {"$ref": V2_REF + OBJECT_META, "description": _OBJECT_META_DESCRIPTION}
    out["x-kubernetes-group-version-kind"] = _gvk_list(rt, kind)
    return out


def _custom_list_schema(rt: ResourceType, item: str) -> dict[str, Any]:
    return {
        "description": f"{rt.list_kind} is a list of {rt.kind}",
        "required": ["items"],
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation "
                "of an object.",
                "type": "string",
            },
            "items": {
                "description": f"List of {rt.plural}. More info: "
                "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
                "type": "array",
                "items": {"$ref": V2_REF + item},
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this "
                "object represents.",
                "type": "string",
            },
            "metadata": {"$ref": V2_REF + LIST_META, "description": _LIST_META_DESCRIPTION},
        },
        "x-kubernetes-group-version-kind": _gvk_list(rt, rt.list_kind),
    }


def _to_structural_v2(schema: Any) -> Any:
    """What a CRD schema becomes in OpenAPI v2: no anyOf/oneOf/allOf/not, int-or-string untyped."""
    if isinstance(schema, list):
        return [_to_structural_v2(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("anyOf", "oneOf", "allOf", "not", "nullable"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: _to_structural_v2(v) for k, v in value.items()}
        else:
            out[key] = _to_structural_v2(value)
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    return out


def _v3(schema: Any, top: bool = False) -> Any:
    """A v2 schema in v3 form: component references, a reference with siblings under allOf."""
    if isinstance(schema, list):
        return [_v3(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = V3_REF + value.rsplit("/", 1)[-1]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: _v3(v) for k, v in value.items()}
        else:
            out[key] = _v3(value)
    if not top and "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out


# --- documents -------------------------------------------------------------------------------


def _collection_path(rt: ResourceType, namespaced: bool) -> str:
    base = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    if namespaced:
        return f"{base}/namespaces/{{namespace}}/{rt.plural}"
    return f"{base}/{rt.plural}"


def _operations(rt: ResourceType, defs: _Definitions) -> dict[str, tuple[list[str], list[_Op]]]:
    """path → (path-level parameters, operations) for one resource type."""
    kind = rt.kind
    obj = defs.kind_definition(rt)
    listing = defs.kind_definition(rt, rt.list_kind) if "list" in rt.verbs else ""
    verbs = set(rt.verbs)
    write = _WRITE_PARAMETERS
    patch = (*_WRITE_PARAMETERS, "force")
    delete = ("dryRun", "gracePeriodSeconds", "propagationPolicy")
    out: dict[str, tuple[list[str], list[_Op]]] = {}
    collection = _collection_path(rt, rt.namespaced)
    scope = ["namespace"] if rt.namespaced else []
    ops: list[_Op] = []

    def list_op(**scope: Any) -> _Op:
        """The list (and watch) operation, in the namespace or across all of them."""
        about = f"list or watch objects of kind {kind}"
        return _Op("get", "list", "list", about, _LIST_PARAMETERS, None, listing, **scope)

    if "list" in verbs:
        ops.append(list_op())
    if "create" in verbs:
        ops.append(_Op("post", "post", "create", f"create a {kind}", write, obj, obj))
    if "deletecollection" in verbs:
        ops.append(
            _Op(
                "delete",
                "deletecollection",
                "deletecollection",
                f"delete collection of {kind}",
                (*delete, *_LIST_PARAMETERS[:-1]),
                DELETE_OPTIONS,
                STATUS,
            )
        )
    if ops:
        out[collection] = ([*scope, "pretty"], ops)
    if rt.namespaced and "list" in verbs:
        out[_collection_path(rt, False)] = (
            ["pretty"],
            [list_op(suffix="ForAllNamespaces", scoped=False)],
        )
    ops = []
    if "get" in verbs:
        ops.append(_Op("get", "get", "read", f"read the specified {kind}", (), None, obj))
    if "update" in verbs:
        ops.append(_Op("put", "put", "replace", f"replace the specified {kind}", write, obj, obj))
    if "delete" in verbs:
        answer = obj if rt.return_deleted_object else STATUS
        ops.append(
            _Op("delete", "delete", "delete", f"delete a {kind}", delete, DELETE_OPTIONS, answer)
        )
    if "patch" in verbs:
        ops.append(
            _Op(
                "patch",
                "patch",
                "patch",
                f"partially update the specified {kind}",
                patch,
                PATCH,
                obj,
            )
        )
    if ops:
        out[f"{collection}/{{name}}"] = (["name", *scope, "pretty"], ops)
    for sub in rt.subresources:
        path = f"{collection}/{{name}}/{sub}"
        params = ["name", *scope, "pretty"]
        if sub == "status":
            out[path] = (
                params,
                [
                    _Op(
                        "get",
                        "get",
                        "read",
                        f"read status of the specified {kind}",
                        (),
                        None,
                        obj,
                        suffix="Status",
                    ),
                    _Op(
                        "put",
                        "put",
                        "replace",
                        f"replace status of the specified {kind}",
                        write,
                        obj,
                        obj,
                        suffix="Status",
                    ),
                    _Op(
                        "patch",
                        "patch",
                        "patch",
                        f"partially update status of the specified {kind}",
                        patch,
                        PATCH,
                        obj,
                        suffix="Status",
                    ),
                ],
            )
        elif sub == "binding":
            binding = defs.gvk[("", "v1", "Binding")]
            out[path] = (
                params,
                [
                    _Op(
                        "post",
                        "post",
                        "create",
                        f"create binding of a {kind}",
                        write,
                        binding,
                        binding,
                        suffix="Binding",
                    )
                ],
            )
        elif sub == "eviction":
            out[path] = (
                params,
                [
                    _Op(
                        "post",
                        "post",
                        "create",
                        f"create eviction of a {kind}",
                        write,
                        EVICTION,
                        EVICTION,
                        suffix="Eviction",
                    )
                ],
            )
    return out


def _gvk_of_op(rt: ResourceType, op: _Op) -> dict[str, str]:
    if op.suffix == "Binding":
        return {"group": "", "kind": "Binding", "version": "v1"}
    if op.suffix == "Eviction":
        return {"group": "policy", "kind": "Eviction", "version": "v1"}
    return {"group": rt.group, "kind": rt.kind, "version": rt.version}


def _operation_id(rt: ResourceType, op: _Op) -> str:
    """kube-openapi's names: listCoreV1NamespacedPod, patchCoreV1NodeStatus, ..."""
    scoped = "Namespaced" if rt.namespaced and op.scoped else ""
    return f"{op.verb}{_op_prefix(rt)}{scoped}{rt.kind}{op.suffix}"


_CODES = {"get": ("200",), "put": ("200", "201"), "patch": ("200", "201")}
_CODES_OTHER = {"post": ("200", "201", "202"), "delete": ("200", "202")}
_CODE_TEXT = {"200": "OK", "201": "Created", "202": "Accepted"}


def _operation(rt: ResourceType, op: _Op, v3: bool) -> dict[str, Any]:
    ref = V3_REF if v3 else V2_REF
    out: dict[str, Any] = {
        "tags": [_tag(rt)],
        "description": op.description,
        "operationId": _operation_id(rt, op),
    }
    params = [_parameter(p, rt.kind, v3) for p in op.parameters]
    if op.body is not None and not v3:
        params.insert(
            0, {"name": "body", "in": "body", "required": True, "schema": {"$ref": ref + op.body}}
        )
    if params:
        out["parameters"] = params
    answer = {"$ref": ref + op.response}
    codes = _CODES.get(op.method) or _CODES_OTHER[op.method]
    responses: dict[str, Any]
    if v3:
        if op.body is not None:
            types = _PATCH_TYPES if op.method == "patch" else ("*/*",)
            out["requestBody"] = {
                "content": {t: {"schema": {"$ref": ref + op.body}} for t in types},
                "required": op.method != "delete",
            }
        responses = {
            c: {"description": _CODE_TEXT[c], "content": {t: {"schema": answer} for t in _PRODUCES}}
            for c in codes
        }
    else:
        out["consumes"] = list(_PATCH_TYPES) if op.method == "patch" else ["*/*"]
        out["produces"] = list(_PRODUCES)
        out["schemes"] = ["https"]
        responses = {c: {"description": _CODE_TEXT[c], "schema": answer} for c in codes}
    responses["401"] = {"description": "Unauthorized"}
    out["responses"] = responses
    out["x-kubernetes-action"] = op.action
    out["x-kubernetes-group-version-kind"] = _gvk_of_op(rt, op)
    return out


def _resources_path(group: str, version: str, v3: bool) -> tuple[str, dict[str, Any]]:
    path = "/api/v1/" if not group else f"/apis/{group}/{version}/"
    ref = (V3_REF if v3 else V2_REF) + API_RESOURCE_LIST
    op: dict[str, Any] = {
        "tags": ["core_v1" if not group else re.sub(r"[.-]", "_", group) + "_" + version],
        "description": "get available resources",
        "operationId": "getAPIResources",
    }
    if v3:
        op["responses"] = {
            "200": {
                "description": "OK",
                "content": {t: {"schema": {"$ref": ref}} for t in _PRODUCES},
            },
            "401": {"description": "Unauthorized"},
        }
    else:
        op["consumes"] = list(_PRODUCES)
        op["produces"] = list(_PRODUCES)
        op["schemes"] = ["https"]
        op["responses"] = {
            "200": {"description": "OK", "schema": {"$ref": ref}},
            "401": {"description": "Unauthorized"},
        }
    return path, {"get": op}


class OpenApi:
    """The v2 document and the v3 documents of one simulated cluster, built once, on demand."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.kubernetes_version = registry.kubernetes_version
        self.definitions = _Definitions(registry)
        self._v2: bytes | None = None
        self._v3: dict[str, tuple[bytes, str]] = {}

    @property
    def info(self) -> dict[str, str]:
        return {"title": "Kubernetes", "version": f"v{self.kubernetes_version}.0"}

    def group_versions(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for group, versions in self.registry.group_versions().items():
            out.extend((group, v) for v in versions)
        return out

    @staticmethod
    def gv_path(group: str, version: str) -> str:
        """The key of a group version in the v3 index: ``api/v1``, ``apis/GROUP/VERSION``."""
        return "api/v1" if not group else f"apis/{group}/{version}"

    def _paths(self, types: list[ResourceType], v3: bool) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        for rt in types:
            for path, (params, ops) in _operations(rt, self.definitions).items():
                item = paths.setdefault(path, {})
                for op in ops:
                    item[op.method] = _operation(rt, op, v3)
                item["parameters"] = [_parameter(p, rt.kind, v3) for p in params]
        return paths

    def _roots(self, types: list[ResourceType]) -> list[str]:
        roots = [STATUS, DELETE_OPTIONS, WATCH_EVENT, PATCH, API_RESOURCE_LIST]
        for rt in types:
            roots.append(self.definitions.kind_definition(rt))
            if "list" in rt.verbs:
                roots.append(self.definitions.kind_definition(rt, rt.list_kind))
            if "eviction" in rt.subresources:
                roots.append(EVICTION)
        return roots

    def v2(self) -> bytes:
        if self._v2 is None:
            types = list(self.registry.types)
            paths: dict[str, Any] = {}
            for group, version in self.group_versions():
                path, item = _resources_path(group, version, v3=False)
                paths[path] = item
            paths.update(self._paths(types, v3=False))
            names = self.definitions.reachable(self._roots(types))
            document = {
                "swagger": "2.0",
                "info": self.info,
                "paths": dict(sorted(paths.items())),
                "definitions": {n: self.definitions.v2_schema(n) for n in names},
                "securityDefinitions": {
                    "BearerToken": {
                        "description": "Bearer Token authentication",
                        "type": "apiKey",
                        "name": "authorization",
                        "in": "header",
                    }
                },
                "security": [{"BearerToken": []}],
            }
            self._v2 = orjson.dumps(document)
        return self._v2

    def v3(self, gv_path: str) -> tuple[bytes, str] | None:
        """(document, hash) for ``api/v1`` or ``apis/GROUP/VERSION``; None if not served."""
        if gv_path not in self._v3:
            found = next(
                ((g, v) for g, v in self.group_versions() if self.gv_path(g, v) == gv_path), None
            )
            if found is None:
                return None
            group, version = found
            types = self.registry.in_group_version(group, version)
            path, item = _resources_path(group, version, v3=True)
            paths = {path: item, **self._paths(types, v3=True)}
            names = self.definitions.reachable(self._roots(types))
            document = {
                "openapi": "3.0.0",
                "info": self.info,
                "paths": dict(sorted(paths.items())),
                "components": {
                    "schemas": {n: self.definitions.v3_schema(n) for n in names},
                    "securitySchemes": {
                        "BearerToken": {
                            "type": "apiKey",
                            "description": "Bearer Token authentication",
                            "name": "authorization",
                            "in": "header",
                        }
                    },
                },
            }
            body = orjson.dumps(document)
            digest = hashlib.sha512(body).hexdigest().upper()
            self._v3[gv_path] = (body, digest)
        return self._v3[gv_path]

    def v3_index(self) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        for group, version in self.group_versions():
            key = self.gv_path(group, version)
            found = self.v3(key)
            assert found is not None
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={found[1]}"}
        return {"paths": paths}
