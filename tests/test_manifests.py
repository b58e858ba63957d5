"""The deployment manifests and the Dockerfile, checked offline on every test run.

- every object in ``manifests/`` validates against the Kubernetes API schemas
  (``kubernetes-validate``, strict: an unknown or misspelt field fails);
- the PodGroup CRD's schema accepts the PodGroups gang accepts (and what gang writes to their
  status) and rejects what the apiserver should refuse at the door;
- RBAC grants exactly the API calls gang makes, with no wildcard;
- the Deployment is hardened, and its probes, ports and config mount agree with the Service, the
  ConfigMap and the configuration the ConfigMap carries (which must load as ``Settings``);
- the kustomization lists every manifest, and ``kubectl kustomize`` renders them all;
- the image runs as a non-root user and names no registry host.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel

from gang.binding.groupstatus import coscheduling_status as podgroup_status
from gang.models.dra import DRA_GROUP
from gang.models.groupapis import GROUP_APIS
from gang.models.podgroup import (
    POD_GROUP_GROUP,
    POD_GROUP_PLURAL,
    POD_GROUP_VERSION,
    parse_podgroup,
)
from gang.models.quantity import parse_quantity
from gang.models.queueapis import QUEUE_APIS
from gang.models.settings import Settings
from gang.models.topologyapis import TOPOLOGY_APIS
from gang.scheduling.gang import Gang, GangKey
from gang.state.dra import DRA_KINDS
from gang.state.podinfo import parse_pod

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "manifests"
DOCKERFILE = ROOT / "Dockerfile"
#: the Kubernetes version the manifests are validated against (kubernetes-validate ships it)
K8S_VERSION = "1.30"
NAMESPACE = "gang-system"
SERVICE_ACCOUNT = "gang-scheduler"
CONFIG_PATH = "/etc/gang/config.yaml"

EXPECTED_FILES = {
    "namespace.yaml",
    "crd-podgroups.yaml",
    "serviceaccount.yaml",
    "rbac.yaml",
    "configmap.yaml",
    "service.yaml",
    "deployment.yaml",
    "kustomization.yaml",
}
RESOURCE_FILES = sorted(p.name for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")

#: (apiGroup, resource, verb): exactly the calls the scheduler makes (gang/kube/transport.py)
CLUSTER_PERMISSIONS = {
    ("", "pods", "get"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods", "delete"),
    ("", "pods/binding", "create"),
    ("", "pods/eviction", "create"),
    ("", "pods/status", "patch"),
    ("policy", "poddisruptionbudgets", "get"),
    ("policy", "poddisruptionbudgets", "list"),
    ("policy", "poddisruptionbudgets", "watch"),
    ("", "nodes", "get"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("", "namespaces", "get"),
    ("", "namespaces", "list"),
    ("", "namespaces", "watch"),
    *(
        ("", resource, verb)
        for resource in ("persistentvolumeclaims", "persistentvolumes")
        for verb in ("get", "list", "watch", "patch")
    ),
    *(
        ("storage.k8s.io", resource, verb)
        for resource in ("storageclasses", "csinodes")
        for verb in ("get", "list", "watch")
    ),
    *(
        (group, resource, verb)
        for group, resource in (
            ("", "services"),
            ("", "replicationcontrollers"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
        )
        for verb in ("get", "list", "watch")
    ),
    ("", "events", "create"),
    # every gang API's objects are watched, and their status written where they have one
    *((api.group, api.plural, verb) for api in GROUP_APIS for verb in ("get", "list", "watch")),
    *((api.group, f"{api.plural}/status", "patch") for api in GROUP_APIS if api.has_status),
    # a CRD without a status subresource (Volcano's) has its status patched with the object
    *((api.group, api.plural, "patch") for api in GROUP_APIS if not api.status_subresource),
    # every queue API's queues are watched, and their status written
    *((api.group, api.plural, verb) for api in QUEUE_APIS for verb in ("get", "list", "watch")),
    *((api.group, f"{api.plural}/status", "patch") for api in QUEUE_APIS),
    # Kueue's and KAI's Topology objects and Volcano's HyperNodes are watched (gang writes nothing)
    *((api.group, api.plural, verb) for api in TOPOLOGY_APIS for verb in ("get", "list", "watch")),
    # DRA: devices and claims watched (gang.state.dra), a claim read again before it is written;
    # the finalizer by an update of the claim, allocation and consumers by one of its status
    *((DRA_GROUP, kind, verb) for kind in DRA_KINDS for verb in ("get", "list", "watch")),
    (DRA_GROUP, "resourceclaims", "update"),
    (DRA_GROUP, "resourceclaims/status", "update"),
}
LEASE_PERMISSIONS = {
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
}

Obj = dict[str, Any]


# --- loading -------------------------------------------------------------------------------


def load(filename: str) -> list[Obj]:
    text = (MANIFESTS / filename).read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def all_objects() -> list[Obj]:
    return [doc for filename in RESOURCE_FILES for doc in load(filename)]


def find(kind: str, name: str) -> Obj:
    found = [
        o
        for o in all_objects()
        if o.get("kind") == kind and o.get("metadata", {}).get("name") == name
    ]
    assert len(found) == 1, f"expected one {kind} {name!r} in manifests/, found {len(found)}"
    return found[0]


def deployment() -> Obj:
    return find("Deployment", "gang-scheduler")


def pod_spec() -> Obj:
    spec: Obj = deployment()["spec"]["template"]["spec"]
    return spec


def container() -> Obj:
    containers = pod_spec()["containers"]
    assert len(containers) == 1
    result: Obj = containers[0]
    return result


def config_map() -> Obj:
    return find("ConfigMap", "gang-config")


def settings() -> Settings:
    return Settings.model_validate(yaml.safe_load(config_map()["data"]["config.yaml"]))


def crd() -> Obj:
    return find("CustomResourceDefinition", f"{POD_GROUP_PLURAL}.{POD_GROUP_GROUP}")


def crd_version() -> Obj:
    versions = [v for v in crd()["spec"]["versions"] if v["name"] == POD_GROUP_VERSION]
    assert len(versions) == 1
    result: Obj = versions[0]
    return result


# --- every object is valid Kubernetes ------------------------------------------------------


def test_expected_manifest_files_exist() -> None:
    present = {p.name for p in MANIFESTS.glob("*.yaml")}
    assert present >= EXPECTED_FILES, f"missing: {sorted(EXPECTED_FILES - present)}"
    assert not list(MANIFESTS.glob("*.yml")), "use the .yaml extension"


@pytest.mark.parametrize("filename", RESOURCE_FILES)
def test_manifest_validates_against_the_kubernetes_schemas(filename: str) -> None:
    docs = load(filename)
    assert docs, f"{filename} holds no object"
    for doc in docs:
        where = f"{filename}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            path = ".".join(str(p) for p in err.path)
            pytest.fail(f"{where}: {path}: {err.message}")
        except kubernetes_validate.SchemaNotFoundError as err:
            pytest.fail(f"{where}: {err.message}")


def test_strict_validation_catches_a_misspelt_field() -> None:
    """The check above bites: a typo in a field name is an error, not silently ignored."""
    bad = copy.deepcopy(deployment())
    bad["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_namespaced_objects_live_in_gang_system() -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for obj in all_objects():
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        assert labels.get("app.kubernetes.io/part-of") == "gang", meta["name"]
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in meta, f"{obj['kind']} {meta['name']} is cluster-scoped"
        else:
            assert meta.get("namespace") == NAMESPACE, f"{obj['kind']} {meta['name']}"
    assert find("Namespace", NAMESPACE)


# --- the PodGroup CRD ----------------------------------------------------------------------


def to_json_schema(node: Any) -> Any:
    """An OpenAPI v3 (Kubernetes structural) schema as plain JSON Schema.

    ``x-kubernetes-int-or-string`` becomes ``anyOf: [integer, string]`` when the schema does not
    spell that out itself, and ``format: int32/int64`` becomes the range the apiserver enforces.
    """
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    bits = {"int32": 31, "int64": 63}.get(str(node.get("format")))
    if bits is not None and node.get("type") == "integer":
        out.setdefault("allOf", []).append({"minimum": -(2**bits), "maximum": 2**bits - 1})
    return out


def _rfc3339(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", value):
        raise ValueError(f"not an RFC 3339 date-time: {value!r}")
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


#: format checks as the apiserver does them (jsonschema's own date-time check needs an extra)
FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("date-time", raises=ValueError)(_rfc3339)


def podgroup_validator() -> jsonschema.Draft4Validator:
    schema = to_json_schema(crd_version()["schema"]["openAPIV3Schema"])
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=FORMATS)


def podgroup(spec: Obj | None = None, status: Obj | None = None) -> Obj:
    obj: Obj = {
        "apiVersion": f"{POD_GROUP_GROUP}/{POD_GROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "team"},
        "spec": spec if spec is not None else {"minMember": 2},
    }
    if status is not None:
        obj["status"] = status
    return obj


def test_crd_names_and_versions() -> None:
    spec = crd()["spec"]
    assert spec["group"] == POD_GROUP_GROUP
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "PodGroup"
    assert spec["names"]["plural"] == POD_GROUP_PLURAL
    assert spec["names"]["shortNames"] == ["pg", "pgs"]
    version = crd_version()
    assert version["served"] is True
    assert version["storage"] is True
    assert [v for v in spec["versions"] if v["storage"]] == [version]
    assert version["subresources"] == {"status": {}}


def test_crd_printer_columns() -> None:
    columns = {
        c["name"]: (c["jsonPath"], c["type"]) for c in crd_version()["additionalPrinterColumns"]
    }
    assert columns["Phase"] == (".status.phase", "string")
    assert columns["MinMember"] == (".spec.minMember", "integer")
    assert columns["Scheduled"] == (".status.scheduled", "integer")
    assert columns["Running"] == (".status.running", "integer")
    assert columns["Age"] == (".metadata.creationTimestamp", "date")


def _structural_problems(node: Obj, where: str) -> Iterator[str]:
    """What the apiserver's structural-schema check would refuse (the parts we use)."""
    if "type" not in node and not (
        node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    ):
        yield f"{where}: no type"
    if node.get("x-kubernetes-int-or-string") and node.get("anyOf") not in (
        None,
        [{"type": "integer"}, {"type": "string"}],
    ):
        yield f"{where}: int-or-string anyOf must be exactly [integer, string]"
    for key in ("oneOf", "not", "allOf"):
        if key in node:
            yield f"{where}: {key} not allowed here"
    for name, child in (node.get("properties") or {}).items():
        yield from _structural_problems(child, f"{where}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _structural_problems(node["additionalProperties"], f"{where}[*]")
    if isinstance(node.get("items"), dict):
        yield from _structural_problems(node["items"], f"{where}[]")
    if node.get("x-kubernetes-list-type") == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        required = set(node["items"].get("required") or [])
        assert keys, f"{where}: list-type map without keys"
        for key in keys:
            if key not in required:
                yield f"{where}: list map key {key} must be required"


def test_crd_schema_is_structural() -> None:
    schema = crd_version()["schema"]["openAPIV3Schema"]
    assert list(_structural_problems(schema, "")) == []


def test_crd_schema_matches_coscheduling_fields() -> None:
    schema = crd_version()["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    assert spec["minMember"]["type"] == "integer"
    assert spec["minMember"]["format"] == "int32"
    assert spec["minMember"]["minimum"] == 1
    assert spec["scheduleTimeoutSeconds"]["format"] == "int32"
    assert (
        spec["scheduleTimeoutSeconds"]["minimum"] == 0
    )  # 0 is the default, as the MPI Operator writes it
    quantity = spec["minResources"]["additionalProperties"]
    assert quantity["x-kubernetes-int-or-string"] is True
    assert quantity["pattern"].startswith("^") and quantity["pattern"].endswith("$")
    status = schema["properties"]["status"]["properties"]
    assert set(status) >= {
        "phase",
        "occupiedBy",
        "scheduled",
        "running",
        "succeeded",
        "failed",
        "scheduleStartTime",
        "conditions",
    }
    for count in ("scheduled", "running", "succeeded", "failed"):
        assert (status[count]["type"], status[count]["format"]) == ("integer", "int32")
    assert status["scheduleStartTime"]["format"] == "date-time"


GOOD_SPECS = [
    {"minMember": 1},
    {"minMember": 8, "scheduleTimeoutSeconds": 60, "minResources": {"nvidia.com/gpu": "64"}},
    {
        "minMember": 3,
        "minResources": {
            "cpu": "1500m",
            "memory": "12Gi",
            "ephemeral-storage": "1e9",
            "pods": 3,
            "example.com/fpga": "0.5",
        },
    },
    {"minMember": 2, "someFutureField": True},  # unknown fields are pruned, not refused
    {"minMember": 3, "scheduleTimeoutSeconds": 0},  # the MPI Operator's default: gang's default
]

BAD_SPECS = {
    "minMember zero": {"minMember": 0},
    "minMember negative": {"minMember": -3},
    "minMember a string": {"minMember": "3"},
    "minMember a fraction": {"minMember": 2.5},
    "minMember a boolean": {"minMember": True},
    "minMember beyond int32": {"minMember": 2**31},
    "scheduleTimeoutSeconds negative": {"minMember": 2, "scheduleTimeoutSeconds": -1},
    "scheduleTimeoutSeconds a string": {"minMember": 2, "scheduleTimeoutSeconds": "60s"},
    "minResources not a quantity": {"minMember": 2, "minResources": {"cpu": "lots"}},
    "minResources a list": {"minMember": 2, "minResources": ["cpu"]},
    "minResources a fraction": {"minMember": 2, "minResources": {"cpu": 1.5}},
}


@pytest.mark.parametrize("spec", GOOD_SPECS)
def test_crd_schema_accepts_valid_podgroups(spec: Obj) -> None:
    podgroup_validator().validate(podgroup(spec))
    # and gang agrees: what the CRD lets in, gang schedules
    assert parse_podgroup(podgroup(spec)).error is None


@pytest.mark.parametrize("spec", BAD_SPECS.values(), ids=BAD_SPECS.keys())
def test_crd_schema_rejects_invalid_podgroups(spec: Obj) -> None:
    with pytest.raises(jsonschema.ValidationError):
        podgroup_validator().validate(podgroup(spec))


def test_crd_schema_accepts_a_coscheduling_status() -> None:
    status = {
        "phase": "Running",
        "occupiedBy": "6f1e0c2a-0c1b-4b55-9a3e-6ab2f1d1e0a7",
        "scheduled": 4,
        "running": 4,
        "succeeded": 0,
        "failed": 0,
        "scheduleStartTime": "2024-05-01T10:00:00Z",
    }
    podgroup_validator().validate(podgroup(status=status))
    with pytest.raises(jsonschema.ValidationError):
        podgroup_validator().validate(podgroup(status={**status, "scheduleStartTime": "yesterday"}))


def _member(name: str, node: str = "", phase: str = "Pending") -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "labels": {"scheduling.x-k8s.io/pod-group": "train"},
            "creationTimestamp": "2024-05-01T10:00:00Z",
        },
        "spec": {
            "schedulerName": "gang-scheduler",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": phase},
    }


def _gangs() -> Iterator[Gang]:
    valid = parse_podgroup(podgroup({"minMember": 2, "scheduleTimeoutSeconds": 30}))
    invalid = parse_podgroup(podgroup({"minMember": 0}))
    states = [
        [],
        [("a", "", "Pending")],
        [("a", "node-1", "Pending"), ("b", "node-2", "Pending")],
        [("a", "node-1", "Running"), ("b", "node-2", "Running")],
        [("a", "node-1", "Succeeded"), ("b", "node-2", "Succeeded")],
        [("a", "node-1", "Failed"), ("b", "", "Pending")],
    ]
    for group in (valid, invalid):
        for members in states:
            gang = Gang(GangKey("team", "train"), podgroup=group)
            for name, node, phase in members:
                pod = parse_pod(_member(name, node, phase))
                gang.members[pod.key] = pod
            yield gang
    waiting = Gang(GangKey("team", "train"), podgroup=valid)
    waiting.last_failure = "gang team/train needs 2 more member(s) placed together, only 1 fit"
    yield waiting
    never = Gang(GangKey("team", "train"), podgroup=valid)
    never.never_fits = "needs 2 more member(s) placed together, only 1 fit"
    never.last_failure = f"gang team/train can never fit this cluster: {never.never_fits}"
    yield never


def test_crd_schema_accepts_every_status_gang_writes() -> None:
    """podgroup_status is what gang merge-patches into /status: the CRD must keep all of it."""
    validator = podgroup_validator()
    phases = set()
    for gang in _gangs():
        first = podgroup_status(gang, {})
        again = podgroup_status(gang, first)
        for status in (first, again):
            validator.validate(podgroup(status=status))
            types = [c["type"] for c in status["conditions"]]
            assert len(types) == len(set(types)), "conditions is a list map keyed by type"
        phases.add(first["phase"])
    assert phases == {"Pending", "Scheduling", "Scheduled", "Running", "Finished", "Failed"}


# --- RBAC ----------------------------------------------------------------------------------


def rbac_objects() -> list[Obj]:
    return [o for o in all_objects() if o["apiVersion"].startswith("rbac.authorization.k8s.io/")]


def permissions(role: Obj) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }


def test_rbac_has_no_wildcard() -> None:
    assert rbac_objects()
    for obj in rbac_objects():
        for rule in obj.get("rules", []):
            assert "nonResourceURLs" not in rule
            for key in ("verbs", "resources", "apiGroups", "resourceNames"):
                for value in rule.get(key, []):
                    assert "*" not in value, f"{obj['kind']} {obj['metadata']['name']}: {key}"
    # nowhere in rbac.yaml, comments included
    assert "*" not in (MANIFESTS / "rbac.yaml").read_text()


def test_cluster_role_grants_exactly_what_gang_uses() -> None:
    role = find("ClusterRole", "gang-scheduler")
    assert permissions(role) == CLUSTER_PERMISSIONS
    assert all("resourceNames" not in rule for rule in role["rules"])
    assert "aggregationRule" not in role
    roles = [o for o in rbac_objects() if o["kind"] == "ClusterRole"]
    assert roles == [role], "one ClusterRole only"


def test_cluster_role_is_bound_to_the_scheduler_service_account() -> None:
    binding = find("ClusterRoleBinding", "gang-scheduler")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "gang-scheduler",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    ]
    assert find("ServiceAccount", SERVICE_ACCOUNT)["metadata"]["namespace"] == NAMESPACE
    assert pod_spec()["serviceAccountName"] == SERVICE_ACCOUNT


def test_lease_role_is_namespaced_and_matches_the_config() -> None:
    election = settings().leader_election
    roles = [o for o in rbac_objects() if o["kind"] == "Role"]
    assert len(roles) == 1
    role = roles[0]
    assert role["metadata"]["namespace"] == election.lease_namespace == NAMESPACE
    assert permissions(role) == LEASE_PERMISSIONS
    for rule in role["rules"]:
        # a name limit cannot apply to create; where one is given it must name our Lease
        if "resourceNames" in rule:
            assert "create" not in rule["verbs"]
            assert rule["resourceNames"] == [election.lease_name]
    binding = [o for o in rbac_objects() if o["kind"] == "RoleBinding"]
    assert len(binding) == 1
    assert binding[0]["metadata"]["namespace"] == NAMESPACE
    assert binding[0]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding[0]["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    ]
    # leases are granted nowhere cluster-wide
    cluster_role = find("ClusterRole", "gang-scheduler")
    assert not {p for p in permissions(cluster_role) if p[1] == "leases"}


# --- the Deployment ------------------------------------------------------------------------


def test_deployment_runs_two_replicas_with_leader_election() -> None:
    assert deployment()["spec"]["replicas"] == 2
    assert settings().leader_election.enabled is True
    selector = deployment()["spec"]["selector"]["matchLabels"]
    labels = deployment()["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert pod_spec()["priorityClassName"] == "system-cluster-critical"


def test_deployment_is_hardened() -> None:
    pod_security = pod_spec().get("securityContext") or {}
    security = container().get("securityContext") or {}

    def effective(key: str) -> Any:
        return security.get(key, pod_security.get(key))

    assert effective("runAsNonRoot") is True
    assert effective("runAsUser") == 65532
    assert effective("seccompProfile") == {"type": "RuntimeDefault"}
    assert security.get("readOnlyRootFilesystem") is True
    assert security.get("allowPrivilegeEscalation") is False
    assert security.get("privileged", False) is False
    assert security.get("capabilities") == {"drop": ["ALL"]}
    spec = pod_spec()
    # Service links would put GANG_* variables (from Services named gang-...) into the
    # environment, where gang reads GANG_<SECTION>__<FIELD> settings
    assert spec.get("enableServiceLinks") is False
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert not spec.get(key)
    assert all("hostPath" not in v for v in spec.get("volumes", []))


def test_deployment_sets_resources() -> None:
    resources = container()["resources"]
    for name in ("cpu", "memory"):
        request = parse_quantity(resources["requests"][name])
        limit = parse_quantity(resources["limits"][name])
        assert 0 < request <= limit, name


def test_probes_and_ports_agree_with_the_service_and_config() -> None:
    port = settings().server.port
    assert settings().server.enabled is True
    ports = {p["name"]: p for p in container()["ports"]}
    assert ports["http-metrics"]["containerPort"] == port == 8080
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        http = container()[probe]["httpGet"]
        assert http["path"] == path
        assert http["port"] == "http-metrics"
        assert http.get("scheme", "HTTP") == "HTTP"

    service = find("Service", "gang-scheduler-metrics")
    assert service["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}
    ]
    labels = deployment()["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/metrics"


def test_config_is_mounted_where_the_command_reads_it() -> None:
    args = container()["args"]
    assert container().get("command", ["gang"]) == ["gang"]
    assert args[0] == "run"
    config_path = Path(args[args.index("--config") + 1])
    assert str(config_path) == CONFIG_PATH

    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    mounts = {m["mountPath"]: m for m in container()["volumeMounts"]}
    mount = mounts[str(config_path.parent)]
    assert mount.get("readOnly") is True
    source = volumes[mount["name"]]["configMap"]
    assert source["name"] == config_map()["metadata"]["name"]
    items = {i["key"]: i["path"] for i in source.get("items", [])}
    key = next((k for k, p in items.items() if p == config_path.name), None)
    key = key or (config_path.name if not items else None)
    assert key is not None and key in config_map()["data"]

    tmp = volumes[mounts["/tmp"]["name"]]
    assert tmp["emptyDir"]["medium"] == "Memory"
    assert tmp["emptyDir"].get("sizeLimit")


def test_image_is_pinned_and_names_no_registry() -> None:
    image = container()["image"]
    name, _, tag = image.rpartition(":")
    assert name == "gang-scheduler"
    assert tag and tag != "latest"
    assert registry_host(image) is None


def _field_names(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, info in model.model_fields.items():
        yield prefix + name
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _field_names(annotation, f"{prefix}{name}.")


def _keys(data: Obj, prefix: str = "") -> Iterator[str]:
    for key, value in data.items():
        yield prefix + key
        if isinstance(value, dict):
            yield from _keys(value, f"{prefix}{key}.")


def test_config_map_loads_as_settings() -> None:
    loaded = settings()
    assert loaded.leader_election.enabled is True
    assert loaded.logging.format == "json"
    assert loaded.kubeconfig is None  # in-cluster config
    assert loaded.scheduler.scheduler_name == "gang-scheduler"
    # a full config: every setting is spelled out, so an operator sees what can be tuned
    raw = yaml.safe_load(config_map()["data"]["config.yaml"])
    assert set(_keys(raw)) == set(_field_names(Settings))


# --- kustomize -----------------------------------------------------------------------------


def test_kustomization_lists_every_manifest() -> None:
    kustomization = load("kustomization.yaml")[0]
    assert kustomization["kind"] == "Kustomization"
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    assert set(resources) == set(RESOURCE_FILES)
    # the CRD and the Namespace before what depends on them
    assert resources.index("namespace.yaml") < resources.index("deployment.yaml")
    assert resources.index("crd-podgroups.yaml") < resources.index("deployment.yaml")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_kustomize_renders_every_object() -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    result = subprocess.run(
        [kubectl, "kustomize", str(MANIFESTS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d is not None]

    def ident(o: Obj) -> tuple[str, str, str]:
        return o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]

    assert sorted(map(ident, rendered)) == sorted(map(ident, all_objects()))
    assert {o["kind"] for o in rendered} >= {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Service",
        "Deployment",
    }


# --- the image -----------------------------------------------------------------------------


def registry_host(image: str) -> str | None:
    """The registry host an image reference names, as Docker reads it; None for the default."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return None


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def test_dockerfile_uses_plain_base_images() -> None:
    stages: list[str] = []
    froms = [rest for word, rest in dockerfile_instructions() if word == "FROM"]
    assert len(froms) >= 2, "multi-stage: a builder and a final stage"
    for line in froms:
        parts = [p for p in line.split() if not p.startswith("--")]
        image = parts[0]
        if image not in stages:
            assert registry_host(image) is None, f"FROM {image} names a registry host"
            assert image.startswith("python:3.11-slim"), image
        if len(parts) == 3 and parts[1].upper() == "AS":
            stages.append(parts[2])


def test_dockerfile_runs_gang_as_a_non_root_user() -> None:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    final = instructions[last_from:]
    users = [rest for word, rest in final if word == "USER"]
    assert users, "the final stage sets a USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    assert user == str(65532), "the uid the Deployment's runAsUser names"
    assert ("ENTRYPOINT", '["gang"]') in final
    assert ("CMD", f'["run", "--config", "{CONFIG_PATH}"]') in final
    assert any(word == "COPY" and "--from=" in rest for word, rest in final)


def test_dockerignore_keeps_what_the_build_needs() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert ".venv" in ignored and ".git" in ignored
    for needed in ("pyproject.toml", "README.md", "gang"):
        assert needed not in ignored
