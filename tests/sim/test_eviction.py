"""The Eviction API and PodDisruptionBudgets, over HTTP, answered as recorded (shared/k8s-api).

Gang-aware preemption evicts its victims through ``pods/{name}/eviction``, so the simulator must
say yes, no (429) and "misconfigured" (500) exactly when and how a real apiserver does, and keep
budgets' status current the way kube-controller-manager's disruption controller does.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from gang.sim.cluster import SimCluster
from gang.sim.disruption import DELETION_TIMEOUT
from gang.sim.kubelet import KubeletConfig
from tests.conftest import Raw, binding, pod
from tests.sim.test_kubectl import Served, served  # noqa: F401  (the fixture)

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
SUCCESS = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'
DEADLINE = 3.0


def eviction(name: str, api_version: str = "policy/v1", **delete_options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
    }
    if delete_options:
        body["deleteOptions"] = delete_options
    return body


def budget(name: str, selector: Any = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": dict(spec),
    }
    if selector is not None:
        body["spec"]["selector"] = selector
    return body


WEB = {"matchLabels": {"app": "web"}}


async def until(check: Callable[[], Awaitable[bool]], within: float = DEADLINE) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def create(raw: Raw, name: str, node: str | None = None, app: str = "web") -> None:
    status, body, _ = await raw.post(PODS, pod(name, labels={"app": app}))
    assert status == 201, body
    if node is not None:
        status, body, _ = await raw.post(f"{PODS}/{name}/binding", binding(name, node))
        assert status == 201, body


async def run_ready(raw: Raw, name: str, ready: bool = True) -> None:
    """What a kubelet reports for a started pod: Running, Ready (a strategic merge on status)."""
    status, body, _ = await raw.patch(
        f"{PODS}/{name}/status",
        {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            }
        },
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 200, body


async def running(raw: Raw, name: str, node: str = "node-00000", app: str = "web") -> None:
    await create(raw, name, node, app)
    await run_ready(raw, name)


async def get(raw: Raw, path: str) -> dict[str, Any]:
    status, body, _ = await raw.get(path)
    assert status == 200, body
    result: dict[str, Any] = body
    return result


async def status_of(raw: Raw, pdb: str) -> dict[str, Any]:
    result: dict[str, Any] = (await get(raw, f"{PDBS}/{pdb}")).get("status") or {}
    return result


async def wait_status(raw: Raw, pdb: str, **want: Any) -> dict[str, Any]:
    """Poll the budget until its status has every ``want`` figure and is current."""
    seen: dict[str, Any] = {}

    async def check() -> bool:
        nonlocal seen
        obj = await get(raw, f"{PDBS}/{pdb}")
        seen = obj.get("status") or {}
        current = seen.get("observedGeneration") == obj["metadata"]["generation"]
        return current and all(seen.get(k) == v for k, v in want.items())

    try:
        await until(check)
    except AssertionError:
        raise AssertionError(f"budget {pdb} status never reached {want}: {seen}") from None
    return seen


async def evict(raw: Raw, name: str, **kw: Any) -> tuple[int, Any, bytes]:
    return await raw.post(f"{PODS}/{name}/eviction", eviction(name, **kw))


def refused(pdb: str, desired: int, current: int) -> bytes:
    return (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Cannot evict pod as it would violate the pod\'s disruption budget.",'
        b'"reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget",'
        b'"message":"The disruption budget '
        + f"{pdb} needs {desired} healthy pods and has {current} currently".encode()
        + b'"}]},"code":429}'
    )


# --- the eviction subresource --------------------------------------------------------------


async def test_discovery_lists_pods_eviction_in_policy_v1(raw: Raw) -> None:
    resources = (await get(raw, "/api/v1"))["resources"]
    entry = next(r for r in resources if r["name"] == "pods/eviction")
    assert entry == {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    }
    assert (await raw.get(f"{PODS}/p/eviction"))[0] == 405
    assert (await raw.delete(f"{PODS}/p/eviction"))[0] == 405


async def test_unknown_pod_is_recorded_404(cluster: SimCluster, raw: Raw) -> None:
    status, _, body = await evict(raw, "nope")
    assert status == 404
    assert orjson.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }
    assert cluster.audit.evictions_of(("default", "nope")) == [404]


async def test_body_name_must_match_the_url(raw: Raw) -> None:
    await create(raw, "p")
    status, body, _ = await raw.post(f"{PODS}/p/eviction", eviction("other"))
    assert status == 400
    assert body["reason"] == "BadRequest"
    assert body["message"] == "name in URL does not match name in Eviction object"
    status, body, _ = await raw.post(f"{PODS}/p/eviction", {"apiVersion": "v1", "kind": "Pod"})
    assert status == 400


async def test_unbound_pod_goes_at_once(cluster: SimCluster, raw: Raw) -> None:
    await create(raw, "p")
    status, _, body = await evict(raw, "p", api_version="policy/v1beta1")
    assert (status, body) == (201, SUCCESS)
    assert (await raw.get(f"{PODS}/p"))[0] == 404
    assert cluster.audit.evictions_of(("default", "p")) == [201]
    assert cluster.audit.evicted == [("default", "p")]


async def test_bound_pod_is_deleted_gracefully_and_marked(raw: Raw) -> None:
    await running(raw, "p")
    status, _, body = await evict(raw, "p")
    assert (status, body) == (201, SUCCESS)
    current = await get(raw, f"{PODS}/p")
    assert current["metadata"]["deletionGracePeriodSeconds"] == 30
    assert current["metadata"]["deletionTimestamp"].endswith("Z")
    (target,) = [c for c in current["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert target["status"] == "True"
    assert target["reason"] == "EvictionByEvictionAPI"
    assert target["message"] == "Eviction API: evicting"
    assert target["lastProbeTime"] is None
    # deleteOptions.gracePeriodSeconds is honoured: 0 removes it now
    status, _, _ = await evict(raw, "p", gracePeriodSeconds=0)
    assert status == 201
    assert (await raw.get(f"{PODS}/p"))[0] == 404


async def test_preconditions_and_dry_run(raw: Raw) -> None:
    await running(raw, "p")
    status, body, _ = await evict(raw, "p", preconditions={"uid": "not-it"})
    assert status == 409 and body["reason"] == "Conflict"
    assert "the UID in the precondition (not-it) does not match" in body["message"]
    before = await get(raw, f"{PODS}/p")
    status, _, body = await evict(raw, "p", dryRun=["All"])
    assert (status, body) == (201, SUCCESS)
    status, _, _ = await raw.post(f"{PODS}/p/eviction?dryRun=All", eviction("p"))
    assert status == 201
    assert await get(raw, f"{PODS}/p") == before


# --- budgets --------------------------------------------------------------------------------


async def test_refused_by_budget_is_recorded_429_and_changes_nothing(
    cluster: SimCluster, raw: Raw
) -> None:
    await running(raw, "p")
    assert (await raw.post(PDBS, budget("pdb", WEB, minAvailable=1)))[0] == 201
    status = await wait_status(raw, "pdb", disruptionsAllowed=0, currentHealthy=1)
    assert status["desiredHealthy"] == 1 and status["expectedPods"] == 1
    pod_before = await get(raw, f"{PODS}/p")
    pdb_before = await get(raw, f"{PDBS}/pdb")
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{cluster.url}{PODS}/p/eviction", data=orjson.dumps(eviction("p"))) as resp,
    ):
        assert resp.status == 429
        assert "Retry-After" not in resp.headers
        assert await resp.read() == refused("pdb", 1, 1)
    await asyncio.sleep(0.05)
    assert await get(raw, f"{PODS}/p") == pod_before
    assert await get(raw, f"{PDBS}/pdb") == pdb_before
    assert cluster.audit.evictions_of(("default", "p")) == [429]


async def test_allowed_eviction_spends_the_budget(raw: Raw) -> None:
    for name in ("a", "b", "c"):
        await running(raw, name)
    assert (await raw.post(PDBS, budget("pdb", WEB, minAvailable=2)))[0] == 201
    await wait_status(raw, "pdb", disruptionsAllowed=1, currentHealthy=3, desiredHealthy=2)
    rv = (await get(raw, f"{PDBS}/pdb"))["metadata"]["resourceVersion"]
    events = asyncio.create_task(
        raw.watch_lines(f"{PDBS}?watch=true&resourceVersion={rv}", max_events=1, seconds=2)
    )
    await asyncio.sleep(0.1)
    status, _, body = await evict(raw, "a")
    assert (status, body) == (201, SUCCESS)
    (event,) = await events
    # the handler's own write: decremented, and the pod listed until its deletion is seen
    assert event["type"] == "MODIFIED"
    written = event["object"]["status"]
    assert written["disruptionsAllowed"] == 0
    assert list(written["disruptedPods"]) == ["a"]
    assert written["disruptedPods"]["a"].endswith("Z")
    (cond,) = written["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "DisruptionAllowed",
        "False",
        "InsufficientPods",
    )
    assert int(event["object"]["metadata"]["resourceVersion"]) > int(rv)
    # the controller then sees "a" going: no longer healthy, no longer listed
    settled = await wait_status(raw, "pdb", currentHealthy=2, disruptionsAllowed=0)
    assert "disruptedPods" not in settled
    status, _, body = await evict(raw, "b")
    assert (status, body) == (429, refused("pdb", 2, 2))


async def test_two_evictions_at_once_against_a_budget_of_one(cluster: SimCluster, raw: Raw) -> None:
    for name in ("a", "b", "c"):
        await running(raw, name)
    await raw.post(PDBS, budget("pdb", WEB, maxUnavailable=1))
    await wait_status(raw, "pdb", disruptionsAllowed=1, desiredHealthy=2, expectedPods=3)
    answers = await asyncio.gather(evict(raw, "a"), evict(raw, "b"))
    assert sorted(a[0] for a in answers) == [201, 429]
    assert sorted(r.status for r in cluster.audit.evictions) == [201, 429]


async def test_disrupted_pods_hold_until_the_pod_goes_or_time_runs_out(
    cluster: SimCluster, raw: Raw
) -> None:
    """An eviction whose delete fails still spent the budget: the pod stays in disruptedPods
    (not counted healthy) for two minutes, as the real disruption controller does."""
    for name in ("a", "b", "c"):
        await running(raw, name)
    await raw.post(PDBS, budget("pdb", WEB, minAvailable=1))
    await wait_status(raw, "pdb", disruptionsAllowed=2)
    rv = (await get(raw, f"{PODS}/a"))["metadata"]["resourceVersion"]
    status, body, _ = await evict(raw, "a", preconditions={"resourceVersion": str(int(rv) - 1)})
    assert status == 409, body  # the budget was spent before the delete failed
    assert (await get(raw, f"{PODS}/a")).get("metadata", {}).get("deletionTimestamp") is None
    held = await wait_status(raw, "pdb", currentHealthy=2, disruptionsAllowed=1)
    assert list(held["disruptedPods"]) == ["a"]
    # two minutes later the entry is dropped and "a" counts again
    real_clock = cluster.api.clock
    cluster.api.clock = lambda: real_clock() + DELETION_TIMEOUT + 5
    try:
        # (the controller's own timer fires at the real two minutes; any budget event will do)
        await raw.patch(f"{PDBS}/pdb", {"metadata": {"labels": {"touched": "1"}}})
        released = await wait_status(raw, "pdb", currentHealthy=3, disruptionsAllowed=2)
    finally:
        cluster.api.clock = real_clock
    assert "disruptedPods" not in released


async def test_stale_budget_status_is_429_still_being_processed() -> None:
    async with (
        SimCluster("1", controllers=False) as cluster,
        aiohttp.ClientSession() as session,
    ):
        raw = Raw(session, cluster.url)
        await running(raw, "p")
        status, created, _ = await raw.post(PDBS, budget("pdb", WEB, minAvailable=0))
        assert status == 201
        assert created["metadata"]["generation"] == 1
        assert created["status"] == {
            "disruptionsAllowed": 0,
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "expectedPods": 0,
        }
        async with session.post(
            f"{cluster.url}{PODS}/p/eviction", data=orjson.dumps(eviction("p"))
        ) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "10"
            assert await resp.read() == (
                b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"Cannot evict pod as it would violate the pod\'s disruption budget.",'
                b'"reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget",'
                b'"message":"The disruption budget pdb is still being processed by the server."}'
                b'],"retryAfterSeconds":10},"code":429}'
            )


async def test_spec_change_makes_the_status_stale_until_the_controller_runs(
    cluster: SimCluster, raw: Raw
) -> None:
    await running(raw, "p")
    await raw.post(PDBS, budget("pdb", WEB, minAvailable=0))
    await wait_status(raw, "pdb", disruptionsAllowed=1)
    assert cluster.disruption is not None
    cluster.disruption.stop()
    status, body, _ = await raw.patch(f"{PDBS}/pdb", {"spec": {"minAvailable": 1}})
    assert status == 200 and body["metadata"]["generation"] == 2
    status, body, _ = await evict(raw, "p")
    assert status == 429
    assert body["details"]["causes"][0]["message"] == (
        "The disruption budget pdb is still being processed by the server."
    )
    cluster.disruption.start()
    await wait_status(raw, "pdb", disruptionsAllowed=0, desiredHealthy=1)


async def test_two_budgets_are_a_500(cluster: SimCluster, raw: Raw) -> None:
    await running(raw, "p")
    await raw.post(PDBS, budget("one", WEB, minAvailable=0))
    await raw.post(PDBS, budget("all", {}, maxUnavailable="100%"))  # {} selects every pod
    status, _, body = await evict(raw, "p")
    assert status == 500
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"This pod has more than one PodDisruptionBudget, which the eviction '
        b'subresource does not support.","code":500}'
    )
    assert (await get(raw, f"{PODS}/p"))["metadata"].get("deletionTimestamp") is None
    assert cluster.audit.evictions_of(("default", "p")) == [500]


async def test_selectors_other_namespaces_and_null(raw: Raw) -> None:
    await running(raw, "p")
    await running(raw, "q", app="db")
    await raw.post(PDBS, budget("db-only", {"matchLabels": {"app": "db"}}, minAvailable=1))
    await raw.post(PDBS, budget("none", None, minAvailable=5))  # no selector: matches nothing
    await raw.post("/api/v1/namespaces", {"metadata": {"name": "other"}})
    await raw.post(
        "/apis/policy/v1/namespaces/other/poddisruptionbudgets", budget("all", {}, minAvailable=9)
    )
    none = await wait_status(raw, "none", expectedPods=0)
    assert none["disruptionsAllowed"] == 0
    await wait_status(raw, "db-only", expectedPods=1, currentHealthy=1, disruptionsAllowed=0)
    assert (await evict(raw, "p"))[0] == 201  # no budget of its namespace selects it
    assert (await evict(raw, "q"))[0] == 429


async def test_pending_bound_pod_is_evicted_without_a_budget_check(raw: Raw) -> None:
    await create(raw, "p", node="node-00000")  # bound, still Pending (no kubelet)
    await raw.post(PDBS, budget("pdb", WEB, minAvailable=1))
    status = await wait_status(raw, "pdb", expectedPods=1)
    assert status["currentHealthy"] == 0 and status["disruptionsAllowed"] == 0
    before = await get(raw, f"{PDBS}/pdb")
    status_code, _, body = await evict(raw, "p")
    assert (status_code, body) == (201, SUCCESS)
    assert (await get(raw, f"{PODS}/p"))["metadata"]["deletionTimestamp"]
    after = await get(raw, f"{PDBS}/pdb")
    assert "disruptedPods" not in after["status"]
    assert after["status"]["disruptionsAllowed"] == before["status"]["disruptionsAllowed"]


async def test_unready_running_pod_follows_the_unhealthy_pod_eviction_policy(raw: Raw) -> None:
    for name in ("a", "b"):
        await running(raw, name)
    await create(raw, "sick", node="node-00000")
    await run_ready(raw, "sick", ready=False)
    await raw.post(PDBS, budget("pdb", WEB, minAvailable=2))
    await wait_status(raw, "pdb", currentHealthy=2, desiredHealthy=2, disruptionsAllowed=0)
    # the application is not disrupted: the unready pod goes, the budget is not spent
    assert (await evict(raw, "sick"))[0] == 201
    assert "disruptedPods" not in await status_of(raw, "pdb")
    # once the application is disrupted (a not ready), an unready pod is protected...
    await run_ready(raw, "a", ready=False)
    await create(raw, "sick2", node="node-00000")
    await run_ready(raw, "sick2", ready=False)
    await wait_status(raw, "pdb", currentHealthy=1, disruptionsAllowed=0)
    status, _, body = await evict(raw, "sick2")
    assert (status, body) == (429, refused("pdb", 2, 1))
    # ...unless the budget says AlwaysAllow
    patched = await raw.patch(
        f"{PDBS}/pdb", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    )
    assert patched[0] == 200
    await wait_status(raw, "pdb", currentHealthy=1)
    assert (await evict(raw, "sick2"))[0] == 201


@pytest.mark.parametrize(
    ("spec", "desired", "allowed"),
    [
        ({"minAvailable": "50%"}, 2, 1),  # ceil(1.5)
        ({"minAvailable": "100%"}, 3, 0),
        ({"minAvailable": 1}, 1, 2),
        ({"maxUnavailable": "34%"}, 1, 2),  # 3 - ceil(1.02)
        ({"maxUnavailable": 1}, 2, 1),
        ({"maxUnavailable": "0%"}, 3, 0),
    ],
)
async def test_percentages_round_up(
    raw: Raw, spec: dict[str, Any], desired: int, allowed: int
) -> None:
    for name in ("a", "b", "c"):
        await running(raw, name)
    await create(raw, "done", node="node-00000")
    await raw.patch(f"{PODS}/done/status", {"status": {"phase": "Succeeded"}})
    await raw.post(PDBS, budget("pdb", WEB, **spec))
    status = await wait_status(raw, "pdb", desiredHealthy=desired, disruptionsAllowed=allowed)
    assert status["expectedPods"] == 3  # the Succeeded pod is not expected
    assert status["currentHealthy"] == 3
    (cond,) = status["conditions"]
    assert cond["type"] == "DisruptionAllowed"
    assert cond["status"] == ("True" if allowed else "False")
    assert cond["reason"] == ("SufficientPods" if allowed else "InsufficientPods")
    assert cond["observedGeneration"] == 1 and cond["message"] == ""


async def test_unreadable_budget_fails_safe(raw: Raw) -> None:
    await running(raw, "p")
    await raw.post(PDBS, budget("pdb", WEB, minAvailable="half"))

    async def failed() -> bool:
        conds = (await status_of(raw, "pdb")).get("conditions") or []
        return any(c["reason"] == "SyncFailed" for c in conds)

    await until(failed)
    status = await status_of(raw, "pdb")
    assert status["disruptionsAllowed"] == 0 and "observedGeneration" not in status
    assert (await evict(raw, "p"))[0] == 429  # never processed


async def test_controller_writes_only_what_changed(raw: Raw) -> None:
    await running(raw, "p")
    await raw.post(PDBS, budget("pdb", WEB, minAvailable=0))
    await wait_status(raw, "pdb", disruptionsAllowed=1)
    await asyncio.sleep(0.05)
    rv = (await get(raw, f"{PDBS}/pdb"))["metadata"]["resourceVersion"]
    await raw.patch(f"{PODS}/p", {"metadata": {"annotations": {"x": "y"}}})  # same health
    await create(raw, "other", node="node-00001", app="other")
    await asyncio.sleep(0.1)
    assert (await get(raw, f"{PDBS}/pdb"))["metadata"]["resourceVersion"] == rv
    # a relabelled pod leaves the budget
    await raw.patch(f"{PODS}/p", {"metadata": {"labels": {"app": "gone"}}})
    await wait_status(raw, "pdb", expectedPods=0, currentHealthy=0, disruptionsAllowed=0)


async def test_figures_follow_the_kubelet_stand_in() -> None:
    config = KubeletConfig(start_delay=0.05, termination_delay=0.1)
    async with (
        SimCluster("2", kubelet=config) as cluster,
        aiohttp.ClientSession() as session,
    ):
        raw = Raw(session, cluster.url)
        await raw.post(PDBS, budget("pdb", WEB, maxUnavailable=1))
        for i, name in enumerate(("a", "b", "c")):
            await create(raw, name, node=f"node-0000{i % 2}")
        await wait_status(
            raw, "pdb", expectedPods=3, currentHealthy=3, desiredHealthy=2, disruptionsAllowed=1
        )
        assert (await evict(raw, "a"))[0] == 201
        status, _, body = await evict(raw, "b")
        assert (status, body) == (429, refused("pdb", 2, 2))

        async def gone() -> bool:
            return (await raw.get(f"{PODS}/a"))[0] == 404

        await until(gone)  # the kubelet confirmed the kill
        # expectedPods counts the pods left (no controller's scale is looked up): 2 - 1 = 1
        await wait_status(
            raw, "pdb", expectedPods=2, currentHealthy=2, desiredHealthy=1, disruptionsAllowed=1
        )
        assert cluster.audit.evictions_of(("default", "a")) == [201]
        assert cluster.audit.evictions_of(("default", "b")) == [429]


# --- pods/status writes a preempting scheduler makes ---------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["application/merge-patch+json", "application/strategic-merge-patch+json"]
)
async def test_nominated_node_name_is_writable_through_pods_status(
    raw: Raw, content_type: str
) -> None:
    await create(raw, "p")
    status, body, _ = await raw.patch(
        f"{PODS}/p/status", {"status": {"nominatedNodeName": "node-00002"}}, content_type
    )
    assert status == 200, body
    assert body["status"]["nominatedNodeName"] == "node-00002"
    assert body["status"]["phase"] == "Pending"
    listed = await get(raw, f"{PODS}?fieldSelector=status.nominatedNodeName=node-00002")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["p"]
    status, body, _ = await raw.patch(
        f"{PODS}/p/status", {"status": {"nominatedNodeName": None}}, content_type
    )
    assert status == 200 and "nominatedNodeName" not in body["status"]


async def test_disruption_target_condition_merges_by_type(raw: Raw) -> None:
    await running(raw, "p")
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "gang-scheduler: preempting to make room for default/big",
    }
    status, body, _ = await raw.patch(
        f"{PODS}/p/status",
        {"status": {"conditions": [condition]}},
        "application/strategic-merge-patch+json",
    )
    assert status == 200, body
    types = [c["type"] for c in body["status"]["conditions"]]
    assert sorted(types) == ["DisruptionTarget", "PodScheduled", "Ready"]
    (target,) = [c for c in body["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert {k: target[k] for k in condition} == condition
    # the eviction that follows replaces it with its own reason, as a v1.30 apiserver does
    assert (await evict(raw, "p"))[0] == 201
    after = await get(raw, f"{PODS}/p")
    (target,) = [c for c in after["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert target["reason"] == "EvictionByEvictionAPI"
    assert sorted(c["type"] for c in after["status"]["conditions"]) == sorted(types)


# --- clients -----------------------------------------------------------------------------------


async def test_kubernetes_asyncio_eviction(client: Any, raw: Raw) -> None:
    core = k8s.CoreV1Api(client)
    await running(raw, "a")
    await running(raw, "b")
    await raw.post(PDBS, budget("pdb", WEB, minAvailable=1))
    await wait_status(raw, "pdb", disruptionsAllowed=1)
    body = k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name="a", namespace="default"),
        delete_options=k8s.V1DeleteOptions(grace_period_seconds=5),
    )
    resp = await core.create_namespaced_pod_eviction("a", "default", body, _preload_content=False)
    assert resp.status == 201
    assert (await resp.json())["status"] == "Success"
    assert (
        await core.read_namespaced_pod("a", "default")
    ).metadata.deletion_grace_period_seconds == 5
    body.metadata.name = "b"
    resp = await core.create_namespaced_pod_eviction("b", "default", body, _preload_content=False)
    assert resp.status == 429  # unread, the answer is not raised
    assert (await resp.json())["details"]["causes"][0]["reason"] == "DisruptionBudget"
    with pytest.raises(ApiException) as refused_err:  # read by the client, it is
        await core.create_namespaced_pod_eviction("b", "default", body)
    assert refused_err.value.status == 429
    assert json.loads(refused_err.value.body)["details"]["causes"][0]["message"] == (
        "The disruption budget pdb needs 1 healthy pods and has 1 currently"
    )


def test_kubectl_drain_evicts_through_the_eviction_api(served: Served) -> None:  # noqa: F811
    """kubectl drain finds pods/eviction in discovery, posts policy/v1 Evictions, and waits for
    the pods to go."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    for name, node in (("web", "node-00001"), ("stay", "node-00002")):
        assert served.request("POST", f"{PODS}", pod(name))[0] == 201
        status, body = served.request("POST", f"{PODS}/{name}/binding", binding(name, node))
        assert status == 201, body
    out = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(served.kubeconfig),
            "--cache-dir",
            str(served.cache),
            "drain",
            "node-00001",
            "--force",
            "--grace-period=0",
            "--timeout=20s",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "evicting pod default/web" in out.stderr + out.stdout
    assert "node/node-00001 drained" in out.stdout
    assert served.request("GET", f"{PODS}/web")[0] == 404
    assert served.request("GET", f"{PODS}/stay")[0] == 200
    status, node = served.request("GET", "/api/v1/nodes/node-00001")
    assert node["spec"]["unschedulable"] is True
