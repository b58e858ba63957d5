"""Topologies and what gangs ask of them, read from the APIs users already write.

A *topology* is an ordered list of node label keys, coarse to fine (block → rack → host): Kueue's
``Topology`` (``kueue.x-k8s.io``), KAI Scheduler's ``Topology`` (``kai.scheduler``) and gang's
own settings all say it the same way, ``levels[].nodeLabel``; Volcano's HyperNode tiers are
levels too, with keys of gang's own (:func:`tier_key`; membership in ``gang.state.hypernodes``).
A gang asks for a *required* level (never span two domains of it), a *preferred* one (try one
domain of it, climb when none holds the gang) and *slices* (groups of N members, each inside one
domain of a level), in whichever API its users write: Kueue's pod-template annotations, KAI's annotations, the
native PodGroup's ``schedulingConstraints.topology``, or a Volcano PodGroup's
``networkTopology`` and ``subGroupPolicy``. Each becomes a :class:`TopologyAsk`
(label keys, as written); :func:`resolve` turns the asks of one gang and the topologies the
cluster declares into one :class:`TopologyConstraint` (level indices), or says clearly why it
cannot: an unknown level, a slice level above the gang's level, required finer than preferred,
two APIs asking different things. Nothing past this boundary reads an annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KUEUE_TOPOLOGY = "kueue"
KAI_TOPOLOGY = "kai"
SETTINGS_TOPOLOGY = "settings"
#: Volcano's HyperNodes, read as one topology whose levels are their tiers
VOLCANO_TOPOLOGY = "volcano"
#: the level key of a HyperNode tier (never a real node label: the prefix is gang's own)
TIER_PREFIX = "hypernode.volcano.sh/tier-"
#: where a Volcano PodGroup's ask is read
VOLCANO_SOURCE = "Volcano networkTopology"
#: Kueue's pod-template annotations (copied onto every pod of the pod set)
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
KUEUE_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
#: KAI Scheduler's annotations (on the workload, its pods or its group)
KAI_TOPOLOGY_NAME = "kai.scheduler/topology"
KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"
#: where the native PodGroup's ask is read: a plain node label, with no Topology object
NATIVE_SOURCE = "schedulingConstraints.topology"
#: every annotation an ask is read from (a snapshot keeps them)
TOPOLOGY_ANNOTATIONS = frozenset(
    {
        KUEUE_REQUIRED,
        KUEUE_PREFERRED,
        KUEUE_UNCONSTRAINED,
        KUEUE_SLICE_REQUIRED,
        KUEUE_SLICE_SIZE,
        KAI_TOPOLOGY_NAME,
        KAI_REQUIRED,
        KAI_PREFERRED,
    }
)
#: the node label of the finest level most topologies end with
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class Topology:
    """One declared topology: ``levels`` are node label keys, coarse to fine."""

    name: str
    api: str
    levels: tuple[str, ...] = ()
    #: why it is unusable (empty or repeated levels), or None
    error: str | None = None
    #: HyperNode tiers by their ``tierName`` (Volcano's only)
    tier_names: tuple[tuple[str, int], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.api}/{self.name}"


@dataclass(frozen=True, slots=True)
class TopologyAsk:
    """What one API says a gang asks of the topology: node label keys as written."""

    #: where it was read, for messages ("Kueue annotations", "KAI annotations", ...)
    source: str
    #: a topology by name (KAI names one); "" for any topology with these levels
    topology: str = ""
    required: str = ""
    preferred: str = ""
    #: Kueue's explicit "no constraint, but topology-aware" (least free capacity first)
    unconstrained: bool = False
    slice_level: str = ""
    slice_size: int = 0
    #: Volcano: the highest HyperNode tier the gang may span (by number, or by ``tierName``);
    #: ``hard``: never above it, else a preference only
    tier: int | None = None
    tier_name: str = ""
    hard: bool = True
    #: Volcano sub-groups: the tier each stays inside (by number or name), and the labels whose
    #: values name a member's sub-group
    slice_tier: int | None = None
    slice_tier_name: str = ""
    rank_labels: tuple[str, ...] = ()
    #: why what was written cannot be read (a slice size that is no number), or ""
    error: str = ""

    def wish(self) -> tuple[object, ...]:
        """What is asked, without where it was said (two APIs asking the same agree)."""
        return (
            self.topology,
            self.required,
            self.preferred,
            self.unconstrained,
            self.slice_level,
            self.slice_size,
            self.tier,
            self.tier_name,
            self.hard,
            self.slice_tier,
            self.slice_tier_name,
            self.rank_labels,
        )

    def describe(self) -> str:
        parts = []
        if self.required:
            parts.append(f"required {self.required}")
        if self.preferred:
            parts.append(f"preferred {self.preferred}")
        if self.slice_level:
            parts.append(f"slices of {self.slice_size} in {self.slice_level}")
        if self.unconstrained:
            parts.append("unconstrained")
        if self.tier is not None or self.tier_name:
            parts.append(
                f"{'hard' if self.hard else 'soft'}, highest tier {self.tier_name or self.tier}"
            )
        where = f" of topology {self.topology}" if self.topology else ""
        return (", ".join(parts) or "no level") + where


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """A gang's ask resolved against one topology: level indices into ``levels``."""

    topology: str
    levels: tuple[str, ...]
    required: int | None = None
    preferred: int | None = None
    #: slices: members per slice, and the level each slice stays inside (None: no slices)
    slice_level: int | None = None
    slice_size: int = 1
    unconstrained: bool = False
    #: labels whose values order the members before rank (a slice is one value's members)
    rank_labels: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = []
        if self.required is not None:
            parts.append(f"required {level_name(self.levels[self.required])}")
        if self.preferred is not None:
            parts.append(f"preferred {level_name(self.levels[self.preferred])}")
        if self.slice_level is not None:
            parts.append(
                f"slices of {self.slice_size} in one {level_name(self.levels[self.slice_level])}"
            )
        return ", ".join(parts) or "unconstrained"


def tier_key(tier: int) -> str:
    return f"{TIER_PREFIX}{tier}"


def tier_of(key: str) -> int | None:
    """The tier of a HyperNode level key; None for a real node label."""
    if not key.startswith(TIER_PREFIX):
        return None
    digits = key.removeprefix(TIER_PREFIX)
    return int(digits) if digits.isdigit() else None


def level_name(label: str) -> str:
    """How a level reads in messages: the label key's name without its prefix, and without
    a ``topology-`` in front (``cloud.com/topology-rack`` → ``rack``)."""
    tier = tier_of(label)
    if tier is not None:
        return f"HyperNode tier {tier}"
    name = label.rsplit("/", 1)[-1]
    return name.removeprefix("topology-") or label


# --- topologies ------------------------------------------------------------------------------


def parse_topology(raw: Mapping[str, Any], api: str) -> Topology:
    """A Kueue or KAI ``Topology`` object (both: ``spec.levels[].nodeLabel``)."""
    meta = raw.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    spec = raw.get("spec")
    levels = spec.get("levels") if isinstance(spec, Mapping) else None
    if not isinstance(levels, list) or not levels:
        return Topology(name, api, error="spec.levels: Required value: at least one level")
    labels: list[str] = []
    for i, level in enumerate(levels):
        label = level.get("nodeLabel") if isinstance(level, Mapping) else None
        if not isinstance(label, str) or not label:
            return Topology(name, api, error=f"spec.levels[{i}].nodeLabel: Required value")
        labels.append(label)
    return topology_of(name, api, labels)


def topology_of(name: str, api: str, labels: Sequence[str]) -> Topology:
    """A topology from its level labels, checked: at least one, none twice."""
    if not labels:
        return Topology(name, api, error="levels: at least one level is required")
    repeated = sorted({label for label in labels if list(labels).count(label) > 1})
    if repeated:
        return Topology(name, api, error=f"levels: {', '.join(repeated)} appears more than once")
    return Topology(name, api, tuple(labels))


# --- asks ------------------------------------------------------------------------------------


def asks_in_annotations(annotations: Any) -> list[TopologyAsk]:
    """The asks written as Kueue's and KAI's annotations (on a pod, or a group object)."""
    if not isinstance(annotations, Mapping):
        return []
    asks: list[TopologyAsk] = []
    kueue = _kueue(annotations)
    if kueue is not None:
        asks.append(kueue)
    kai = _kai(annotations)
    if kai is not None:
        asks.append(kai)
    return asks


def _text(annotations: Mapping[str, Any], key: str) -> str:
    value = annotations.get(key)
    return value.strip() if isinstance(value, str) else ""


def _kueue(annotations: Mapping[str, Any]) -> TopologyAsk | None:
    required = _text(annotations, KUEUE_REQUIRED)
    preferred = _text(annotations, KUEUE_PREFERRED)
    unconstrained = _text(annotations, KUEUE_UNCONSTRAINED)
    slice_level = _text(annotations, KUEUE_SLICE_REQUIRED)
    slice_size = _text(annotations, KUEUE_SLICE_SIZE)
    if not (required or preferred or unconstrained or slice_level or slice_size):
        return None
    source = "Kueue annotations"
    error = ""
    size = 0
    if sum(bool(x) for x in (required, preferred, unconstrained)) > 1:
        error = (
            "must not contain more than one topology annotation: "
            f'["{KUEUE_REQUIRED}", "{KUEUE_PREFERRED}", "{KUEUE_UNCONSTRAINED}"]'
        )
    elif unconstrained and unconstrained.lower() not in ("true", "false"):
        error = f"{KUEUE_UNCONSTRAINED}: must be a boolean value, got {unconstrained!r}"
    elif slice_size and not slice_level:
        error = f"{KUEUE_SLICE_SIZE}: may not be set when '{KUEUE_SLICE_REQUIRED}' is not specified"
    elif slice_level:
        if not slice_size:
            error = f"{KUEUE_SLICE_SIZE}: must be set when '{KUEUE_SLICE_REQUIRED}' is specified"
        elif not slice_size.isdigit():
            error = f"{KUEUE_SLICE_SIZE}: must be a numeric value, got {slice_size!r}"
        else:
            size = int(slice_size)
            if size < 1:
                error = f"{KUEUE_SLICE_SIZE}: must be greater than or equal to 1"
    return TopologyAsk(
        source,
        required=required,
        preferred=preferred,
        unconstrained=unconstrained.lower() == "true",
        slice_level=slice_level,
        slice_size=size,
        error=error,
    )


def _kai(annotations: Mapping[str, Any]) -> TopologyAsk | None:
    name = _text(annotations, KAI_TOPOLOGY_NAME)
    required = _text(annotations, KAI_REQUIRED)
    preferred = _text(annotations, KAI_PREFERRED)
    if not (name or required or preferred):
        return None
    error = ""
    if not (required or preferred):
        error = f"{KAI_TOPOLOGY_NAME} names a topology, but no level is required or preferred"
    return TopologyAsk(
        "KAI annotations", topology=name, required=required, preferred=preferred, error=error
    )


def native_ask(spec: Mapping[str, Any]) -> TopologyAsk | None:
    """The native PodGroup's ``spec.schedulingConstraints.topology`` (at most one ``{key}``,
    required: the gang inside one domain of that node label)."""
    constraints = spec.get("schedulingConstraints")
    if not isinstance(constraints, Mapping):
        return None
    topology = constraints.get("topology")
    if topology is None:
        return None
    source = NATIVE_SOURCE
    if not isinstance(topology, list) or len(topology) > 1:
        return TopologyAsk(source, error="must have at most 1 item")
    if not topology:
        return None
    key = topology[0].get("key") if isinstance(topology[0], Mapping) else None
    if not isinstance(key, str) or not key:
        return TopologyAsk(source, error="[0].key: Required value")
    return TopologyAsk(source, required=key)


def volcano_ask(spec: Mapping[str, Any]) -> TopologyAsk | None:
    """A Volcano PodGroup's ``spec.networkTopology`` and ``spec.subGroupPolicy``.

    ``networkTopology``: ``mode`` hard (default) or soft, and the highest tier the gang may
    span, ``highestTierAllowed`` (default 1) or ``highestTierName``. ``subGroupPolicy`` (one
    entry): pods with equal values of ``matchLabelKeys`` form a sub-group of ``subGroupSize``,
    each inside one HyperNode of its own hard ``networkTopology`` tier — gang's slices."""
    topology = spec.get("networkTopology")
    policies = spec.get("subGroupPolicy")
    if topology is None and not policies:
        return None
    source = VOLCANO_SOURCE
    tier, tier_name, hard = None, "", False
    if topology is not None:
        read = _tiers(topology, "networkTopology")
        if isinstance(read, str):
            return TopologyAsk(source, error=read)
        tier, tier_name, hard = read
    slice_tier, slice_tier_name, size, keys = None, "", 0, ()
    if policies:
        if not isinstance(policies, list) or len(policies) > 1:
            return TopologyAsk(source, error="subGroupPolicy: gang honours one policy per group")
        policy = policies[0] if isinstance(policies[0], Mapping) else {}
        size = policy.get("subGroupSize", 1)
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            return TopologyAsk(
                source, error=f"subGroupPolicy[0].subGroupSize: expected >= 1, got {size!r}"
            )
        raw_keys = policy.get("matchLabelKeys") or []
        if not isinstance(raw_keys, list) or not all(isinstance(k, str) for k in raw_keys):
            return TopologyAsk(source, error="subGroupPolicy[0].matchLabelKeys: expected labels")
        keys = tuple(raw_keys)
        if policy.get("networkTopology") is not None:
            read = _tiers(policy["networkTopology"], "subGroupPolicy[0].networkTopology")
            if isinstance(read, str):
                return TopologyAsk(source, error=read)
            if read[2]:  # a soft sub-group tier is a preference gang does not keep per slice
                slice_tier, slice_tier_name = read[0], read[1]
    return TopologyAsk(
        source,
        tier=tier,
        tier_name=tier_name,
        hard=hard,
        slice_size=size if (slice_tier is not None or slice_tier_name) else 0,
        slice_tier=slice_tier,
        slice_tier_name=slice_tier_name,
        rank_labels=keys,
    )


def _tiers(topology: Any, where: str) -> tuple[int | None, str, bool] | str:
    """A ``networkTopology``: (highest tier, or its name; hard), or why it cannot be read."""
    if not isinstance(topology, Mapping):
        return f"{where}: expected an object"
    mode = topology.get("mode", "hard")
    if mode not in ("hard", "soft"):
        return f'{where}.mode: Unsupported value: {mode!r}: supported values: "hard", "soft"'
    tier = topology.get("highestTierAllowed")
    name = topology.get("highestTierName")
    if tier is not None and name is not None:
        return f"{where}: highestTierAllowed and highestTierName cannot be set at the same time"
    if tier is not None and (not isinstance(tier, int) or isinstance(tier, bool) or tier < 0):
        return f"{where}.highestTierAllowed: expected a whole number >= 0, got {tier!r}"
    if name is not None and (not isinstance(name, str) or not name):
        return f"{where}.highestTierName: expected a tier name"
    return (None if name else (1 if tier is None else tier)), name or "", mode == "hard"


# --- resolution ------------------------------------------------------------------------------


def resolve(
    asks: Iterable[TopologyAsk], topologies: Sequence[Topology]
) -> TopologyConstraint | str | None:
    """One gang's asks against the declared topologies: the constraint, None when nothing is
    asked, or why what is asked cannot be honoured (a message for the gang's Event)."""
    found = list(asks)
    if not found:
        return None
    for ask in found:
        if ask.error:
            return f"{ask.source}: {ask.error}"
    first = found[0]
    for other in found[1:]:
        if other.wish() != first.wish():
            return (
                f"{first.source} ask {first.describe()}, but {other.source} ask "
                f"{other.describe()}: the gang's topology requests disagree"
            )
    if first.unconstrained and not first.slice_level:
        return None  # topology-aware, but no constraint: placed as every other gang
    return _against(first, topologies)


def _against(ask: TopologyAsk, topologies: Sequence[Topology]) -> TopologyConstraint | str:
    if ask.source == VOLCANO_SOURCE:
        return _against_hypernodes(ask, topologies)
    named = [x for x in (ask.required, ask.preferred, ask.slice_level) if x]
    usable = [t for t in topologies if t.error is None]
    if ask.topology:
        candidates = [t for t in usable if t.name == ask.topology]
        if not candidates:
            broken = [t for t in topologies if t.name == ask.topology and t.error]
            if broken:
                return f"topology {ask.topology} is invalid: {broken[0].error}"
            return f"{ask.source}: no topology named {ask.topology}"
    else:
        candidates = usable
    if not ask.topology:
        broken = [t for t in topologies if t.error]
        if not usable and broken:
            return f"topology {broken[0].key} is invalid: {broken[0].error}"
    fitting = [t for t in candidates if all(level in t.levels for level in named)]
    if not fitting and ask.source == NATIVE_SOURCE and not ask.topology:
        fitting = [topology_of(ask.required, "label", [ask.required])]  # the label alone
    if not fitting:
        roles = {"required": ask.required, "preferred": ask.preferred, "slice": ask.slice_level}
        missing = [
            f"{role} level {level}"
            for role, level in roles.items()
            if level and not any(level in t.levels for t in candidates)
        ] or ["levels " + ", ".join(named)]
        known = sorted({level for t in candidates for level in t.levels})
        return f"{ask.source}: no topology has the {' or '.join(missing)}" + (
            f" (levels known: {', '.join(known)})" if known else " (no topology is declared)"
        )
    topology = fitting[0]
    index = {label: i for i, label in enumerate(topology.levels)}
    required = index[ask.required] if ask.required else None
    preferred = index[ask.preferred] if ask.preferred else None
    if required is not None and preferred is not None and preferred < required:
        return (
            f"{ask.source}: the required level {ask.required} is finer than the preferred "
            f"level {ask.preferred}"
        )
    slice_level = index[ask.slice_level] if ask.slice_level else None
    if slice_level is not None:
        outer = required if required is not None else preferred
        if outer is not None and slice_level < outer:
            return (
                f"{ask.source}: podset slice topology {ask.slice_level} is above the podset "
                f"topology {ask.required or ask.preferred}"
            )
    return TopologyConstraint(
        topology.key,
        topology.levels,
        required=required,
        preferred=preferred if preferred != required else None,
        slice_level=slice_level,
        slice_size=max(1, ask.slice_size),
        # slices alone (Kueue): no level asked, so least free capacity, anywhere
        unconstrained=ask.unconstrained or (required is None and preferred is None),
    )


def _against_hypernodes(
    ask: TopologyAsk, topologies: Sequence[Topology]
) -> TopologyConstraint | str:
    """Volcano's ask over the HyperNode tiers: as low a tier as holds the gang (preferred: the
    lowest), never above the highest allowed one when the mode is hard; sub-groups each inside
    one HyperNode of their own highest tier."""
    found = [t for t in topologies if t.api == VOLCANO_TOPOLOGY and t.error is None]
    if not found:
        return f"{ask.source}: no HyperNode (topology.volcano.sh) describes the network"
    topology = found[0]
    tiers = [tier_of(level) or 0 for level in topology.levels]
    lowest = len(tiers) - 1
    required: int | None = None
    if ask.hard:
        found_level = _coarsest_within(ask.source, topology, tiers, ask.tier, ask.tier_name)
        if isinstance(found_level, str):
            return found_level
        required = found_level
    slice_level: int | None = None
    if ask.slice_tier is not None or ask.slice_tier_name:
        found_level = _coarsest_within(
            ask.source, topology, tiers, ask.slice_tier, ask.slice_tier_name
        )
        if isinstance(found_level, str):
            return found_level
        slice_level = found_level
        if required is not None and slice_level < required:
            return f"{ask.source}: a sub-group's highest tier is above the group's"
    return TopologyConstraint(
        topology.key,
        topology.levels,
        required=required,
        preferred=lowest if lowest != required else None,
        slice_level=slice_level,
        slice_size=max(1, ask.slice_size),
        rank_labels=ask.rank_labels,
    )


def _coarsest_within(
    source: str, topology: Topology, tiers: list[int], tier: int | None, name: str
) -> int | str:
    """The coarsest level whose tier is at most ``tier`` (or the tier named ``name``)."""
    highest = tier
    if name:
        highest = dict(topology.tier_names).get(name)
        if highest is None:
            named = ", ".join(sorted(n for n, _ in topology.tier_names)) or "none"
            return f"{source}: no HyperNode tier is named {name} (named: {named})"
    allowed = [i for i, t in enumerate(tiers) if highest is not None and t <= highest]
    if not allowed:
        return (
            f"{source}: no HyperNode tier at or below {highest} "
            f"(tiers: {', '.join(str(t) for t in sorted(tiers))})"
        )
    return allowed[0]


# --- the APIs --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopologyApi:
    """One topology API: where its objects live; gang watches the first version served."""

    name: str
    group: str
    versions: tuple[str, ...]
    plural: str = "topologies"
    kind: str = "Topology"


TOPOLOGY_APIS: tuple[TopologyApi, ...] = (
    TopologyApi(KUEUE_TOPOLOGY, "kueue.x-k8s.io", ("v1beta2", "v1beta1", "v1alpha1")),
    TopologyApi(KAI_TOPOLOGY, "kai.scheduler", ("v1alpha1",)),
    #: Volcano's HyperNodes: each object one node of the tree, together one topology
    TopologyApi(VOLCANO_TOPOLOGY, "topology.volcano.sh", ("v1alpha1",), "hypernodes", "HyperNode"),
)
