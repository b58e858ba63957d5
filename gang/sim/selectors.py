"""Label and field selectors, parsed and matched the way the kube-apiserver does it.

Why this exists: the in-process API simulator must answer ``list``/``watch``/``deletecollection``
requests carrying ``labelSelector`` and ``fieldSelector`` query parameters exactly like a real
cluster, including the corner cases clients silently rely on (``!=`` and ``notin`` matching objects
that lack the label, ``spec.nodeName=`` selecting unassigned pods, backslash escapes in field
values) and the HTTP 400 the real server returns for a malformed selector. A scheduler that only
ever ran against a lenient fake would pass its tests and then fail against a real apiserver, so
this module ports the grammar of Go's ``k8s.io/apimachinery/pkg/labels.Parse`` and
``k8s.io/apimachinery/pkg/fields.ParseSelector`` (including their validation and error wording)
rather than approximating them.

Error messages are raised as :class:`SelectorError`; the simulator shows ``str(error)`` as the
``message`` of a ``BadRequest`` Status. Deliberate differences from the Go wording, chosen for
clarity, are: an invalid label *key* is reported under the path ``key`` (Go prints ``<nil>``), and
an unescaped ``,``/``=`` in a field value is shown as the character (Go prints its code point).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any

__all__ = [
    "FieldSelector",
    "FieldTerm",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "escape_field_value",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """Message is shown to the client as the Status message of an HTTP 400."""


# --------------------------------------------------------------------------------------------
# Validation (ports of k8s.io/apimachinery/pkg/util/validation, same wording)
# --------------------------------------------------------------------------------------------

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_QUALIFIED_NAME_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_MAX = 63

_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MAX = 253

_INT64_RE = re.compile("[+-]?[0-9]+")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def _byte_len(value: str) -> int:
    """Go measures string length in bytes, not code points."""
    return len(value.encode("utf-8", "surrogatepass"))


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    # Reproduces Go's RegexError byte for byte, including its double spaces before "or".
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errs: list[str] = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def _qualified_name_errors(value: str) -> list[str]:
    """Port of ``validation.IsQualifiedName``: label keys are ``[prefix/]name``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + msg for msg in _dns1123_subdomain_errors(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_NAME_ERR, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _byte_len(name) > _QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len_error(_QUALIFIED_NAME_MAX))
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        errs.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_ERR, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def _label_value_errors(value: str) -> list[str]:
    errs: list[str] = []
    if _byte_len(value) > _LABEL_VALUE_MAX:
        errs.append(_max_len_error(_LABEL_VALUE_MAX))
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        errs.append(
            _regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errs


def _go_quote(value: str) -> str:
    """Approximates Go's ``%q`` so bad values are shown unambiguously."""
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif not ch.isprintable():
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _invalid(path: str, value: str, detail: str) -> str:
    """Formats like ``field.Invalid(path, value, detail).Error()``."""
    return f"{path}: Invalid value: {_go_quote(value)}: {detail}"


def _aggregate(messages: list[str]) -> str:
    """Formats like Go's ``utilerrors.NewAggregate(...).Error()`` (deduplicated)."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def _parse_int64(text: str) -> int | None:
    """Like ``strconv.ParseInt(text, 10, 64)``: no underscores, spaces or non-ASCII digits."""
    if _INT64_RE.fullmatch(text) is None:
        return None
    number = int(text)
    if not _INT64_MIN <= number <= _INT64_MAX:
        return None
    return number


# --------------------------------------------------------------------------------------------
# Label selectors
# --------------------------------------------------------------------------------------------


class Operator(StrEnum):
    """Label requirement operators, spelled like Go's ``selection.Operator``."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


# The order (and the "gt"/"lt" spelling) is what Go lists in "expected: ..." messages.
_BINARY_OPERATORS = ", ".join(
    op.value
    for op in (
        Operator.IN,
        Operator.NOT_IN,
        Operator.EQUALS,
        Operator.DOUBLE_EQUALS,
        Operator.NOT_EQUALS,
        Operator.GREATER_THAN,
        Operator.LESS_THAN,
    )
)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One comma-separated term of a label selector; ``values`` is sorted and deduplicated."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        # GREATER_THAN / LESS_THAN: the label must exist and both sides must be int64.
        if self.key not in labels or len(self.values) != 1:
            return False
        have = _parse_int64(labels[self.key])
        want = _parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op is Operator.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(self.values)
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({joined})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{joined}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector: the AND of its requirements, sorted by key like Go does."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        present: Mapping[str, str] = labels if labels is not None else {}
        return all(req.matches(present) for req in self.requirements)

    def is_empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        """The canonical form Go's ``Selector.String()`` prints; it parses back to ``self``."""
        return ",".join(str(req) for req in self.requirements)


class _Tok(Enum):
    EOS = "end of string"
    CLOSE_PAR = ")"
    COMMA = ","
    NOT = "!"
    DOUBLE_EQUALS = "=="
    EQUALS = "="
    GREATER_THAN = ">"
    IDENTIFIER = "identifier"
    IN = "in"
    LESS_THAN = "<"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    OPEN_PAR = "("


_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")
_SYMBOLS: dict[str, _Tok] = {
    ")": _Tok.CLOSE_PAR,
    ",": _Tok.COMMA,
    "!": _Tok.NOT,
    "==": _Tok.DOUBLE_EQUALS,
    "=": _Tok.EQUALS,
    ">": _Tok.GREATER_THAN,
    "<": _Tok.LESS_THAN,
    "!=": _Tok.NOT_EQUALS,
    "(": _Tok.OPEN_PAR,
}
_KEYWORDS: dict[str, _Tok] = {"in": _Tok.IN, "notin": _Tok.NOT_IN}
_OPERATOR_TOKENS: dict[_Tok, Operator] = {
    _Tok.IN: Operator.IN,
    _Tok.NOT_IN: Operator.NOT_IN,
    _Tok.EQUALS: Operator.EQUALS,
    _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Tok.NOT_EQUALS: Operator.NOT_EQUALS,
    _Tok.GREATER_THAN: Operator.GREATER_THAN,
    _Tok.LESS_THAN: Operator.LESS_THAN,
}


def _lex(text: str) -> list[tuple[_Tok, str]]:
    """Tokenises like Go's ``labels.Lexer``: identifiers run until whitespace or a symbol."""
    items: list[tuple[_Tok, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            items.append((_Tok.EOS, ""))
            return items
        if text[i] in _SPECIAL:
            # Longest match; the only two-character symbols are "==" and "!=".
            pair = text[i : i + 2]
            lit = pair if pair in ("==", "!=") else text[i]
            items.append((_SYMBOLS[lit], lit))
            i += len(lit)
            continue
        start = i
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        lit = text[start:i]
        items.append((_KEYWORDS.get(lit, _Tok.IDENTIFIER), lit))


class _LabelParser:
    """Recursive-descent parser mirroring Go's ``labels.Parser`` step by step.

    As in Go, ``in``/``notin`` read in a "values" position (a key or a value) are plain
    identifiers, so ``in=notin`` and ``x in (in)`` are valid selectors.
    """

    def __init__(self, text: str) -> None:
        self._items = _lex(text)
        self._pos = 0

    def _lookahead(self, values: bool = True) -> tuple[_Tok, str]:
        tok, lit = self._items[self._pos]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENTIFIER
        return tok, lit

    def _consume(self, values: bool = True) -> tuple[_Tok, str]:
        item = self._lookahead(values)
        # Never step past EOS: the token list always ends with it.
        self._pos = min(self._pos + 1, len(self._items) - 1)
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self._lookahead()
            if tok is _Tok.EOS:
                return requirements
            if tok not in (_Tok.IDENTIFIER, _Tok.NOT):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except SelectorError as err:
                raise SelectorError(f"unable to parse requirement: {err}") from None
            tok, lit = self._consume()
            if tok is _Tok.EOS:
                return requirements
            if tok is not _Tok.COMMA:
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self._lookahead()
            if tok not in (_Tok.IDENTIFIER, _Tok.NOT):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        key, inferred = self._key_and_inferred_operator()
        if inferred is not None:
            return Requirement(key, inferred)
        op = self._operator()
        values = self._values() if op in (Operator.IN, Operator.NOT_IN) else self._exact_value()
        return _new_requirement(key, op, values)

    def _key_and_inferred_operator(self) -> tuple[str, Operator | None]:
        operator: Operator | None = None
        tok, lit = self._consume()
        if tok is _Tok.NOT:
            operator = Operator.DOES_NOT_EXIST
            tok, lit = self._consume()
        if tok is not _Tok.IDENTIFIER:
            raise SelectorError(f"found '{lit}', expected: identifier")
        errs = _qualified_name_errors(lit)
        if errs:
            raise SelectorError(_invalid("key", lit, "; ".join(errs)))
        # "!key" is unary even when an operator follows ("!a=b" then fails at the "=").
        if operator is None and self._lookahead()[0] in (_Tok.EOS, _Tok.COMMA):
            operator = Operator.EXISTS
        return lit, operator

    def _operator(self) -> Operator:
        tok, lit = self._consume(values=False)
        op = _OPERATOR_TOKENS.get(tok)
        if op is None:
            raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        return op

    def _values(self) -> set[str]:
        tok, lit = self._consume()
        if tok is not _Tok.OPEN_PAR:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self._lookahead()
        if tok is _Tok.CLOSE_PAR:  # "()" means the single empty value, as in Go
            self._consume()
            return {""}
        if tok not in (_Tok.IDENTIFIER, _Tok.COMMA):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._identifiers_list()
        tok, lit = self._consume()
        if tok is not _Tok.CLOSE_PAR:
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def _identifiers_list(self) -> set[str]:
        """Comma-separated, possibly empty values; stops with ``)`` as the next token."""
        values: set[str] = set()
        while True:
            tok, lit = self._consume()
            if tok is _Tok.IDENTIFIER:
                values.add(lit)
                nxt, nxt_lit = self._lookahead()
                if nxt is _Tok.COMMA:
                    continue
                if nxt is _Tok.CLOSE_PAR:
                    return values
                raise SelectorError(f"found '{nxt_lit}', expected: ',' or ')'")
            if tok is not _Tok.COMMA:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")
            if not values:
                values.add("")  # "(,"
            nxt, _ = self._lookahead()
            if nxt is _Tok.CLOSE_PAR:
                values.add("")  # ",)"
                return values
            if nxt is _Tok.COMMA:
                self._consume()
                values.add("")  # ",,"

    def _exact_value(self) -> set[str]:
        tok, _ = self._lookahead()
        if tok in (_Tok.EOS, _Tok.COMMA):
            return {""}
        tok, lit = self._consume()
        if tok is not _Tok.IDENTIFIER:
            raise SelectorError(f"found '{lit}', expected: identifier")
        return {lit}


def _new_requirement(key: str, op: Operator, values: set[str]) -> Requirement:
    """Validates the values of a binary requirement like Go's ``NewRequirement``."""
    ordered = tuple(sorted(values))
    errors: list[str] = []
    if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        errors.extend(
            _invalid(f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")
            for i, v in enumerate(ordered)
            if _parse_int64(v) is None
        )
    for i, value in enumerate(ordered):
        errs = _label_value_errors(value)
        if errs:
            errors.append(_invalid(f"values[{i}][{key}]", value, "; ".join(errs)))
    if errors:
        raise SelectorError(_aggregate(errors))
    return Requirement(key, op, ordered)


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parses a ``labelSelector`` query parameter; empty or ``None`` selects everything."""
    if not text:
        return LabelSelector()
    requirements = _LabelParser(text).parse()
    return LabelSelector(tuple(sorted(requirements, key=lambda req: req.key)))


# --------------------------------------------------------------------------------------------
# Field selectors
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldTerm:
    """``field=value`` (``negated`` False; ``==`` is the same) or ``field!=value``."""

    field: str
    value: str
    negated: bool = False

    def matches(self, obj: Mapping[str, Any]) -> bool:
        actual = _field_value(obj, self.field)
        return (actual == self.value) != self.negated

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negated else '='}{escape_field_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A parsed field selector: the AND of its terms (sorted like Go sorts the raw terms)."""

    terms: tuple[FieldTerm, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(term.matches(obj) for term in self.terms)

    def is_empty(self) -> bool:
        return not self.terms

    def required_value(self, field: str) -> str | None:
        """The value an ``=``/``==`` term demands for ``field``, for index lookups, else None.

        With several such terms for one field the first is returned; callers narrowing an
        index with it must still call :meth:`matches` on the candidates.
        """
        for term in self.terms:
            if term.field == field and not term.negated:
                return term.value
        return None

    def __str__(self) -> str:
        return ",".join(str(term) for term in self.terms)


def escape_field_value(value: str) -> str:
    """Escapes ``\\``, ``,`` and ``=`` so ``value`` can sit on the right of a field term."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    if not any(ch in value for ch in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for ch in value:
        if in_slash:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: '{ch}'")
        else:
            out.append(ch)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """Splits on commas that are not backslash-escaped (Go's ``splitTerms``)."""
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """Splits at the leftmost operator, preferring ``!=`` then ``==`` then ``=`` at a position."""
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _field_value(obj: Mapping[str, Any], path: str) -> str | None:
    """The string form of a dotted field; missing or null is "" like the apiserver's field sets.

    Returns None for a mapping or list, which equals no selector value.
    """
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return ""
        current = current[part]
    if current is None:
        return ""
    if isinstance(current, str):
        return current
    if isinstance(current, bool):  # Go renders bools with strconv.FormatBool
        return "true" if current else "false"
    if isinstance(current, Mapping | list | tuple | set):
        return None
    return str(current)


def parse_field_selector(text: str | None, supported: Collection[str]) -> FieldSelector:
    """Parses a ``fieldSelector`` query parameter, allowing only the ``supported`` fields.

    Whitespace is not trimmed (as in Go), and every term is parsed before unsupported
    fields are reported, so syntax errors win over ``field label not supported``.
    """
    if not text:
        return FieldSelector()
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, raw_value = split
        terms.append(FieldTerm(field, _unescape_field_value(raw_value), negated=op == "!="))
    for term in terms:
        if term.field not in supported:
            raise SelectorError(f"field label not supported: {term.field}")
    return FieldSelector(tuple(terms))
