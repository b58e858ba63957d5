"""Device selectors: CEL expressions over one device, evaluated as Kubernetes' DRA does.

Why this exists: DeviceClasses and requests choose devices with CEL (``device.driver``,
``device.attributes["gpu.nvidia.com"].productName``, ``device.capacity[...].memory``). The language
itself comes from a maintained library (``cel-python``); what Kubernetes adds on top is here: the
``device`` variable's shape (attributes and capacity by domain, an unknown domain an empty map),
quantities and semantic versions as values with ``compareTo``/``isGreaterThan``/``isLessThan``, and
the extension functions selectors use (``quantity()``, ``semver()``, ``isSemver()``,
``lowerAscii()`` ...). A selector that does not compile or fails at run time is a
:class:`SelectorError` with Kubernetes' wording ("CEL runtime error: no such key: model"): the
allocator rejects with it, it never ends a scheduling cycle.

Evaluation is the costly part (a few hundred µs in pure Python), so results are memoised per
(expression, device) by the caller: a device's attributes do not change within one snapshot.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from gang.models.dra import Device, DraParseError, Version
from gang.models.quantity import QuantityError, parse_quantity

__all__ = ["SelectorError", "compile_selector", "device_variable", "matches"]


class SelectorError(Exception):
    """A selector that cannot be compiled or evaluated; the message says why."""


class Quantity:
    """A CEL value for a Kubernetes quantity (comparison by method, as in Kubernetes' CEL)."""

    __slots__ = ("value",)

    def __init__(self, value: Decimal) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


class Semver:
    """A CEL value for a semantic version."""

    __slots__ = ("version",)

    def __init__(self, version: Version) -> None:
        self.version = version

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.version.compare(other.version) == 0

    def __hash__(self) -> int:
        return hash((self.version.major, self.version.minor, self.version.patch))


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: a domain the device lacks is an empty map
    (so ``"x" in device.attributes["other.domain"]`` is false, not an error)."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


def _cel(value: Any) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, Version):
        return Semver(value)
    if isinstance(value, Decimal):
        return Quantity(value)
    if isinstance(value, tuple):
        return celtypes.ListType([_cel(v) for v in value])
    raise TypeError(f"no CEL value for {type(value).__name__}")


def _by_domain(values: Mapping[str, Any]) -> _Domains:
    domains: dict[str, dict[celtypes.StringType, Any]] = {}
    for qualified, value in values.items():
        domain, _, name = qualified.rpartition("/")
        domains.setdefault(domain, {})[celtypes.StringType(name)] = _cel(value)
    return _Domains({celtypes.StringType(d): celtypes.MapType(v) for d, v in domains.items()})


def device_variable(driver: str, device: Device) -> celtypes.MapType:
    """The ``device`` variable a selector sees."""
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): _by_domain(device.attributes),
            celtypes.StringType("capacity"): _by_domain(device.capacity),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                device.allow_multiple_allocations
            ),
        }
    )


# --- Kubernetes' CEL library (the parts device selectors use) -------------------------------


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.version.compare(b.version)
    raise TypeError(f"no such overload: compareTo({type(a).__name__}, {type(b).__name__})")


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError as err:
        raise ValueError(f"quantities must match the regular expression: {err}") from None


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(text))
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _semver(text: Any, normalize: Any = False) -> Semver:
    try:
        return Semver(Version.parse(str(text), normalize=bool(normalize)))
    except DraParseError as err:
        raise ValueError(f"could not parse semver: {err}") from None


def _is_semver(text: Any, normalize: Any = False) -> celtypes.BoolType:
    try:
        Version.parse(str(text), normalize=bool(normalize))
    except DraParseError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _arith(sign: int) -> Callable[[Any, Any], Quantity]:
    def apply(a: Any, b: Any) -> Quantity:
        other = b.value if isinstance(b, Quantity) else Decimal(int(b))
        return Quantity(a.value + sign * other)

    return apply


def _as_integer(q: Any) -> celtypes.IntType:
    if q.value != q.value.to_integral_value():
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(int(q.value))


def _string_fn(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A string extension function: Python's answer turned into CEL values."""

    def call(s: Any, *args: Any) -> Any:
        result = fn(str(s), *args)
        return _cel(tuple(result) if isinstance(result, list) else result)

    return call


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "add": _arith(1),
    "sub": _arith(-1),
    "asInteger": _as_integer,
    "isInteger": lambda q: celtypes.BoolType(q.value == q.value.to_integral_value()),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
    "major": lambda v: celtypes.IntType(v.version.major),
    "minor": lambda v: celtypes.IntType(v.version.minor),
    "patch": lambda v: celtypes.IntType(v.version.patch),
    "lowerAscii": _string_fn(lambda s: s.lower() if s.isascii() else s),
    "upperAscii": _string_fn(lambda s: s.upper() if s.isascii() else s),
    "trim": _string_fn(str.strip),
    "replace": _string_fn(lambda s, old, new, n=-1: s.replace(str(old), str(new), int(n))),
    "split": _string_fn(lambda s, sep, n=-1: s.split(str(sep), int(n) - 1 if int(n) > 0 else -1)),
    "substring": _string_fn(lambda s, a, b=None: s[int(a) : None if b is None else int(b)]),
    "indexOf": _string_fn(lambda s, sub, start=0: s.find(str(sub), int(start))),
    "lastIndexOf": _string_fn(lambda s, sub: s.rfind(str(sub))),
    "charAt": _string_fn(lambda s, i: s[int(i)] if int(i) < len(s) else ""),
}

_ENV = celpy.Environment()
_NO_KEY = re.compile(r"no such member in mapping: '([^']*)'")


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Any:
    """The compiled program for ``expression``; :class:`SelectorError` if it does not compile."""
    try:
        return _ENV.program(_ENV.compile(expression), functions=FUNCTIONS)
    except CELParseError as err:
        first = str(err).splitlines()[0] if str(err) else "syntax error"
        raise SelectorError(f"CEL compile error: {first}") from None


def _runtime_message(err: BaseException) -> str:
    text = str(err.args[0]) if err.args else str(err)
    missing = _NO_KEY.search(text)
    if missing:
        return f"no such key: {missing[1]}"
    if "undeclared reference to '" in text:
        name = text.split("undeclared reference to '", 1)[1].split("'", 1)[0]
        return f"undeclared reference to '{name}'"
    return text.splitlines()[0][:300]


def matches(expression: str, variable: celtypes.MapType) -> bool:
    """Whether the device passes ``expression``; :class:`SelectorError` when the expression
    fails to compile, errs at run time or yields something other than a bool."""
    program = compile_selector(expression)
    try:
        result = program.evaluate({"device": variable})
    except CELEvalError as err:
        raise SelectorError(f"CEL runtime error: {_runtime_message(err)}") from None
    except (TypeError, ValueError, KeyError, ArithmeticError) as err:
        raise SelectorError(f"CEL runtime error: {err}") from None
    if isinstance(result, CELEvalError):
        raise SelectorError(f"CEL runtime error: {_runtime_message(result)}")
    if not isinstance(result, celtypes.BoolType | bool):
        raise SelectorError(f"CEL result type: expected bool, got {type(result).__name__}")
    return bool(result)
