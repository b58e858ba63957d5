"""The simulator's OpenAPI documents, its gang APIs per Kubernetes version, field validation.

kubectl decides from ``/openapi/v3`` whether the server validates fields (the ``fieldValidation``
parameter on a kind's PATCH operation) and explains kinds from the schemas there; the documents
must cover every group version and kind the simulator serves, with the kind's GVK. The schemas
are vendored: the file must be exactly what ``gang.sim.openapi_vendor`` makes from
kubernetes-validate and the CRD manifests.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes_validate
import pytest
import yaml

from gang.sim import openapi_vendor
from gang.sim.cluster import SimCluster
from gang.sim.openapi import DATA_PATH, OpenApi, definition_name, vendored
from gang.sim.resources import KUBERNETES_VERSIONS, Registry
from tests.conftest import Raw, pod

ROOT = Path(__file__).resolve().parents[2]
PODS = "/api/v1/namespaces/default/pods"
NATIVE = "scheduling.k8s.io"
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
SIGS = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/default/podgroups"
XK8S = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
#: the scheduling.k8s.io versions each release serves, preferred gang version first after v1
NATIVE_VERSIONS = {
    "1.35": ["v1", "v1alpha1"],
    "1.36": ["v1", "v1alpha2"],
    "1.37": ["v1", "v1beta1", "v1alpha3"],
}
NATIVE_RESOURCES = {
    ("1.35", "v1alpha1"): {"workloads"},
    ("1.36", "v1alpha2"): {"workloads", "podgroups", "podgroups/status"},
    ("1.37", "v1beta1"): {"workloads", "podgroups", "podgroups/status"},
    ("1.37", "v1alpha3"): {"workloads", "podgroups", "podgroups/status"},
}


@pytest.fixture(params=KUBERNETES_VERSIONS)
async def versioned(request: pytest.FixtureRequest) -> AsyncIterator[tuple[SimCluster, Raw]]:
    async with (
        SimCluster("1:gpu=8", kubernetes_version=request.param) as sim,
        aiohttp.ClientSession() as session,
    ):
        yield sim, Raw(session, sim.url)


@asynccontextmanager
async def raw_cluster(version: str) -> AsyncIterator[tuple[SimCluster, Raw]]:
    async with (
        SimCluster("1:gpu=8", kubernetes_version=version) as sim,
        aiohttp.ClientSession() as session,
    ):
        yield sim, Raw(session, sim.url)


def _walk_refs(schema: Any) -> list[str]:
    out: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                out.append(value)
            else:
                out.extend(_walk_refs(value))
    elif isinstance(schema, list):
        for item in schema:
            out.extend(_walk_refs(item))
    return out


# --- the vendored schemas --------------------------------------------------------------------


def test_vendored_schemas_are_what_the_generator_makes() -> None:
    """Edit a CRD manifest or bump kubernetes-validate: run python -m gang.sim.openapi_vendor."""
    assert json.loads(gzip.decompress(DATA_PATH.read_bytes())) == openapi_vendor.generate()
    assert openapi_vendor.main(["--check"]) == 0


def test_vendored_file_is_small_and_complete() -> None:
    assert DATA_PATH.stat().st_size < 400_000  # the package stays small: no 108 MB dependency
    data = vendored()
    assert set(data["kubernetes"]) == set(KUBERNETES_VERSIONS)
    for version, names in data["kubernetes"].items():
        for name, digest in names.items():
            for ref in _walk_refs(data["schemas"][digest]):
                assert ref.startswith("#/definitions/"), (version, name, ref)
                assert ref.removeprefix("#/definitions/") in names, (version, name, ref)
    crds = {(c["group"], c["version"], c["kind"]): c for c in data["crds"]}
    assert set(crds) == {
        ("scheduling.x-k8s.io", "v1alpha1", "PodGroup"),
        ("scheduling.sigs.k8s.io", "v1alpha1", "PodGroup"),
        ("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        ("scheduling.volcano.sh", "v1beta1", "Queue"),
        ("scheduling.run.ai", "v2", "Queue"),
        ("scheduling.x-k8s.io", "v1alpha1", "ElasticQuota"),
        ("kueue.x-k8s.io", "v1beta2", "Topology"),
        ("kai.scheduler", "v1alpha1", "Topology"),
        ("topology.volcano.sh", "v1alpha1", "HyperNode"),
    }
    # Volcano's PodGroup CRD and the Topology CRDs, like upstream's, have no status
    # subresource; the others (the HyperNode's too) have one
    assert [c["subresources"] for c in crds.values()] == (
        [["status"]] * 2 + [[]] + [["status"]] * 3 + [[]] * 2 + [["status"]]
    )
    # only gang's own CRD has short names: `kubectl get pg` means scheduling.x-k8s.io
    assert crds[("scheduling.x-k8s.io", "v1alpha1", "PodGroup")]["shortNames"] == ["pg", "pgs"]
    assert all(c["shortNames"] == [] for k, c in crds.items() if k[0] != "scheduling.x-k8s.io")


@pytest.mark.parametrize("manifest", sorted((ROOT / "manifests" / "extra-apis").glob("*.yaml")))
def test_extra_api_crds_are_valid_and_stay_out_of_the_kustomization(manifest: Path) -> None:
    (crd,) = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    kubernetes_validate.validate(crd, "1.30", strict=True)
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
    assert "shortNames" not in crd["spec"]["names"]
    kustomization = yaml.safe_load((ROOT / "manifests" / "kustomization.yaml").read_text())
    assert not any("extra-apis" in str(r) for r in kustomization.get("resources") or [])


@pytest.mark.parametrize(
    ("version", "present", "absent", "fields"),
    [
        ("1.35", "workloadRef", "schedulingGroup", {"name", "podGroup", "podGroupReplicaKey"}),
        ("1.36", "schedulingGroup", "workloadRef", {"podGroupName"}),
        ("1.37", "schedulingGroup", "workloadRef", {"podGroupName"}),
    ],
)
def test_pod_schema_joins_pods_to_the_versions_gang_api(
    version: str, present: str, absent: str, fields: set[str]
) -> None:
    defs = OpenApi(Registry(kubernetes_version=version)).definitions
    spec = defs.v2["io.k8s.api.core.v1.PodSpec"]["properties"]
    assert present in spec and absent not in spec
    ref = spec[present]["$ref"].removeprefix("#/definitions/")
    assert set(defs.v2[ref]["properties"]) == fields


# --- the documents ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_served_kind_has_a_schema_with_its_gvk_and_field_validation(version: str) -> None:
    registry = Registry(kubernetes_version=version)
    docs = OpenApi(registry)
    index = docs.v3_index()["paths"]
    expected = {
        ("api/v1" if not g else f"apis/{g}/{v}")
        for g, versions in registry.group_versions().items()
        for v in versions
    }
    assert set(index) == expected
    v2 = json.loads(docs.v2())
    for rt in registry.types:
        key = "api/v1" if not rt.group else f"apis/{rt.group}/{rt.version}"
        url = index[key]["serverRelativeURL"]
        body, digest = docs.v3(key) or (b"", "")
        assert url == f"/openapi/v3/{key}?hash={digest}"
        assert digest == hashlib.sha512(body).hexdigest().upper()
        doc = json.loads(body)
        gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
        name = (
            definition_name(rt.group, rt.version, rt.kind)
            if not rt.builtin
            else docs.definitions.kind_definition(rt)
        )
        for schemas in (doc["components"]["schemas"], v2["definitions"]):
            assert gvk in schemas[name]["x-kubernetes-group-version-kind"], (rt.key, name)
        patches = [
            (path, item["patch"])
            for path, item in doc["paths"].items()
            if "patch" in item and item["patch"]["x-kubernetes-group-version-kind"] == gvk
        ]
        assert bool(patches) == ("patch" in rt.verbs), rt.key
        for path, patch in patches:
            params = {(p["name"], p["in"]) for p in patch["parameters"]}
            assert ("fieldValidation", "query") in params, (rt.key, path)
        # every reference resolves inside the same document
        for ref in _walk_refs(doc):
            assert ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"]


def test_custom_resource_schemas_come_from_the_crd_manifests() -> None:
    docs = OpenApi(Registry())
    body, _ = docs.v3("apis/scheduling.volcano.sh/v1beta1") or (b"", "")
    schemas = json.loads(body)["components"]["schemas"]
    pg = schemas["sh.volcano.scheduling.v1beta1.PodGroup"]
    spec = pg["properties"]["spec"]["properties"]
    assert {"minMember", "minResources", "minTaskMember", "queue", "priorityClassName"} <= set(spec)
    assert spec["queue"]["default"] == "default"
    assert pg["properties"]["metadata"] == {
        "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
        "description": pg["properties"]["metadata"]["description"],
    }
    assert schemas["sh.volcano.scheduling.v1beta1.PodGroupList"][
        "x-kubernetes-group-version-kind"
    ] == [{"group": "scheduling.volcano.sh", "kind": "PodGroupList", "version": "v1beta1"}]
    body, _ = docs.v3("apis/scheduling.sigs.k8s.io/v1alpha1") or (b"", "")
    sigs = json.loads(body)["components"]["schemas"]["io.k8s.sigs.scheduling.v1alpha1.PodGroup"]
    assert set(sigs["properties"]["status"]["properties"]) == {
        "phase", "occupiedBy", "scheduled", "running", "succeeded", "failed", "scheduleStartTime",
    }  # fmt: skip
    # in v2, what v2 cannot say is dropped (anyOf), as kube-apiserver does for CRDs
    v2 = json.loads(docs.v2())["definitions"]["sh.volcano.scheduling.v1beta1.PodGroup"]
    quantity = v2["properties"]["spec"]["properties"]["minResources"]["additionalProperties"]
    assert "anyOf" not in quantity and "type" not in quantity
    assert quantity["x-kubernetes-int-or-string"] is True


async def test_openapi_endpoints_over_http(raw: Raw) -> None:
    status, index, _ = await raw.get("/openapi/v3")
    assert status == 200
    url = index["paths"]["apis/scheduling.k8s.io/v1beta1"]["serverRelativeURL"]
    async with raw.session.get(raw.base + url) as resp:
        assert resp.status == 200
        assert resp.headers["Cache-Control"] == "public, immutable"
        doc = await resp.json()
    assert doc["openapi"] == "3.0.0" and doc["info"]["version"] == "v1.37.0"
    schemas = doc["components"]["schemas"]
    assert "io.k8s.api.scheduling.v1beta1.PodGroup" in schemas
    # a stale hash is sent on to the current document
    path = url.split("?")[0]
    async with raw.session.get(raw.base + path + "?hash=0", allow_redirects=False) as resp:
        assert resp.status == 301
        assert resp.headers["Location"] == url
    status, _, _ = await raw.get("/openapi/v3/apis/scheduling.k8s.io/v1alpha2")
    assert status == 404  # 1.37 does not serve v1alpha2
    status, v2, _ = await raw.get("/openapi/v2", headers={"Accept": "application/json"})
    assert status == 200 and v2["swagger"] == "2.0"
    assert "/api/v1/namespaces/{namespace}/pods/{name}/binding" in v2["paths"]
    # client-go's OpenAPISchema asks for protobuf only: refused, not answered in JSON
    status, body, _ = await raw.get("/openapi/v2", headers={"Accept": PROTOBUF_V2})
    assert status == 406 and body["reason"] == "NotAcceptable"


async def test_openapi_needs_the_token_when_the_api_does() -> None:
    async with (
        SimCluster("1", token="sesame") as sim,
        aiohttp.ClientSession() as session,
    ):
        raw = Raw(session, sim.url)
        assert (await raw.get("/openapi/v3"))[0] == 401
        ok = {"Authorization": "Bearer sesame"}
        assert (await raw.get("/openapi/v3", headers=ok))[0] == 200


# --- the native gang API per version ---------------------------------------------------------


async def test_discovery_names_the_versions_gang_api(versioned: tuple[SimCluster, Raw]) -> None:
    sim, raw = versioned
    versions = NATIVE_VERSIONS[sim.kubernetes_version]
    status, group, _ = await raw.get(f"/apis/{NATIVE}")
    assert status == 200
    assert [v["version"] for v in group["versions"]] == versions
    assert group["preferredVersion"]["version"] == "v1"  # PriorityClasses: as a real server
    for other in ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1"):
        status, body, _ = await raw.get(f"/apis/{NATIVE}/{other}")
        if other not in versions:
            assert status == 404
            continue
        assert status == 200
        names = {r["name"] for r in body["resources"]}
        assert names == NATIVE_RESOURCES[(sim.kubernetes_version, other)]
        for r in body["resources"]:
            assert r["namespaced"] is True and "shortNames" not in r
    status, apis, _ = await raw.get("/apis")
    groups = {g["name"] for g in apis["groups"]}
    assert {"scheduling.sigs.k8s.io", "scheduling.volcano.sh", "scheduling.x-k8s.io"} <= groups


async def test_v1alpha3_and_v1beta1_are_one_storage() -> None:
    async with raw_cluster("1.37") as (_sim, raw):
        beta = f"/apis/{NATIVE}/v1beta1/namespaces/default/podgroups"
        alpha = f"/apis/{NATIVE}/v1alpha3/namespaces/default/podgroups"
        group = {
            "apiVersion": f"{NATIVE}/v1alpha3",
            "kind": "PodGroup",
            "metadata": {"name": "trainers"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
            "status": {"conditions": []},
        }
        status, created, _ = await raw.post(alpha, group)
        assert status == 201, created
        assert created["apiVersion"] == f"{NATIVE}/v1alpha3"
        assert "status" not in created  # PrepareForCreate clears it
        assert created["metadata"]["generation"] == 1
        status, seen, _ = await raw.get(f"{beta}/trainers")
        assert status == 200 and seen["apiVersion"] == f"{NATIVE}/v1beta1"
        assert (
            seen["spec"] == group["spec"] and seen["metadata"]["uid"] == created["metadata"]["uid"]
        )
        # a status written through one version is read through the other
        condition = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}
        status, _, _ = await raw.patch(
            f"{beta}/trainers/status", {"status": {"conditions": [condition]}}
        )
        assert status == 200
        status, listed, _ = await raw.get(alpha)
        assert listed["apiVersion"] == f"{NATIVE}/v1alpha3" and listed["kind"] == "PodGroupList"
        assert [i["status"]["conditions"] for i in listed["items"]] == [[condition]]
        watched = await raw.watch_lines(f"{alpha}?watch=1&resourceVersion=0", max_events=1)
        assert watched[0]["object"]["apiVersion"] == f"{NATIVE}/v1alpha3"
        # Workloads have no status subresource; built-in DELETE answers a Status
        workloads = f"/apis/{NATIVE}/v1beta1/namespaces/default/workloads"
        status, _, _ = await raw.post(
            workloads, {"metadata": {"name": "w"}, "spec": {"podGroupTemplates": []}}
        )
        assert status == 201
        assert (await raw.get(f"{workloads}/w/status"))[0] == 404
        status, deleted, _ = await raw.delete(f"{alpha}/trainers")
        assert status == 200 and deleted["kind"] == "Status"
        assert (await raw.get(f"{beta}/trainers"))[0] == 404


@pytest.mark.parametrize(
    ("version", "accepted", "refused"),
    [
        (
            "1.35",
            {"workloadRef": {"name": "wl", "podGroup": "workers", "podGroupReplicaKey": "0"}},
            {"schedulingGroup": {"podGroupName": "workers"}},
        ),
        (
            "1.36",
            {"schedulingGroup": {"podGroupName": "workers"}},
            {"workloadRef": {"name": "wl", "podGroup": "workers"}},
        ),
        (
            "1.37",
            {"schedulingGroup": {"podGroupName": "workers"}},
            {"workloadRef": {"name": "wl", "podGroup": "workers"}},
        ),
    ],
)
async def test_strict_pods_take_the_versions_group_field(
    version: str, accepted: dict[str, Any], refused: dict[str, Any]
) -> None:
    async with raw_cluster(version) as (_sim, raw):
        status, body, _ = await raw.post(f"{PODS}?fieldValidation=Strict", pod("ok", **accepted))
        assert status == 201, body
        (field,) = accepted
        assert body["spec"][field] == accepted[field]
        status, body, _ = await raw.post(f"{PODS}?fieldValidation=Strict", pod("no", **refused))
        (field,) = refused
        assert status == 400
        assert body["message"] == (
            'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
            f'unknown field "spec.{field}"'
        )


# --- field validation ------------------------------------------------------------------------

DUPLICATED_POD = (
    b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dupe","name":"p","unknownMeta":1},'
    b'"spec":{"unknown1":1,"unknownDupe":1,"unknownDupe":2,"restartPolicy":"Always",'
    b'"restartPolicy":"Never","containers":[{"name":"c","image":"i","unknownNested":1,'
    b'"imagePullPolicy":"Always","imagePullPolicy":"Never"}]}}'
)
DUPLICATED_PROBLEMS = [
    'duplicate field "metadata.name"',
    'unknown field "metadata.unknownMeta"',
    'unknown field "spec.unknown1"',
    'unknown field "spec.unknownDupe"',
    'duplicate field "spec.restartPolicy"',
    'unknown field "spec.containers[0].unknownNested"',
    'duplicate field "spec.containers[0].imagePullPolicy"',
]


async def test_strict_create_reports_unknown_and_duplicate_fields_in_order(raw: Raw) -> None:
    """The order and words of kube-apiserver's field validation integration test."""
    status, body, _ = await raw.post(f"{PODS}?fieldValidation=Strict", data=DUPLICATED_POD)
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        + ", ".join(DUPLICATED_PROBLEMS)
    )
    assert (await raw.get(f"{PODS}/p"))[0] == 404


async def test_warn_and_ignore_drop_unknown_fields_and_differ_in_what_they_say(raw: Raw) -> None:
    for mode, name in (("Warn", "warned"), ("Ignore", "ignored")):
        data = DUPLICATED_POD.replace(b'"name":"p"', f'"name":"{name}"'.encode())
        async with raw.session.post(
            f"{raw.base}{PODS}?fieldValidation={mode}",
            data=data,
            headers={"Content-Type": "application/json"},
        ) as resp:
            assert resp.status == 201, await resp.text()
            warnings = resp.headers.getall("Warning", [])
            stored = await resp.json()
        expected = DUPLICATED_PROBLEMS if mode == "Warn" else []
        assert warnings == ['299 - "' + w.replace('"', '\\"') + '"' for w in expected], warnings
        assert "unknownMeta" not in stored["metadata"]
        assert "unknown1" not in stored["spec"] and "unknownDupe" not in stored["spec"]
        assert stored["spec"]["restartPolicy"] == "Never"  # the last duplicate wins
        container = stored["spec"]["containers"][0]
        assert container["imagePullPolicy"] == "Never" and "unknownNested" not in container


async def test_without_the_parameter_a_body_is_stored_as_sent(raw: Raw) -> None:
    """No fieldValidation: the simulator's lenient path (the bad-input tests rely on it)."""
    body = pod("loose")
    body["spec"]["madeUp"] = {"x": 1}
    status, stored, _ = await raw.post(PODS, body)
    assert status == 201 and stored["spec"]["madeUp"] == {"x": 1}
    group = {"metadata": {"name": "loose"}, "spec": {"minMember": "three"}}
    status, stored, _ = await raw.post(XK8S, group)
    assert status == 201 and stored["spec"]["minMember"] == "three"


async def test_a_wrong_type_is_refused_as_the_decoder_refuses_it(raw: Raw) -> None:
    cases = [
        ({"priority": "high"}, "PodSpec.spec.priority of type int32", "string"),
        ({"containers": {"name": "c"}}, "PodSpec.spec.containers of type []v1.Container", "object"),
        ({"nodeSelector": {"gpu": True}}, "PodSpec.spec.nodeSelector of type string", "bool"),
        (
            {"containers": [{"name": "c", "image": "i", "args": ["a", 3]}]},
            "Container.spec.containers.args of type string",
            "number",
        ),
    ]
    for i, (spec, where, what) in enumerate(cases):
        body = pod(f"typed-{i}")
        body["spec"].update(spec)
        status, answer, _ = await raw.post(f"{PODS}?fieldValidation=Ignore", body)
        assert status == 400, answer
        assert answer["message"] == (
            'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal '
            f"{what} into Go struct field {where}"
        )


async def test_custom_resources_are_pruned_and_validated_by_their_crd(raw: Raw) -> None:
    misspelt = {"metadata": {"name": "pg", "bogus": 1}, "spec": {"minMembr": 3, "minMember": 3}}
    status, body, _ = await raw.post(f"{VOLCANO}?fieldValidation=Strict", misspelt)
    assert status == 400
    assert body["message"] == (
        'PodGroup in version "v1beta1" cannot be handled as a PodGroup: strict decoding error: '
        'unknown field "metadata.bogus", unknown field "spec.minMembr"'
    )
    status, body, _ = await raw.post(f"{VOLCANO}?fieldValidation=Ignore", misspelt)
    assert status == 201, body
    assert body["spec"] == {"minMember": 3, "queue": "default"}  # pruned, and defaulted
    assert "bogus" not in body["metadata"]
    wrong = {
        "metadata": {"name": "wrong"},
        "spec": {"minMember": "3", "networkTopology": {"mode": "sideways"}},
    }
    status, body, _ = await raw.post(f"{VOLCANO}?fieldValidation=Strict", wrong)
    assert status == 422 and body["reason"] == "Invalid"
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert causes == {
        "spec.minMember": 'Invalid value: "string": spec.minMember in body must be of type '
        'integer: "string"',
        "spec.networkTopology.mode": 'Unsupported value: "sideways": supported values: '
        '"hard", "soft"',
    }
    assert body["message"].startswith('PodGroup.scheduling.volcano.sh "wrong" is invalid: [')
    # gang's own CRD says minMember >= 1
    zero = {"metadata": {"name": "zero"}, "spec": {"minMember": 0}}
    status, body, _ = await raw.post(f"{XK8S}?fieldValidation=Strict", zero)
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0: spec.minMember in body should be greater than or "
            "equal to 1",
            "field": "spec.minMember",
        }
    ]


async def test_volcano_defaults_are_set_on_every_write(raw: Raw) -> None:
    status, body, _ = await raw.post(
        VOLCANO, {"metadata": {"name": "plain"}, "spec": {"minMember": 2, "networkTopology": {}}}
    )
    assert status == 201
    assert body["spec"]["queue"] == "default"
    # upstream defaults the mode only (highestTierAllowed lost its default to highestTierName)
    assert body["spec"]["networkTopology"] == {"mode": "hard"}
    status, body, _ = await raw.patch(
        f"{VOLCANO}/plain", {"spec": {"queue": None, "networkTopology": None}}
    )
    assert status == 200
    assert body["spec"] == {"minMember": 2, "queue": "default"}


async def test_patches_report_body_duplicates_then_unknown_fields_sorted(raw: Raw) -> None:
    status, _, _ = await raw.post(PODS, pod("patched"))
    assert status == 201
    patch = (
        b'{"metadata":{"labels":{"a":"1","a":"2"}},"spec":{"zeta":1,"alpha":2,'
        b'"activeDeadlineSeconds":5,"activeDeadlineSeconds":6}}'
    )
    status, body, _ = await raw.request(
        "PATCH",
        f"{PODS}/patched?fieldValidation=Strict",
        data=patch,
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 400
    assert body["message"] == (
        'strict decoding error: duplicate field "metadata.labels.a", '
        'duplicate field "spec.activeDeadlineSeconds", '
        'unknown field "spec.alpha", unknown field "spec.zeta"'
    )
    status, body, _ = await raw.request(
        "PATCH",
        f"{PODS}/patched?fieldValidation=Ignore",
        data=patch,
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 200
    assert body["metadata"]["labels"]["a"] == "2" and body["spec"]["activeDeadlineSeconds"] == 6
    assert "zeta" not in body["spec"] and "alpha" not in body["spec"]
    # a custom resource's merge patch, through its status subresource too
    assert (await raw.post(SIGS, {"metadata": {"name": "old"}, "spec": {"minMember": 2}}))[0] == 201
    status, body, _ = await raw.request(
        "PATCH",
        f"{SIGS}/old/status?fieldValidation=Strict",
        data=b'{"status":{"phase":"Scheduling","conditions":[]}}',
        content_type="application/merge-patch+json",
    )
    assert status == 400
    assert body["message"] == 'strict decoding error: unknown field "status.conditions"'


async def test_an_unknown_directive_is_a_bad_request(raw: Raw) -> None:
    status, body, _ = await raw.post(f"{PODS}?fieldValidation=Loose", pod("x"))
    assert status == 400
    assert body["message"] == (
        'fieldValidation: Unsupported value: "Loose": supported values: "Ignore", "Strict", "Warn"'
    )
