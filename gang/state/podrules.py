"""The placement rules a pod states about *other pods* and *volumes*, parsed once per pod.

Why this exists: node affinity and taints judge a node by its own facts, but pod affinity,
anti-affinity and topology spread judge it by the pods around it, and volumes by the claims the
pod mounts. These rules are read here, once per pod event, into frozen hashable values that sit
in :class:`gang.state.podinfo.Constraints`, so members stamped from one template share them and
the plugins never walk JSON on the hot path.

What is resolved at parse time, as the API server and kube-scheduler do before any Filter runs:
- an affinity term without ``namespaces`` and ``namespaceSelector`` means the pod's namespace;
- ``matchLabelKeys`` / ``mismatchLabelKeys`` become ``In`` / ``NotIn`` requirements carrying the
  pod's own label values (keys the pod lacks are ignored);
- a spread constraint's defaults (``nodeAffinityPolicy: Honor``, ``nodeTaintsPolicy: Ignore``);
- a generic ephemeral volume names its claim ``<pod>-<volume>``.

Fields kube-scheduler reads that gang cannot honour yet are listed in ``unsupported`` so the pod
is refused loudly instead of placed against a rule it did not check. ``spec.resourceClaims`` (the
devices of dynamic resource allocation) are read as references; the claims themselves are
``gang.state.dra``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gang.state.labels import (
    NOTHING,
    LabelSelector,
    NodeSelectorTerm,
    SelectorError,
    label_key_requirements,
    parse_selector,
)

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"

#: in-tree volume sources whose node restrictions (VolumeRestrictions, zone labels) gang does not
#: check: a pod using one is refused rather than placed blind
UNSUPPORTED_VOLUME_SOURCES: Final = (
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "azureDisk",
    "iscsi",
    "rbd",
    "cinder",
)


class RuleError(ValueError):
    """A rule that cannot be read; the message starts with the field's path."""


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One ``podAffinityTerm``, namespaces resolved."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector  # NOTHING when absent
    topology_key: str
    #: computed once: terms key the pod index and are grouped on every placement
    _hash: int = field(default=0, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        fields = (self.selector, self.namespaces, self.namespace_selector, self.topology_key)
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash

    def matches(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]
    ) -> bool:
        """``AffinityTerm.Matches``: the pod's namespace is listed or selected, and its labels
        match."""
        if namespace not in self.namespaces and not self.namespace_selector.matches(
            namespace_labels
        ):
            return False
        return self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """``spec.affinity.podAffinity`` and ``podAntiAffinity``, required and preferred."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    preferred_anti: tuple[WeightedTerm, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.required or self.required_anti or self.preferred or self.preferred_anti)


NO_POD_AFFINITY: Final = PodAffinity()


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One ``topologySpreadConstraints`` entry, ``matchLabelKeys`` merged into the selector."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector
    min_domains: int | None = None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


# --------------------------------------------------------------------------- readers


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RuleError(f"{where}: expected a list")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RuleError(f"{where}: expected an object")
    return value


def _term(raw: Any, where: str, namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    term = _object(raw, where)
    # the API server refuses an empty key; kube-scheduler, handed one, finds no node carrying it
    topology_key = term.get("topologyKey") or ""
    if not isinstance(topology_key, str):
        raise RuleError(f"{where}.topologyKey: expected a string")
    try:
        selector = parse_selector(term.get("labelSelector"), f"{where}.labelSelector")
        extra = label_key_requirements(
            term.get("matchLabelKeys"), labels, "In", f"{where}.matchLabelKeys"
        ) + label_key_requirements(
            term.get("mismatchLabelKeys"), labels, "NotIn", f"{where}.mismatchLabelKeys"
        )
        raw_ns_selector = term.get("namespaceSelector")
        namespace_selector = parse_selector(raw_ns_selector, f"{where}.namespaceSelector")
    except SelectorError as err:
        raise RuleError(str(err)) from None
    namespaces = _list(term.get("namespaces"), f"{where}.namespaces")
    if not all(isinstance(n, str) for n in namespaces):
        raise RuleError(f"{where}.namespaces: expected a list of strings")
    if not namespaces and raw_ns_selector is None:
        namespaces = [namespace]
    return AffinityTerm(
        selector.with_requirements(extra), frozenset(namespaces), namespace_selector, topology_key
    )


def _weighted(raw: Any, where: str, namespace: str, labels: Mapping[str, str]) -> WeightedTerm:
    entry = _object(raw, where)
    weight = entry.get("weight")
    if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
        raise RuleError(f"{where}.weight: must be in the range 1-100")
    return WeightedTerm(
        weight, _term(entry.get("podAffinityTerm"), f"{where}.podAffinityTerm", namespace, labels)
    )


def parse_pod_affinity(affinity: Any, namespace: str, labels: Mapping[str, str]) -> PodAffinity:
    """``spec.affinity``'s pod affinity and anti-affinity (node affinity is read elsewhere)."""
    if not affinity:
        return NO_POD_AFFINITY
    affinity = _object(affinity, "spec.affinity")
    parts: dict[str, Any] = {}
    for name, prefix in (("podAffinity", ""), ("podAntiAffinity", "_anti")):
        where = f"spec.affinity.{name}"
        raw = affinity.get(name)
        if not raw:
            continue
        section = _object(raw, where)
        required = f"{where}.requiredDuringSchedulingIgnoredDuringExecution"
        preferred = f"{where}.preferredDuringSchedulingIgnoredDuringExecution"
        parts["required" + prefix] = tuple(
            _term(t, f"{required}[{i}]", namespace, labels)
            for i, t in enumerate(
                _list(section.get("requiredDuringSchedulingIgnoredDuringExecution"), required)
            )
        )
        parts["preferred" + prefix] = tuple(
            _weighted(t, f"{preferred}[{i}]", namespace, labels)
            for i, t in enumerate(
                _list(section.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred)
            )
        )
    result = PodAffinity(**parts)
    return result if result else NO_POD_AFFINITY


def parse_spread(raw: Any, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    """``spec.topologySpreadConstraints``."""
    constraints: list[SpreadConstraint] = []
    for i, item in enumerate(_list(raw, "spec.topologySpreadConstraints")):
        where = f"spec.topologySpreadConstraints[{i}]"
        entry = _object(item, where)
        max_skew = entry.get("maxSkew")
        if not isinstance(max_skew, int) or isinstance(max_skew, bool) or max_skew < 1:
            raise RuleError(f"{where}.maxSkew: must be greater than zero")
        topology_key = entry.get("topologyKey") or ""
        if not isinstance(topology_key, str):
            raise RuleError(f"{where}.topologyKey: expected a string")
        when = entry.get("whenUnsatisfiable")
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise RuleError(
                f"{where}.whenUnsatisfiable: supported values: "
                f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
            )
        min_domains = entry.get("minDomains")
        if min_domains is not None and (
            not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains < 1
        ):
            raise RuleError(f"{where}.minDomains: must be greater than zero")
        policies = []
        for name, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
            value = entry.get(name) or default
            if value not in (HONOR, IGNORE):
                raise RuleError(f'{where}.{name}: supported values: "{HONOR}", "{IGNORE}"')
            policies.append(str(value))
        try:
            selector = parse_selector(entry.get("labelSelector"), f"{where}.labelSelector")
            extra = label_key_requirements(
                entry.get("matchLabelKeys"), labels, "In", f"{where}.matchLabelKeys"
            )
        except SelectorError as err:
            raise RuleError(str(err)) from None
        if extra and selector is NOTHING:
            selector = LabelSelector()
        constraints.append(
            SpreadConstraint(
                max_skew,
                topology_key,
                str(when),
                selector.with_requirements(extra),
                min_domains,
                policies[0],
                policies[1],
            )
        )
    return tuple(constraints)


def parse_claims(spec: Mapping[str, Any], pod_name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(PersistentVolumeClaim names the pod mounts, unsupported volume sources it uses)."""
    claims: list[str] = []
    unsupported: list[str] = []
    for i, raw in enumerate(_list(spec.get("volumes"), "spec.volumes")):
        volume = _object(raw, f"spec.volumes[{i}]")
        pvc = volume.get("persistentVolumeClaim")
        if pvc is not None:
            name = _object(pvc, f"spec.volumes[{i}].persistentVolumeClaim").get("claimName")
            if not isinstance(name, str) or not name:
                raise RuleError(f"spec.volumes[{i}].persistentVolumeClaim.claimName: required")
            claims.append(name)
        elif volume.get("ephemeral") is not None:
            claims.append(f"{pod_name}-{volume.get('name')}")
        for source in UNSUPPORTED_VOLUME_SOURCES:
            if volume.get(source) is not None:
                unsupported.append(f"spec.volumes[{i}].{source}")
    return tuple(dict.fromkeys(claims)), tuple(unsupported)


@dataclass(frozen=True, slots=True)
class DeviceClaimRef:
    """One entry of ``spec.resourceClaims``: a ResourceClaim by name, or one the resourceclaim
    controller makes for the pod from a template (its name then read from the pod's
    ``status.resourceClaimStatuses``)."""

    name: str
    claim_name: str | None = None
    template_name: str | None = None


def parse_device_claims(spec: Mapping[str, Any]) -> tuple[DeviceClaimRef, ...]:
    """``spec.resourceClaims`` (dynamic resource allocation), as the API server validates it."""
    refs: list[DeviceClaimRef] = []
    for i, raw in enumerate(_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        entry = _object(raw, f"spec.resourceClaims[{i}]")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise RuleError(f"spec.resourceClaims[{i}].name: Required value")
        claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        if (claim is None) == (template is None):
            raise RuleError(
                f"spec.resourceClaims[{i}]: Invalid value: must specify one of: "
                "`resourceClaimName`, `resourceClaimTemplateName`"
            )
        for field_name, value in (
            ("resourceClaimName", claim),
            ("resourceClaimTemplateName", template),
        ):
            if value is not None and (not isinstance(value, str) or not value):
                raise RuleError(f"spec.resourceClaims[{i}].{field_name}: must be a name")
        refs.append(DeviceClaimRef(name, claim, template))
    return tuple(refs)


@dataclass(frozen=True, slots=True)
class PodRules:
    """Everything besides :class:`~gang.state.podinfo.Constraints` that decides where a pod may
    go or would rather go: rules about other pods, preferred node affinity, volumes, and the
    fields gang refuses. Kept apart from Constraints so the per-template cache of node-only
    Filter verdicts is not split by, say, a per-pod ephemeral claim name."""

    pod_affinity: PodAffinity = NO_POD_AFFINITY
    spread: tuple[SpreadConstraint, ...] = ()
    #: ``preferredDuringSchedulingIgnoredDuringExecution`` node affinity: (weight, term)
    preferred_nodes: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    #: PersistentVolumeClaims the pod mounts (generic ephemeral volumes included)
    claims: tuple[str, ...] = ()
    #: fields gang cannot honour yet, as paths with a word of explanation
    unsupported: tuple[str, ...] = ()
    #: ResourceClaims the pod uses (dynamic resource allocation: devices)
    device_claims: tuple[DeviceClaimRef, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.pod_affinity
            or self.spread
            or self.preferred_nodes
            or self.claims
            or self.unsupported
            or self.device_claims
        )


NO_RULES: Final = PodRules()
