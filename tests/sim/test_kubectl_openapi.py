"""The real kubectl, validation on, against ``gang sim serve --kubernetes-version``.

kubectl reads ``/openapi/v3`` before it writes: it finds the ``fieldValidation`` parameter on the
kind's PATCH operation, sends ``fieldValidation=Strict`` and leaves the checking to the server.
So every example applies as on a real cluster, a misspelt field fails with the server's words,
``kubectl explain`` prints the schemas, and discovery names each release's gang API.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gang.sim.resources import KUBERNETES_VERSIONS
from tests.sim.kubectl_server import Served, gang_sim_serve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
#: what `kubectl api-versions` lists besides the release's scheduling.k8s.io gang versions
COMMON_VERSIONS = {
    "v1",
    "apps/v1",
    "batch/v1",
    "coordination.k8s.io/v1",
    "events.k8s.io/v1",
    "policy/v1",
    "resource.k8s.io/v1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1",
    "scheduling.x-k8s.io/v1alpha1",
    "scheduling.sigs.k8s.io/v1alpha1",
    "scheduling.volcano.sh/v1beta1",
    "scheduling.run.ai/v2",
    "kueue.x-k8s.io/v1beta2",
    "kai.scheduler/v1alpha1",
    "topology.volcano.sh/v1alpha1",
}
GANG_VERSIONS = {
    "1.35": {"scheduling.k8s.io/v1alpha1"},
    "1.36": {"scheduling.k8s.io/v1alpha2"},
    "1.37": {"scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1beta1"},
}
MISSPELT = {
    "scheduling.x-k8s.io/v1alpha1": "minMembr",
    "scheduling.volcano.sh/v1beta1": "minMembers",
    "scheduling.sigs.k8s.io/v1alpha1": "minMember_",
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with gang_sim_serve(tmp_path) as server:  # the default: Kubernetes 1.37
        yield server


def test_every_example_applies_with_validation_on(served: Served) -> None:
    assert EXAMPLES, "no examples/*.yaml"
    for example in EXAMPLES:
        done = served.run("apply", "-f", str(example), "-v=6")
        assert done.returncode == 0, (example.name, done.stderr)
        # validation was on and left to the server: OpenAPI v3 read, Strict sent, no v2 asked
        assert "/openapi/v3" in done.stderr, example.name
        assert "fieldValidation=Strict" in done.stderr, example.name
        assert "/openapi/v2" not in done.stderr, example.name
        assert "created" in done.stdout or "configured" in done.stdout, done.stdout
        # again: the client-side apply patches what is there (unchanged: nothing to patch)
        again = served.kubectl("apply", "-f", str(example))
        lines = [line for line in again.splitlines() if line.strip()]
        assert lines and all(line.endswith(("unchanged", "configured")) for line in lines), again


@pytest.mark.parametrize("api_version", sorted(MISSPELT))
def test_a_misspelt_field_fails_the_apply(served: Served, api_version: str, tmp_path: Path) -> None:
    typo = MISSPELT[api_version]
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(
        f"apiVersion: {api_version}\nkind: PodGroup\nmetadata:\n  name: typo\nspec:\n  {typo}: 3\n"
    )
    err = served.kubectl_fails("apply", "-f", str(manifest))
    version = api_version.split("/")[1]
    assert (
        f'PodGroup in version "{version}" cannot be handled as a PodGroup: '
        f'strict decoding error: unknown field "spec.{typo}"'
    ) in err
    group = api_version.split("/")[0]
    assert served.run("get", f"podgroups.{group}", "typo").returncode != 0  # nothing stored
    # --validate=warn: applied, the field dropped, the server's warning printed
    done = served.run("apply", "--validate=warn", "-f", str(manifest))
    assert done.returncode == 0, done.stderr
    assert f'Warning: unknown field "spec.{typo}"' in done.stderr
    stored = served.kubectl("get", f"podgroups.{group}", "typo", "-o", "jsonpath={.spec}")
    assert typo not in stored


def test_a_misspelt_pod_field_fails_kubectl_create(served: Served, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\nspec:\n"
        "  containers:\n  - name: c\n    image: busybox\n    imagePullPolicyy: Always\n"
    )
    err = served.kubectl_fails("create", "-f", str(manifest))
    assert 'unknown field "spec.containers[0].imagePullPolicyy"' in err


def test_kubectl_create_works_and_refuses_a_second_time(served: Served, tmp_path: Path) -> None:
    manifest = tmp_path / "gang.yaml"
    manifest.write_text(
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata:\n  name: vc\n"
        "spec:\n  minMember: 2\n  minResources:\n    cpu: '4'\n---\n"
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata:\n  name: native\n"
        "spec:\n  schedulingPolicy:\n    gang:\n      minCount: 2\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: member-0\n"
        "  annotations:\n    scheduling.k8s.io/group-name: vc\nspec:\n"
        "  schedulingGroup:\n    podGroupName: native\n"
        "  containers:\n  - name: c\n    image: busybox\n"
    )
    out = served.kubectl("create", "-f", str(manifest))
    assert out.split() == [
        "podgroup.scheduling.volcano.sh/vc",
        "created",
        "podgroup.scheduling.k8s.io/native",
        "created",
        "pod/member-0",
        "created",
    ]
    queue = served.kubectl(
        "get", "podgroups.scheduling.volcano.sh", "vc", "-o", "jsonpath={.spec.queue}"
    )
    assert queue == "default"  # the CRD's default
    group = served.kubectl("get", "pod", "member-0", "-o", "jsonpath={.spec.schedulingGroup}")
    assert group == '{"podGroupName":"native"}'
    err = served.kubectl_fails("create", "-f", str(manifest))
    assert 'podgroups.scheduling.volcano.sh "vc" already exists' in err
    # the table kubectl prints for Volcano's PodGroups has Volcano's columns
    header = served.kubectl("get", "podgroups.scheduling.volcano.sh").splitlines()[0].split()
    assert header == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE"]


def test_kubectl_explain_prints_the_schemas(served: Served) -> None:
    volcano = served.kubectl("explain", "podgroups.scheduling.volcano.sh.spec")
    assert "GROUP:      scheduling.volcano.sh" in volcano
    fields = set(re.findall(r"^  (\w+)\t", volcano, flags=re.MULTILINE))
    assert {"minMember", "minResources", "minTaskMember", "queue", "priorityClassName"} <= fields
    group = served.kubectl("explain", "pods.spec.schedulingGroup")
    assert "FIELD: schedulingGroup <PodSchedulingGroup>" in group
    assert re.search(r"^  podGroupName\t<string>", group, flags=re.MULTILINE), group
    native = served.kubectl("explain", "podgroups.scheduling.k8s.io.spec.schedulingPolicy")
    assert "VERSION:    v1beta1" in native  # the preferred version of the gang API
    assert re.search(r"^  gang\t<GangSchedulingPolicy>", native, flags=re.MULTILINE), native
    sigs = served.kubectl("explain", "podgroups.scheduling.sigs.k8s.io.status")
    assert re.search(r"^  scheduled\t<integer>", sigs, flags=re.MULTILINE), sigs


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_discovery_lists_exactly_the_releases_apis(tmp_path: Path, version: str) -> None:
    with gang_sim_serve(tmp_path, "--kubernetes-version", version, nodes="1") as served:
        versions = set(served.kubectl("api-versions").split())
        assert versions == COMMON_VERSIONS | GANG_VERSIONS[version]
        resources = served.kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name")
        expected = {"priorityclasses.scheduling.k8s.io", "workloads.scheduling.k8s.io"}
        if version != "1.35":
            expected.add("podgroups.scheduling.k8s.io")
        assert set(resources.split()) == expected
        if version == "1.35":
            field = served.kubectl("explain", "pods.spec.workloadRef")
            assert re.search(r"^  podGroupReplicaKey\t<string>", field, flags=re.MULTILINE)
            err = served.kubectl_fails("explain", "pods.spec.schedulingGroup")
            assert 'field "schedulingGroup" does not exist' in err
