"""Topologies and what gangs ask of them, read from the APIs users already write.

A *topology* is an ordered list of node label keys, coarse to fine (block → rack → host): Kueue's
``Topology`` (``kueue.x-k8s.io``), KAI Scheduler's ``Topology`` (``kai.scheduler``) and gang's
own settings all say it the same way, ``levels[].nodeLabel``. A gang asks for a *required*
level (never span two domains of it), a *preferred* one (try one domain of it, climb when none
holds the gang) and *slices* (groups of N members, each inside one domain of a level), in
whichever API its users write: Kueue's pod-template annotations, KAI's annotations, or the
native PodGroup's ``schedulingConstraints.topology``. Each becomes a :class:`TopologyAsk`
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


def level_name(label: str) -> str:
    """How a level reads in messages: the label key's name without its prefix, and without
    a ``topology-`` in front (``cloud.com/topology-rack`` → ``rack``)."""
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


@dataclass(frozen=True, slots=True)
class TopologyApi:
    """One Topology API: where its objects live; gang watches the first version served."""

    name: str
    group: str
    versions: tuple[str, ...]
    plural: str = "topologies"


TOPOLOGY_APIS: tuple[TopologyApi, ...] = (
    TopologyApi(KUEUE_TOPOLOGY, "kueue.x-k8s.io", ("v1beta2", "v1beta1", "v1alpha1")),
    TopologyApi(KAI_TOPOLOGY, "kai.scheduler", ("v1alpha1",)),
)
