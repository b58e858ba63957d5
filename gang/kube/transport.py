"""Raw-JSON access to the apiserver over kubernetes-asyncio's transport, with retries.

kubernetes-asyncio gives us what must not be reinvented — kubeconfig and in-cluster config,
authentication, TLS, the URL of every operation. Its generated models are what the hot path
must avoid: deserialising 20,000 pods into ``V1Pod`` objects costs seconds, and a successful
binding (which answers a ``Status``) even raises in the generated client. So every call here
passes ``_preload_content=False``, reads the HTTP status itself, and parses bodies with orjson.

Transient failures (429 with ``Retry-After``, 5xx, broken connections) are retried with capped
exponential backoff and jitter; everything else surfaces as ``KubeError`` with the server's
Status reason and message, for the caller to decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from gang.kube.leanhttp import REQUEST_TIMEOUT, LeanError, LeanHTTP, Reply, ssl_context_of
from gang.kube.postpool import PostPool, WatchStream, worker_settings
from gang.kube.ratelimit import TokenBucket

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Objs = list[Obj]  # (inside Kube, ``list`` names its method)
RETRYABLE = frozenset({429, 500, 502, 503, 504})
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
#: how long past its ``timeoutSeconds`` a watch may go on (in process: stay silent) before it
#: counts as broken
WATCH_READ_GRACE = 30


class KubeError(Exception):
    """A non-success answer: ``status`` 0 means no answer at all (connection failure)."""

    def __init__(
        self, status: int, reason: str, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.status == 0 or self.status in RETRYABLE


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None


@dataclass(frozen=True, slots=True)
class Kind:
    """A resource the informers list and watch."""

    name: str
    group: str
    version: str
    plural: str

    @property
    def custom(self) -> bool:
        return self.group not in ("", "core")


PODS = Kind("pods", "", "v1", "pods")
NODES = Kind("nodes", "", "v1", "nodes")
NAMESPACES = Kind("namespaces", "", "v1", "namespaces")
PVCS = Kind("persistentvolumeclaims", "", "v1", "persistentvolumeclaims")
PVS = Kind("persistentvolumes", "", "v1", "persistentvolumes")
STORAGE_CLASSES = Kind("storageclasses", "storage.k8s.io", "v1", "storageclasses")
CSI_NODES = Kind("csinodes", "storage.k8s.io", "v1", "csinodes")
SERVICES = Kind("services", "", "v1", "services")
REPLICATION_CONTROLLERS = Kind("replicationcontrollers", "", "v1", "replicationcontrollers")
REPLICA_SETS = Kind("replicasets", "apps", "v1", "replicasets")
STATEFUL_SETS = Kind("statefulsets", "apps", "v1", "statefulsets")
PDBS = Kind("poddisruptionbudgets", "policy", "v1", "poddisruptionbudgets")
#: kubernetes-asyncio's CoreV1Api list method for each core kind (every namespace at once)
_CORE_LISTS = {
    "pods": "list_pod_for_all_namespaces",
    "nodes": "list_node",
    "namespaces": "list_namespace",
    "persistentvolumeclaims": "list_persistent_volume_claim_for_all_namespaces",
    "persistentvolumes": "list_persistent_volume",
    "services": "list_service_for_all_namespaces",
    "replicationcontrollers": "list_replication_controller_for_all_namespaces",
}


@dataclass(frozen=True, slots=True)
class _Gated:
    """A request over the lean pool, which takes its rate-limit token itself, with the
    connection in hand (see LeanHTTP.request)."""

    lean: LeanHTTP | PostPool
    method: str
    path: str
    data: bytes
    content_type: str

    def __call__(self, limiter: TokenBucket | None = None) -> Awaitable[Reply]:
        gate = limiter.acquire if limiter is not None else None
        return self.lean.request(self.method, self.path, self.data, self.content_type, gate)


def _no_answer(err: BaseException) -> KubeError:
    """No answer at all (a connection that failed, a worker that went): status 0, retryable."""
    return KubeError(0, "ConnectionError", str(err) or type(err).__name__)


def _list_path(kind: Kind) -> str:
    """The path listing every object of ``kind`` (what kubernetes-asyncio's list calls GET)."""
    if kind.custom:
        return f"/apis/{kind.group}/{kind.version}/{kind.plural}"
    return f"/api/{kind.version}/{kind.plural}"


def _watch_path(base: str, resource_version: str, timeout_seconds: int) -> str:
    """A list path with the query of a watch from ``resource_version`` (BOOKMARKs asked for)."""
    query = {
        "watch": "true",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(timeout_seconds),
    }
    if not resource_version:
        del query["resourceVersion"]
    return f"{base}?{urlencode(query)}"


async def _read_stream(stream: WatchStream) -> bytes:
    """The next piece of a watch a post worker reads; b"" at its clean end. Its other ends
    are the in-process watch's errors: no complete answer is a broken stream (status 0,
    resumed), any other status is the server's error."""
    data = await stream.read()
    if data is not None:
        return data
    end = stream.end
    if isinstance(end, LeanError) or end is None:
        raise KubeError(0, "StreamBroken", str(end or "the watch ended without an answer"))
    if end.status != 200:
        raise error_from(end.status, end.body, _reply_headers(end))
    return b""


def _reply_headers(reply: Reply) -> Mapping[str, str] | None:
    """The one header of a lean reply an error needs: ``Retry-After``."""
    return {"Retry-After": reply.retry_after} if reply.retry_after else None


#: one binding: namespace, pod name, node, the pod's uid (None: not checked)
Binding = tuple[str, str, str, str | None]


#: what an object's name or namespace is made of (DNS subdomain and label names): nothing in it
#: needs escaping in a path
_PLAIN_NAME: Final = re.compile(r"[a-z0-9.-]*")


def _segment(text: str) -> str:
    """``text`` as a URL path segment: ``quote(text)``, with a name that needs no escaping
    (every valid one) returned as it is without going through ``quote``'s encode and scan
    (two per binding request, on the scheduler's one core)."""
    return text if _PLAIN_NAME.fullmatch(text) else quote(text)


def _binding(namespace: str, name: str, node: str, uid: str | None) -> tuple[str, Obj]:
    """The path and body of a pod's binding (with its uid, the server refuses a namesake)."""
    meta: Obj = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    return f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}/binding", body


def backoff_delay(attempt: int, initial: float = 0.2, cap: float = 10.0) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, initial * 2**attempt)]."""
    return random.uniform(0.0, min(cap, initial * (2**attempt)))


def error_from(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> KubeError:
    reason, message = "Unknown", body[:300].decode(errors="replace")
    try:
        parsed = orjson.loads(body)
        if isinstance(parsed, dict):
            reason = str(parsed.get("reason") or reason)
            message = str(parsed.get("message") or message)
    except orjson.JSONDecodeError:
        pass
    retry_after = None
    if headers is not None and headers.get("Retry-After"):
        try:
            retry_after = float(headers["Retry-After"])
        except ValueError:
            retry_after = None
    return KubeError(status, reason, message, retry_after)


class Kube:
    """The operations the scheduler needs, each one HTTP request (plus retries)."""

    def __init__(
        self,
        api_client: Any,
        limiter: TokenBucket | None = None,
        max_retries: int = 5,
        event_limiter: TokenBucket | None = None,
        post_workers: int = 0,
    ) -> None:
        from kubernetes_asyncio import client

        self.api_client = api_client
        # typed as Any: we pass plain dicts and transport-level keywords the stubs do not list
        self.core: Any = client.CoreV1Api(api_client)
        self.custom: Any = client.CustomObjectsApi(api_client)
        self.limiter = limiter
        #: Events get their own budget so a burst of them never delays a binding
        self.event_limiter = event_limiter
        self.max_retries = max_retries
        #: worker processes that send the bindings, Events and status patches (0: this process)
        self.post_workers = post_workers
        self._session: aiohttp.ClientSession | None = None

    async def _once(
        self, call: Callable[[], Awaitable[Any]], limiter: TokenBucket | None
    ) -> Answer:
        if isinstance(call, _Gated):  # it takes the token itself, with the connection in hand
            answer = call(limiter)
        else:
            if limiter is not None:
                await limiter.acquire()
            answer = call()
        headers: Mapping[str, str] | None
        try:
            resp = await answer
            if isinstance(resp, Reply):
                status, body, headers = resp.status, resp.body, _reply_headers(resp)
            else:
                try:
                    body = await resp.read()
                finally:
                    resp.release()
                status, headers = resp.status, resp.headers
        except (aiohttp.ClientError, TimeoutError, OSError, LeanError) as err:
            raise _no_answer(err) from err
        if not 200 <= status < 300:
            raise error_from(status, body, headers)
        return Answer(status, body)

    async def request(
        self,
        call: Callable[[], Awaitable[Any]],
        *,
        limited: bool = True,
        retries: int | None = None,
        limiter: TokenBucket | None = None,
    ) -> Answer:
        """Run ``call`` (a generated-API call with ``_preload_content=False``) with retries."""
        attempts = self.max_retries if retries is None else retries
        attempt = 0
        while True:
            try:
                return await self._once(call, limiter or (self.limiter if limited else None))
            except KubeError as err:
                if not err.retryable or attempt >= attempts:
                    raise
                delay = err.retry_after if err.retry_after is not None else backoff_delay(attempt)
                log.debug("retrying after %s (attempt %d, %.2fs)", err, attempt + 1, delay)
                await asyncio.sleep(delay)
                attempt += 1

    # --- list and watch ------------------------------------------------------------------

    def _list_call(self, kind: Kind, **params: Any) -> Callable[[], Awaitable[Any]]:
        if not kind.custom:
            method = getattr(self.core, _CORE_LISTS[kind.plural])
            return lambda: method(_preload_content=False, **params)
        return lambda: self.custom.list_cluster_custom_object(
            kind.group, kind.version, kind.plural, _preload_content=False, **params
        )

    async def serves(self, group: str, version: str, plural: str) -> bool:
        """Discovery: does the API server serve ``plural`` in ``group/version``?"""
        try:
            answer = await self.request(
                lambda: self.custom.get_api_resources(group, version, _preload_content=False),
                limited=False,
            )
        except KubeError as err:
            if err.status in (404, 503):  # not served (or its aggregated server is down)
                return False
            raise
        resources = answer.json().get("resources") or []
        return any(isinstance(r, dict) and r.get("name") == plural for r in resources)

    async def list(self, kind: Kind) -> tuple[list[Obj], str]:
        """All objects of ``kind`` and the list's resourceVersion (paged, 500 per request)."""
        items: list[Obj] = []
        rv = ""
        async for page, list_rv in self.list_pages(kind):
            items.extend(page)
            rv = list_rv
        return items, rv

    async def list_pages(
        self, kind: Kind, decode: Callable[[bytes], Any] = orjson.loads
    ) -> AsyncIterator[tuple[Objs, str]]:
        """The list of ``kind`` page by page (500 objects each) with the list's
        resourceVersion. The next page is asked for before this one is handed over, so the
        server prepares it while the caller works through this one. ``decode`` turns a page's
        body into its object (``gang.kube.decoding``)."""
        ahead = asyncio.ensure_future(self._page(kind, None, decode))
        try:
            while True:
                items, rv, token = await ahead
                if token:
                    ahead = asyncio.ensure_future(self._page(kind, token, decode))
                yield items, rv
                if not token:
                    return
        finally:
            if not ahead.done():
                ahead.cancel()

    async def _page(
        self, kind: Kind, token: str | None, decode: Callable[[bytes], Any]
    ) -> tuple[Objs, str, str | None]:
        params: dict[str, Any] = {"limit": 500}
        if token:
            params["_continue"] = token
        answer = await self.request(self._list_call(kind, **params), limited=False)
        if not answer.body:  # never taken for an empty list: that would delete every object
            raise KubeError(0, "EmptyAnswer", f"listing {kind.name} answered no body")
        body = decode(answer.body)
        meta = body.get("metadata") or {}
        return body.get("items") or [], meta.get("resourceVersion") or "", meta.get("continue")

    async def watch(
        self,
        kind: Kind,
        resource_version: str,
        timeout_seconds: int,
        decode: Callable[[bytes], Any] = orjson.loads,
    ) -> AsyncIterator[Objs]:
        """Events after ``resource_version`` until the server ends the stream, decoded, in
        the batches they arrived in: whatever the connection holds is read at once and split
        into lines, instead of a ``readline`` and a generator step per event (with one event
        per bound pod, its binding's confirmation, those were a tenth of the scheduler's
        core).

        ``decode`` turns each line into its event (``gang.kube.decoding``). ``ERROR`` events
        are included (the caller relists on 410). Where post workers run, one of them reads
        the stream (``PostPool.open_watch``), and its body comes here through the pipe.
        Raises KubeError if the watch cannot be opened or the stream breaks.
        """
        read, release = await self._open_watch(kind, resource_version, timeout_seconds)
        try:
            unfinished: list[bytes] = []  # the pieces of a line the reads so far end inside
            while True:
                data = await read()
                if not data:
                    last = b"".join(unfinished)
                    if last.strip():
                        yield [decode(last)]  # the stream's last line had no newline
                    return
                if b"\n" not in data:
                    unfinished.append(data)  # joined once, when its line ends
                    continue
                if unfinished:
                    unfinished.append(data)
                    data = b"".join(unfinished)
                    unfinished.clear()
                *lines, rest = data.split(b"\n")
                if rest:
                    unfinished.append(rest)
                events = [decode(line) for line in lines if line.strip()]
                if events:
                    yield events
        finally:
            release()

    async def _open_watch(
        self, kind: Kind, resource_version: str, timeout_seconds: int
    ) -> tuple[Callable[[], Awaitable[bytes]], Callable[[], None]]:
        """A watch opened: how to read its body piece by piece (b"": the server ended it;
        KubeError: it broke, or was refused) and how to let it go."""
        posters = self._posters
        if posters is not None:
            path = _watch_path(_list_path(kind), resource_version, timeout_seconds)
            stream = await posters.open_watch(path, timeout_seconds + WATCH_READ_GRACE)
            if stream is not None:
                return functools.partial(_read_stream, stream), stream.close
        call = self._list_call(
            kind,
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _request_timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=10, sock_read=timeout_seconds + WATCH_READ_GRACE
            ),
        )
        try:
            resp = await call()
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise _no_answer(err) from err
        if resp.status != 200:
            try:
                raise error_from(resp.status, await resp.read(), resp.headers)
            finally:
                resp.release()

        async def read() -> bytes:
            try:
                data: bytes = await resp.content.readany()
            except (aiohttp.ClientError, TimeoutError, OSError) as err:
                raise KubeError(0, "StreamBroken", str(err) or type(err).__name__) from err
            return data

        return read, resp.release

    # --- writes --------------------------------------------------------------------------

    def _direct(
        self,
        method: str,
        path: str,
        body: Obj,
        content_type: str = "application/json",
        offload: bool = False,
    ) -> Callable[[], Awaitable[Any]]:
        """A request skipping kubernetes-asyncio's model layer (the hot path — one binding and
        one Event per pod — pays for JSON once, with orjson): over the lean keep-alive pool, or
        where a proxy is configured, through kubernetes-asyncio's own session. ``offload``: sent
        by a post worker where the scheduler runs them (the writes whose answer matters only as
        a status: bindings, Events, status patches)."""
        data = orjson.dumps(body)
        posters = self._posters if offload else None
        if posters is not None:
            return _Gated(posters, method, path, data, content_type)
        lean = self._lean
        if lean is not None:
            return _Gated(lean, method, path, data, content_type)

        async def call() -> Any:
            headers = await self._auth_headers()
            headers["Content-Type"] = content_type
            url = self.api_client.configuration.host + path
            session, proxy = self._hot_session()
            return await session.request(method, url, data=data, headers=headers, proxy=proxy)

        return call

    async def _auth_headers(self) -> dict[str, str]:
        """kubernetes-asyncio's default headers and credentials (its hooks refresh tokens)."""
        headers = {**self.api_client.default_headers, "Accept": "application/json"}
        await self.api_client.update_params_for_auth(headers, [], ["BearerToken"])
        return headers

    @functools.cached_property
    def _lean(self) -> LeanHTTP | None:
        """The keep-alive pool for direct requests, unless a proxy stands between us and the
        server (aiohttp speaks to proxies; the lean pool does not)."""
        if self._proxy is not None:
            return None
        config = self.api_client.configuration
        return LeanHTTP(
            config.host,
            ssl_context=ssl_context_of(config) if config.host.startswith("https") else None,
            server_hostname=config.tls_server_name,
            headers=self._auth_headers,
            limit=config.connection_pool_maxsize,
        )

    @functools.cached_property
    def _posters(self) -> PostPool | None:
        """The post workers, where configured and the lean pool is used."""
        lean = self._lean
        if self.post_workers < 1 or lean is None:
            return None
        settings = worker_settings(self.api_client.configuration, REQUEST_TIMEOUT)
        return PostPool(self.post_workers, settings, self._auth_headers, lean)

    @property
    def post_pool(self) -> PostPool | None:
        """The post workers' pool, once made (None: this process sends everything)."""
        found: PostPool | None = self.__dict__.get("_posters")
        return found

    async def start_post_workers(self) -> None:
        """Start the post workers now, if any (else the first binding starts them)."""
        posters = self._posters
        if posters is not None:
            await posters.start()

    def _hot_session(self) -> tuple[aiohttp.ClientSession, str | None]:
        """A session on kubernetes-asyncio's connection pool (its TLS settings) without
        ``trust_env``: with it, aiohttp consults netrc and the proxy environment in a worker thread
        on *every* request, two thread hops per binding. The proxy is resolved once instead."""
        if self._session is None or self._session.closed:
            pool = self.api_client.rest_client.pool_manager
            self._session = aiohttp.ClientSession(connector=pool.connector, connector_owner=False)
        return self._session, self._proxy

    @functools.cached_property
    def _proxy(self) -> str | None:
        """The configured proxy, else the environment's for the server's URL (resolved once)."""
        config = self.api_client.configuration
        if config.proxy:
            return str(config.proxy)
        with contextlib.suppress(LookupError):
            found, _ = get_env_proxy_for_url(URL(config.host))
            return str(found)
        return None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        posters = self.post_pool
        if posters is not None:
            await posters.close()
        lean = self.__dict__.get("_lean")  # (only if one was made)
        if lean is not None:
            await lean.close()

    async def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        """POST pods/{name}/binding once (no retries: the binder owns that policy)."""
        path, body = _binding(namespace, name, node, uid)
        await self.request(self._direct("POST", path, body, offload=True), retries=0)

    async def bind_tokens(self, want: int) -> int:
        """Wait for the client's rate limit to allow at least one binding; how many of
        ``want`` it allows now (see ``TokenBucket.acquire_many``)."""
        if self.limiter is None:
            return want
        return await self.limiter.acquire_many(want)

    async def bind_many(
        self, bindings: Sequence[Binding], answered: Callable[[int, KubeError | None], None]
    ) -> bool:
        """POST each binding once, all handed to a post worker together (``PostPool.send_many``):
        ``answered(index, None)`` for a success, ``answered(index, KubeError)`` as ``bind``
        would raise it, once per binding. The caller has taken their rate-limit tokens
        (``bind_tokens``). False (nothing sent): no post workers take batches now; bind them
        one by one."""
        pool = self._posters
        if pool is None:
            return False
        requests = []
        for namespace, name, node, uid in bindings:
            path, body = _binding(namespace, name, node, uid)
            requests.append((f"POST {path} application/json".encode("latin-1"), orjson.dumps(body)))

        def outcome(index: int, reply: Reply | LeanError) -> None:
            if isinstance(reply, LeanError):
                answered(index, _no_answer(reply))
            elif 200 <= reply.status < 300:
                answered(index, None)
            else:
                answered(index, error_from(reply.status, reply.body, _reply_headers(reply)))

        return await pool.send_many(requests, outcome, brief=True)

    async def _get_or_none(self, call: Callable[[], Awaitable[Any]]) -> Obj | None:
        """One GET, unthrottled (a read the binding path waits on); None on 404."""
        try:
            answer = await self.request(call, limited=False)
        except KubeError as err:
            if err.status == 404:
                return None
            raise
        result: Obj = answer.json()
        return result

    async def get_pod(self, namespace: str, name: str) -> Obj | None:
        return await self._get_or_none(
            lambda: self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        )

    async def get_namespaced(
        self, group: str, version: str, plural: str, namespace: str, name: str
    ) -> Obj | None:
        """GET one namespaced object of any API group (None when it does not exist)."""
        return await self._get_or_none(
            lambda: self.custom.get_namespaced_custom_object(
                group, version, namespace, plural, name, _preload_content=False
            )
        )

    async def replace_namespaced(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        body: Obj,
        *,
        status: bool = False,
    ) -> Obj:
        """PUT a namespaced object (or its ``status`` subresource) carrying its resourceVersion:
        a 409 when it changed since it was read. Returns the object as written."""
        path = (
            f"/apis/{group}/{version}/namespaces/{_segment(namespace)}/{plural}/{_segment(name)}"
            + ("/status" if status else "")
        )
        answer = await self.request(self._direct("PUT", path, body))
        result: Obj = answer.json()
        return result

    async def patch_custom_status(
        self, kind: Kind, namespace: str, name: str, status: Obj, subresource: bool = True
    ) -> None:
        """A JSON merge patch of a custom object's status: through its ``status`` subresource,
        or (a CRD without one, like Volcano's PodGroup) of the object itself. ``namespace`` ""
        names a cluster-scoped object (Volcano and KAI Queues)."""
        base = f"/apis/{kind.group}/{kind.version}"
        if namespace:
            base += f"/namespaces/{_segment(namespace)}"
        path = f"{base}/{kind.plural}/{_segment(name)}" + ("/status" if subresource else "")
        await self.request(
            self._direct("PATCH", path, {"status": status}, MERGE_PATCH, offload=True)
        )

    async def patch_pod_status(self, namespace: str, name: str, patch: Obj) -> None:
        """A strategic merge patch on pods/status: conditions merge by type, so a condition
        is added or updated without rewriting the others."""
        path = f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}/status"
        await self.request(self._direct("PATCH", path, patch, STRATEGIC_MERGE_PATCH, offload=True))

    async def evict(self, namespace: str, name: str, uid: str | None = None) -> None:
        """POST pods/{name}/eviction (policy/v1) once: the API server checks the pod's
        PodDisruptionBudget and answers 429 if it would be violated (no retries here: the
        evictor decides what a refusal means)."""
        body: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        await self.request(
            self._direct(
                "POST",
                f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}/eviction",
                body,
            ),
            retries=0,
        )

    async def delete_pod(self, namespace: str, name: str, uid: str | None = None) -> None:
        """DELETE a pod gracefully (what an eviction does, without the budget check)."""
        body: Obj = {"preconditions": {"uid": uid}} if uid else {}
        await self.request(
            lambda: self.core.delete_namespaced_pod(
                name, namespace, body=body, _preload_content=False
            )
        )

    async def patch_claim(self, namespace: str, name: str, patch: Obj) -> None:
        """A JSON merge patch on a PersistentVolumeClaim (VolumeBinding's selected-node)."""
        await self.request(
            lambda: self.core.patch_namespaced_persistent_volume_claim(
                name, namespace, patch, _content_type=MERGE_PATCH, _preload_content=False
            )
        )

    async def patch_volume(self, name: str, patch: Obj) -> None:
        """A JSON merge patch on a PersistentVolume (VolumeBinding's claimRef)."""
        await self.request(
            lambda: self.core.patch_persistent_volume(
                name, patch, _content_type=MERGE_PATCH, _preload_content=False
            )
        )

    async def create_event(self, namespace: str, event: Obj) -> None:
        await self.request(
            self._direct(
                "POST", f"/api/v1/namespaces/{_segment(namespace)}/events", event, offload=True
            ),
            retries=2,
            limiter=self.event_limiter,
        )

    # --- leases (leader election: never rate limited, never retried here) -----------------

    async def get_lease(self, namespace: str, name: str) -> Obj | None:
        from kubernetes_asyncio import client

        api: Any = client.CoordinationV1Api(self.api_client)
        try:
            answer = await self.request(
                lambda: api.read_namespaced_lease(name, namespace, _preload_content=False),
                limited=False,
                retries=0,
            )
        except KubeError as err:
            if err.status == 404:
                return None
            raise
        lease: Obj = answer.json()
        return lease

    async def patch_lease(self, namespace: str, name: str, patch: Obj) -> None:
        """A JSON merge patch of a Lease over the lean pool (a kubelet-style heartbeat: the
        answer matters only as a status), not retried here."""
        path = (
            f"/apis/coordination.k8s.io/v1/namespaces/{_segment(namespace)}/leases/{_segment(name)}"
        )
        await self.request(
            self._direct("PATCH", path, patch, MERGE_PATCH), limited=False, retries=0
        )

    async def write_lease(self, namespace: str, lease: Obj, *, create: bool) -> Obj:
        """Create or replace (optimistic concurrency on metadata.resourceVersion) a Lease."""
        from kubernetes_asyncio import client

        api: Any = client.CoordinationV1Api(self.api_client)
        name = lease["metadata"]["name"]

        async def call() -> Any:
            if create:
                return await api.create_namespaced_lease(namespace, lease, _preload_content=False)
            return await api.replace_namespaced_lease(
                name, namespace, lease, _preload_content=False
            )

        answer = await self.request(call, limited=False, retries=0)
        written: Obj = answer.json()
        return written
