"""Garbage and oversized requests to every HTTP endpoint gang serves, and to the simulator's API.

Each server runs on a loop thread and hypothesis sends one request per example, so a failure
shrinks to the single request that caused it. What must hold, per server:

- the status server (``/healthz /readyz /metrics /debug/gangs``): GET/HEAD answer, any other
  method is 405, a body is ignored up to ``MAX_REQUEST_BYTES`` and 413 beyond; never a 5xx
  (on every server, a method token the HTTP parser does not know is a 400 before routing);
- the extender: every verb answers garbage with 200 (an ``Error`` field), 400, 401 (no token),
  404, 405, 413 or 422 (prioritize's "cannot judge this pod") — with a JSON ``Error`` body when
  not 200 — and never a 5xx; it still answers a good request afterwards;
- the simulator: every POST/PUT/PATCH of garbage to pods, nodes, PodGroups and bindings is a
  4xx with a ``Status`` body, as a real apiserver's is, because gang's tests rely on that.

``GANG_FUZZ_REQUESTS`` scales the number of requests per server (default 1: 300/400/600).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gang.app.metrics import make_registry
from gang.app.server import MAX_REQUEST_BYTES, StatusServer
from gang.extender.server import ExtenderConfig, ExtenderServer
from gang.kube.client import make_api_client
from gang.kube.transport import Kube
from gang.sim.cluster import SimCluster
from tests.badinput.conftest import LoopThread, field_garbage, http_request, json_values, mutations
from tests.extender.conftest import fixture, fixture_bytes

SCALE = int(os.environ.get("GANG_FUZZ_REQUESTS", "1"))
TOKEN = "fuzz-token-5e1f0c"


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def report(name: str, answers: Counter[int]) -> None:
    total = sum(answers.values())
    errors = sum(n for status, n in answers.items() if status >= 500)
    print(
        f"\nFIGURES {name}: {total} garbage requests, {errors} 5xx, by status {dict(sorted(answers.items()))}"
    )


def mostly(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``common`` nine times in ten, else ``rare``."""
    return st.integers(0, 9).flatmap(lambda i: rare if i == 0 else common)


STANDARD_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")
#: HTTP methods: the usual ones, and now and then a made-up token (CONNECT takes no path)
methods = mostly(
    st.sampled_from(STANDARD_METHODS),
    st.from_regex(r"[A-Z]{1,10}", fullmatch=True).filter(lambda m: m != "CONNECT"),
)
#: paths that match no route: no '%' (decoded before routing) and no '.' (dot segments are
#: normalised away), so none of them can turn into a real endpoint
stray_paths = st.from_regex(r"/[a-zA-Z0-9_~/-]{0,40}", fullmatch=True)


def json_bytes(values: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    return values.map(lambda v: orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS))


# --- the status server --------------------------------------------------------------------------

STATUS_PATHS = ("/healthz", "/readyz", "/metrics", "/debug/gangs")
status_bodies = st.one_of(
    st.none(),
    st.binary(max_size=MAX_REQUEST_BYTES),
    json_bytes(json_values),
    st.integers(MAX_REQUEST_BYTES + 1, 16 * MAX_REQUEST_BYTES).map(lambda n: b"{" * n),
)


def test_status_server_is_read_only_and_bounded_under_garbage(loop_thread: LoopThread) -> None:
    async def start() -> StatusServer:
        server = StatusServer(
            make_registry(lambda: None, lambda: False), lambda: None, lambda: (True, "ok")
        )
        await server.start("127.0.0.1", 0)
        return server

    server = loop_thread.run(start())
    answers: Counter[int] = Counter()

    @fuzz_settings(300)
    @given(
        method=methods,
        path=mostly(st.sampled_from(STATUS_PATHS), stray_paths),
        query=st.sampled_from(["", "?format=json", "?format=%ff", "?a=1&a=2", "?" + "x" * 300]),
        body=status_bodies,
        content_type=st.sampled_from(["application/json", "text/plain", "x/\u00ff"]),
    )
    def one(method: str, path: str, query: str, body: bytes | None, content_type: str) -> None:
        headers = {"Content-Type": content_type} if body is not None else {}
        status, _, _ = http_request(server.port, method, path + query, body, headers)
        answers[status] += 1
        known = path in STATUS_PATHS
        if method in ("GET", "HEAD"):
            too_large = body is not None and len(body) > MAX_REQUEST_BYTES
            expected = {413 if too_large else 200 if known else 404}
        else:
            expected = {405 if known else 404}
            if method not in STANDARD_METHODS:
                expected.add(400)  # a method the HTTP parser does not know never gets routed
        assert status in expected, (method, path, status)

    try:
        one()
        for path in STATUS_PATHS:  # still answering
            assert http_request(server.port, "GET", path)[0] == 200
    finally:
        loop_thread.run(server.stop())
    report("status server", answers)


# --- the extender ---------------------------------------------------------------------------

PREFIX = "/gang-extender"
EXTENDER_LIMIT = 64 * 1024
VERB_TEMPLATES = {
    "filter": fixture("filter-args-nodes.json"),
    "prioritize": fixture("filter-args-nodes.json"),
    "bind": fixture("bind-args.json"),
}
#: what kube-scheduler may be answered: 422 is prioritize's "this pod cannot be judged" (its
#: answer has no error field), 401 a request without the bearer token
EXTENDER_STATUSES = {200, 400, 401, 404, 405, 413, 422}


@st.composite
def extender_requests(draw: st.DrawFn) -> tuple[str, str, bytes, dict[str, str]]:
    verb = draw(mostly(st.sampled_from(list(VERB_TEMPLATES)), st.sampled_from(["preempt", ""])))
    path = draw(
        mostly(
            st.just(f"{PREFIX}/{verb}"),
            st.sampled_from(["/healthz", "/readyz", f"{PREFIX}/filter/x", "/filter"]) | stray_paths,
        )
    )
    template = VERB_TEMPLATES.get(verb, VERB_TEMPLATES["filter"])
    body = draw(
        st.one_of(
            json_bytes(mutations(template)),
            json_bytes(mutations(template)),
            json_bytes(json_values),
            st.binary(max_size=512),
            st.integers(EXTENDER_LIMIT + 1, 2 * EXTENDER_LIMIT).map(lambda n: b" " * n),
        )
    )
    method = draw(mostly(st.just("POST"), methods))
    token = draw(st.sampled_from([TOKEN] * 6 + [None, "wrong", ""]))
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return method, path, body, headers


def test_extender_answers_garbage_to_every_verb_without_5xx(loop_thread: LoopThread) -> None:
    async def start() -> tuple[SimCluster, Any, ExtenderServer]:
        cluster = SimCluster("2:gpu=8")
        await cluster.start()
        api_client = await make_api_client(str(cluster.kubeconfig_path))
        config = ExtenderConfig(enable_bind=True, token=TOKEN, max_body_bytes=EXTENDER_LIMIT)
        server = ExtenderServer(config, kube=Kube(api_client))
        await server.start("127.0.0.1", 0)
        return cluster, api_client, server

    async def stop() -> None:
        await server.stop()
        await api_client.close()
        await cluster.close()

    cluster, api_client, server = loop_thread.run(start())
    answers: Counter[int] = Counter()

    @fuzz_settings(400)
    @given(request=extender_requests())
    def one(request: tuple[str, str, bytes, dict[str, str]]) -> None:
        method, path, body, headers = request
        status, _, raw = http_request(server.port, method, path, body, headers)
        answers[status] += 1
        assert status in EXTENDER_STATUSES, (status, raw[:300])
        if status != 200 and method in STANDARD_METHODS and method != "HEAD":
            error = orjson.loads(raw)["Error"]  # (unknown methods stop at the HTTP parser)
            assert isinstance(error, str) and error
        authorized = headers.get("Authorization") == f"Bearer {TOKEN}"
        if path.startswith(PREFIX) and not authorized and method in STANDARD_METHODS:
            assert status in (401, 413)

    try:
        one()
        good = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        status, _, raw = http_request(
            server.port, "POST", f"{PREFIX}/filter", fixture_bytes("filter-args-nodes.json"), good
        )
        assert status == 200 and orjson.loads(raw)["FailedNodes"] == {
            "cpu-d": "Insufficient nvidia.com/gpu"
        }
        assert server.answers.get(("filter", 500), 0) == 0
    finally:
        loop_thread.run(stop())
    report("extender", answers)


# --- the simulator's API ------------------------------------------------------------------------

POD: dict[str, Any] = {
    "metadata": {"name": "q", "labels": {"app": "x"}, "annotations": {"a": "b"}},
    "spec": {
        "schedulerName": "gang-scheduler",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "c",
                "image": "i",
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            }
        ],
        "initContainers": [{"name": "init", "image": "i", "restartPolicy": "Always"}],
        "overhead": {"cpu": "10m"},
        "priorityClassName": "system-node-critical",
        "schedulingGates": [{"name": "wait"}],
    },
    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
}
NODE: dict[str, Any] = {
    "metadata": {"name": "n", "labels": {"pool": "a"}},
    "spec": {
        "unschedulable": False,
        "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
    },
    "status": {
        "capacity": {"cpu": "8", "pods": "110"},
        "allocatable": {"cpu": "8", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}
PODGROUP: dict[str, Any] = {
    "metadata": {"name": "h"},
    "spec": {"minMember": 2, "minResources": {"cpu": "1"}, "scheduleTimeoutSeconds": 30},
    "status": {"phase": "Pending", "conditions": [{"type": "Valid", "status": "True"}]},
}
BINDING: dict[str, Any] = {
    "metadata": {"name": "p", "annotations": {"a": "b"}},
    "target": {"apiVersion": "v1", "kind": "Node", "name": "node-00000"},
}
GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
#: (method, path, template): every write of the resources gang's tests use
SIM_TARGETS = [
    ("POST", "/api/v1/namespaces/default/pods", POD),
    ("PUT", "/api/v1/namespaces/default/pods/p", POD),
    ("PATCH", "/api/v1/namespaces/default/pods/p", POD),
    ("PUT", "/api/v1/namespaces/default/pods/p/status", POD),
    ("PATCH", "/api/v1/namespaces/default/pods/p/status", POD),
    ("POST", "/api/v1/namespaces/default/pods/p/binding", BINDING),
    ("POST", "/api/v1/namespaces/default/bindings", BINDING),
    ("POST", "/api/v1/nodes", NODE),
    ("PUT", "/api/v1/nodes/node-00000", NODE),
    ("PATCH", "/api/v1/nodes/node-00000", NODE),
    ("PUT", "/api/v1/nodes/node-00000/status", NODE),
    ("PATCH", "/api/v1/nodes/node-00000/status", NODE),
    ("POST", GROUPS, PODGROUP),
    ("PUT", f"{GROUPS}/g", PODGROUP),
    ("PATCH", f"{GROUPS}/g", PODGROUP),
    ("PUT", f"{GROUPS}/g/status", PODGROUP),
    ("PATCH", f"{GROUPS}/g/status", PODGROUP),
]
PATCH_TYPES = [
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "text/plain",
]
json_patches = st.lists(
    st.fixed_dictionaries(
        {
            "op": st.sampled_from(["add", "replace", "remove", "test", "move", "copy", "bogus"]),
            "path": st.sampled_from(
                [
                    "/spec",
                    "/spec/containers/0",
                    "/metadata/labels/a",
                    "/status",
                    "",
                    "/x/y",
                    "/metadata",
                ]
            ),
        },
        optional={"value": field_garbage, "from": st.sampled_from(["/spec", "/nope", ""])},
    )
    | json_values,
    max_size=3,
)


@st.composite
def sim_requests(draw: st.DrawFn) -> tuple[str, str, bytes, str]:
    method, path, template = draw(st.sampled_from(SIM_TARGETS))
    content_type = "application/json"
    if method == "PATCH":
        content_type = draw(st.sampled_from(PATCH_TYPES))
    if content_type == "application/json-patch+json" and draw(st.booleans()):
        return method, path, draw(json_bytes(json_patches)), content_type
    keep = frozenset({"metadata"}) if method == "POST" and template is not BINDING else frozenset()
    body = draw(
        st.one_of(
            json_bytes(mutations(template, keep=keep)),
            json_bytes(mutations(template, keep=keep)),
            json_bytes(json_values),
            st.binary(max_size=256),
        )
    )
    return method, path, body, content_type


def test_simulator_answers_garbage_writes_with_a_4xx_status(loop_thread: LoopThread) -> None:
    async def start() -> SimCluster:
        cluster = SimCluster("2:gpu=8")
        await cluster.start()
        api = cluster.api
        api.create(
            api.rt_pods,
            "default",
            {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        )
        api.create(
            api.registry.by_key("scheduling.x-k8s.io/v1alpha1/podgroups"),
            "default",
            {"metadata": {"name": "g"}, "spec": {"minMember": 1}},
        )
        return cluster

    cluster = loop_thread.run(start())
    answers: Counter[int] = Counter()
    names = iter(range(10**9))

    @fuzz_settings(600)
    @given(request=sim_requests())
    def one(request: tuple[str, str, bytes, str]) -> None:
        method, path, body, content_type = request
        if method == "POST" and "binding" not in path:
            # fresh names, so that creates are not all 409s
            try:
                decoded = orjson.loads(body)
                if isinstance(decoded, dict) and isinstance(decoded.get("metadata"), dict):
                    decoded["metadata"]["name"] = f"fz-{next(names)}"
                    body = orjson.dumps(decoded, option=orjson.OPT_NON_STR_KEYS)
            except orjson.JSONDecodeError:
                pass
        status, _, raw = http_request(
            cluster.port, method, path, body, {"Content-Type": content_type}
        )
        answers[status] += 1
        assert status < 500, raw[:500]
        if status >= 400:
            answer = orjson.loads(raw)
            assert answer["kind"] == "Status" and answer["status"] == "Failure", answer
            assert answer["code"] == status and answer["message"], answer

    try:
        one()
        assert http_request(cluster.port, "GET", "/api/v1/namespaces/default/pods/p")[0] == 200
    finally:
        loop_thread.run(cluster.close())
    report("simulator API", answers)
