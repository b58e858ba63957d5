"""Tests for gang.models.quantity: the Kubernetes quantity grammar, rounding and formatting."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gang.models.quantity import (
    FORMAT_MESSAGE,
    INT64_MAX,
    INT64_MIN,
    QUANTITY_PATTERN,
    QuantityError,
    format_quantity,
    parse_quantity,
    quantity_to_int,
    quantity_to_milli,
)

KUBERNETES_MESSAGE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

VALID: list[tuple[str | int | float, Decimal]] = [
    ("0", Decimal(0)),
    ("1", Decimal(1)),
    ("007", Decimal(7)),
    ("100m", Decimal("0.1")),
    ("500m", Decimal("0.5")),
    ("1500m", Decimal("1.5")),
    ("1.5", Decimal("1.5")),
    ("1.", Decimal(1)),
    (".5", Decimal("0.5")),
    ("+.5", Decimal("0.5")),
    ("0.000", Decimal(0)),
    ("-0", Decimal(0)),
    ("1Ki", Decimal(1024)),
    ("2Mi", Decimal(2 * 1024**2)),
    ("2Gi", Decimal(2 * 1024**3)),
    ("8Gi", Decimal(8 * 1024**3)),
    ("1.5Gi", Decimal(3 * 1024**3 // 2)),
    ("1Ti", Decimal(1024**4)),
    ("1Pi", Decimal(1024**5)),
    ("1Ei", Decimal(1024**6)),
    ("0.5Ki", Decimal(512)),
    ("5n", Decimal("0.000000005")),
    ("12u", Decimal("0.000012")),
    ("1k", Decimal(1000)),
    ("1M", Decimal(10**6)),
    ("1G", Decimal(10**9)),
    ("1T", Decimal(10**12)),
    ("1P", Decimal(10**15)),
    ("1E", Decimal(10**18)),
    ("1e3", Decimal(1000)),
    ("1e+3", Decimal(1000)),
    ("1e03", Decimal(1000)),
    ("1E-3", Decimal("0.001")),
    ("5E-2", Decimal("0.05")),
    ("2.5e1", Decimal(25)),
    ("1e0", Decimal(1)),
    ("+1", Decimal(1)),
    ("-1", Decimal(-1)),
    ("-1.5Gi", Decimal(-3 * 1024**3 // 2)),
    ("-100m", Decimal("-0.1")),
    (
        "123456789012345678901234567890.123456789",
        Decimal("123456789012345678901234567890.123456789"),
    ),
    ("99999999999999999999999999999999Ei", Decimal(99999999999999999999999999999999 * 1024**6)),
    (0, Decimal(0)),
    (3, Decimal(3)),
    (-7, Decimal(-7)),
    (10**30, Decimal(10**30)),
    (0.1, Decimal("0.1")),
    (1.5, Decimal("1.5")),
    (1e20, Decimal(10**20)),
    (-0.25, Decimal("-0.25")),
]

INVALID = [
    "",
    " ",
    " 1",
    "1 ",
    "1\n",
    "\t1",
    "1.5.5",
    "1..5",
    "1KI",
    "1K",
    "1kb",
    "1KiB",
    "1 Gi",
    "1gi",
    "1mi",
    "Gi",
    "m",
    ".",
    "-",
    "+",
    "-.",
    ".Gi",
    "1e",
    "1E+",
    "1e-",
    "1e+-3",
    "1e3.5",
    "1kk",
    "1mm",
    "1Kii",
    "1m3",
    "1k-3",
    "1Ki3",
    "1e3m",
    "--1",
    "+-1",
    "++1",
    "1-",
    "0x10",
    "0b1",
    "1_000",
    "1,5",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "\u0661",  # ARABIC-INDIC DIGIT ONE: a digit, but not an ASCII one
    "\uff11",  # FULLWIDTH DIGIT ONE
    "1\u0660",
    "1e2147483648",  # exponent beyond int32
    "1e-2147483649",
    "1e" + "9" * 5000,
]


def test_pattern_and_message_are_kubernetes_verbatim() -> None:
    assert QUANTITY_PATTERN == r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
    assert FORMAT_MESSAGE == KUBERNETES_MESSAGE


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_parse_valid(text: str | int | float, expected: Decimal) -> None:
    result = parse_quantity(text)
    assert isinstance(result, Decimal)
    assert result == expected


@pytest.mark.parametrize("text", INVALID)
def test_parse_invalid_uses_kubernetes_message(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert str(info.value) == KUBERNETES_MESSAGE


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize("value", [True, False, None, [1], b"1", Decimal(1), object()])
def test_parse_rejects_non_string_non_number(value: Any) -> None:
    with pytest.raises(QuantityError, match=r"^quantity must be a string or a number$"):
        parse_quantity(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_parse_rejects_non_finite_floats(value: float) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_negative_zero_is_zero() -> None:
    assert not parse_quantity("-0").is_signed()
    assert not parse_quantity(-0.0).is_signed()


def test_parse_is_exact_beyond_default_decimal_precision() -> None:
    text = "1234567890123456789012345678901234567890.5"
    assert parse_quantity(text) == Decimal(text)
    assert quantity_to_milli("1234567890.123456789012345678901234567") == 1234567890124


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        ("0", 0, 0),
        ("1", 1000, 1),
        ("1n", 1, 1),
        ("999999n", 1, 1),
        ("1000001n", 2, 1),
        ("1u", 1, 1),
        ("1m", 1, 1),
        ("100m", 100, 1),
        ("1500m", 1500, 2),
        ("1.1", 1100, 2),
        ("1.0001", 1001, 2),
        ("2", 2000, 2),
        ("8Gi", 8 * 1024**3 * 1000, 8 * 1024**3),
        ("1e-12", 1, 1),
        ("-1.5", -1500, -1),
        ("-1n", 0, 0),
        ("-1.5m", -1, 0),
        ("-1999999n", -1, 0),
        ("-2.5", -2500, -2),
        ("1e2147483647", INT64_MAX, INT64_MAX),
        ("-1e2147483647", INT64_MIN, INT64_MIN),
        ("1e-2147483648", 1, 1),
        ("9223372036854775807", INT64_MAX, INT64_MAX),
        ("9223372036854775806", INT64_MAX, 9223372036854775806),
        ("10E", INT64_MAX, INT64_MAX),
    ],
)
def test_rounding_up_like_kubernetes(text: str, milli: int, whole: int) -> None:
    assert quantity_to_milli(text) == milli
    assert quantity_to_int(text) == whole


@pytest.mark.parametrize(
    ("value", "milli", "whole"),
    [
        (0, 0, 0),
        (3, 3000, 3),
        (-2, -2000, -2),
        (0.1, 100, 1),
        (0.0001, 1, 1),
        (-0.0001, 0, 0),
        (2.5, 2500, 3),
        (10**30, INT64_MAX, INT64_MAX),
        (-(10**30), INT64_MIN, INT64_MIN),
    ],
)
def test_rounding_of_numbers(value: int | float, milli: int, whole: int) -> None:
    assert quantity_to_milli(value) == milli
    assert quantity_to_int(value) == whole


@pytest.mark.parametrize("bad", ["1.5.5", "", True, float("nan")])
def test_conversions_reject_invalid(bad: Any) -> None:
    with pytest.raises(QuantityError):
        quantity_to_milli(bad)
    with pytest.raises(QuantityError):
        quantity_to_int(bad)


@pytest.mark.parametrize(
    ("value", "binary", "expected"),
    [
        (0, False, "0"),
        (0, True, "0"),
        (Decimal("0.000"), False, "0"),
        (Decimal("-0"), False, "0"),
        (8, False, "8"),
        (1000, False, "1000"),
        (-3, False, "-3"),
        (1024, False, "1024"),
        (1024, True, "1Ki"),
        (1536, True, "1536"),
        (32 * 1024**3, True, "32Gi"),
        (32 * 1024**3, False, "34359738368"),
        (3 * 1024**2, True, "3Mi"),
        (1024**4, True, "1Ti"),
        (1024**5, True, "1Pi"),
        (1024**6, True, "1Ei"),
        (1024**7, True, "1024Ei"),
        (-(2 * 1024**3), True, "-2Gi"),
        (Decimal("2048.000"), True, "2Ki"),
        (Decimal("1.5"), False, "1500m"),
        (Decimal("1.5"), True, "1500m"),
        (Decimal("0.1"), False, "100m"),
        (Decimal("0.100"), False, "100m"),
        (Decimal("-0.25"), False, "-250m"),
        (Decimal("0.000002"), False, "2u"),
        (Decimal("0.0000025"), False, "2500n"),
        (Decimal("0.000000005"), False, "5n"),
        (Decimal("1.5E-12"), False, "15e-13"),
        (Decimal("1E+2"), False, "100"),
        (10**40, False, "1e40"),
        (Decimal("1.23E+45"), False, "123e43"),
        (10**29, False, "1" + "0" * 29),
    ],
)
def test_format_quantity(value: Decimal | int, binary: bool, expected: str) -> None:
    assert format_quantity(value, binary=binary) == expected
    assert parse_quantity(expected) == value


@pytest.mark.parametrize("value", [Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity")])
def test_format_rejects_non_finite(value: Decimal) -> None:
    with pytest.raises(QuantityError):
        format_quantity(value)


@pytest.mark.parametrize("value", [True, 1.5, "1"])
def test_format_rejects_wrong_types(value: Any) -> None:
    with pytest.raises(QuantityError):
        format_quantity(value)


def test_format_rejects_exponent_beyond_int32() -> None:
    with pytest.raises(QuantityError):
        format_quantity(Decimal("1E+3000000000"))


# ---- property tests ---------------------------------------------------------------------------

_SUFFIX = re.compile(r"-?[0-9]+(Ki|Mi|Gi|Ti|Pi|Ei|m|u|n|e-?[0-9]+)?")


@given(st.integers(), st.booleans())
def test_format_roundtrips_integers(value: int, binary: bool) -> None:
    text = format_quantity(value, binary=binary)
    assert _SUFFIX.fullmatch(text), text
    assert parse_quantity(text) == value


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_format_roundtrips_milli_values(milli: int) -> None:
    value = Decimal(milli).scaleb(-3)
    text = format_quantity(value)
    assert parse_quantity(text) == value
    assert quantity_to_milli(text) == milli


@given(st.decimals(allow_nan=False, allow_infinity=False), st.booleans())
def test_format_roundtrips_decimals(value: Decimal, binary: bool) -> None:
    text = format_quantity(value, binary=binary)
    assert parse_quantity(text) == value


@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(["Ki", "Mi", "Gi", "Ti"]))
def test_binary_suffix_roundtrip(count: int, suffix: str) -> None:
    power = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4}[suffix]
    assert parse_quantity(f"{count}{suffix}") == count * 1024**power
    assert parse_quantity(format_quantity(count * 1024**power, binary=True)) == count * 1024**power


@given(st.text())
def test_parse_only_raises_quantity_error(text: str) -> None:
    try:
        result = parse_quantity(text)
    except QuantityError as error:
        assert str(error) == KUBERNETES_MESSAGE
    else:
        assert result.is_finite()
        # Anything accepted also matches the (looser) pattern Kubernetes quotes.
        assert re.fullmatch(QUANTITY_PATTERN[1:-1], text)
        # The conversions accept whatever parse accepts, and stay within int64.
        assert INT64_MIN <= quantity_to_int(text) <= INT64_MAX
        assert INT64_MIN <= quantity_to_milli(text) <= INT64_MAX


@given(
    st.from_regex(re.compile(r"[+-]?[0-9.]{1,6}[eEinumkKMGTP+-]{0,3}[0-9]{0,3}"), fullmatch=True)
)
def test_parse_on_near_miss_strings(text: str) -> None:
    try:
        result = parse_quantity(text)
    except QuantityError as error:
        assert str(error) == KUBERNETES_MESSAGE
    else:
        assert result.is_finite()
        # At most 6 + 3 + 3 digits of exponent: far from saturation, so ceil is checked exactly.
        whole, milli = quantity_to_int(text), quantity_to_milli(text)
        if abs(result) < 10**15:
            assert whole - 1 < result <= whole
            assert milli - 1 < result * 1000 <= milli
        else:
            assert whole == (INT64_MAX if result > 0 else INT64_MIN) or whole == result


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_parse_by_repr(value: float) -> None:
    assert parse_quantity(value) == Decimal(repr(value))
