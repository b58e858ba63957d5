"""Kubernetes resource quantities, parsed exactly and cheaply.

Why this exists: both halves of the project read ``resources.requests``/``limits`` strings. The
API simulator has to reject malformed quantities with the very message a kube-apiserver gives
(``k8s.io/apimachinery/pkg/api/resource.ParseQuantity``), or clients written against it would
behave differently in tests and in production. The scheduler has to add and compare those
quantities for every pod it sees, so parsing must be exact (no float drift: ``0.1 + 0.2`` CPU is
exactly ``300m``) and fast. Keeping one parser for both guarantees that what the simulator
accepts is precisely what the scheduler can account for.

Grammar (as implemented by ``ParseQuantity``)::

    quantity := sign? number suffix
    number   := digits | digits "." digits? | "." digits
    suffix   := "" | Ki Mi Gi Ti Pi Ei | n u m k M G T P E | (e|E) sign? digits

Deliberate differences from Go, all on inputs nobody should send:

* Go accepts a few degenerate strings that have no digit at all (``"."``, ``"-"``, ``"Gi"``) as
  zero; they are rejected here.
* Go reports an unknown suffix (``"1kk"``, ``"1e"``) as "unable to parse quantity's suffix";
  here every malformed string gets the format message, :data:`FORMAT_MESSAGE`.
* Go silently truncates a decimal exponent to 32 bits; exponents outside the int32 range are
  rejected here instead.
* :func:`parse_quantity` returns the exact value. Go rounds non-zero values away from zero to a
  whole nano-unit and caps ``DecimalSI``/``BinarySI`` values at ``2**63 - 1``; the integer
  conversions :func:`quantity_to_milli` and :func:`quantity_to_int` saturate at the int64 range
  instead, which yields the same answers for every value the scheduler can meaningfully use.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import (
    MAX_EMAX,
    MAX_PREC,
    MIN_EMIN,
    ROUND_CEILING,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
)
from typing import Final

__all__ = [
    "FORMAT_MESSAGE",
    "INT64_MAX",
    "INT64_MIN",
    "QUANTITY_PATTERN",
    "QuantityError",
    "format_quantity",
    "parse_quantity",
    "quantity_to_int",
    "quantity_to_milli",
    "resource_units",
]


class QuantityError(ValueError):
    """A value is not a valid Kubernetes quantity (or cannot be rendered as one)."""


#: The regular expression Kubernetes quotes in its error message. It is looser than the real
#: grammar (it would admit ``"."`` or ``"1kk"``), so it is only used for the message; the
#: validation itself uses :data:`_STRICT`.
QUANTITY_PATTERN: Final[str] = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

#: The exact text of ``resource.ErrFormatWrong``.
FORMAT_MESSAGE: Final[str] = f"quantities must match the regular expression '{QUANTITY_PATTERN}'"

_TYPE_MESSAGE: Final[str] = "quantity must be a string or a number"

#: Bounds of Go's int64, to which the integer conversions saturate.
INT64_MAX: Final[int] = 2**63 - 1
INT64_MIN: Final[int] = -(2**63)

# Go keeps the decimal exponent in an int32.
_MAX_EXPONENT: Final[int] = 2**31 - 1
_MIN_EXPONENT: Final[int] = -(2**31)

# Groups: sign, number, binary suffix, decimal SI suffix, exponent. Only ASCII digits; used with
# fullmatch so a trailing newline is not silently accepted (as "$" would).
_STRICT: Final[re.Pattern[str]] = re.compile(
    r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:([KMGTPE]i)|([numkMGTPE])|[eE]([+-]?[0-9]+))?"
)

_BINARY_POWER: Final[dict[str, int]] = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_EXPONENT: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final[tuple[tuple[int, str], ...]] = tuple(
    (1024**power, suffix)
    for suffix, power in sorted(_BINARY_POWER.items(), key=lambda item: -item[1])
)
_FRACTION_SUFFIXES: Final[tuple[tuple[int, str], ...]] = ((-3, "m"), (-6, "u"), (-9, "n"))

# Arithmetic here must never round: every operation below has an exact result, and Inexact is
# trapped so that a mistake shows up as an error instead of a silently wrong quantity. A huge
# precision limit costs nothing; mpdecimal only allocates the digits a result actually has.
_EXACT: Final[Context] = Context(
    prec=MAX_PREC,
    Emax=MAX_EMAX,
    Emin=MIN_EMIN,
    traps=[InvalidOperation, DivisionByZero, Overflow, Inexact],
)
_ZERO: Final[Decimal] = Decimal(0)

# Integer rendering: above this many digits an integer is written with an exponent instead.
_MAX_PLAIN_DIGITS: Final[int] = 30
# Binary suffixes are only tried for integers of at most this many digits (1024**6 has 19).
_MAX_BINARY_DIGITS: Final[int] = 60


@functools.lru_cache(maxsize=8192)
def _parse_string(text: str) -> Decimal:
    match = _STRICT.fullmatch(text)
    if match is None:
        raise QuantityError(FORMAT_MESSAGE)
    sign, number, binary, decimal_suffix, exponent_text = match.groups()
    if binary is not None:
        value = _EXACT.multiply(Decimal(number), Decimal(1024 ** _BINARY_POWER[binary]))
    else:
        if decimal_suffix is not None:
            exponent = _DECIMAL_EXPONENT[decimal_suffix]
        elif exponent_text is not None:
            # Bound the digit count before int(): leading zeros are legal ("1e007"), but a
            # thousand-digit exponent must not reach int()'s own digit limit.
            magnitude = exponent_text.lstrip("+-").lstrip("0") or "0"
            if len(magnitude) > 10:
                raise QuantityError(FORMAT_MESSAGE)
            exponent = -int(magnitude) if exponent_text[0] == "-" else int(magnitude)
            if not _MIN_EXPONENT <= exponent <= _MAX_EXPONENT:
                raise QuantityError(FORMAT_MESSAGE)
        else:
            exponent = 0
        # Decimal's string constructor is exact and independent of any context.
        value = Decimal(f"{number}E{exponent}")
    if value.is_zero():
        return _ZERO  # also folds "-0" into 0
    return value.copy_negate() if sign == "-" else value


def parse_quantity(value: str | int | float) -> Decimal:
    """Return the exact value of a quantity such as ``"500m"``, ``"8Gi"``, ``"1e3"``, ``2``.

    Strings follow ``resource.ParseQuantity``; ints are taken as they are; finite floats are
    taken by their shortest repr (``0.1`` is exactly one tenth). Negative values are returned as
    they are; whether they are allowed is the caller's decision.

    Raises :class:`QuantityError` for anything else, with Kubernetes' own message for a
    malformed string.
    """
    if isinstance(value, str):
        return _parse_string(value)
    if isinstance(value, bool):
        raise QuantityError(_TYPE_MESSAGE)
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(FORMAT_MESSAGE)
        return _parse_string(repr(value))
    raise QuantityError(_TYPE_MESSAGE)


def _ceil_scaled(value: Decimal, exponent: int) -> int:
    """``ceil(value * 10**exponent)``, saturated to the int64 range."""
    if value.is_zero():
        return 0
    scaled = _EXACT.scaleb(value, exponent)
    # adjusted() is the power of ten of the leading digit: >= 19 means |scaled| >= 10**19.
    if scaled.adjusted() >= 19:
        return INT64_MAX if scaled > 0 else INT64_MIN
    result = int(scaled.to_integral_value(rounding=ROUND_CEILING, context=_EXACT))
    return max(INT64_MIN, min(INT64_MAX, result))


def _saturate(value: int) -> int:
    return max(INT64_MIN, min(INT64_MAX, value))


@functools.lru_cache(maxsize=8192)
def _milli_of_string(text: str) -> int:
    return _ceil_scaled(_parse_string(text), 3)


@functools.lru_cache(maxsize=8192)
def _int_of_string(text: str) -> int:
    return _ceil_scaled(_parse_string(text), 0)


def quantity_to_milli(value: str | int | float) -> int:
    """``ceil(value * 1000)``, like ``Quantity.MilliValue()``: ``"1n"`` -> 1, ``"1.5"`` -> 1500.

    Rounding is towards +infinity (``"-1.5m"`` -> -1); results saturate at the int64 bounds.
    """
    if isinstance(value, str):
        return _milli_of_string(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _saturate(value * 1000)
    return _ceil_scaled(parse_quantity(value), 3)


def quantity_to_int(value: str | int | float) -> int:
    """``ceil(value)``, like ``Quantity.Value()``: ``"1.1"`` -> 2, ``"-1.5"`` -> -1, ``"1n"`` -> 1.

    Results saturate at the int64 bounds.
    """
    if isinstance(value, str):
        return _int_of_string(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _saturate(value)
    return _ceil_scaled(parse_quantity(value), 0)


def format_quantity(value: Decimal | int, binary: bool = False) -> str:
    """Render a value as a short quantity string that :func:`parse_quantity` reads back exactly.

    * integers plainly: ``8`` -> ``"8"``; with ``binary=True`` whole multiples of ``1024**n``
      take the largest binary suffix: ``32 * 2**30`` -> ``"32Gi"``, ``1536`` -> ``"1536"``;
    * fractions with the coarsest of ``m``/``u``/``n`` that keeps them whole:
      ``1.5`` -> ``"1500m"``, ``0.000002`` -> ``"2u"``;
    * anything finer, or integers longer than 30 digits, with a decimal exponent:
      ``1.5e-12`` -> ``"15e-13"``, ``10**40`` -> ``"1e40"``.
    """
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise QuantityError(_TYPE_MESSAGE)
    number = Decimal(value) if isinstance(value, int) else value
    if not number.is_finite():
        raise QuantityError(f"cannot format non-finite quantity {number}")
    if number.is_zero():
        return "0"
    sign_bit, digit_tuple, exponent = _EXACT.normalize(number).as_tuple()
    assert isinstance(exponent, int)  # finite, checked above
    sign = "-" if sign_bit else ""
    # Built from the digit tuple rather than str(int): no int<->str digit limit applies.
    digits = "".join(map(str, digit_tuple))

    if exponent >= 0:
        width = len(digits) + exponent
        if binary and width <= _MAX_BINARY_DIGITS:
            magnitude = int(digits) * 10**exponent
            for factor, suffix in _BINARY_SUFFIXES:
                if magnitude % factor == 0:
                    return f"{sign}{magnitude // factor}{suffix}"
        if width <= _MAX_PLAIN_DIGITS:
            return f"{sign}{digits}{'0' * exponent}"
    else:
        for scale, suffix in _FRACTION_SUFFIXES:
            if exponent >= scale:
                return f"{sign}{digits}{'0' * (exponent - scale)}{suffix}"
    if not _MIN_EXPONENT <= exponent <= _MAX_EXPONENT:
        raise QuantityError(f"quantity {number} is out of the representable range")
    return f"{sign}{digits}e{exponent}"


#: resources whose amounts read best with binary suffixes (bytes)
_BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def resource_units(resource: str, value: str | int | float) -> int:
    """A resource amount in the scheduler's integer units: millicores for ``cpu``, else whole units.

    Kubernetes accounts CPU by ``MilliValue()`` and every other resource (memory bytes,
    ephemeral-storage, pods, extended resources such as ``nvidia.com/gpu``) by ``Value()``.
    """
    return quantity_to_milli(value) if resource == "cpu" else quantity_to_int(value)


def units_text(resource: str, units: int) -> str:
    """An amount in the scheduler's units (:func:`resource_units`) as a quantity people read:
    ``cpu`` 1500 → ``"1500m"``, 4000 → ``"4"``; memory 32 Gi in bytes → ``"32Gi"``."""
    if resource == "cpu":
        return format_quantity(Decimal(units) / 1000)
    return format_quantity(units, binary=resource in _BINARY_RESOURCES)
