"""The extender's filter and prioritize verbs with full node objects (``nodeCacheCapable: false``),
and its answers to everything that is not a good request — always over real HTTP."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import aiohttp
import orjson
import pytest

from gang.extender import server as server_module
from gang.extender.judge import cache_of_nodes, extender_score, max_total
from gang.extender.models import MAX_EXTENDER_PRIORITY
from gang.extender.server import DEFAULT_MAX_BODY_BYTES, ExtenderConfig
from gang.models.settings import ScoreWeights
from gang.scheduling.placement import Placer
from gang.state.podinfo import parse_pod
from tests.extender.conftest import Client, fixture, fixture_bytes, names, serving

NODES_ARGS = "filter-args-nodes.json"
FILTER_RESULT_KEYS = ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]


async def still_serving(client: Client) -> None:
    """A good filter request still gets its full answer."""
    status, body, _ = await client.post("filter", fixture_bytes(NODES_ARGS))
    assert status == 200, body
    assert names(body) == ["gpu-a", "gpu-e"]


# --- the fixtures are what kube-scheduler sends ---------------------------------------------


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("filter-args-nodes.json", ["Pod", "Nodes", "NodeNames"]),
        ("filter-args-nodenames.json", ["Pod", "Nodes", "NodeNames"]),
        ("bind-args.json", ["PodName", "PodNamespace", "PodUID", "Node"]),
    ],
)
def test_fixtures_are_go_json(name: str, keys: list[str]) -> None:
    raw = fixture_bytes(name)
    assert b"\n" not in raw and b": " not in raw  # json.Marshal: compact, one line
    assert list(orjson.loads(raw)) == keys  # untagged Go structs: field names, declared order
    if "Pod" in keys:
        data = fixture(name)
        assert (data["Nodes"] is None) != (data["NodeNames"] is None)  # the other one is null
        assert "kind" not in data["Pod"] and "managedFields" not in data["Pod"]["metadata"]


# --- filter -------------------------------------------------------------------------------------


async def test_filter_passes_and_fails_nodes_with_kube_scheduler_reasons() -> None:
    async with serving() as client:
        status, body, raw = await client.post("filter", fixture_bytes(NODES_ARGS))
    assert status == 200
    assert list(body) == FILTER_RESULT_KEYS  # every field, as json.Marshal writes them
    assert body["Error"] == ""
    assert body["NodeNames"] is None  # nodeCacheCapable: false reads Nodes
    assert names(body) == ["gpu-a", "gpu-e"]
    # the passing node objects come back exactly as sent
    sent = {n["metadata"]["name"]: n for n in fixture(NODES_ARGS)["Nodes"]["items"]}
    assert body["Nodes"]["items"] == [sent["gpu-a"], sent["gpu-e"]]
    assert body["Nodes"]["metadata"] == {}
    assert body["FailedNodes"] == {"cpu-d": "Insufficient nvidia.com/gpu"}
    assert body["FailedAndUnresolvableNodes"] == {  # preemption cannot help these
        "gpu-b": "node(s) had untolerated taint {dedicated: infra}",
        "gpu-c": "node(s) didn't match Pod's node affinity/selector",
    }
    assert raw.startswith(b'{"Nodes":{"metadata":{},"items":[{"metadata":{"name":"gpu-a"')


async def test_filter_reports_every_insufficient_resource() -> None:
    args = fixture(NODES_ARGS)
    container = args["Pod"]["spec"]["containers"][0]
    container["resources"]["requests"]["cpu"] = "32"
    container["resources"]["limits"]["cpu"] = "32"
    async with serving() as client:
        status, body, _ = await client.post("filter", args)
    assert status == 200
    assert names(body) == ["gpu-a"]
    assert body["FailedNodes"] == {
        "cpu-d": "Insufficient nvidia.com/gpu",
        "gpu-e": "Insufficient cpu",
    }


async def test_filter_reasons_follow_the_pod() -> None:
    """Filter reasons follow the pod: without its zone affinity gpu-c passes."""
    args = fixture(NODES_ARGS)
    del args["Pod"]["spec"]["affinity"]
    async with serving() as client:
        _, body, _ = await client.post("filter", args)
    assert names(body) == ["gpu-a", "gpu-c", "gpu-e"]
    assert set(body["FailedAndUnresolvableNodes"]) == {"gpu-b"}


async def test_lower_case_keys_of_kube_scheduler_1_15_and_older_are_read_too() -> None:
    """Go decodes keys case-insensitively; old kube-schedulers sent pod/nodes/nodenames."""
    args = fixture(NODES_ARGS)
    legacy = {"pod": args["Pod"], "nodes": args["Nodes"], "nodenames": None, "extra": 1}
    async with serving() as client:
        status, body, _ = await client.post("filter", legacy)
        assert status == 200
        assert names(body) == ["gpu-a", "gpu-e"]
        status, scores, _ = await client.post("prioritize", legacy)
        assert status == 200 and len(scores) == 5


# --- prioritize ---------------------------------------------------------------------------------


async def test_prioritize_scores_0_to_10_and_prefers_what_gang_prefers() -> None:
    args = fixture(NODES_ARGS)
    async with serving() as client:
        status, body, _ = await client.post("prioritize", fixture_bytes(NODES_ARGS))
    assert status == 200
    assert [list(entry) for entry in body] == [["Host", "Score"]] * 5  # HostPriority, Go names
    scores = {entry["Host"]: entry["Score"] for entry in body}
    assert list(scores) == ["gpu-a", "gpu-b", "gpu-c", "cpu-d", "gpu-e"]  # the order asked
    assert all(isinstance(s, int) and 0 <= s <= MAX_EXTENDER_PRIORITY for s in scores.values())
    assert scores["gpu-b"] == scores["gpu-c"] == scores["cpu-d"] == 0  # filtered out
    # gang's own evaluation of the same pod on the same nodes, and the mapping onto 0..10
    cache, node_names = cache_of_nodes(args["Nodes"]["items"])
    pod = parse_pod(args["Pod"])
    cache.index.vector(pod.requests)
    placer = Placer(cache.index, ScoreWeights(), "topology.kubernetes.io/zone")
    evaluation = placer.evaluate(cache.snapshot(), pod)
    totals = {name: evaluation.scores[cache.nodes[name].row] for name in ("gpu-a", "gpu-e")}
    assert totals["gpu-e"] > totals["gpu-a"]  # bin-packing: the smaller node ends up fuller
    assert scores["gpu-e"] > scores["gpu-a"] > 0
    for name, total in totals.items():
        assert scores[name] == extender_score(total, max_total(evaluation))
    assert node_names == list(scores)


def test_score_mapping_is_linear_over_the_maximum_and_rounds_half_up() -> None:
    assert extender_score(0, 200) == 0
    assert extender_score(200, 200) == MAX_EXTENDER_PRIORITY
    assert extender_score(250, 200) == MAX_EXTENDER_PRIORITY  # clamped
    assert extender_score(-5, 200) == 0
    assert extender_score(10, 200) == 1  # 0.5 rounds up
    assert extender_score(9.9, 200) == 0
    assert extender_score(103.6, 200) == 5
    assert extender_score(50, 0) == 0  # no score plugins: no preference
    assert extender_score(float("nan"), 200) == 0
    cache = cache_of_nodes([{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1"}}}])[
        0
    ]
    placer = Placer(cache.index, ScoreWeights(), "zone")
    plain = placer.evaluate(cache.snapshot(), parse_pod(fixture(NODES_ARGS)["Pod"]))
    assert max_total(plain) == 200  # most_allocated 1 + balanced 1; gang packing left out


async def test_prioritize_with_several_weights_keeps_the_order() -> None:
    """Least-allocated turns the preference around; the extender follows gang's weights."""
    config = ExtenderConfig(weights=ScoreWeights(least_allocated=1, most_allocated=0))
    async with serving(config) as client:
        _, body, _ = await client.post("prioritize", fixture_bytes(NODES_ARGS))
    scores = {entry["Host"]: entry["Score"] for entry in body}
    assert scores["gpu-a"] > scores["gpu-e"]


# --- malformed and refused requests -------------------------------------------------------------


async def test_malformed_json_is_400_and_the_server_keeps_serving() -> None:
    async with serving() as client:
        for verb in ("filter", "prioritize"):
            for bad in (b'{"Pod": {', b"", b"not json", b"\xff\xfe"):
                status, body, _ = await client.post(verb, bad)
                assert status == 400, (verb, bad)
                assert body["Error"].startswith("malformed JSON"), body
                await still_serving(client)


@pytest.mark.parametrize(
    ("body", "names_field"),
    [
        ({"Nodes": {"items": []}, "NodeNames": None}, "Pod: required field missing"),
        ({"Pod": None, "Nodes": {"items": []}}, "Pod: required field missing"),
        ({"Pod": {"metadata": {}}, "Nodes": None, "NodeNames": None}, "Nodes or NodeNames"),
        ({"Pod": {}, "Nodes": {"items": [1]}}, "Nodes.items.0"),
        ({"Pod": "a pod", "NodeNames": ["n"]}, "Pod: Input should be a valid dictionary"),
        ({"Pod": {}, "NodeNames": "n"}, "NodeNames: Input should be a valid list"),
    ],
)
async def test_missing_or_mistyped_fields_are_400_naming_the_field(
    body: dict[str, Any], names_field: str
) -> None:
    async with serving() as client:
        for verb in ("filter", "prioritize"):
            status, answer, _ = await client.post(verb, body)
            assert status == 400
            assert answer["Error"].startswith("invalid ExtenderArgs: ")
            assert names_field in answer["Error"], answer
            await still_serving(client)


async def test_a_body_that_is_not_an_object_is_400() -> None:
    async with serving() as client:
        status, body, _ = await client.post("filter", [1, 2])
        assert status == 400 and "JSON object" in body["Error"]
        await still_serving(client)


async def test_an_unparsable_pod_is_an_error_field_with_200_from_filter() -> None:
    args = fixture(NODES_ARGS)
    args["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    async with serving() as client:
        status, body, _ = await client.post("filter", args)
        assert status == 200  # kube-scheduler reads the answer only on 200
        assert list(body) == FILTER_RESULT_KEYS
        assert body["Error"].startswith("gang extender cannot read the pod: ")
        assert "cpu" in body["Error"]
        assert body["Nodes"] is None and body["NodeNames"] is None
        # prioritize has no error field (its answer is a bare list): 422 with the reason
        status, body, _ = await client.post("prioritize", args)
        assert status == 422 and "cannot read the pod" in body["Error"]
        await still_serving(client)


async def test_node_names_without_a_node_cache_is_an_error_field() -> None:
    async with serving() as client:
        status, body, _ = await client.post("filter", fixture_bytes("filter-args-nodenames.json"))
        assert status == 200
        assert "--node-cache" in body["Error"] and "nodeCacheCapable" in body["Error"]
        status, body, _ = await client.post(
            "prioritize", fixture_bytes("filter-args-nodenames.json")
        )
        assert status == 422
        await still_serving(client)


async def test_a_body_over_the_limit_is_413() -> None:
    assert DEFAULT_MAX_BODY_BYTES == 10 * 1024 * 1024
    size = len(fixture_bytes(NODES_ARGS))
    async with serving(ExtenderConfig(max_body_bytes=size)) as client:
        await still_serving(client)  # exactly at the limit: accepted
        status, body, _ = await client.post("filter", fixture_bytes(NODES_ARGS) + b" ")
        assert status == 413
        assert body["Error"] == f"request body over the limit of {size} bytes"

        async def chunks() -> Any:  # no Content-Length: the limit holds while reading
            for _ in range(8):
                yield b" " * size

        async with client.session.post(
            f"{client.base}/gang-extender/filter", data=chunks()
        ) as resp:
            assert resp.status == 413
        await still_serving(client)


async def test_bearer_token_is_required_when_configured() -> None:
    async with serving(ExtenderConfig(token="s3cret")) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            status, body, _ = await client.post(
                "filter", fixture_bytes(NODES_ARGS), headers=headers
            )
            assert status == 401
            assert body["Error"] == "a valid bearer token is required"
        async with client.session.post(f"{client.base}/gang-extender/prioritize") as resp:
            assert resp.status == 401
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        status, body, _ = await client.post(
            "filter", fixture_bytes(NODES_ARGS), headers={"Authorization": "Bearer s3cret"}
        )
        assert status == 200 and names(body) == ["gpu-a", "gpu-e"]
        assert (await client.get("/healthz"))[0] == 200  # probes need no token
        assert (await client.get("/readyz"))[0] == 200


async def test_an_unexpected_exception_is_500_and_the_server_keeps_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    async with serving() as client:
        with monkeypatch.context() as patch:
            patch.setattr(server_module, "judge", broken)
            for verb in ("filter", "prioritize"):
                status, body, _ = await client.post(verb, fixture_bytes(NODES_ARGS))
                assert status == 500
                assert body == {"Error": "internal error: RuntimeError: boom"}
        await still_serving(client)
        assert client.server.answers[("filter", 500)] == 1


async def test_unknown_paths_methods_and_disabled_bind_are_refused() -> None:
    async with serving() as client:
        status, body, _ = await client.post("bind", fixture_bytes("bind-args.json"))
        assert status == 404 and "--enable-bind" in body["Error"]
        status, _, _ = await client.post("preempt", fixture_bytes(NODES_ARGS))
        assert status == 404  # no preempt verb (see gang.extender.server)
        status, body, _ = await client.get("/gang-extender/filter")
        assert status == 405 and "Error" in body
        await still_serving(client)


async def test_prefix_is_normalized_and_can_be_empty() -> None:
    async with serving(ExtenderConfig(prefix="/")) as client:
        assert client.prefix == ""
        await still_serving(client)
    async with serving(ExtenderConfig(prefix="scheduler/gang/")) as client:
        assert client.prefix == "/scheduler/gang"
        await still_serving(client)


async def test_many_concurrent_requests_are_all_answered() -> None:
    args = fixture(NODES_ARGS)
    async with serving() as client:

        async def one(i: int) -> list[str]:
            body = copy.deepcopy(args)
            body["Pod"]["metadata"]["name"] = f"train-{i}"
            status, answer, _ = await client.post("filter", body)
            assert status == 200
            return names(answer)

        results = await asyncio.gather(*(one(i) for i in range(20)))
    assert all(r == ["gpu-a", "gpu-e"] for r in results)


async def test_keep_alive_connection_survives_errors() -> None:
    """kube-scheduler reuses connections: an error answer must not poison the next request."""
    connector = aiohttp.TCPConnector(limit=1)
    async with serving() as client, aiohttp.ClientSession(connector=connector) as session:
        one = Client(session, client.base, client.server)
        for bad in (b"{", orjson.dumps({"Nodes": None}), fixture_bytes(NODES_ARGS)):
            status, _, _ = await one.post("filter", bad)
            assert status in (200, 400)
        await still_serving(one)


async def test_a_configured_profile_decides_the_scores() -> None:
    """``gang extender --config``: a profile's plugins (here: spread instead of pack) score."""
    from gang.app.profiles import build_profiles
    from gang.models.settings import SchedulerConfig
    from gang.scheduling.framework import PluginContext
    from gang.state.resources import ResourceIndex

    config = SchedulerConfig(
        profiles=[
            {
                "scheduler_name": "spread",
                "plugins": {
                    "disabled": ["MostAllocated", "BalancedAllocation"],
                    "enabled": [{"name": "LeastAllocated"}],
                },
            }
        ]
    )
    profile = build_profiles(config, PluginContext(config, ResourceIndex(), None))["spread"]
    async with serving(ExtenderConfig(profile=profile)) as client:
        status, body, _ = await client.post("prioritize", fixture_bytes(NODES_ARGS))
    assert status == 200
    scores = {entry["Host"]: entry["Score"] for entry in body}
    assert scores["gpu-a"] > scores["gpu-e"]  # least-allocated: the bigger node stays emptier
