"""The default spreading selector (kube-scheduler's ``helper.DefaultSelector``): what selects a
pod, including the cases answered without a lookup (nothing in the namespace could)."""

from __future__ import annotations

from gang.state.labels import LabelSelector, Requirement
from gang.state.selecting import SelectorCatalog

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
