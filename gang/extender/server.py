"""gang's Filter and Score for kube-scheduler, over the scheduler extender HTTP protocol.

kube-scheduler calls an extender with ``POST {urlPrefix}/{verb}`` and a JSON body (see
``gang.extender.models`` for the exact keys), after its own Filter plugins and alongside its own
Score plugins. This server answers three verbs under ``prefix`` (default ``/gang-extender``):

- ``filter`` (ExtenderArgs → ExtenderFilterResult): the nodes gang's Filter plugins accept,
  and for the others kube-scheduler-style reasons (``Insufficient nvidia.com/gpu``, ``node(s)
  had untolerated taint {dedicated: ml}``), in ``FailedAndUnresolvableNodes`` when preemption
  cannot help (cordon, taints, node affinity), else in ``FailedNodes``.
- ``prioritize`` (ExtenderArgs → HostPriorityList): gang's Score for every node, mapped onto
  kube-scheduler's 0..10 (see ``gang.extender.judge``); 0 for a node gang's filters reject.
- ``bind`` (ExtenderBindingArgs → ExtenderBindingResult): off unless enabled (``enable_bind``);
  then the pod is bound through ``pods/binding``. Binding changes cluster state, so a server
  with bind enabled refuses to start unless its callers are authenticated — a bearer token, or
  TLS requiring client certificates — or ``allow_unauthenticated_bind`` says the listener is
  otherwise protected (``--allow-unauthenticated-bind``: loopback in kube-scheduler's pod).

Where the nodes come from:

- ``nodeCacheCapable: false`` — the request carries full node objects (``Nodes``). They are
  judged on their own: a throw-away cache of just those nodes, no pods, so free = allocatable.
  gang's resource filter then only asks "could this node ever hold the pod?"; the accounting of
  what is already running is kube-scheduler's (its NodeResourcesFit runs before extenders).
- ``nodeCacheCapable: true`` — the request carries node names (``NodeNames``), judged against
  gang's own informer-fed cache (``NodeCache``: nodes and every bound pod), so resources are
  accounted: a node whose GPUs are taken fails with ``Insufficient nvidia.com/gpu``. A name the
  cache does not know fails with a reason saying so. Until the cache has synced, filter answers
  an ``Error`` (kube-scheduler skips an ``ignorable`` extender) and prioritize a 503.

No ``preempt`` verb: gang's Filter plugins are a subset of kube-scheduler's default ones
(NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit), which
kube-scheduler's preemption dry run already applies with the victims removed. An honest
``preempt`` answer could therefore only echo kube-scheduler's victims back unchanged, while a
wrong one (or an unreachable extender) would block preemption; so the verb is not offered.

Errors, as the protocol has them: kube-scheduler reads an answer only on HTTP 200. A request
that parses but cannot be judged (a pod gang cannot read, node names without a node cache, a
failing plugin) gets 200 with ``Error`` set from filter, 422 (503 while the cache syncs) from
prioritize (whose answer, a bare list, has no error field). Malformed JSON and missing fields
are 400, bodies over ``max_body_bytes`` 413 (on any path: ``/healthz`` and ``/readyz`` ignore a
body, but not an oversized one), a missing or wrong bearer token 401, anything unexpected 500 —
each with a JSON ``{"Error": message}`` body, and the server keeps serving. The token is
compared in constant time and never logged.

The bearer token guards the verbs when something can send it (a proxy, a test client):
kube-scheduler's extender client has no option to send one. With kube-scheduler, listen on
localhost (the sidecar layout) or use TLS with client certificates (``client_ca``; kube-scheduler
presents ``tlsConfig.certFile``/``keyFile``). ``/healthz`` and ``/readyz`` are always open.
"""

from __future__ import annotations

import hmac
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from aiohttp import web
from pydantic import ValidationError

from gang.extender.judge import Verdict, cache_of_nodes, judge
from gang.extender.models import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    GoJSON,
    HostPriority,
    NodeList,
    describe,
)
from gang.extender.nodecache import NodeCache
from gang.kube.transport import Kube, KubeError
from gang.models.settings import ZONE_LABEL, ScoreWeights
from gang.scheduling.framework import PluginError, Profile
from gang.scheduling.placement import Placer
from gang.state.podinfo import PodParseError, parse_pod
from gang.state.resources import ResourceIndex

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "/gang-extender"
DEFAULT_PORT = 8888
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024  # a NodeList takes 2-3 KiB per node, more with images
VERBS = ("filter", "prioritize", "bind")
OPEN_PATHS = frozenset({"/healthz", "/readyz"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
M = TypeVar("M", bound=GoJSON)


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    prefix: str = DEFAULT_PREFIX
    #: serve the bind verb (kube-scheduler then leaves binding the pods it sends us to us)
    enable_bind: bool = False
    #: require ``Authorization: Bearer <token>`` on the verbs (kept out of the repr: no log
    #: line that prints the configuration can leak it)
    token: str | None = field(default=None, repr=False)
    #: serve bind without authentication (no token, no client certificates); only for a
    #: listener nothing else can reach
    allow_unauthenticated_bind: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    weights: ScoreWeights = field(default_factory=ScoreWeights)
    topology_key: str = ZONE_LABEL
    #: a profile from gang's configuration (its Filter and Score plugins, third-party ones
    #: included); None: the default plugins with ``weights``
    profile: Profile | None = None

    def placer(self, index: ResourceIndex) -> Placer:
        if self.profile is None:
            return Placer(index, self.weights, self.topology_key)
        return Placer.for_profile(index, self.profile, self.topology_key)

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be at least 1")
        if self.token is not None and not self.token:
            raise ValueError("the bearer token must not be empty")


class InsecureBindError(ValueError):
    """Bind is enabled but nothing authenticates the callers who could use it."""


def bind_authentication_problem(
    config: ExtenderConfig, ssl_context: ssl.SSLContext | None
) -> str | None:
    """Why serving ``config`` on a listener with ``ssl_context`` would expose an unauthenticated
    verb that mutates cluster state; None when it would not."""
    if not config.enable_bind or config.allow_unauthenticated_bind or config.token is not None:
        return None
    if ssl_context is not None and ssl_context.verify_mode == ssl.CERT_REQUIRED:
        return None
    return (
        "the bind verb creates pods/binding, so its callers must be authenticated: "
        "give --token-file, or --tls-cert/--tls-key with --tls-client-ca (kube-scheduler's "
        "client certificate); on a listener nothing else can reach (127.0.0.1 in "
        "kube-scheduler's pod) --allow-unauthenticated-bind accepts the risk"
    )


def normalize_prefix(prefix: str) -> str:
    """``gang-extender/`` → ``/gang-extender``; ``/`` or ``""`` → ``""`` (verbs at the root)."""
    stripped = prefix.strip().strip("/")
    return f"/{stripped}" if stripped else ""


def server_ssl_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """TLS for the listener; with ``client_ca`` every client must present a certificate it
    signed (kube-scheduler's ``tlsConfig.certFile``/``keyFile``)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=client_ca)
    return context


class RequestError(Exception):
    """Answer ``status`` with ``{"Error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    response = _json({"Error": message}, status)
    if headers:
        response.headers.update(headers)
    return response


class ExtenderServer:
    def __init__(
        self,
        config: ExtenderConfig | None = None,
        *,
        node_cache: NodeCache | None = None,
        kube: Kube | None = None,
    ) -> None:
        self.config = config or ExtenderConfig()
        if self.config.enable_bind and kube is None:
            raise ValueError("binding needs an API client (kube)")
        self.prefix = normalize_prefix(self.config.prefix)
        self.node_cache = node_cache
        self.kube = kube
        self._placer = (
            self.config.placer(node_cache.cache.index) if node_cache is not None else None
        )
        self._token = self.config.token.encode() if self.config.token else None
        self._runner: web.AppRunner | None = None
        self.port = 0
        #: answers by verb ("other" for any other path) and HTTP status, for logs and tests
        self.answers: dict[tuple[str, int], int] = {}

    # --- the application -------------------------------------------------------------------

    def make_app(self) -> web.Application:
        # aiohttp refuses bodies of client_max_size bytes or more; ours refuses more than max
        app = web.Application(
            client_max_size=self.config.max_body_bytes + 1,
            middlewares=[self._guard_middleware(), self._auth_middleware()],
        )
        app.router.add_post(f"{self.prefix}/filter", self._filter)
        app.router.add_post(f"{self.prefix}/prioritize", self._prioritize)
        app.router.add_post(f"{self.prefix}/bind", self._bind)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        return app

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> None:
        """Listen; raises :class:`InsecureBindError` for bind without authentication."""
        problem = bind_authentication_problem(self.config, ssl_context)
        if problem is not None:
            raise InsecureBindError(problem)
        runner = web.AppRunner(self.make_app(), handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        self._runner = runner
        sockets = getattr(site._server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _guard_middleware(self) -> Any:
        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            verb = request.path.rsplit("/", 1)[-1]
            verb = verb if verb in VERBS or f"/{verb}" in OPEN_PATHS else "other"
            start = time.perf_counter()
            limit = self.config.max_body_bytes
            try:
                if request.content_length is not None and request.content_length > limit:
                    raise RequestError(413, f"request body over the limit of {limit} bytes")
                response = await handler(request)
            except RequestError as err:
                response = _error(err.status, err.message)
            except web.HTTPException as err:
                if err.status < 400:
                    raise
                response = _error(err.status, err.text or err.reason, _auth_header(err))
            except Exception as err:  # a bug must cost one answer, never the server
                log.exception("extender: %s %s failed", request.method, request.path)
                response = _error(500, f"internal error: {type(err).__name__}: {err}")
            key = (verb, response.status)
            self.answers[key] = self.answers.get(key, 0) + 1
            if response.status >= 400:
                log.warning("extender: %s %s -> %d", request.method, request.path, response.status)
            log.debug(
                "extender: %s %s -> %d in %.1f ms",
                request.method,
                request.path,
                response.status,
                (time.perf_counter() - start) * 1000,
            )
            return response

        return guard

    def _auth_middleware(self) -> Any:
        token = self._token

        @web.middleware
        async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
            if token is not None and request.path not in OPEN_PATHS:
                given = request.headers.get("Authorization", "")
                scheme, _, value = given.partition(" ")
                if scheme.lower() != "bearer" or not hmac.compare_digest(
                    value.strip().encode(), token
                ):
                    raise web.HTTPUnauthorized(
                        text="a valid bearer token is required",
                        headers={"WWW-Authenticate": 'Bearer realm="gang-extender"'},
                    )
            return await handler(request)

        return auth

    # --- reading requests --------------------------------------------------------------------

    async def _read(self, request: web.Request, model: type[M]) -> M:
        limit = self.config.max_body_bytes
        too_large = f"request body over the limit of {limit} bytes"
        if request.content_length is not None and request.content_length > limit:
            raise RequestError(413, too_large)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise RequestError(413, too_large) from None
        if len(body) > limit:
            raise RequestError(413, too_large)
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise RequestError(400, f"malformed JSON: {err}") from None
        if not isinstance(data, dict):
            raise RequestError(400, f"the body must be a JSON object ({model.__name__})")
        try:
            return model.model_validate(data)
        except ValidationError as err:
            raise RequestError(400, f"invalid {model.__name__}: {describe(err)}") from None

    # --- filter and prioritize ---------------------------------------------------------------

    def _verdict(self, args: ExtenderArgs) -> tuple[Verdict, bool, dict[str, Any]]:
        """Judge the request; returns the verdict, whether the node cache was used, and the
        raw node objects by name (node-list mode). Raises ``_Unjudgeable``."""
        try:
            pod = parse_pod(args.pod)
        except PodParseError as err:
            raise _Unjudgeable(422, f"gang extender cannot read the pod: {err}") from None
        use_cache = args.node_names is not None and (
            self.node_cache is not None or args.nodes is None
        )
        try:
            if use_cache:
                if self.node_cache is None or self._placer is None:
                    raise _Unjudgeable(
                        422,
                        "the request names nodes (nodeCacheCapable: true) but the gang extender "
                        "runs without a node cache: start it with --node-cache, or set "
                        "nodeCacheCapable: false",
                    )
                if not self.node_cache.synced:
                    raise _Unjudgeable(503, "the gang extender's node cache has not synced yet")
                names = list(args.node_names or [])
                return judge(self.node_cache.cache, self._placer, pod, names), True, {}
            items = args.nodes.items if args.nodes is not None else []
            cache, names = cache_of_nodes(items)
            raw: dict[str, Any] = {}
            for obj in items:
                meta = obj.get("metadata")
                name = meta.get("name") if isinstance(meta, dict) else None
                if isinstance(name, str):
                    raw.setdefault(name, obj)
            placer = self.config.placer(cache.index)
            return judge(cache, placer, pod, names), False, raw
        except PluginError as err:
            raise _Unjudgeable(422, f"gang extender: {err}") from None

    async def _filter(self, request: web.Request) -> web.Response:
        args = await self._read(request, ExtenderArgs)
        try:
            verdict, cached, raw = self._verdict(args)
        except _Unjudgeable as err:
            return _json(ExtenderFilterResult(Error=err.message).wire())
        failed = dict(sorted(verdict.failed.items()))  # Go writes map keys sorted
        unresolvable = dict(sorted(verdict.unresolvable.items()))
        if cached:
            result = ExtenderFilterResult(
                NodeNames=verdict.passed,
                FailedNodes=failed,
                FailedAndUnresolvableNodes=unresolvable,
            )
        else:
            result = ExtenderFilterResult(
                Nodes=NodeList(items=[raw[name] for name in verdict.passed]),
                FailedNodes=failed,
                FailedAndUnresolvableNodes=unresolvable,
            )
        return _json(result.wire())

    async def _prioritize(self, request: web.Request) -> web.Response:
        args = await self._read(request, ExtenderArgs)
        try:
            verdict, _, _ = self._verdict(args)
        except _Unjudgeable as err:
            raise RequestError(err.status, err.message) from None
        return _json(
            [HostPriority(Host=name, Score=score).wire() for name, score in verdict.scores.items()]
        )

    # --- bind --------------------------------------------------------------------------------

    async def _bind(self, request: web.Request) -> web.Response:
        if not self.config.enable_bind or self.kube is None:
            raise RequestError(
                404,
                "the bind verb is disabled: start the gang extender with --enable-bind "
                "(and set bindVerb in kube-scheduler's extender configuration)",
            )
        args = await self._read(request, ExtenderBindingArgs)
        ns, name, node = args.pod_namespace, args.pod_name, args.node
        try:
            await self.kube.bind(ns, name, node, args.pod_uid or None)
        except KubeError as err:
            if err.status == 409 and await self._bound_to(ns, name, node):
                return _json(ExtenderBindingResult().wire())  # an earlier attempt landed
            log.warning("extender: binding %s/%s to %s failed: %s", ns, name, node, err)
            return _json(
                ExtenderBindingResult(Error=f"binding {ns}/{name} to {node} failed: {err}").wire()
            )
        return _json(ExtenderBindingResult().wire())

    async def _bound_to(self, namespace: str, name: str, node: str) -> bool:
        assert self.kube is not None
        try:
            pod = await self.kube.get_pod(namespace, name)
        except KubeError:
            return False
        return bool(pod) and ((pod or {}).get("spec") or {}).get("nodeName") == node

    # --- health ------------------------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.node_cache is not None and not self.node_cache.synced:
            return web.Response(text="node cache not synced yet", status=503)
        return web.Response(text="ok")


class _Unjudgeable(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _auth_header(err: web.HTTPException) -> dict[str, str] | None:
    challenge = err.headers.get("WWW-Authenticate")
    return {"WWW-Authenticate": challenge} if challenge else None
