"""Regenerate ``gang/sim/openapi_data.json.gz``: the schemas behind the simulator's OpenAPI.

Why vendored: kubectl validates, explains and patches from the server's OpenAPI documents, so the
simulator must serve real schemas for every kind it serves. The Kubernetes definitions ship in
the ``kubernetes-validate`` package (a test dependency, 108 MB: every release since 1.28, as JSON
Schema); the simulator must not need it at run time. This script takes, for each Kubernetes
version the simulator can be (``--kubernetes-version``), only the definitions reachable from the
kinds it serves, turns them back into OpenAPI v2 form (``#/definitions/`` references, one type per
schema, int-or-string and quantities as the apiserver describes them), adds the custom resources'
schemas from the CRD manifests (``manifests/crd-podgroups.yaml``, ``manifests/extra-apis/``), and
writes one gzipped JSON file, definitions shared between versions stored once.

    python -m gang.sim.openapi_vendor            # rewrite the vendored file
    python -m gang.sim.openapi_vendor --check    # exit 1 if it is out of date

``tests/sim/test_openapi.py`` runs the check: the vendored file must be what this script makes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from gang.sim.resources import KUBERNETES_VERSIONS, resource_types

DATA_PATH = Path(__file__).with_name("openapi_data.json.gz")
ROOT = Path(__file__).resolve().parents[2]
CRD_MANIFESTS = (
    "manifests/crd-podgroups.yaml",
    "manifests/extra-apis/crd-sigs-podgroups.yaml",
    "manifests/extra-apis/crd-volcano-podgroups.yaml",
    "manifests/extra-apis/crd-volcano-queues.yaml",
    "manifests/extra-apis/crd-kai-queues.yaml",
    "manifests/extra-apis/crd-elasticquotas.yaml",
    "manifests/extra-apis/crd-kueue-topologies.yaml",
    "manifests/extra-apis/crd-kai-topologies.yaml",
    "manifests/extra-apis/crd-volcano-hypernodes.yaml",
)
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
#: definitions every API group's document refers to (operations' parameters and answers)
COMMON_DEFINITIONS = (
    f"{META}.Status",
    f"{META}.DeleteOptions",
    f"{META}.WatchEvent",
    f"{META}.Patch",
    f"{META}.APIResourceList",
    f"{META}.ObjectMeta",
    f"{META}.ListMeta",
    "io.k8s.api.policy.v1.Eviction",
)
#: what kube-apiserver says of the two types kubernetes-validate writes as ``oneOf``
INT_OR_STRING = {
    "description": (
        "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML "
        "marshalling and unmarshalling, it produces or consumes the inner type.  This allows you "
        "to have, for example, a JSON field that can accept a name or number."
    ),
    "format": "int-or-string",
    "type": "string",
}
QUANTITY = {
    "description": (
        "Quantity is a fixed-point representation of a number. It provides convenient "
        "marshaling/unmarshaling in JSON and YAML, in addition to String() and AsInt64() "
        "accessors.\n\nThe serialization format is:\n\n``` <quantity>        ::= "
        '<signedNumber><suffix>\n\n\t(Note that <suffix> may be empty, from the "" case in '
        "<decimalSI>.)\n\n<digit>           ::= 0 | 1 | ... | 9 <digits>          ::= <digit> | "
        "<digit><digits> <number>          ::= <digits> | <digits>.<digits> | <digits>. | "
        '.<digits> <sign>            ::= "+" | "-" <signedNumber>    ::= <number> | '
        "<sign><number> <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI> "
        "<binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei\n\n\t(International System of units; "
        'See: http://physics.nist.gov/cuu/Units/binary.html)\n\n<decimalSI>       ::= m | "" | '
        "k | M | G | T | P | E\n\n\t(Note that 1024 = 1Ki but 1000 = 1k; I didn't choose the "
        'capitalization.)\n\n<decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber> ```'
    ),
    "type": "string",
}
_SPECIAL = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": INT_OR_STRING,
    "io.k8s.apimachinery.pkg.api.resource.Quantity": QUANTITY,
}


def kubernetes_validate_schemas() -> Path:
    """The folder of per-version schemas inside the installed ``kubernetes-validate``."""
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or spec.origin is None:
        raise SystemExit("kubernetes-validate is not installed (pip install kubernetes-validate)")
    return Path(spec.origin).parent / "kubernetes-json-schema"


def _to_v2(schema: Any) -> Any:
    """kubernetes-validate's JSON Schema back to the OpenAPI v2 the apiserver serves."""
    if isinstance(schema, list):
        return [_to_v2(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = "#/definitions/" + value.rsplit("/", 1)[-1]
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out[key] = types[0] if len(types) == 1 else types
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _to_v2(prop) for name, prop in value.items()}
        else:
            out[key] = _to_v2(value)
    return out


def _refs(schema: Any) -> Iterable[str]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[-1]
            elif isinstance(value, dict | list):
                yield from _refs(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _refs(item)


def _gvk_index(definitions: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in definitions.items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            key = (gvk.get("group", ""), gvk["version"], gvk["kind"])
            # meta types name every group; the first (core) definition wins
            index.setdefault(key, name)
    return index


def builtin_definitions(version: str, source: Path) -> dict[str, Any]:
    """The v2 definitions reachable from the built-in kinds a ``version`` simulator serves."""
    folder = source / f"v{version}.0-local"
    raw = json.loads((folder / "_definitions.json").read_text())["$defs"]
    index = _gvk_index(raw)
    roots: list[str] = list(COMMON_DEFINITIONS)
    for rt in resource_types(version):
        if not rt.builtin:
            continue
        kinds = (rt.kind, rt.list_kind) if "list" in rt.verbs else (rt.kind,)
        for kind in kinds:
            name = index.get((rt.group, rt.version, kind))
            if name is None:
                raise SystemExit(f"{version}: no definition for {rt.api_version} {kind}")
            roots.append(name)
    out: dict[str, Any] = {}
    todo = roots
    while todo:
        name = todo.pop()
        if name in out:
            continue
        schema: dict[str, Any] = dict(_SPECIAL[name]) if name in _SPECIAL else _to_v2(raw[name])
        if "x-kubernetes-group-version-kind" in schema:
            # kubernetes-validate pins apiVersion and kind with an enum; the apiserver does not
            props = schema.get("properties") or {}
            for field in ("apiVersion", "kind"):
                if isinstance(props.get(field), dict):
                    props[field].pop("enum", None)
        out[name] = schema
        todo.extend(_refs(schema))
    return dict(sorted(out.items()))


def crd_versions(root: Path = ROOT) -> list[dict[str, Any]]:
    """Each served version of the CRDs in the manifests, with the names and schema it serves."""
    out: list[dict[str, Any]] = []
    for rel in CRD_MANIFESTS:
        for doc in yaml.safe_load_all((root / rel).read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            names = spec["names"]
            for version in spec["versions"]:
                if not version.get("served", True):
                    continue
                out.append(
                    {
                        "group": spec["group"],
                        "version": version["name"],
                        "kind": names["kind"],
                        "listKind": names.get("listKind", names["kind"] + "List"),
                        "plural": names["plural"],
                        "scope": spec["scope"],
                        "shortNames": names.get("shortNames", []),
                        "subresources": sorted((version.get("subresources") or {}).keys()),
                        "schema": version["schema"]["openAPIV3Schema"],
                        "manifest": rel,
                    }
                )
    return out


def _digest(schema: Any) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:16]


def generate(source: Path | None = None, root: Path = ROOT) -> dict[str, Any]:
    """The vendored document: per version a name → digest map, one pool of schemas by digest."""
    source = source or kubernetes_validate_schemas()
    pool: dict[str, Any] = {}
    versions: dict[str, dict[str, str]] = {}
    for version in KUBERNETES_VERSIONS:
        names: dict[str, str] = {}
        for name, schema in builtin_definitions(version, source).items():
            digest = _digest(schema)
            pool[digest] = schema
            names[name] = digest
        versions[version] = names
    return {
        "comment": "generated by python -m gang.sim.openapi_vendor; do not edit",
        "kubernetes": versions,
        "schemas": dict(sorted(pool.items())),
        "crds": crd_versions(root),
    }


def encode(document: dict[str, Any]) -> bytes:
    data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(data, compresslevel=9, mtime=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail if the vendored file is stale")
    args = parser.parse_args(argv)
    document = generate()
    if args.check:
        current = json.loads(gzip.decompress(DATA_PATH.read_bytes()))
        if current != document:
            print(f"{DATA_PATH} is out of date: run python -m gang.sim.openapi_vendor")
            return 1
        return 0
    DATA_PATH.write_bytes(encode(document))
    print(f"wrote {DATA_PATH} ({DATA_PATH.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
