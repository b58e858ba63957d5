"""examples/*.yaml checked offline: what ``kubectl apply -f`` would accept, and what gang needs.

- every built-in object validates against the Kubernetes API schemas (``kubernetes-validate``,
  strict: an unknown or misspelt field fails), for the oldest and newest versions we care about;
- every PodGroup has an integer ``minMember`` >= 1, passes the CRD's schema and gang's own
  PodGroup rules, and is the group of the workloads in its file (the pod-group label) — which
  together can reach its quorum;
- every workload's pods use ``schedulerName: gang-scheduler`` and name their images plainly;
- a StatefulSet in a gang uses ``podManagementPolicy: Parallel`` (OrderedReady would deadlock).

The examples running on a cluster is ``tests/e2e``'s business.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gang.models.podgroup import POD_GROUP_GROUP, POD_GROUP_LABEL, parse_podgroup
from tests.test_manifests import podgroup_validator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FILES = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
K8S_VERSIONS = ("1.28.0", "1.30.0", kubernetes_validate.latest_version())
SCHEDULER_NAME = "gang-scheduler"
Obj = dict[str, Any]


def load(filename: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((EXAMPLES / filename).read_text()) if d]


def is_podgroup(doc: Obj) -> bool:
    return str(doc.get("apiVersion", "")).startswith(f"{POD_GROUP_GROUP}/")


def pod_template(doc: Obj) -> Obj | None:
    """The pod (metadata + spec) a workload object stands for; None for other kinds."""
    if doc["kind"] == "Pod":
        return doc
    if doc["kind"] in ("Job", "StatefulSet", "Deployment", "ReplicaSet"):
        template: Obj = doc["spec"]["template"]
        return template
    return None


def pod_count(doc: Obj) -> int:
    """How many pods the workload runs at once."""
    spec = doc.get("spec") or {}
    if doc["kind"] == "Pod":
        return 1
    if doc["kind"] == "Job":
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        return min(parallelism, int(completions)) if completions is not None else parallelism
    return int(spec.get("replicas", 1))


def test_every_example_is_here_and_described() -> None:
    assert FILES == [
        "mpi-job.yaml",
        "plain-pods-gang.yaml",
        "too-big-gang.yaml",
        "training-job.yaml",
    ]
    readme = (EXAMPLES / "README.md").read_text()
    for name in FILES:
        assert name in readme, f"examples/README.md does not describe {name}"


@pytest.mark.parametrize("filename", FILES)
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_builtin_objects_validate_against_the_kubernetes_schemas(
    filename: str, version: str
) -> None:
    for doc in load(filename):
        if is_podgroup(doc):
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{filename}: {doc['kind']} {doc['metadata']['name']}: {err.message}")


def test_strict_validation_catches_a_misspelt_field() -> None:
    job = next(d for d in load("training-job.yaml") if d["kind"] == "Job")
    bad = copy.deepcopy(job)
    spec = bad["spec"]["template"]["spec"]
    spec["restartPolcy"] = spec.pop("restartPolicy")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("filename", FILES)
def test_podgroups_are_valid_and_are_the_group_of_their_workloads(filename: str) -> None:
    docs = load(filename)
    groups = {d["metadata"]["name"]: d for d in docs if is_podgroup(d)}
    assert groups, f"{filename} has no PodGroup"
    validator = podgroup_validator()
    for name, group in groups.items():
        assert group["kind"] == "PodGroup"
        min_member = group["spec"]["minMember"]
        assert isinstance(min_member, int) and not isinstance(min_member, bool), name
        assert min_member >= 1, name
        validator.validate(group)  # the CRD's schema: what the apiserver lets in
        info = parse_podgroup(group)  # gang's own rules: what the scheduler accepts
        assert info.error is None, f"{name}: {info.error}"
    members = dict.fromkeys(groups, 0)
    for doc in docs:
        template = pod_template(doc)
        if template is None:
            continue
        where = f"{filename}: {doc['kind']} {doc['metadata']['name']}"
        label = (template.get("metadata") or {}).get("labels", {}).get(POD_GROUP_LABEL)
        assert label in groups, f"{where}: pod-group label {label!r} names no PodGroup here"
        members[label] += pod_count(doc)
    for name, group in groups.items():
        need = group["spec"]["minMember"]
        assert members[name] >= need, f"{name}: {members[name]} pods can never reach {need}"


@pytest.mark.parametrize("filename", FILES)
def test_workloads_use_gang_scheduler_and_plain_image_names(filename: str) -> None:
    for doc in load(filename):
        template = pod_template(doc)
        if template is None:
            continue
        spec = template["spec"]
        where = f"{filename}: {doc['kind']} {doc['metadata']['name']}"
        assert spec.get("schedulerName") == SCHEDULER_NAME, where
        for container in spec.get("initContainers", []) + spec["containers"]:
            image = container["image"]
            name, _, tag = image.partition(":")
            assert "/" not in image and name and tag and tag != "latest", f"{where}: {image}"


@pytest.mark.parametrize("filename", FILES)
def test_statefulsets_in_a_gang_create_their_pods_in_parallel(filename: str) -> None:
    for doc in load(filename):
        if doc["kind"] == "StatefulSet" and POD_GROUP_LABEL in (
            doc["spec"]["template"]["metadata"].get("labels") or {}
        ):
            assert doc["spec"].get("podManagementPolicy") == "Parallel", doc["metadata"]["name"]
