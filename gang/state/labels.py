"""Label selectors (``metav1.LabelSelector``) as small hashable values, and their matching.

Why this exists: pod affinity, anti-affinity and topology spread all ask "which pods carry these
labels?", for every member of a gang against every pod in the cluster. A selector is parsed once
per pod template into a :class:`LabelSelector` (hashable, so templates that share one share every
computation keyed on it) and answers :meth:`LabelSelector.matches` without touching JSON.
:meth:`LabelSelector.index_keys` tells the pod index which label pairs a matching term's
selector needs, so an incoming pod is matched against the few terms that could select it.

Semantics are apimachinery's ``LabelSelectorAsSelector``: ``matchLabels`` and
``matchExpressions`` are ANDed; an empty selector matches everything, an absent (nil) one
nothing; ``In``/``NotIn`` need values, ``Exists``/``DoesNotExist`` take none.

The node selector terms of node affinity (and of volumes' and devices' node restrictions) live
here too, as plain values, so the pod parser and the pod rules both build on this module.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sized
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

SELECTOR_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})

# Go regexes from k8s.io/apimachinery/pkg/util/validation, matched with re.fullmatch.
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions``/``matchFields`` entry of a core/v1 ``NodeSelectorTerm``; operator
    in ``gang.state.podinfo.NODE_SELECTOR_OPERATORS``."""

    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed together. A term with neither list empty matches no node (as in Go).

    ``match_fields`` supports only the key ``metadata.name``. Parsed by ``gang.state.podinfo``
    (which exports both), matched by ``gang.scheduling.predicates.term_matches``.
    """

    match_expressions: tuple[NodeSelectorRequirement, ...]
    match_fields: tuple[NodeSelectorRequirement, ...]


def is_label_key(key: str) -> bool:
    """A qualified name with an optional DNS subdomain prefix (``IsQualifiedName``)."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or _DNS1123_SUBDOMAIN.fullmatch(prefix) is None):
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """``IsValidLabelValue``: empty, or up to 63 alphanumerics with ``-_.`` inside."""
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


class SelectorError(ValueError):
    """A selector that cannot be read; the message starts with the field's path."""


def set_operator_matches(operator: str, values: Collection[str], value: str | None) -> bool | None:
    """``In`` / ``NotIn`` / ``Exists`` / ``DoesNotExist`` for a label's ``value`` (None: the
    object lacks the label); None for any other operator (node selectors add ``Gt`` / ``Lt``)."""
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    return None


#: an index's group of objects (a dict or list of them): only its size is read here
Group = TypeVar("Group", bound=Sized)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # one of SELECTOR_OPERATORS
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return set_operator_matches(self.operator, self.values, labels.get(self.key)) is True


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Requirements ANDed; ``nothing`` is the nil selector, which matches no object."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    #: computed once: selectors key the pod index and per-cycle caches
    _hash: int = field(default=0, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.requirements, self.nothing)))

    def __hash__(self) -> int:
        return self._hash

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(requirement.matches(labels) for requirement in self.requirements)

    def keys_read(self) -> frozenset[str]:
        """The label keys whose values decide whether it matches (none for ``nothing``)."""
        if self.nothing:
            return frozenset()
        return frozenset(requirement.key for requirement in self.requirements)

    def index_keys(self) -> list[tuple[str, str]] | None:
        """The label pairs of the most selective ``In`` requirement: every matching object
        carries one of them. ``None`` when no requirement narrows the search."""
        best: frozenset[str] | None = None
        key = ""
        for requirement in self.requirements:
            if requirement.operator == "In" and (
                best is None or len(requirement.values) < len(best)
            ):
                best, key = requirement.values, requirement.key
        return None if best is None else [(key, value) for value in sorted(best)]

    def narrowest(
        self,
        by_pair: Mapping[tuple[str, str], Group],
        by_key: Mapping[str, Group] | None = None,
    ) -> list[Group] | None:
        """The groups of an index (objects by label pair, and by key for ``Exists``) that
        every object this selects is in: those of the requirement the fewest indexed objects
        meet, counted. ``None``: no requirement narrows (only ``NotIn``/``DoesNotExist``, or
        ``Exists`` without ``by_key``). A per-replica Service's selector reads a label every
        pod of the operator carries beside the job's name: the count picks the name."""
        best: list[Group] | None = None
        fewest = 0
        for requirement in self.requirements:
            if requirement.operator == "In":
                values = requirement.values
                if len(values) == 1:  # (most: matchLabels)
                    group = by_pair.get((requirement.key, next(iter(values))))
                    groups = [] if group is None else [group]
                else:
                    pairs = ((requirement.key, value) for value in sorted(values))
                    groups = [by_pair[pair] for pair in pairs if pair in by_pair]
            elif requirement.operator == "Exists" and by_key is not None:
                groups = [by_key[requirement.key]] if requirement.key in by_key else []
            else:
                continue
            size = sum(len(group) for group in groups)
            if best is None or size < fewest:
                best, fewest = groups, size
                if not size:
                    break
        return best

    def with_requirements(self, more: tuple[Requirement, ...]) -> LabelSelector:
        if self.nothing or not more:
            return self
        return LabelSelector(self.requirements + more)


EVERYTHING: Final = LabelSelector()
NOTHING: Final = LabelSelector(nothing=True)


def parse_selector(raw: Any, where: str) -> LabelSelector:
    """A ``metav1.LabelSelector`` from JSON; ``None`` (absent) gives :data:`NOTHING`."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: expected an object")
    requirements: list[Requirement] = []
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise SelectorError(f"{where}.matchLabels: expected an object")
    for key, value in sorted(match_labels.items()):
        if not isinstance(key, str) or not isinstance(value, str):
            raise SelectorError(f"{where}.matchLabels[{key}]: expected a string value")
        _check_label(key, (value,), f"{where}.matchLabels")
        requirements.append(Requirement(key, "In", frozenset((value,))))
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError(f"{where}.matchExpressions: expected a list")
    for i, expression in enumerate(expressions):
        at = f"{where}.matchExpressions[{i}]"
        if not isinstance(expression, Mapping):
            raise SelectorError(f"{at}: expected an object")
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if not isinstance(key, str) or not key:
            raise SelectorError(f"{at}.key: required")
        if operator not in SELECTOR_OPERATORS:
            raise SelectorError(f"{at}.operator: not a valid selector operator: {operator!r}")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"{at}.values: expected a list of strings")
        if operator in ("In", "NotIn") and not values:
            raise SelectorError(
                f"{at}.values: must be specified when `operator` is 'In' or 'NotIn'"
            )
        if operator in ("Exists", "DoesNotExist") and values:
            raise SelectorError(
                f"{at}.values: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        _check_label(key, values, at)
        requirements.append(Requirement(key, str(operator), frozenset(values)))
    return LabelSelector(tuple(requirements))


def _check_label(key: str, values: Any, where: str) -> None:
    """Refuse what ``labels.NewRequirement`` refuses: an invalid key or value."""
    if not is_label_key(key):
        raise SelectorError(f"{where}: invalid label key {key!r}")
    for i, value in enumerate(values):
        if not is_label_value(value):
            raise SelectorError(
                f"{where}.values[{i}]: Invalid value: {value!r}: a valid label must be an empty "
                "string or consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character"
            )


def label_key_requirements(
    keys: Any, labels: Mapping[str, str], operator: str, where: str
) -> tuple[Requirement, ...]:
    """``matchLabelKeys`` (``In``) / ``mismatchLabelKeys`` (``NotIn``): one requirement per key
    the pod carries, with the pod's own value (keys it lacks are ignored, as upstream does)."""
    if keys is None:
        return ()
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise SelectorError(f"{where}: expected a list of strings")
    return tuple(
        Requirement(key, operator, frozenset((labels[key],))) for key in keys if key in labels
    )
