"""PATCH semantics for the simulated kube-apiserver.

Why this module exists: the scheduler (and kubectl, and client libraries) do
not only PUT whole objects, they PATCH them, and every flavour behaves
differently.  kube-scheduler in particular sends *strategic* merge patches
with ``$setElementOrder`` directives when it records a pod's
``PodScheduled`` condition, and the real server merges them by merge key
rather than replacing the list.  If the simulator got that wrong, tests would
pass against it and fail against a real cluster.  This module implements the
three flavours a kube-apiserver accepts on plain JSON values (as decoded by
orjson), so the HTTP layer only has to pick one by ``Content-Type``:

* ``application/json-patch+json`` - RFC 6902, through the ``jsonpatch`` library;
* ``application/merge-patch+json`` - RFC 7386;
* ``application/strategic-merge-patch+json`` - the subset of
  ``k8s.io/apimachinery/pkg/util/strategicpatch`` that Pods, Nodes, Events,
  Leases and their like need, driven by a table of list fields keyed by field
  *name* (not by full path, which is good enough for a simulator).

Objects in the simulator's store are immutable, so every function returns a
new value and never mutates its inputs.  Sub-trees a patch does not touch are
shared with the input instead of being copied, which keeps patching a large
object cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import jsonpatch

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "PatchError",
    "UnsupportedPatchType",
    "accepted_patch_types",
    "apply_patch",
    "json_merge_patch",
    "json_patch",
    "strategic_merge_patch",
]

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"


class PatchError(ValueError):
    """Message goes to the client as an HTTP 400/422 Status message."""


class UnsupportedPatchType(PatchError):
    """The media type is not a patch flavour this resource accepts.

    The caller maps it to HTTP 415; ``str(exc)`` is the exact message the
    kube-apiserver sends.
    """


def accepted_patch_types(*, strategic: bool) -> tuple[str, ...]:
    """The patch media types a resource accepts, in the order the apiserver lists them.

    ``strategic`` is True for built-in types and False for custom resources,
    which have no Go struct tags to drive a strategic merge.
    """
    if strategic:
        return (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
    return (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)


def _unsupported(*, strategic: bool) -> UnsupportedPatchType:
    accepted = ", ".join(accepted_patch_types(strategic=strategic))
    return UnsupportedPatchType(
        "the body of the request was in an unknown format - "
        f"accepted media types include: {accepted}"
    )


def apply_patch(content_type: str, target: Any, body: Any, *, strategic: bool) -> Any:
    """Apply ``body`` to ``target`` according to the ``Content-Type`` of the request.

    Media type parameters (``; charset=utf-8``) and case are ignored.  With
    ``strategic=False`` (a custom resource) a strategic merge patch is
    rejected, as the real server does.  Server-side apply and unknown types
    raise :class:`UnsupportedPatchType`.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == JSON_PATCH:
        return json_patch(target, body)
    if media_type == MERGE_PATCH:
        return json_merge_patch(target, body)
    if media_type == STRATEGIC_MERGE_PATCH and strategic:
        return strategic_merge_patch(target, body)
    raise _unsupported(strategic=strategic)


# ---------------------------------------------------------------------------
# helpers


class _Missing:
    """Sentinel type for "no value", distinct from JSON null (None)."""


_MISSING: Final = _Missing()


def _go_json_type(value: Any) -> str:
    """The name Go's encoding/json uses for a JSON value in unmarshal errors."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "null"


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: unlike ``==``, ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_json_equal(v, b[k]) for k, v in a.items())
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(b, dict | list):
        return False
    return bool(a == b)


def _contains(values: list[Any], value: Any) -> bool:
    return any(_json_equal(value, v) for v in values)


# ---------------------------------------------------------------------------
# RFC 7386 JSON merge patch


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


# ---------------------------------------------------------------------------
# RFC 6902 JSON patch

_JSON_PATCH_ERRORS: Final = (
    jsonpatch.JsonPatchException,
    jsonpatch.JsonPointerException,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
)


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch, applied with the ``jsonpatch`` library.

    The library either deep-copies the whole document or patches it in place.
    Instead, before each operation the containers on the way to the location
    it writes are shallow-copied (once), and the operation is applied in place
    to those copies: the input is never touched and untouched sub-trees stay
    shared.
    """
    if not isinstance(operations, list):
        raise PatchError(
            f"json: cannot unmarshal {_go_json_type(operations)} "
            "into Go value of type jsonpatch.Patch"
        )
    try:
        jsonpatch.JsonPatch(operations)  # validate every operation up front
        owned: dict[int, Any] = {}  # id -> our copy; the value keeps the id alive
        doc = target
        for operation in operations:
            kind = operation.get("op")
            if kind != "test":
                pointers = [operation.get("path")]
                if kind == "move":
                    pointers.append(operation.get("from"))
                for pointer in pointers:
                    if isinstance(pointer, str):
                        doc = _own_path(doc, pointer, owned)
            doc = jsonpatch.JsonPatch([operation]).apply(doc, in_place=True)
    except _JSON_PATCH_ERRORS as exc:
        raise PatchError(str(exc) or type(exc).__name__) from exc
    return doc


def _own(value: Any, owned: dict[int, Any]) -> Any:
    """Our private shallow copy of a container (the container itself if already ours)."""
    if id(value) in owned:
        return value
    copy: dict[str, Any] | list[Any] = dict(value) if isinstance(value, dict) else list(value)
    owned[id(copy)] = copy
    return copy


def _own_path(doc: Any, pointer: str, owned: dict[int, Any]) -> Any:
    """Make every container from the root to the parent of ``pointer`` our own copy.

    Returns the (possibly new) root.  Stops quietly where the path does not
    resolve; the operation itself then reports the error.
    """
    parts: list[str] = jsonpatch.JsonPointer(pointer).parts
    if not parts or not isinstance(doc, dict | list):
        return doc
    root = node = _own(doc, owned)
    for part in parts[:-1]:
        key: str | int
        if isinstance(node, dict):
            if part not in node:
                break
            key = part
        else:
            if not (part.isascii() and part.isdigit()) or (part != "0" and part[0] == "0"):
                break
            key = int(part)
            if key >= len(node):
                break
        child = node[key]
        if not isinstance(child, dict | list):
            break
        child = _own(child, owned)
        node[key] = child
        node = child
    return root


# ---------------------------------------------------------------------------
# strategic merge patch

#: list fields merged element by element, by the value of this key
_MERGE_KEYS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "containers": "name",
        "initContainers": "name",
        "ephemeralContainers": "name",
        "env": "name",
        "volumes": "name",
        "volumeMounts": "mountPath",
        "ports": "containerPort",
        "conditions": "type",
        "ownerReferences": "uid",
        "imagePullSecrets": "name",
        "addresses": "type",
        "hostAliases": "ip",
        "resourceClaims": "name",
        "resourceClaimStatuses": "name",
        # a ResourceClaim's consumers (kube-scheduler reserves with a strategic merge patch)
        "reservedFor": "uid",
    }
)
#: lists of primitives merged as sets
_SET_LISTS: Final = frozenset({"finalizers"})

_PATCH: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ELEMENT_ORDER: Final = "$setElementOrder/"
_DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList/"


def _is_directive(key: str) -> bool:
    return (
        key in (_PATCH, _RETAIN_KEYS)
        or key.startswith(_SET_ELEMENT_ORDER)
        or key.startswith(_DELETE_FROM_PRIMITIVE_LIST)
    )


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Kubernetes strategic merge patch, for built-in types.

    Like a merge patch, except that the list fields in the merge-key table are
    merged element by element (existing order kept, new elements appended in
    patch order), ``finalizers`` is merged as a set, and the ``$patch``,
    ``$retainKeys``, ``$setElementOrder/<field>`` and
    ``$deleteFromPrimitiveList/<field>`` directives are honoured.  Other lists
    are replaced wholesale.  No directive survives into the result.
    """
    if patch is None:  # Go unmarshals "null" into a nil map: nothing to do
        return target
    if not isinstance(patch, dict):
        raise PatchError(
            f"json: cannot unmarshal {_go_json_type(patch)} "
            "into Go value of type map[string]interface {}"
        )
    return _merge_map(target if isinstance(target, dict) else {}, patch)


def _merge_map(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get(_PATCH, _MISSING)
    if directive == "replace":
        return _merge_map({}, {k: v for k, v in patch.items() if k != _PATCH})
    if directive == "delete":
        return {}
    if directive is not _MISSING and directive != "merge":
        raise PatchError(f"unknown patch type: {directive!r} in map")

    result = dict(original)
    retain: Any = _MISSING
    orders: list[tuple[str, Any]] = []
    for key, value in patch.items():
        if key == _RETAIN_KEYS:
            retain = value
        elif key.startswith(_SET_ELEMENT_ORDER):
            orders.append((key.removeprefix(_SET_ELEMENT_ORDER), value))
        elif key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            # before the merge, so that a value the patch also adds is kept
            field = key.removeprefix(_DELETE_FROM_PRIMITIVE_LIST)
            current = result.get(field)
            if isinstance(current, list) and value is not None:
                if not isinstance(value, list):
                    raise PatchError(f"{key}: expected a list, got {_go_json_type(value)}")
                result[field] = [x for x in current if not _contains(value, x)]

    for key, value in patch.items():
        if _is_directive(key):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_value(key, result.get(key, _MISSING), value)

    for field, order in orders:
        current = result.get(field)
        if isinstance(current, list) and order is not None:
            if not isinstance(order, list):
                raise PatchError(
                    f"{_SET_ELEMENT_ORDER}{field}: expected a list, got {_go_json_type(order)}"
                )
            result[field] = _reorder(field, current, order)

    if retain is not _MISSING and retain is not None:
        if not isinstance(retain, list):
            raise PatchError(f"{_RETAIN_KEYS}: expected a list, got {_go_json_type(retain)}")
        keep = {k for k in retain if isinstance(k, str)}
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _merge_value(field: str | None, original: Any, patch: Any) -> Any:
    """Merge ``patch`` into ``original``, the value of ``field`` (missing or any type)."""
    if isinstance(patch, dict):
        return _merge_map(original if isinstance(original, dict) else {}, patch)
    if isinstance(patch, list):
        return _merge_list(field, original if isinstance(original, list) else [], patch)
    return patch


def _merge_list(field: str | None, original: list[Any], patch: list[Any]) -> list[Any]:
    elements: list[Any] = []
    deletes: list[dict[str, Any]] = []
    replace = False
    for element in patch:
        if isinstance(element, dict) and _PATCH in element:
            directive = element[_PATCH]
            if directive == "replace":
                replace = True
            elif directive == "delete":
                deletes.append(element)
            else:
                raise PatchError(f"unknown patch type: {directive!r} in list {field}")
        else:
            elements.append(element)
    if replace:  # the rest of the patch is the new list
        original, deletes = [], []

    merge_key = _MERGE_KEYS.get(field) if field is not None else None
    if merge_key is not None:
        if all(isinstance(e, dict) and merge_key in e for e in elements):
            return _merge_keyed_list(merge_key, original, elements, deletes)
        if deletes:
            bad = next(e for e in elements if not (isinstance(e, dict) and merge_key in e))
            raise PatchError(f"map: {bad} does not contain declared merge key: {merge_key}")
        # Elements without the key: the field is not the one the table means
        # (Service ports are keyed by "port", Endpoints addresses are atomic),
        # so treat the list as atomic rather than reject the patch.
    elif field in _SET_LISTS:
        merged: list[Any] = []
        for value in (*original, *elements):
            if not _contains(merged, value):
                merged.append(value)
        return merged
    return [_merge_value(None, _MISSING, e) for e in elements]


def _merge_keyed_list(
    merge_key: str,
    original: list[Any],
    elements: list[dict[str, Any]],
    deletes: list[dict[str, Any]],
) -> list[Any]:
    result = list(original)
    for delete in deletes:
        if merge_key not in delete:
            raise PatchError(f"map: {delete} does not contain declared merge key: {merge_key}")
        key = delete[merge_key]
        result = [
            e
            for e in result
            if not (isinstance(e, dict) and merge_key in e and _json_equal(e[merge_key], key))
        ]
    for element in elements:
        key = element[merge_key]
        for index, existing in enumerate(result):
            if (
                isinstance(existing, dict)
                and merge_key in existing
                and _json_equal(existing[merge_key], key)
            ):
                result[index] = _merge_map(existing, element)
                break
        else:
            result.append(_merge_map({}, element))
    return result


def _reorder(field: str, values: list[Any], order: list[Any]) -> list[Any]:
    """Sort ``values`` as ``$setElementOrder/<field>`` says; unmentioned ones go last."""
    merge_key = _MERGE_KEYS.get(field)

    def identity(value: Any) -> Any:
        if merge_key is not None and isinstance(value, dict):
            return value.get(merge_key, _MISSING)
        return value

    wanted = [identity(o) for o in order]

    def rank(value: Any) -> int:
        ident = identity(value)
        if ident is not _MISSING:
            for index, w in enumerate(wanted):
                if w is not _MISSING and _json_equal(ident, w):
                    return index
        return len(wanted)

    return sorted(values, key=rank)
