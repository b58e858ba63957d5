"""examples/*.yaml checked offline: what ``kubectl apply -f`` would accept, and what gang needs.

- every built-in object validates against the Kubernetes API schemas (``kubernetes-validate``,
  strict: an unknown or misspelt field fails), for the oldest and newest versions we care about
  (a file using the native gang API, from the first version that serves it);
- every group object (Coscheduling, Volcano or native PodGroup) passes its CRD's schema (or the
  built-in one) and gang's own rules for that API, and is the group of workloads in its file —
  which together can reach its quorum; every workload names exactly one group of its file;
- every workload's pods use ``schedulerName: gang-scheduler`` and name their images plainly;
- a StatefulSet in a gang uses ``podManagementPolicy: Parallel`` (OrderedReady would deadlock).

The examples running on a cluster is ``tests/e2e``'s business.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from gang.models.groupapis import GROUP_APIS, GroupApi
from gang.state.podinfo import group_claims
from tests.test_manifests import FORMATS, to_json_schema

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FILES = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
K8S_VERSIONS = ("1.28.0", "1.30.0", kubernetes_validate.latest_version())
#: files that use a native gang API: validated from the first release that serves it
FIRST_VERSION = {"jobset-native-podgroup.yaml": "1.37.0", "dra-gang.yaml": "1.34.0"}
#: the CRDs gang ships, by API group
CRD_FILES = {
    "scheduling.x-k8s.io": ROOT / "manifests/crd-podgroups.yaml",
    "scheduling.sigs.k8s.io": ROOT / "manifests/extra-apis/crd-sigs-podgroups.yaml",
    "scheduling.volcano.sh": ROOT / "manifests/extra-apis/crd-volcano-podgroups.yaml",
}
SCHEDULER_NAME = "gang-scheduler"
Obj = dict[str, Any]


def load(filename: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((EXAMPLES / filename).read_text()) if d]


def group_api(doc: Obj) -> GroupApi | None:
    """The gang API a document is a group object of (PodGroup, Workload), if any."""
    group, _, version = str(doc.get("apiVersion", "")).rpartition("/")
    for api in GROUP_APIS:
        if (api.group, api.kind) == (group, doc.get("kind")) and version in api.versions:
            return api
    return None


def is_custom(doc: Obj) -> bool:
    """An object of a CRD (not in the Kubernetes API schemas)."""
    return str(doc.get("apiVersion", "")).rpartition("/")[0] in CRD_FILES


@cache
def crd_validator(api_version: str) -> jsonschema.Draft4Validator:
    group, _, version = api_version.rpartition("/")
    [crd] = [d for d in yaml.safe_load_all(CRD_FILES[group].read_text()) if d]
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = to_json_schema(served["schema"]["openAPIV3Schema"])
    return jsonschema.Draft4Validator(schema, format_checker=FORMATS)


def validation_cases() -> list[tuple[str, str]]:
    def number(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    return [
        (name, version)
        for name in FILES
        for version in K8S_VERSIONS
        if number(version) >= number(FIRST_VERSION.get(name, "0.0.0"))
    ]


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


def claims(template: Obj) -> set[str]:
    """The gangs a pod template names (gang's qualified names: ``volcano:x``, ``k8s:y``)."""
    meta = template.get("metadata") or {}
    return set(
        group_claims(meta.get("labels") or {}, meta.get("annotations"), template["spec"]).values()
    )


def test_every_example_is_here_and_described() -> None:
    assert FILES == [
        "dra-gang.yaml",
        "jobset-native-podgroup.yaml",
        "leaderworkerset-volcano.yaml",
        "mpi-job.yaml",
        "mpijob-v2.yaml",
        "plain-pods-gang.yaml",
        "pytorchjob-volcano.yaml",
        "too-big-gang.yaml",
        "training-job.yaml",
        "trainjob-coscheduling.yaml",
    ]
    readme = (EXAMPLES / "README.md").read_text()
    for name in FILES:
        assert name in readme, f"examples/README.md does not describe {name}"


@pytest.mark.parametrize(("filename", "version"), validation_cases())
def test_builtin_objects_validate_against_the_kubernetes_schemas(
    filename: str, version: str
) -> None:
    for doc in load(filename):
        if is_custom(doc):
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
def test_groups_are_valid_and_are_the_group_of_their_workloads(filename: str) -> None:
    docs = load(filename)
    need: dict[str, int] = {}
    for doc in docs:
        api = group_api(doc)
        if api is None:
            continue
        name = doc["metadata"]["name"]
        if is_custom(doc):  # the CRD's schema: what the apiserver lets in
            crd_validator(doc["apiVersion"]).validate(doc)
        for info in api.parse(doc, doc["apiVersion"].rpartition("/")[2]):  # gang's own rules
            assert info.error is None, f"{name}: {info.error}"
            assert info.min_member >= 1, name
            need[info.group or name] = info.min_member
    assert need, f"{filename} has no group object"
    members = dict.fromkeys(need, 0)
    for doc in docs:
        template = pod_template(doc)
        if template is None:
            continue
        where = f"{filename}: {doc['kind']} {doc['metadata']['name']}"
        named = claims(template)
        assert len(named) == 1, f"{where}: names {sorted(named)}, not exactly one group"
        [group] = named
        assert group in need, f"{where}: names {group!r}, no group object of this file"
        members[group] += pod_count(doc)
    for group, quorum in need.items():
        assert members[group] >= quorum, f"{group}: {members[group]} pods can never reach {quorum}"


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
        if doc["kind"] == "StatefulSet" and claims(doc["spec"]["template"]):
            assert doc["spec"].get("podManagementPolicy") == "Parallel", doc["metadata"]["name"]
