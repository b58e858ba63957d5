"""Server-side field validation: ``?fieldValidation=Strict|Warn|Ignore`` on create, update, patch.

Why: kubectl (1.27+) validates on the server. It sends ``fieldValidation=Strict`` (``--validate``
on, the default), ``Warn`` or ``Ignore`` (``--validate=false``) and relies on the answer: a
misspelt field (``minMembr``) must fail the apply with the server's own words, not be stored and
ignored. kube-apiserver gets this from decoding: a built-in kind is decoded into its Go struct
(an unknown field is dropped, a field of the wrong JSON type fails the whole request with the
``encoding/json`` message), a custom resource is pruned to its CRD's structural schema and then
validated against it (wrong types, minimums, enums, required fields are a 422 ``Invalid``).
Unknown and duplicate fields are reported as the directive says: a 400 ``strict decoding
error: ...`` for Strict, one ``Warning: 299 - "..."`` header each for Warn, nothing for Ignore.

The schemas are the ones ``/openapi/v3`` serves (``gang.sim.openapi``), compiled once into a
small tree of :class:`Node`.

Only requests that name ``fieldValidation`` are decoded this way. A request without it is stored
as sent, as the simulator always did: its bad-input tests rely on objects a real server would
have refused (a PodGroup with ``minMember: "3"``) reaching the scheduler, as objects written
before a schema existed do on a real cluster. kubectl always sends the parameter.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gang.sim import errors
from gang.sim.openapi import OBJECT_META, OpenApi, vendored
from gang.sim.resources import ResourceType

STRICT = "Strict"
WARN = "Warn"
IGNORE = "Ignore"
DIRECTIVES = (IGNORE, STRICT, WARN)

Obj = dict[str, Any]


def directive(raw: str | None) -> str | None:
    """The request's directive; None when it names none (the simulator's lenient path)."""
    if raw is None or raw == "":
        return None
    if raw not in DIRECTIVES:
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{raw}": supported values: '
            + ", ".join(f'"{d}"' for d in DIRECTIVES)
        )
    return raw


class Pairs(list[tuple[str, Any]]):
    """A JSON object as the decoder met it: every key in order, duplicates kept."""


def loads_with_duplicates(raw: bytes) -> Any:
    """Parse JSON keeping duplicate keys (objects become :class:`Pairs`)."""
    return json.loads(raw, object_pairs_hook=Pairs)


def plain(value: Any) -> Any:
    """A parsed value with duplicates resolved as Go's decoder does: the last one wins."""
    if isinstance(value, Pairs):
        return {k: plain(v) for k, v in value}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def duplicate_fields(value: Any, path: str = "") -> list[str]:
    """Paths of the keys that appear twice in one object, in document order (a patch body)."""
    out: list[str] = []
    if isinstance(value, Pairs):
        seen: set[str] = set()
        for key, _ in value:
            here = f"{path}.{key}" if path else key
            if key in seen:
                out.append(here)
            seen.add(key)
        last = {k: v for k, v in value}
        for key, item in last.items():
            out.extend(duplicate_fields(item, f"{path}.{key}" if path else key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(duplicate_fields(item, f"{path}[{i}]"))
    return out


# --- compiled schemas ------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Node:
    """One schema position. ``type`` "any" takes anything; objects with ``free`` keep every field."""

    type: str = "any"
    props: dict[str, Node] | None = None
    additional: Node | None = None
    items: Node | None = None
    free: bool = False
    #: the Go type a built-in field decodes into (``int32``, ``[]v1.Container``), for messages
    go_type: str = ""
    #: the Go struct an object node is (``PodSpec``)
    struct: str = ""
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    required: tuple[str, ...] = ()
    #: a custom resource's structural default, set where the field is absent
    has_default: bool = False
    default: Any = None
    #: some field at or below this node has a default (so a lenient write still needs a walk)
    defaults_below: bool = False


_GO_PRIMITIVES = {
    ("integer", "int32"): "int32",
    ("integer", "int64"): "int64",
    ("integer", None): "int64",
    ("number", "double"): "float64",
    ("number", None): "float64",
    ("boolean", None): "bool",
    ("string", None): "string",
}


def _short(name: str) -> tuple[str, str]:
    """(Go type, struct name) of a definition: io.k8s.api.core.v1.PodSpec → (v1.PodSpec, PodSpec)."""
    parts = name.split(".")
    return f"{parts[-2]}.{parts[-1]}", parts[-1]


class _Compiler:
    def __init__(self, schemas: Callable[[str], Any]) -> None:
        self._schemas = schemas
        self._memo: dict[str, Node] = {}

    def ref(self, name: str) -> Node:
        found = self._memo.get(name)
        if found is not None:
            return found
        node = Node()
        self._memo[name] = node  # before compiling: schemas may refer to themselves
        go_type, struct = _short(name)
        if name.endswith("resource.Quantity"):
            node.type, node.go_type = "quantity", "resource.Quantity"
            return node
        if name.endswith("intstr.IntOrString"):
            node.type, node.go_type = "int-or-string", "intstr.IntOrString"
            return node
        built = self.compile(self._schemas(name), struct)
        for slot in Node.__slots__:
            setattr(node, slot, getattr(built, slot))
        if node.type != "array":
            node.go_type = go_type  # a named Go type (v1.PodSpec, v1.Time)
        return node

    def compile(self, schema: Any, struct: str = "") -> Node:
        if not isinstance(schema, dict):
            return Node()
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self.ref(ref.rsplit("/", 1)[-1])
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and "type" not in schema:
            return self.compile(all_of[0], struct)
        if schema.get("x-kubernetes-int-or-string") or schema.get("format") == "int-or-string":
            return Node(type="int-or-string", go_type="intstr.IntOrString")
        kind = schema.get("type")
        node = Node(
            enum=tuple(schema["enum"]) if isinstance(schema.get("enum"), list) else None,
            minimum=schema.get("minimum"),
            maximum=schema.get("maximum"),
            required=tuple(schema.get("required") or ()),
            has_default="default" in schema,
            default=schema.get("default"),
        )
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        if kind == "object" or isinstance(props, dict) or isinstance(additional, dict):
            node.type = "object"
            node.struct = struct
            if isinstance(props, dict):
                node.props = {k: self.compile(v) for k, v in props.items()}
                node.defaults_below = any(
                    c.has_default or c.defaults_below for c in node.props.values()
                )
            if isinstance(additional, dict):
                node.additional = self.compile(additional)
                node.go_type = "map[string]" + (node.additional.go_type or "interface {}")
                node.defaults_below |= node.additional.defaults_below
            node.free = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or (
                node.props is None and node.additional is None
            )
            return node
        if kind == "array":
            node.type = "array"
            node.items = self.compile(schema.get("items"))
            node.go_type = "[]" + (node.items.go_type or "interface {}")
            node.defaults_below = node.items.has_default or node.items.defaults_below
            return node
        if kind in ("string", "integer", "number", "boolean"):
            node.type = kind
            fmt = schema.get("format")
            node.go_type = _GO_PRIMITIVES.get((kind, fmt)) or _GO_PRIMITIVES[(kind, None)]
            return node
        return node


def _json_type(value: Any) -> str:
    """How Go's decoder names a JSON value in "cannot unmarshal X"."""
    if isinstance(value, Pairs | dict):
        return "object"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _schema_type(value: Any) -> str:
    """How a CRD validation message names a JSON value's type."""
    if isinstance(value, Pairs | dict):
        return "object"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _fits(node: Node, value: Any) -> bool:
    if value is None or node.type == "any":
        return True
    kind = node.type
    if kind == "object":
        return isinstance(value, dict | Pairs)
    if kind == "array":
        return isinstance(value, list) and not isinstance(value, Pairs)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "int-or-string":
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    if kind == "quantity":
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    return True


class _TypeError(Exception):
    """A built-in field of the wrong JSON type: the decoder stops (Go's first error wins)."""


@dataclass(slots=True)
class _Walk:
    builtin: bool
    #: only set defaults: keep unknown fields and values of the wrong type (a request that
    #: named no fieldValidation, see the module docstring)
    lenient: bool = False
    #: unknown and duplicate fields in document order (a built-in create or update)
    ordered: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    #: (field path, message) of a custom resource's schema violations
    invalid: list[tuple[str, str]] = field(default_factory=list)
    type_error: str | None = None

    def value(self, value: Any, node: Node, path: str, gopath: str, struct: str) -> Any:
        if self.lenient:
            return self.defaults(value, node)
        if not _fits(node, value):
            if self.builtin:
                what = _json_type(value)
                if isinstance(value, float) and node.type in ("integer", "int-or-string"):
                    what = f"number {value!r}"
                where = f"{struct}.{gopath}" if struct else gopath
                self.type_error = (
                    f"json: cannot unmarshal {what} into Go struct field {where} "
                    f"of type {node.go_type or node.type}"
                )
                raise _TypeError
            got = _schema_type(value)
            expected = "integer" if node.type == "integer" else node.type
            if node.type in ("int-or-string", "quantity"):
                expected = "integer or string"
            self.invalid.append(
                (
                    path,
                    f'Invalid value: "{got}": {path} in body must be of type {expected}: "{got}"',
                )
            )
            return plain(value)
        if value is None:
            return None
        if node.type == "object":
            return self.object(value, node, path, gopath, struct)
        if node.type == "array":
            assert node.items is not None
            return [
                self.value(item, node.items, f"{path}[{i}]", gopath, struct)
                for i, item in enumerate(value)
            ]
        if not self.builtin:
            self.constraints(value, node, path)
        return value

    def defaults(self, value: Any, node: Node) -> Any:
        """``value`` with the schema's defaults set, nothing else changed."""
        if not node.defaults_below:
            return value
        if node.type == "object" and isinstance(value, dict):
            out = dict(value)
            for key, child in (node.props or {}).items():
                if key not in out and child.has_default:
                    out[key] = copy.deepcopy(child.default)
                elif key in out and child.defaults_below:
                    out[key] = self.defaults(out[key], child)
            if node.additional is not None and node.additional.defaults_below:
                for key, item in out.items():
                    if node.props is None or key not in node.props:
                        out[key] = self.defaults(item, node.additional)
            return out
        if node.type == "array" and isinstance(value, list) and node.items is not None:
            return [self.defaults(item, node.items) for item in value]
        return value

    def constraints(self, value: Any, node: Node, path: str) -> None:
        if node.enum is not None and value not in node.enum:
            allowed = ", ".join(json.dumps(v) for v in node.enum)
            self.invalid.append(
                (path, f"Unsupported value: {json.dumps(value)}: supported values: {allowed}")
            )
        if isinstance(value, int | float) and not isinstance(value, bool):
            if node.minimum is not None and value < node.minimum:
                self.invalid.append(
                    (
                        path,
                        f"Invalid value: {value}: {path} in body should be greater than or "
                        f"equal to {_number(node.minimum)}",
                    )
                )
            if node.maximum is not None and value > node.maximum:
                self.invalid.append(
                    (
                        path,
                        f"Invalid value: {value}: {path} in body should be less than or equal "
                        f"to {_number(node.maximum)}",
                    )
                )

    def object(self, value: Any, node: Node, path: str, gopath: str, struct: str) -> Obj:
        pairs = list(value) if isinstance(value, Pairs) else list(value.items())
        out: Obj = {}
        seen: set[str] = set()
        dropped: set[str] = set()
        inner = node.struct or struct
        for key, item in pairs:
            here = f"{path}.{key}" if path else key
            gohere = f"{gopath}.{key}" if gopath else key
            if key in seen:
                if key in dropped:
                    continue  # an unknown field twice is reported once, as unknown
                self.duplicates.append(here)
                self.ordered.append(f'duplicate field "{here}"')
            seen.add(key)
            child = node.props.get(key) if node.props is not None else None
            if child is None and node.additional is not None:
                # a map's values: messages name the map field, not the key
                out[key] = self.value(item, node.additional, here, gopath, struct)
                continue
            if child is None:
                if node.free:
                    out[key] = plain(item)
                    continue
                dropped.add(key)
                self.unknown.append(here)
                self.ordered.append(f'unknown field "{here}"')
                continue
            out[key] = self.value(item, child, here, gohere, inner)
        if not self.builtin:
            for key, child in (node.props or {}).items():
                if key not in out and child.has_default:
                    out[key] = copy.deepcopy(child.default)
            for name in node.required:
                if name not in out:
                    here = f"{path}.{name}" if path else name
                    self.invalid.append((here, "Required value"))
        return out


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(slots=True)
class Decoded:
    """A body decoded as the directive says: what to store and what to tell the client."""

    obj: Any
    warnings: list[str]


class FieldValidator:
    """Decodes request bodies of one simulated cluster against its OpenAPI schemas."""

    def __init__(self, openapi: OpenApi) -> None:
        self.openapi = openapi
        defs = openapi.definitions
        self._compiler = _Compiler(lambda name: defs.custom.get(name) or defs.v2[name])
        self._roots: dict[str, Node] = {}

    def root(self, rt: ResourceType) -> Node | None:
        """The compiled schema of ``rt``'s kind (None if there is no schema to check)."""
        found = self._roots.get(rt.key)
        if found is None:
            try:
                name = self.openapi.definitions.kind_definition(rt)
            except KeyError:
                return None
            found = self._compiler.ref(name)
            if not rt.builtin:
                # a custom resource's metadata is an ObjectMeta, whatever its schema says
                meta = self._compiler.ref(OBJECT_META)
                props = dict(found.props or {})
                props["metadata"] = meta
                found = Node(
                    type="object",
                    props=props,
                    additional=found.additional,
                    free=found.free,
                    struct=found.struct,
                    required=found.required,
                    defaults_below=found.defaults_below,
                )
            self._roots[rt.key] = found
        return found

    def decode(
        self,
        rt: ResourceType,
        parsed: Any,
        mode: str,
        *,
        patch_duplicates: list[str] | None = None,
    ) -> Decoded:
        """Check ``parsed`` (a body, or a patched object) against ``rt``'s schema.

        ``patch_duplicates`` marks a patch: the duplicates found in the patch body are reported
        first and the object's unknown fields after them, sorted (the apiserver finds those on
        the patched object, not in the order the client wrote them); a failure then carries
        no "cannot be handled as" prefix, as the patch handler's does not.
        """
        node = self.root(rt)
        if node is None:
            return Decoded(plain(parsed), [])
        walk = _Walk(builtin=rt.builtin)
        prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
        patch = patch_duplicates is not None
        try:
            obj = walk.value(parsed, node, "", "", node.struct or rt.kind)
        except _TypeError:
            assert walk.type_error is not None
            raise errors.bad_request(("" if patch else prefix) + walk.type_error) from None
        if patch:
            unknown = sorted(walk.unknown)
            problems = [f'duplicate field "{p}"' for p in patch_duplicates or []]
            problems += [f'unknown field "{p}"' for p in unknown]
        elif rt.builtin:
            problems = walk.ordered
        else:
            meta = [p for p in walk.unknown if p.startswith("metadata.")]
            rest = sorted(p for p in walk.unknown if not p.startswith("metadata."))
            problems = [f'duplicate field "{p}"' for p in walk.duplicates]
            problems += [f'unknown field "{p}"' for p in meta + rest]
        if problems and mode == STRICT:
            message = "strict decoding error: " + ", ".join(problems)
            raise errors.bad_request(("" if patch else prefix) + message)
        if walk.invalid:
            name = ""
            meta_obj = obj.get("metadata") if isinstance(obj, dict) else None
            if isinstance(meta_obj, dict):
                name = str(meta_obj.get("name") or "")
            raise errors.invalid(rt, name, walk.invalid)
        return Decoded(obj, problems if mode == WARN else [])

    def default(self, rt: ResourceType, obj: Any) -> Any:
        """A custom resource with its schema's defaults set (what every write gets, however
        it is validated); anything else unchanged."""
        if rt.builtin:
            return obj
        node = self.root(rt)
        if node is None or not node.defaults_below:
            return obj
        return _Walk(builtin=False, lenient=True).value(obj, node, "", "", "")


@functools.cache
def has_defaults(group: str, version: str, kind: str) -> bool:
    """Whether a custom resource's CRD schema sets any default (Volcano's does)."""
    for crd in vendored()["crds"]:
        if (crd["group"], crd["version"], crd["kind"]) == (group, version, kind):
            return _any_default(crd["schema"])
    return False


def _any_default(schema: Any) -> bool:
    if isinstance(schema, dict):
        if "default" in schema and not isinstance(schema.get("default"), dict | list):
            return True
        return any(_any_default(v) for k, v in schema.items() if k != "enum")
    if isinstance(schema, list):
        return any(_any_default(v) for v in schema)
    return False


def warning_header(text: str) -> str:
    """One ``Warning`` header value as kube-apiserver writes it (RFC 7234, code 299)."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
