"""The default spreading selector (kube-scheduler's ``helper.DefaultSelector``): what selects a
pod, including the cases answered without a lookup (nothing in the namespace could)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gang.scheduling.topologyspread import PodTopologySpread
from gang.state.cache import ClusterCache
from gang.state.labels import LabelSelector, Requirement
from gang.state.selecting import SelectorCatalog
from tests.unit.test_cache import make_info, make_node

LABELS = {"app": "train", "scheduling.x-k8s.io/pod-group": "job-1"}


def _service(namespace: str, name: str, selector: dict[str, str]) -> dict[str, object]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"selector": selector}}


def _in(key: str, value: str) -> Requirement:
    return Requirement(key, "In", frozenset((value,)))


def test_nothing_in_the_namespace_selects_the_pod() -> None:
    catalog = SelectorCatalog()
    catalog.upsert("Service", _service("other", "train", {"app": "train"}))
    assert catalog.default_selector("ml", LABELS, None) is None
    assert catalog.default_selector("ml", LABELS, ("ReplicaSet", "unknown")) is None
    assert catalog.default_selector("other", LABELS, None) == LabelSelector((_in("app", "train"),))


def test_a_service_added_later_selects_the_pod_and_a_removed_one_stops() -> None:
    catalog = SelectorCatalog()
    assert catalog.default_selector("ml", LABELS, None) is None
    catalog.upsert("Service", _service("ml", "train", {"app": "train"}))
    assert catalog.default_selector("ml", LABELS, None) == LabelSelector((_in("app", "train"),))
    catalog.remove("Service", "ml", "train")
    assert catalog.default_selector("ml", LABELS, None) is None


def test_a_service_selecting_other_labels_leaves_the_pod_unselected() -> None:
    catalog = SelectorCatalog()
    catalog.upsert("Service", _service("ml", "serve", {"app": "serve"}))
    assert catalog.default_selector("ml", LABELS, None) is None


def test_only_replicaset_statefulset_and_replicationcontroller_owners_count() -> None:
    catalog = SelectorCatalog()
    rs = {
        "metadata": {"namespace": "ml", "name": "rs"},
        "spec": {"selector": {"matchLabels": LABELS}},
    }
    catalog.upsert("ReplicaSet", rs)
    owned = catalog.default_selector("ml", LABELS, ("ReplicaSet", "rs"))
    assert owned is not None and set(owned.requirements) == {_in(k, v) for k, v in LABELS.items()}
    assert catalog.default_selector("ml", LABELS, ("Job", "rs")) is None


def test_the_label_keys_a_namespace_s_services_read_follow_its_services() -> None:
    """What the twin test asks (``label_keys_read``): the keys a pod's default selector could
    depend on, per namespace, kept in step as Services come, change and go."""
    catalog = SelectorCatalog()
    assert catalog.label_keys_read("ml") == frozenset()
    catalog.upsert("Service", _service("ml", "train", {"app": "train"}))
    catalog.upsert("Service", _service("other", "w-0", {"replica-index": "0"}))
    assert catalog.label_keys_read("ml") == {"app"}
    catalog.upsert("Service", _service("ml", "w-0", {"app": "train", "replica-index": "0"}))
    assert catalog.label_keys_read("ml") == {"app", "replica-index"}
    catalog.remove("Service", "ml", "w-0")
    assert catalog.label_keys_read("ml") == {"app"}
    catalog.upsert("Service", {"metadata": {"namespace": "ml", "name": "train"}, "spec": {}})
    assert catalog.label_keys_read("ml") == frozenset()


KEYS = ("group-name", "job-name", "replica-index")
selectors_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(("a", "b")), max_size=3)
labels_st = st.dictionaries(st.sampled_from((*KEYS, "app")), st.sampled_from(("a", "b")))


def _brute_force(services: dict[str, dict[str, str]], labels: dict[str, str]) -> set[Requirement]:
    """kube-scheduler's way: every Service of the namespace matched against the pod."""
    merged: dict[str, str] = {}
    for selector in services.values():
        if all(labels.get(k) == v for k, v in selector.items()):
            merged.update(selector)
    return {_in(k, v) for k, v in merged.items()}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("ml", "other")),
            st.sampled_from(("s0", "s1", "s2", "s3")),
            st.none() | selectors_st,  # None: the Service is removed (or has no selector)
            st.booleans(),  # remove rather than upsert a selector-less Service
        ),
        max_size=25,
    ),
    st.lists(labels_st, min_size=1, max_size=4),
)
def test_the_indexed_services_select_what_matching_every_service_selects(
    changes: list[tuple[str, str, dict[str, str] | None, bool]], pods: list[dict[str, str]]
) -> None:
    """The catalog indexes Services by the keys they select by; whatever the changes, a pod's
    default selector is what matching it against every Service of its namespace gives, and
    the generation moves exactly when something that selects changed."""
    catalog = SelectorCatalog()
    model: dict[str, dict[str, dict[str, str]]] = {}
    for namespace, name, selector, remove in changes:
        before = catalog.generation
        in_namespace = model.setdefault(namespace, {})
        had = in_namespace.get(name)
        if selector is None and remove:
            catalog.remove("Service", namespace, name)
        else:
            spec = {} if selector is None else {"selector": selector}
            raw = {"metadata": {"namespace": namespace, "name": name}, "spec": spec}
            assert catalog.upsert("Service", raw) == (had != selector)
        if selector is None:
            in_namespace.pop(name, None)
        else:
            in_namespace[name] = selector
        assert (catalog.generation != before) == (had != in_namespace.get(name))
        for labels in pods:  # asked between changes too: remembered answers must follow
            for ns in ("ml", "other"):
                found = catalog.default_selector(ns, labels, None)
                expected = _brute_force(model.get(ns, {}), labels)
                assert (set(found.requirements) if found else set()) == expected
                read = {k for s in model.get(ns, {}).values() for k in s}
                assert catalog.label_keys_read(ns) == read
    assert catalog.services == {ns: s for ns, s in model.items() if s}


def test_the_spread_plugin_s_remembered_defaults_follow_a_service_that_comes_later() -> None:
    """PodTopologySpread remembers the last pod's default constraints (it is asked about each
    member four times); a Service added or removed since must show at the next question."""
    cache = ClusterCache()
    cache.upsert_node(make_node("n0", zone="z1"))
    pod = replace(make_info("w-0"), labels=LABELS)
    plugin = PodTopologySpread()
    assert plugin.constraints(pod, cache.snapshot()) == ((), False)
    cache.selecting.upsert("Service", _service("default", "train", {"app": "train"}))
    found, _ = plugin.constraints(pod, cache.snapshot())
    assert [c.selector for c in found] == [LabelSelector((_in("app", "train"),))] * 2
    cache.selecting.remove("Service", "default", "train")
    assert plugin.constraints(pod, cache.snapshot()) == ((), False)
