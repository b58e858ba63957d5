"""Members that are twins share one relevance answer, and the placement does not change.

The placer asks each rule-aware plugin whether it matters for a member (``relevant``); a plugin
that answers per template (``relevance_by_template``) is asked once for a run of twins
(``gang.scheduling.framework.same_template``). That is an optimisation and nothing else: on any
cluster of pods with inter-pod rules and any gang of mixed members, the placer must choose
exactly what it chooses when it asks every plugin for every member."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gang.models.settings import ScoreWeights
from gang.scheduling.dra.plugin import DynamicResources
from gang.scheduling.framework import Budgets, same_template
from gang.scheduling.interpodaffinity import InterPodAffinity
from gang.scheduling.placement import Placement, Placer, Unplaceable
from gang.scheduling.plugins import default_node_filters
from gang.scheduling.twins import PluginsByReads
from gang.sim.pods import DEFAULT_TOLERATIONS
from gang.state.cache import ClusterCache
from gang.state.podinfo import PodInfo
from tests.unit.test_cache import make_node
from tests.unit.test_podinfo import make_pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
UNTIMED = Budgets(sync=None, asynchronous=None, preemption=None)


def _selecting(app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}}


#: the index label a Job's, a Kubeflow job's or a LeaderWorkerSet's members differ in
INDEX = "training.kubeflow.org/replica-index"


#: what a pod may state about other pods (by app label), or nothing
RULES: list[dict[str, Any]] = [
    {},
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**_selecting("a"), "topologyKey": HOST}]}},
    {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "podAffinityTerm": {**_selecting("b"), "topologyKey": ZONE}}]}},
    {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 20, "podAffinityTerm": {**_selecting("c"), "topologyKey": HOST}}]}},
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {INDEX: "1"}}, "topologyKey": HOST}]}},
    {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 70, "podAffinityTerm": {"topologyKey": ZONE, "labelSelector": {
            "matchExpressions": [{"key": INDEX, "operator": "In", "values": ["0", "2"]}]}}}]}},
]  # fmt: skip
#: Services a namespace may hold (their selectors give pods System default spreading), by the
#: labels they select: none, the app, a member's index (the training operator's per-replica
#: Service), both
SERVICES: list[list[dict[str, str]]] = [
    [],
    [{"app": "a"}],
    [{INDEX: "0"}],
    [{"app": "b", INDEX: "2"}],
]
SPREAD = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "b"}}}]  # fmt: skip

apps = st.sampled_from(["a", "b", "c"])
kinds = st.tuples(apps, st.integers(0, len(RULES) - 1), st.booleans(), st.integers(1, 2))


def _pod(
    name: str, app: str, rule: int, spread: bool, gpus: int, node: str = "", index: str = ""
) -> PodInfo:
    """A pod as the API server admits it: with the not-ready/unreachable tolerations that it
    adds to every pod (so each is parsed into constraints of its own before interning).
    ``index``: its value of the index label (none when empty)."""
    builder = make_pod(name).container(cpu="500m", gpu=gpus).label("app", app)
    if index:
        builder.label(INDEX, index)
    builder.spec(schedulerName="gang-scheduler", tolerations=copy.deepcopy(DEFAULT_TOLERATIONS))
    if RULES[rule]:
        builder.spec(affinity=RULES[rule])
    if spread:
        builder.spec(topologySpreadConstraints=SPREAD)
    if node:
        builder.spec(nodeName=node).status(phase="Running")
    return builder.meta(uid=f"uid-{name}").info()


def _answer(result: Placement | Unplaceable) -> object:
    if isinstance(result, Placement):
        return ("placed", result.assignments, result.unplaced)
    return ("unplaceable", result.message, result.placed, result.member)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(2, 8)), min_size=1, max_size=10),
    st.lists(st.tuples(kinds, st.integers(0, 100)), max_size=12),
    st.lists(st.tuples(kinds, st.integers(1, 4)), min_size=1, max_size=4),
    st.booleans(),
    st.booleans(),
    st.integers(0, len(SERVICES) - 1),
)
def test_twins_share_relevance_without_changing_the_placement(
    shape: list[tuple[int, int]],
    existing: list[tuple[tuple[str, int, bool, int], int]],
    runs: list[tuple[tuple[str, int, bool, int], int]],
    spread_scores: bool,
    indexed: bool,
    services: int,
) -> None:
    """``indexed``: the members of a run differ in an index label, which the other pods' terms
    and the namespace's Services may select by, or not."""
    cache = ClusterCache()
    for i, selector in enumerate(SERVICES[services]):
        cache.selecting.upsert("Service", _service(f"svc-{i}", selector))
    for i, (zone, gpus) in enumerate(shape):
        cache.upsert_node(
            make_node(f"n{i}", cpu="16", zone=f"z{zone}", extra={"nvidia.com/gpu": gpus})
        )
    for i, ((app, rule, spread, _), at) in enumerate(existing):
        node, index = f"n{at % len(shape)}", str(at % 3) if indexed else ""
        cache.upsert_pod(_pod(f"e{i}", app, rule, spread, 1, node=node, index=index))
    # runs of twins, one kind after another (a kind may come back after another run)
    members = [
        _pod(f"m{r}-{i}", *kind, index=str(i % 3) if indexed else "")
        for r, (kind, count) in enumerate(runs)
        for i in range(count)
    ]
    for pod in members:
        cache.index.vector(pod.requests)
    weights = ScoreWeights(most_allocated=0, least_allocated=1) if spread_scores else ScoreWeights()
    sharing = Placer(cache.index, weights, ZONE, budgets=UNTIMED)
    asking = Placer(cache.index, weights, ZONE, budgets=UNTIMED)
    asking._by_template = frozenset()  # every plugin asked for every member
    asking._by_reads = PluginsByReads.of(())
    got = sharing.place(cache.snapshot(), members, len(members))
    want = asking.place(cache.snapshot(), members, len(members))
    assert _answer(got) == _answer(want)


def asked_inter_pod_affinity(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pods InterPodAffinity will be asked about (``relevant``), in order."""
    asked: list[str] = []
    relevant = InterPodAffinity.relevant

    def counting(plugin: InterPodAffinity, pod: PodInfo, *args: Any) -> bool:
        asked.append(pod.name)
        return relevant(plugin, pod, *args)

    monkeypatch.setattr(InterPodAffinity, "relevant", counting)
    return asked


@pytest.mark.parametrize("indexed", [False, True], ids=["same-labels", "replica-index"])
def test_a_run_of_twins_asks_inter_pod_affinity_once(
    monkeypatch: pytest.MonkeyPatch, indexed: bool
) -> None:
    """Eight members of one template, among pods whose anti-affinity selects them: the plugin is
    asked about the first member only, and still keeps them off the forbidding pods' nodes.
    ``indexed``: the members are a Kubeflow job's workers, each with its own replica index, and
    a Service selects them by app; nothing reads the index, so they are twins still."""
    cache = ClusterCache()
    for i in range(12):
        cache.upsert_node(
            make_node(f"n{i}", cpu="16", zone=f"z{i % 2}", extra={"nvidia.com/gpu": 8})
        )
    for i in range(4):
        cache.upsert_pod(_pod(f"e{i}", "c", 1, False, 1, node=f"n{i}"))  # anti-affinity to "a"
    if indexed:
        cache.selecting.upsert("Service", _service("job", {"app": "a"}))
    members = [_pod(f"m-{i}", "a", 0, False, 1, index=str(i) if indexed else "") for i in range(8)]
    assert all(same_template(a, b) != indexed for a, b in itertools.pairwise(members))
    for pod in members:
        cache.index.vector(pod.requests)
    placer = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)
    asked = asked_inter_pod_affinity(monkeypatch)
    result = placer.place(cache.snapshot(), members, 8)
    assert isinstance(result, Placement)
    assert not {f"n{i}" for i in range(4)} & set(result.assignments.values())
    assert asked == ["m-0"]


def _service(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": name}, "spec": {"selector": selector}}


def _three_nodes() -> ClusterCache:
    cache = ClusterCache()
    for i in range(3):
        cache.upsert_node(make_node(f"n{i}", cpu="16", zone="z0", extra={"nvidia.com/gpu": 8}))
    return cache


def _first_packs_onto_n0_and_second_goes_elsewhere(
    cache: ClusterCache, first: PodInfo, second: PodInfo
) -> None:
    for pod in (first, second):
        cache.index.vector(pod.requests)
    placer = Placer(cache.index, ScoreWeights(), ZONE, budgets=UNTIMED)  # packs: n0 first
    result = placer.place(cache.snapshot(), [first, second], 2)
    assert isinstance(result, Placement)
    assert result.assignments[first.key] == "n0"
    assert result.assignments[second.key] != "n0"


@pytest.mark.parametrize("differing", ["app", "index"])
def test_a_member_that_differs_in_a_label_a_term_selects_by_is_asked_again(
    differing: str,
) -> None:
    """Two members with no rules of their own share every parsed object but one label, which a
    pod on the fullest node selects with its anti-affinity: the first member's answer (the rule
    does not concern it) must not be reused for the second. ``differing``: the app label, or
    the index label (the term then selects the second member by its index)."""
    cache = _three_nodes()
    if differing == "app":
        cache.upsert_pod(_pod("e0", "c", 1, False, 4, node="n0"))  # anti-affinity to "a" on n0
        first, second = _pod("m-0", "b", 0, False, 1), _pod("m-1", "a", 0, False, 1)
    else:
        cache.upsert_pod(_pod("e0", "c", 4, False, 4, node="n0"))  # anti-affinity to index 1
        first, second = (
            _pod("m-0", "b", 0, False, 1, index="0"),
            _pod("m-1", "b", 0, False, 1, index="1"),
        )
    assert first.rules is second.rules and not same_template(first, second)
    _first_packs_onto_n0_and_second_goes_elsewhere(cache, first, second)


def test_a_member_a_service_selects_by_its_index_is_spread_as_selected() -> None:
    """The training operator's per-replica Service selects one member by its index, which gives
    that member kube-scheduler's default spreading (System defaults) and the one before it
    none. Pods of that index already crowd the fullest node: the selected member must be
    judged on its own and go elsewhere, not take the first member's "spreading does not
    matter" and pack beside it."""
    cache = _three_nodes()
    for i in range(4):
        cache.upsert_pod(_pod(f"e{i}", "c", 0, False, 1, node="n0", index="1"))
    cache.selecting.upsert("Service", _service("w-1", {INDEX: "1"}))
    first = _pod("m-0", "b", 0, False, 1, index="0")
    second = _pod("m-1", "b", 0, False, 1, index="1")
    _first_packs_onto_n0_and_second_goes_elsewhere(cache, first, second)


def test_a_run_of_twins_asks_no_rule_aware_plugin_after_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the default plugins (the volume and device-claim ones among them), every member
    after the first of a run of twins takes the first's answers without any plugin being
    asked; a plugin of a user's that answers per pod keeps being asked for each."""
    cache = ClusterCache()
    for i in range(6):
        cache.upsert_node(
            make_node(f"n{i}", cpu="16", zone=f"z{i % 2}", extra={"nvidia.com/gpu": 8})
        )
    members = [_pod(f"m-{i}", "a", 0, True, 1) for i in range(5)]
    for pod in members:
        cache.index.vector(pod.requests)
    node_filters = [*default_node_filters(), DynamicResources()]
    placer = Placer(cache.index, ScoreWeights(), ZONE, node_filters=node_filters, budgets=UNTIMED)
    kinds = {type(p) for p in placer._rule_aware}
    assert {"VolumeBinding", "DynamicResources", "InterPodAffinity"} <= {k.__name__ for k in kinds}
    asked: list[tuple[str, str]] = []
    for kind in kinds:
        original = kind.relevant

        def counting(plugin: Any, pod: PodInfo, *args: Any, _was: Any = original) -> bool:
            asked.append((type(plugin).__name__, pod.name))
            return bool(_was(plugin, pod, *args))

        monkeypatch.setattr(kind, "relevant", counting)
    assert isinstance(placer.place(cache.snapshot(), members, 5), Placement)
    assert asked and {pod for _, pod in asked} == {"m-0"}

    class PerPod:
        """A rule-aware plugin of a user's that makes no promise about templates."""

        name = "PerPod"

        def relevant(self, pod: PodInfo, *args: Any) -> bool:
            asked.append(("PerPod", pod.name))
            return False

    placer._rule_aware.append(PerPod())
    asked.clear()
    assert isinstance(placer.place(cache.snapshot(), members, 5), Placement)
    assert [pod for kind, pod in asked if kind == "PerPod"] == [f"m-{i}" for i in range(5)]
    assert {pod for kind, pod in asked if kind != "PerPod"} == {"m-0"}
