"""``manifests/extender/``: kube-scheduler's configuration agrees with what the extender serves.

kube-scheduler builds each call's URL as ``strings.TrimRight(urlPrefix, "/") + "/" + verb``;
the configuration's URL is followed to a running extender here, so a renamed verb, prefix or
port cannot go unnoticed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from gang.extender.server import DEFAULT_PORT, DEFAULT_PREFIX, VERBS
from tests.extender.conftest import fixture_bytes, serving
from tests.test_manifests import registry_host

ROOT = Path(__file__).resolve().parents[2]
EXTENDER = ROOT / "manifests" / "extender"
CONFIG = EXTENDER / "kube-scheduler-config.yaml"

#: the fields of kubescheduler.config.k8s.io/v1 (KubeSchedulerConfiguration, Extender)
CONFIG_FIELDS = {
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
}
EXTENDER_FIELDS = {
    "urlPrefix",
    "filterVerb",
    "preemptVerb",
    "prioritizeVerb",
    "weight",
    "bindVerb",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
}


def config() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(CONFIG.read_text()) if d is not None]
    assert len(docs) == 1
    doc: dict[str, Any] = docs[0]
    return doc


def extender() -> dict[str, Any]:
    extenders = config()["extenders"]
    assert len(extenders) == 1
    entry: dict[str, Any] = extenders[0]
    return entry


def test_config_is_a_v1_kube_scheduler_configuration() -> None:
    doc = config()
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert set(doc) <= CONFIG_FIELDS
    assert set(extender()) <= EXTENDER_FIELDS
    assert [p["schedulerName"] for p in doc["profiles"]] == ["default-scheduler"]


def test_extender_entry_matches_what_gang_extender_serves() -> None:
    entry = extender()
    url = urlsplit(entry["urlPrefix"])
    assert url.scheme == "http" and entry["enableHTTPS"] is False
    assert url.hostname == "127.0.0.1" and url.port == DEFAULT_PORT  # the sidecar layout
    assert url.path.rstrip("/") == DEFAULT_PREFIX
    assert entry["filterVerb"] == "filter" and entry["prioritizeVerb"] == "prioritize"
    assert {entry["filterVerb"], entry["prioritizeVerb"]} <= set(VERBS)
    assert "preemptVerb" not in entry and "bindVerb" not in entry
    assert isinstance(entry["weight"], int) and entry["weight"] > 0  # required with prioritize
    assert entry["nodeCacheCapable"] is True
    assert entry["ignorable"] is True
    assert re.fullmatch(r"\d+(ms|s|m)", entry["httpTimeout"])
    assert entry["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]


async def test_kube_scheduler_urls_reach_the_extender() -> None:
    entry = extender()
    path = urlsplit(entry["urlPrefix"]).path
    async with serving() as client:
        for verb in (entry["filterVerb"], entry["prioritizeVerb"]):
            url = f"{client.base}{path.rstrip('/')}/{verb}"
            body = fixture_bytes("filter-args-nodes.json")
            async with client.session.post(url, data=body) as resp:
                assert resp.status == 200, url


def test_extender_manifests_stay_out_of_the_kustomization() -> None:
    kustomization = yaml.safe_load((ROOT / "manifests" / "kustomization.yaml").read_text())
    assert not any("extender" in r for r in kustomization["resources"])


def test_docs_exist_and_name_no_registry() -> None:
    readme = (EXTENDER / "README.md").read_text()
    for term in ("nodeCacheCapable", "managedResources", "ignorable", "sidecar", "Service"):
        assert term in readme
    images = re.findall(r"image:\s*(\S+)", readme)
    assert images
    assert all(registry_host(image) is None for image in images)
    assert "manifests/extender" in (ROOT / "README.md").read_text()


def readme_containers() -> list[dict[str, Any]]:
    """The containers the README's YAML blocks spell out for the extender."""
    readme = (EXTENDER / "README.md").read_text()
    containers = []
    for block in re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL):
        doc = yaml.safe_load(block)
        if isinstance(doc, list):
            containers += [c for c in doc if isinstance(c, dict) and "image" in c]
    return containers


def test_the_documented_extender_container_is_hardened() -> None:
    """What manifests/ requires of gang's own Deployment (tests/test_manifests.py), the
    extender's documented container has too: non-root, read-only root, no capabilities, no
    privilege escalation, the runtime's default seccomp profile."""
    containers = readme_containers()
    assert [c["name"] for c in containers] == ["gang-extender"]
    for container in containers:
        security = container["securityContext"]
        assert security["runAsNonRoot"] is True
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert security.get("privileged", False) is False


def test_docs_say_how_bind_is_authenticated() -> None:
    readme = (EXTENDER / "README.md").read_text()
    for flag in (
        "--enable-bind",
        "--tls-client-ca",
        "--token-file",
        "--allow-unauthenticated-bind",
    ):
        assert flag in readme
