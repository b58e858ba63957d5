"""List pages and watch lines decoded without ``managedFields``, and a pod's update as far as
its binding's confirmation reads it (``gang.kube.decoding``).

The truth is orjson's decode of the same bytes: a lean object must equal it less
``metadata.managedFields``; every field a ``LazyPod`` keeps must read as it does there, and
``whole`` must give the lean object back; every other line must come back as orjson decodes it.
The recorded line is a real kube-apiserver v1.23's watch event for a pod being bound (with its
``managedFields``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from gang.kube.decoding import LazyPod, digest_event, lean_event, lean_page, whole

RECORDED = (
    (Path(__file__).resolve().parent.parent / "fixtures" / "watch-pod-bound.jsonl")
    .read_bytes()
    .strip()
)

#: what a LazyPod keeps, as (section, field)
DIGESTED = [
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "uid"),
    ("metadata", "resourceVersion"),
    ("metadata", "labels"),
    ("metadata", "deletionTimestamp"),
    ("spec", "nodeName"),
    ("status", "phase"),
]


def without_managed_fields(obj: Any) -> Any:
    """orjson's object as the lean decode should give it."""
    out = copy.deepcopy(obj)
    if isinstance(out, dict) and isinstance(out.get("metadata"), dict):
        out["metadata"].pop("managedFields", None)
    return out


def reads_as(pod: dict[str, Any], full: dict[str, Any]) -> None:
    for section, field in DIGESTED:
        got = (pod.get(section) or {}).get(field)
        want = (full.get(section) or {}).get(field) if isinstance(full.get(section), dict) else None
        assert got == want, (section, field)


def test_the_real_servers_bound_pod_is_digested_and_reads_as_the_full_decode() -> None:
    full = orjson.loads(RECORDED)
    assert "managedFields" in full["object"]["metadata"]  # what the lean decode skips
    event = digest_event(RECORDED)
    assert event["type"] == "MODIFIED"
    pod = event["object"]
    assert isinstance(pod, LazyPod)
    assert pod["spec"] == {"nodeName": full["object"]["spec"]["nodeName"]}
    reads_as(pod, full["object"])
    assert whole(pod) == without_managed_fields(full["object"])


def test_added_and_deleted_come_lean_and_the_rest_as_orjson_decodes_them() -> None:
    full = orjson.loads(RECORDED)
    for kind in ("ADDED", "DELETED", "MODIFIED"):
        line = orjson.dumps({**full, "type": kind})
        want = {"type": kind, "object": without_managed_fields(full["object"])}
        assert lean_event(line) == want
        if kind != "MODIFIED":
            assert digest_event(line) == want
    status = {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"}
    for line in (
        orjson.dumps({"type": "ERROR", "object": status}),
        orjson.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}),
    ):
        assert lean_event(line) == orjson.loads(line)
        assert digest_event(line) == orjson.loads(line)
    plain = {"metadata": {"name": "p"}}
    assert whole(plain) is plain


def test_a_page_of_the_real_servers_pods_comes_lean() -> None:
    pod = orjson.loads(RECORDED)["object"]
    items = []
    for i in range(3):
        item = copy.deepcopy(pod)
        item["metadata"]["name"] = f"p{i}"
        items.append(item)
    body = orjson.dumps(
        {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "5"},
            "items": items,
        }
    )
    page = lean_page(body)
    assert page["metadata"] == {"resourceVersion": "5"}
    assert page["items"] == [without_managed_fields(i) for i in items]
    assert lean_page(b'{"metadata":{}}') == {"metadata": {}, "items": []}


def test_objects_of_the_wrong_shape_are_decoded_whole_for_the_parsers_to_judge() -> None:
    for pod in (
        {"metadata": "not a map", "spec": {"nodeName": "n"}},
        {"metadata": {"name": "p"}, "spec": ["not", "a", "map"]},
        {"metadata": {"name": "p"}, "status": 7},
    ):
        for kind in ("ADDED", "MODIFIED"):
            line = orjson.dumps({"type": kind, "object": pod})
            event = digest_event(line)
            assert not isinstance(event["object"], LazyPod)
            assert event == {"type": kind, "object": without_managed_fields(pod)}
    page = orjson.dumps({"metadata": {}, "items": [{"metadata": 3}]})
    assert lean_page(page) == orjson.loads(page)


_scalar = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5)
_value = st.recursive(
    _scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
#: ObjectMeta's fields (k8s.io/apimachinery v1: a server writes no other), managedFields too
_META_FIELDS = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
]
_meta = st.dictionaries(st.sampled_from(_META_FIELDS), _value, max_size=6)
_section = st.dictionaries(
    st.sampled_from(["nodeName", "phase", "containers", "conditions", "x"]), _value, max_size=4
)


@given(
    kind=st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
    metadata=st.none() | _meta,
    spec=st.none() | _section,
    status=st.none() | _section,
    extra=st.dictionaries(st.sampled_from(["kind", "apiVersion"]), _value, max_size=2),
)
def test_any_object_reads_as_the_full_decode_and_whole_gives_it_back(
    kind: str,
    metadata: dict[str, Any] | None,
    spec: dict[str, Any] | None,
    status: dict[str, Any] | None,
    extra: dict[str, Any],
) -> None:
    pod: dict[str, Any] = dict(extra)
    for name, section in (("metadata", metadata), ("spec", spec), ("status", status)):
        if section is not None:
            pod[name] = section
    line = orjson.dumps({"type": kind, "object": pod})
    lean = without_managed_fields(pod)
    assert lean_event(line) == {"type": kind, "object": lean}
    event = digest_event(line)
    assert event["type"] == kind
    if isinstance(event["object"], LazyPod):
        reads_as(event["object"], pod)
    else:
        assert event["object"] == lean
    assert whole(event["object"]) == lean
    page = orjson.dumps({"metadata": {"resourceVersion": "1"}, "items": [pod, pod]})
    assert lean_page(page)["items"] == [lean, lean]
