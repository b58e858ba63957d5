"""Run kube-scheduler's own test cases (ported as data in ``tests/data/kube_scheduler``) against
gang's plugins: build the cluster the case describes, ask the plugin, compare with what
kube-scheduler's tests expect. Facts carried over, not code: the data names the Go test each case
comes from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gang.scheduling.framework import NodeFilterInput, ScoreInput
from gang.state.cache import ClusterCache, Snapshot
from gang.state.podinfo import PodInfo, PodParseError, parse_pod

DATA = Path(__file__).parent.parent / "data" / "kube_scheduler"


def load(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = yaml.safe_load((DATA / name).read_text())["cases"]
    return cases


def case_id(case: dict[str, Any]) -> str:
    return f"{case['from'].split('/')[-1].strip()}[{case['index']}] {case['name']}"


def _pod(raw: dict[str, Any], default_name: str) -> dict[str, Any]:
    pod = {"metadata": dict(raw.get("metadata") or {}), "spec": dict(raw.get("spec") or {})}
    pod["metadata"].setdefault("name", default_name)
    pod["metadata"].setdefault("namespace", "default")
    return pod


@dataclass
class World:
    cache: ClusterCache
    snap: Snapshot
    pod: PodInfo


def world(case: dict[str, Any]) -> World:
    """The case's cluster in a ClusterCache, its snapshot, and the incoming pod parsed."""
    cache = ClusterCache()
    for ns in case.get("namespaces") or []:
        meta = ns["metadata"]
        cache.upsert_namespace(meta["name"], meta.get("labels") or {})
    for node in case["nodes"]:
        cache.upsert_node(node)
    for i, raw in enumerate(case.get("existing") or []):
        cache.upsert_pod(parse_pod(_pod(raw, f"ex-{i}")))
    for obj in case.get("objects") or []:  # Services, ReplicaSets, ... selecting the pod
        meta = {"namespace": "default", **(obj.get("metadata") or {})}
        meta.setdefault("name", obj["kind"].lower())
        cache.selecting.upsert(obj["kind"], {**obj, "metadata": meta})
    incoming = parse_pod(_pod(case["pod"], "p"))
    return World(cache, cache.snapshot(), incoming)


def filter_verdicts(plugin: Any, w: World) -> dict[str, str | None]:
    """Node name → None if the plugin's Filter passes it, else its reason."""
    view = NodeFilterInput(w.snap, w.snap.free, w.pod, np.zeros(0, np.int64), w.cache.index, {})
    if not plugin.relevant(w.pod, w.snap, ()):
        return {name: None for name in w.snap.names if name}
    mask = plugin.filter_nodes(view)
    out: dict[str, str | None] = {}
    for row, name in enumerate(w.snap.names):
        if name:
            out[name] = None if mask[row] else ", ".join(plugin.reasons(view, row))
    return out


def normalized_scores(plugin: Any, w: World, candidates: list[str]) -> dict[str, int]:
    rows = np.array([w.snap.names.index(n) for n in candidates], dtype=np.intp)
    if not plugin.relevant(w.pod, w.snap, ()):
        return dict.fromkeys(candidates, 0)
    view = ScoreInput(
        rows,
        np.zeros((len(rows), 1)),
        np.zeros(len(rows), np.int64),
        frozenset(),
        pod=w.pod,
        snap=w.snap,
    )
    scores = plugin.normalize(plugin.score(view))
    return {name: int(score) for name, score in zip(candidates, scores, strict=True)}


def check(case: dict[str, Any], plugin: Any) -> None:
    """Assert gang's plugin reproduces the case."""
    try:
        w = world(case)
    except PodParseError as err:
        assert case.get("expect_error"), f"gang refused the pod: {err}"
        return
    assert not case.get("expect_error"), "kube-scheduler rejects this pod; gang accepted it"
    if case["kind"] == "filter":
        verdicts = filter_verdicts(plugin, w)
        feasible = sorted(n for n, reason in verdicts.items() if reason is None)
        assert feasible == sorted(case["feasible"])
        for node, reason in (case.get("reasons") or {}).items():
            assert verdicts[node] == reason, node
    elif case["kind"] == "score":
        candidates = case.get("candidates") or [n["metadata"]["name"] for n in case["nodes"]]
        assert normalized_scores(plugin, w, candidates) == {
            n: case["scores"][n] for n in candidates
        }
    elif case["kind"] == "prefilter_counts":
        found: dict[str, int] = {}
        domains_num: dict[str, int] = {}
        for c, _, counts, present in plugin.hard_counts(w.snap, w.pod, ()):
            values = w.snap.domains(c.topology_key).values
            if len(present):  # kube-scheduler keeps no entry for a key without domains
                domains_num[c.topology_key] = len(present)
            for domain in present:
                found[f"{c.topology_key}={values[domain]}"] = int(counts[domain])
        assert found == (case.get("match_counts") or {})
        if case.get("domains_num") is not None:
            assert domains_num == case["domains_num"]
    else:
        raise AssertionError(f"unknown kind {case['kind']}")


def storage_world(case: dict[str, Any]) -> World:
    """``world`` plus the case's claims, volumes, storage classes and CSINodes."""
    cache = ClusterCache()
    for node in case["nodes"]:
        cache.upsert_node(node)
    catalog = cache.volumes
    for kind, key in (
        ("claims", "pvcs"),
        ("volumes", "pvs"),
        ("classes", "storageclasses"),
        ("csinodes", "csinodes"),
    ):
        for raw in case.get(key) or []:
            obj = dict(raw)
            if kind == "claims":
                obj["metadata"] = {"namespace": "default", **raw["metadata"]}
            catalog.upsert(kind, obj)
    for i, raw in enumerate(case.get("existing") or []):
        cache.upsert_pod(parse_pod(_pod(raw, f"ex-{i}")))
    incoming = parse_pod(_pod(case["pod"], "p"))
    return World(cache, cache.snapshot(), incoming)


def check_volumes(case: dict[str, Any], plugin: Any) -> None:
    """Assert gang's volume plugin reproduces the case (PreFilter verdict, then Filter)."""
    from gang.scheduling.volumes import claim_problem

    w = storage_world(case)
    if plugin.name == "VolumeBinding":
        problem = claim_problem(w.snap.volumes, w.pod)
        assert problem == case.get("prefilter_error")
        if problem is not None:
            return
    verdicts = filter_verdicts(plugin, w)
    feasible = sorted(n for n, reason in verdicts.items() if reason is None)
    assert feasible == sorted(case.get("feasible") or [])
    for node, reason in (case.get("reasons") or {}).items():
        assert verdicts[node] == reason, node
