"""The simulator's HTTP face: kube-apiserver REST paths, discovery, lists, and watch streams.

Clients (kubernetes-asyncio, kubectl, the scheduler) must not be able to tell this from a real
apiserver for the subset they use, so the shapes are the real ones: ``Status`` bodies on errors,
``XxxList`` with the list's resourceVersion, chunked watch streams of one JSON event per line,
the in-stream ``ERROR`` 410 on a too-old resourceVersion, BOOKMARK events, server-side Tables
for kubectl, and limit/continue paging. Everything stateful is delegated to ``SimApi``/``Store``;
fault injection (``Faults``) wraps the API paths as a middleware, an optional write latency model
(``gang.sim.latency``: bounded workers, a service time, an inflight cap) wraps the writes among
them, and ``Audit`` records requests, binding POSTs and eviction POSTs as evidence for tests.
``pods/eviction`` is answered by ``gang.sim.disruption``, which checks PodDisruptionBudgets as
kube-apiserver does.
``/openapi/v2`` and ``/openapi/v3`` serve the schemas of everything served (``gang.sim.openapi``)
and a write that names ``fieldValidation`` is decoded against them (``gang.sim.fieldvalidation``),
so kubectl validates and explains as against a real cluster.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import itertools
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from gang import __version__
from gang.sim import disruption, errors, fieldvalidation, tables
from gang.sim.api import DeleteOptions, SimApi
from gang.sim.audit import Audit
from gang.sim.errors import ApiError
from gang.sim.faults import Faults
from gang.sim.latency import ApiLatency
from gang.sim.openapi import OpenApi
from gang.sim.patch import JSON_PATCH
from gang.sim.resources import ResourceType
from gang.sim.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from gang.sim.store import ADDED, DELETED, MODIFIED, Expired, Obj, StoredEvent

KUBE_VERSION = {
    "major": "1",
    "minor": "30",
    "gitVersion": f"v1.30.0+gang-sim-{__version__}",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
MAX_BODY_BYTES = 3 * 1024 * 1024  # the apiserver's request size limit
JSON = "application/json"
_TRUE = ("1", "true", "True")
_WRITES = frozenset({"POST", "PUT", "PATCH"})
#: the verbs ``ApiLatency`` models (kube-apiserver's mutating requests)
_MUTATING = _WRITES | {"DELETE"}
_TYPE_CONFUSION = (TypeError, AttributeError, ValueError, KeyError, IndexError)
#: subresources that only take a POST (a create): every other verb is a 405
_CREATE_ONLY_SUBRESOURCES = frozenset({"binding", "eviction"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class ServerConfig:
    #: when set, API requests must carry ``Authorization: Bearer <token>``.
    token: str | None = None
    #: how often an idle watch with allowWatchBookmarks gets a BOOKMARK (real servers: ~60 s).
    bookmark_interval: float = 60.0
    #: how long a watch without timeoutSeconds stays open (real servers: 30 to 60 min).
    default_watch_timeout: float = 1800.0


@dataclass(slots=True)
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def _json(
    body: Any,
    status: int = 200,
    headers: dict[str, str] | None = None,
    warnings: list[str] | None = None,
) -> web.Response:
    response = web.Response(
        body=orjson.dumps(body), status=status, content_type=JSON, headers=headers
    )
    for text in warnings or ():
        response.headers.add("Warning", fieldvalidation.warning_header(text))
    return response


def _error(err: ApiError) -> web.Response:
    return _json(err.body(), err.code, err.headers)


class _Pages:
    """Consistent paging: the first page snapshots the filtered list; later pages read it."""

    def __init__(self, capacity: int = 64) -> None:
        self._snapshots: OrderedDict[int, tuple[str, list[Obj]]] = OrderedDict()
        self._ids = itertools.count(1)
        self._capacity = capacity

    def page(
        self, items: list[Obj], rv: str, limit: int, token: str | None
    ) -> tuple[list[Obj], str, str | None, int]:
        """Return (page, list rv, next continue token or None, remaining count).

        ``limit`` 0 means the rest of the list. A token that does not decode is a 400, as
        etcd3's DecodeContinue failing; a well-formed one for a forgotten snapshot is a 410,
        as a token whose resourceVersion has been compacted.
        """
        if token:
            try:
                snap_id, offset = (
                    int(x) for x in base64.urlsafe_b64decode(token).decode().split(":")
                )
                if offset < 0:
                    raise ValueError("negative offset")
            except ValueError as err:  # binascii.Error and UnicodeDecodeError included
                raise errors.bad_request(
                    f"invalid continue token: continue key is not valid: {err}"
                ) from None
            if snap_id not in self._snapshots:
                raise errors.gone(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
            rv, items = self._snapshots[snap_id]
        else:
            snap_id, offset = next(self._ids), 0
        end = offset + limit if limit > 0 else len(items)
        if end >= len(items):
            self._snapshots.pop(snap_id, None)
            return items[offset:], rv, None, 0
        self._snapshots[snap_id] = (rv, items)
        self._snapshots.move_to_end(snap_id)
        while len(self._snapshots) > self._capacity:
            self._snapshots.popitem(last=False)
        next_token = base64.urlsafe_b64encode(f"{snap_id}:{end}".encode()).decode()
        return items[offset:end], rv, next_token, len(items) - end


class SimServer:
    """Builds the aiohttp application over one SimApi. A new app per (re)start; state persists."""

    def __init__(
        self,
        api: SimApi,
        config: ServerConfig | None = None,
        faults: Faults | None = None,
        audit: Audit | None = None,
        latency: ApiLatency | None = None,
    ) -> None:
        self.api = api
        self.store = api.store
        self.registry = api.registry
        self.config = config or ServerConfig()
        self.faults = faults or Faults()
        self.audit = audit or Audit()
        #: the write latency model, None (the default) for none; may be set while serving
        self.latency = latency
        self._pages = _Pages()
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        self._openapi: OpenApi | None = None
        self._fields: fieldvalidation.FieldValidator | None = None

    @property
    def openapi(self) -> OpenApi:
        """The OpenAPI documents (built on first use: most clients never ask)."""
        if self._openapi is None:
            self._openapi = OpenApi(self.registry)
        return self._openapi

    @property
    def fields(self) -> fieldvalidation.FieldValidator:
        if self._fields is None:
            self._fields = fieldvalidation.FieldValidator(self.openapi)
        return self._fields

    def make_app(self) -> web.Application:
        app = web.Application(
            client_max_size=MAX_BODY_BYTES,
            middlewares=[
                self._audit_middleware,
                self._error_middleware,
                self._auth_middleware,
                self._fault_middleware,
                self._latency_middleware,
            ],
        )
        app.router.add_get("/version", self._version)
        app.router.add_get("/version/", self._version)
        for probe in ("/healthz", "/livez", "/readyz"):
            app.router.add_get(probe, self._ok)
        app.router.add_get("/api", self._core_versions)
        app.router.add_get("/api/", self._core_versions)
        app.router.add_get("/apis", self._group_list)
        app.router.add_get("/apis/", self._group_list)
        app.router.add_get("/openapi/v2", self._openapi_v2)
        app.router.add_get("/openapi/v3", self._openapi_v3_index)
        app.router.add_get("/openapi/v3/", self._openapi_v3_index)
        app.router.add_get("/openapi/v3/{tail:.+}", self._openapi_v3)
        app.router.add_route("*", "/api/{tail:.*}", self._dispatch)
        app.router.add_route("*", "/apis/{tail:.*}", self._dispatch)
        return app

    # --- middlewares ---------------------------------------------------------------------

    @web.middleware
    async def _audit_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        record = None
        if request.path.startswith("/api"):
            watch = request.query.get("watch") in _TRUE
            record = self.audit.request(request.method, request.path, watch)
        response = await handler(request)
        if record is not None:
            record.status = response.status
        return response

    @web.middleware
    async def _error_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as err:
            return _error(err)
        except web.HTTPRequestEntityTooLarge:
            return _error(
                ApiError(
                    413,
                    "RequestEntityTooLarge",
                    f"Request entity too large: limit is {MAX_BODY_BYTES}",
                )
            )
        except web.HTTPNotFound:
            return web.Response(status=404, text="404 page not found\n")

    @web.middleware
    async def _auth_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        token = self.config.token
        if (
            token
            and request.path.startswith(("/api", "/openapi"))
            and request.headers.get("Authorization") != f"Bearer {token}"
        ):
            raise errors.unauthorized()
        return await handler(request)

    @web.middleware
    async def _fault_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/api"):
            binding = request.method == "POST" and request.path.endswith("/binding")
            delay = self.faults.request_delay(binding)
            if delay > 0:
                await asyncio.sleep(delay)
            injected = self.faults.injected_error() or self.faults.injected_conflict(
                request.method, request.path
            )
            if injected is not None:
                raise injected
        return await handler(request)

    @web.middleware
    async def _latency_middleware(
        self, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        latency = self.latency
        if (
            latency is None
            or request.method not in _MUTATING
            or not request.path.startswith("/api")
        ):
            return await handler(request)
        async with latency.write():
            return await handler(request)

    # --- discovery -----------------------------------------------------------------------

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _version(self, request: web.Request) -> web.Response:
        return _json(KUBE_VERSION)

    async def _core_versions(self, request: web.Request) -> web.Response:
        return _json(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}
                ],
            }
        )

    def _group(self, group: str, versions: list[str]) -> dict[str, Any]:
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    async def _group_list(self, request: web.Request) -> web.Response:
        groups = [self._group(g, vs) for g, vs in self.registry.group_versions().items() if g]
        return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for rt in self.registry.in_group_version(group, version):
            entry: dict[str, Any] = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(rt.verbs),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            for sub in rt.subresources:
                sub_entry: dict[str, Any] = {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                }
                if sub == "eviction":  # served in another group's version, as discovery says
                    sub_entry.update(group="policy", version="v1", kind="Eviction")
                else:
                    sub_entry["kind"] = "Binding" if sub == "binding" else rt.kind
                create_only = sub in _CREATE_ONLY_SUBRESOURCES
                sub_entry["verbs"] = ["create"] if create_only else ["get", "patch", "update"]
                resources.append(sub_entry)
        gv = version if not group else f"{group}/{version}"
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": resources,
        }

    # --- OpenAPI -------------------------------------------------------------------------

    async def _openapi_v2(self, request: web.Request) -> web.Response:
        if not _accepts_json(request.headers.get("Accept")):
            # client-go's OpenAPISchema asks for protobuf only; it gets none here, and kubectl
            # works from the v3 documents instead
            raise ApiError(
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json",
            )
        return web.Response(body=self.openapi.v2(), content_type=JSON)

    async def _openapi_v3_index(self, request: web.Request) -> web.Response:
        return _json(self.openapi.v3_index())

    async def _openapi_v3(self, request: web.Request) -> web.Response:
        tail = request.match_info["tail"].strip("/")
        found = self.openapi.v3(tail)
        if found is None:
            return web.Response(status=404, text="404 page not found\n")
        if not _accepts_json(request.headers.get("Accept")):
            raise ApiError(
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json",
            )
        body, digest = found
        wanted = request.query.get("hash")
        if wanted is not None and wanted != digest:
            # as kube-openapi does: an outdated hash is sent on to the current document
            raise web.HTTPMovedPermanently(f"/openapi/v3/{tail}?hash={digest}")
        cache = "public, immutable" if wanted else "no-cache, private"
        return web.Response(
            body=body,
            content_type=JSON,
            headers={"ETag": f'"{digest}"', "Cache-Control": cache},
        )

    # --- routing -------------------------------------------------------------------------

    def _parse(self, path: str) -> tuple[str, str, list[str]] | dict[str, Any]:
        """Split an API path into (group, version, rest) or answer a discovery document."""
        parts = [p for p in path.split("/") if p]
        if parts[0] == "api":
            if len(parts) < 2 or parts[1] != "v1":
                raise errors.resource_not_found()
            group, version, rest = "", "v1", parts[2:]
        else:
            if len(parts) < 2:
                raise errors.resource_not_found()
            group = parts[1]
            versions = self.registry.group_versions().get(group)
            if not versions:
                raise errors.resource_not_found()
            if len(parts) == 2:
                return {"kind": "APIGroup", "apiVersion": "v1", **self._group(group, versions)}
            version, rest = parts[2], parts[3:]
            if version not in versions:
                raise errors.resource_not_found()
        if not rest:
            return self._resource_list(group, version)
        return group, version, rest

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        rt = self.registry.find(group, version, rest[0])
        if rt is None or len(rest) > 3 or (namespace is not None and not rt.namespaced):
            raise errors.resource_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rt.subresources:
            raise errors.resource_not_found()
        if rt.namespaced and name is not None and namespace is None:
            raise errors.resource_not_found()
        return Target(rt, namespace, name, sub)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parsed = self._parse(request.path)
        if isinstance(parsed, dict):
            if request.method != "GET":
                raise errors.method_not_allowed()
            return _json(parsed)
        target = self._target(*parsed)
        method = request.method
        rt, name = target.rt, target.name
        if method == "GET" and name is None:
            if request.query.get("watch") in _TRUE:
                return await self._watch(request, target)
            return self._list(request, target)
        if method not in _WRITES:
            return await self._read_or_delete(request, target)
        try:
            return await self._write(request, target)
        except _TYPE_CONFUSION as err:
            # A real apiserver decodes a body into typed structs first, so a field of the
            # wrong JSON type (a number for a list, a list for an object) is a 400 from the
            # decoder. Here the untyped body reaches the registry logic, where such a mismatch
            # surfaces as one of these exceptions, before anything is stored: the same 400.
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"{type(err).__name__}: {err}"
            ) from None

    async def _read_or_delete(self, request: web.Request, target: Target) -> web.StreamResponse:
        rt, name = target.rt, target.name
        if rt.plural == "bindings":
            raise errors.method_not_allowed()
        if request.method == "GET":
            assert name is not None
            if target.subresource in _CREATE_ONLY_SUBRESOURCES:
                raise errors.method_not_allowed()
            return self._one(request, rt, self.api.get(rt, target.namespace, name))
        if request.method != "DELETE":
            raise errors.method_not_allowed()
        if name is None:
            return await self._delete_collection(request, target)
        if target.subresource in _CREATE_ONLY_SUBRESOURCES:
            raise errors.method_not_allowed()
        options = await self._delete_options(request)
        return _json(self.api.delete(rt, target.namespace, name, options))

    async def _write(self, request: web.Request, target: Target) -> web.StreamResponse:
        """POST, PUT and PATCH: everything that takes an object from the request body."""
        method = request.method
        rt, name, sub = target.rt, target.name, target.subresource
        if rt.plural == "bindings":
            if method != "POST" or name is not None:
                raise errors.method_not_allowed()
            assert target.namespace is not None
            return _json(self._bind(target.namespace, None, await self._body(request, rt)), 201)
        if method == "POST":
            if sub == "binding" and name is not None:
                assert target.namespace is not None
                body = await self._body(request, rt)
                return _json(self._bind(target.namespace, name, body), 201)
            if sub == "eviction" and name is not None:
                assert target.namespace is not None
                body = await self._body(request, rt)
                dry_run = bool(request.query.getall("dryRun", []))
                return _json(self._evict(target.namespace, name, body, dry_run), 201)
            if name is not None:
                raise errors.method_not_allowed()
            mode = fieldvalidation.directive(request.query.get("fieldValidation"))
            warnings: list[str] = []
            body = await self._decoded_body(request, rt, mode, warnings)
            return _json(self.api.create(rt, target.namespace, body), 201, warnings=warnings)
        if name is None or sub in _CREATE_ONLY_SUBRESOURCES:
            raise errors.method_not_allowed()
        mode = fieldvalidation.directive(request.query.get("fieldValidation"))
        warnings = []
        if method == "PUT":
            body = await self._decoded_body(request, rt, mode, warnings)
            existed = self.store.get(rt.storage_key, target.namespace or "", name) is not None
            result = self.api.update(rt, target.namespace, name, body, sub)
            # 201: created by the PUT
            return _json(result, 200 if existed else 201, warnings=warnings)
        body = await self._body(request, rt)
        ctype = request.headers.get("Content-Type", "")
        decode = None
        if mode is not None:
            decode = self._patch_decoder(rt, mode, ctype, await request.read(), warnings)
        elif self._needs_defaults(rt):
            decode = functools.partial(self.fields.default, rt)
        result = self.api.patch(rt, target.namespace, name, ctype, body, sub, decode=decode)
        return _json(result, warnings=warnings)

    async def _decoded_body(
        self, request: web.Request, rt: ResourceType, mode: str | None, warnings: list[str]
    ) -> Any:
        """The request's object; decoded against the kind's schema if a directive is named."""
        if mode is None:
            body = await self._body(request, rt)
            if self._needs_defaults(rt):
                body = self.fields.default(rt, body)
            return body
        raw = await request.read()
        try:
            parsed = fieldvalidation.loads_with_duplicates(raw)
        except ValueError as err:
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {err}'
            ) from None
        decoded = self.fields.decode(rt, parsed, mode)
        warnings.extend(decoded.warnings)
        return decoded.obj

    def _needs_defaults(self, rt: ResourceType) -> bool:
        """A custom resource whose schema has defaults: every write sets them, validated or not."""
        return not rt.builtin and fieldvalidation.has_defaults(rt.group, rt.version, rt.kind)

    def _patch_decoder(
        self, rt: ResourceType, mode: str, content_type: str, raw: bytes, warnings: list[str]
    ) -> Callable[[Obj], Obj]:
        """Field validation of a patch: the body's duplicate keys, the patched object's fields."""
        duplicates: list[str] = []
        if not content_type.startswith(JSON_PATCH):
            try:
                duplicates = fieldvalidation.duplicate_fields(
                    fieldvalidation.loads_with_duplicates(raw)
                )
            except ValueError:
                duplicates = []

        def decode(patched: Obj) -> Obj:
            decoded = self.fields.decode(rt, patched, mode, patch_duplicates=duplicates)
            warnings.extend(decoded.warnings)
            result: Obj = decoded.obj
            return result

        return decode

    def _bind(self, namespace: str, name: str | None, body: Any) -> dict[str, Any]:
        """``SimApi.bind``, with the POST and its answer recorded in the audit trail."""
        meta = body.get("metadata") if isinstance(body, dict) else None
        pod = name or (meta.get("name") if isinstance(meta, dict) else None)
        if not isinstance(pod, str) or not pod:
            return self.api.bind(namespace, name, body)  # malformed: the API says why
        target = body.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        current = self.store.get(self.api.rt_pods.storage_key, namespace, pod)
        bound_to = str(((current or {}).get("spec") or {}).get("nodeName") or "")
        try:
            result = self.api.bind(namespace, name, body)
        except ApiError as err:
            self.audit.binding((namespace, pod), str(node or ""), bound_to, err.code)
            raise
        self.audit.binding((namespace, pod), str(node or ""), bound_to, 201)
        return result

    def _evict(self, namespace: str, name: str, body: Any, dry_run: bool) -> dict[str, Any]:
        """``disruption.evict``, with the POST and its answer recorded in the audit trail."""
        try:
            result = disruption.evict(self.api, namespace, name, body, dry_run=dry_run)
        except ApiError as err:
            self.audit.eviction((namespace, name), err.code)
            raise
        except _TYPE_CONFUSION:
            self.audit.eviction((namespace, name), 400)
            raise
        self.audit.eviction((namespace, name), 201)
        return result

    async def _body(self, request: web.Request, rt: ResourceType) -> Any:
        raw = await request.read()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {err}'
            ) from None

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        options = DeleteOptions()
        raw = await request.read() if request.can_read_body else b""
        if raw.strip():
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError as err:
                raise errors.bad_request(f"invalid DeleteOptions: {err}") from None
            if isinstance(body, dict):
                grace = body.get("gracePeriodSeconds")
                if grace is not None:
                    options.grace_period_seconds = _int(grace, "gracePeriodSeconds")
                pre = body.get("preconditions") or {}
                if isinstance(pre, dict):
                    options.precondition_uid = pre.get("uid")
                    options.precondition_resource_version = pre.get("resourceVersion")
        if "gracePeriodSeconds" in request.query:
            options.grace_period_seconds = _int(
                request.query["gracePeriodSeconds"], "gracePeriodSeconds"
            )
        return options

    # --- reads ---------------------------------------------------------------------------

    def _selectors(
        self, request: web.Request, rt: ResourceType
    ) -> tuple[LabelSelector, FieldSelector]:
        try:
            labels = parse_label_selector(request.query.get("labelSelector"))
            fields = parse_field_selector(request.query.get("fieldSelector"), rt.field_selectors)
        except SelectorError as err:
            raise errors.bad_request(str(err)) from None
        return labels, fields

    def _select(self, request: web.Request, target: Target) -> list[Obj]:
        labels, fields = self._selectors(request, target.rt)
        out = []
        for obj in self.api.list_objects(target.rt, target.namespace):
            if labels.matches(obj["metadata"].get("labels")) and fields.matches(obj):
                out.append(obj)
        return out

    def _table(
        self,
        request: web.Request,
        rt: ResourceType,
        items: list[Obj],
        rv: str,
        continue_token: str | None = None,
    ) -> web.Response | None:
        """A server-side printed Table when the client asked for one (kubectl get), else None."""
        accept = request.headers.get("Accept")
        if accept is None or not tables.wants_table(accept):
            return None
        try:
            return _json(
                tables.build_table(
                    rt.printer_key,
                    items,
                    api_version=tables.table_api_version(accept),
                    resource_version=rv,
                    continue_token=continue_token,
                    include_object=request.query.get("includeObject", "Metadata"),
                )
            )
        except ValueError as err:
            raise errors.bad_request(str(err)) from None

    def _one(self, request: web.Request, rt: ResourceType, obj: Obj) -> web.Response:
        table = self._table(request, rt, [obj], obj["metadata"]["resourceVersion"])
        return table if table is not None else _json(obj)

    def _list(self, request: web.Request, target: Target) -> web.Response:
        rt = target.rt
        requested = request.query.get("resourceVersion")
        if requested not in (None, "", "0"):
            wanted = _int(requested, "resourceVersion")
            if wanted > self.store.rv:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {wanted}, current: {self.store.rv}",
                    {
                        "causes": [
                            {
                                "reason": "ResourceVersionTooLarge",
                                "message": "Too large resource version",
                            }
                        ],
                        "retryAfterSeconds": 1,
                    },
                )
        items = self._select(request, target)
        rv = str(self.store.rv)
        limit = _int(request.query.get("limit", "0"), "limit")
        token = request.query.get("continue")
        meta: dict[str, Any] = {"resourceVersion": rv}
        if limit > 0 or token:
            items, rv, next_token, remaining = self._pages.page(items, rv, max(limit, 0), token)
            meta["resourceVersion"] = rv
            if next_token:
                meta["continue"] = next_token
                labels, fields = self._selectors(request, rt)
                if labels.is_empty() and fields.is_empty():
                    # like etcd3's store: the count is only known when nothing is filtered out
                    meta["remainingItemCount"] = remaining
        table = self._table(request, rt, items, meta["resourceVersion"], meta.get("continue"))
        if table is not None:
            return table
        if rt.builtin:  # items of built-in lists carry no kind/apiVersion on the wire
            items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
        return _json(
            {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}
        )

    async def _delete_collection(self, request: web.Request, target: Target) -> web.Response:
        victims = self._select(request, target)
        options = await self._delete_options(request)
        items = self.api.delete_collection(target.rt, victims, options)
        rt = target.rt
        if rt.builtin:  # as in a list: items of built-in lists carry no kind/apiVersion
            items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
        return _json(
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": items,
            }
        )

    # --- watch ---------------------------------------------------------------------------

    async def _watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        rt = target.rt
        labels, fields = self._selectors(request, rt)
        requested = request.query.get("resourceVersion", "")
        bookmarks = request.query.get("allowWatchBookmarks") in _TRUE
        timeout = self.config.default_watch_timeout
        if "timeoutSeconds" in request.query:
            timeout = float(_int(request.query["timeoutSeconds"], "timeoutSeconds"))
        drop_after = self.faults.watch_drop_after
        if drop_after is not None:
            timeout = min(timeout, drop_after)
        since = None if requested in ("", "0") else _int(requested, "resourceVersion")

        def matches(obj: Obj | None) -> bool:
            if obj is None:
                return False
            if (
                target.namespace is not None
                and obj["metadata"].get("namespace") != target.namespace
            ):
                return False
            return labels.matches(obj["metadata"].get("labels")) and fields.matches(obj)

        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        await response.prepare(request)
        initial: list[bytes] = []
        try:
            if since is None:
                sub = self.store.subscribe(rt.storage_key, self.store.rv)
                for obj in self.api.list_objects(rt, target.namespace):
                    if matches(obj):
                        initial.append(_line(ADDED, obj))
            else:
                sub = self.store.subscribe(rt.storage_key, since)
        except Expired as expired:
            body = errors.gone(str(expired)).body()
            body.pop("details", None)
            await response.write(orjson.dumps({"type": "ERROR", "object": body}) + b"\n")
            return response
        if since is not None and since > self.store.rv:
            self.store.unsubscribe(sub)
            body = ApiError(
                504, "Timeout", f"Too large resource version: {since}, current: {self.store.rv}"
            ).body()
            await response.write(orjson.dumps({"type": "ERROR", "object": body}) + b"\n")
            return response
        self.faults.note_watch_opened()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.config.bookmark_interval
        try:
            if initial:
                await response.write(b"".join(initial))
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                if sub.queue.empty():
                    # a BOOKMARK only when caught up (its resourceVersion covers everything);
                    # a busy stream gets it at the next idle moment
                    if bookmarks and now >= next_bookmark:
                        await response.write(_bookmark(rt, self.store.rv))
                        next_bookmark = now + self.config.bookmark_interval
                        continue
                    wait = deadline - now
                    if bookmarks:
                        wait = min(wait, next_bookmark - now)
                    try:
                        # (not ``wait_for``: with the bookmark due on a busy stream it was
                        # called with timeout 0, which cancels the get before it runs, every
                        # time: the stream stopped delivering while events piled up)
                        async with asyncio.timeout(wait):
                            first = await sub.queue.get()
                    except TimeoutError:
                        continue
                else:
                    first = sub.queue.get_nowait()
                batch = [first]
                while not sub.queue.empty() and len(batch) < 512:
                    batch.append(sub.queue.get_nowait())
                lines = []
                ended = False
                for event in batch:
                    if event is None:
                        ended = True
                        break
                    line = self._event_line(rt, event, matches)
                    if line is not None and not self.faults.drop_event():
                        lines.append(line)
                if lines:
                    await response.write(b"".join(lines))
                if ended:
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unsubscribe(sub)
        return response

    def _event_line(
        self, rt: ResourceType, event: StoredEvent, matches: Callable[[Obj | None], bool]
    ) -> bytes | None:
        """The line this watcher sees for ``event``, or None.

        Like the apiserver's watch cache: an object that starts matching the watcher's
        selectors arrives as ADDED, one that stops matching as DELETED.
        """
        obj = self.api.to_view(rt, event.obj)
        now_match = matches(obj)
        before = event.prev is not None and matches(self.api.to_view(rt, event.prev))
        if event.type == DELETED:
            kind = DELETED if now_match else None
        elif now_match:
            kind = MODIFIED if before else ADDED
        else:
            kind = DELETED if before else None
        if kind is None:
            return None
        return _line(kind, obj)


def _accepts_json(accept: str | None) -> bool:
    """Whether an Accept header takes JSON (no header, or a JSON or wildcard clause)."""
    if not accept:
        return True
    for clause in accept.split(","):
        media, *params = (part.strip() for part in clause.split(";"))
        if any(p.replace(" ", "") in ("q=0", "q=0.0") for p in params):
            continue
        if media.lower() in ("application/json", "application/*", "*/*"):
            return True
    return False


def _line(kind: str, obj: Obj) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def _bookmark(rt: ResourceType, rv: int) -> bytes:
    return (
        orjson.dumps(
            {
                "type": "BOOKMARK",
                "object": {
                    "kind": rt.kind,
                    "apiVersion": rt.api_version,
                    "metadata": {"resourceVersion": str(rv), "creationTimestamp": None},
                },
            }
        )
        + b"\n"
    )


def _int(raw: Any, what: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise errors.bad_request(f"invalid {what}: {raw!r} is not an integer") from None
