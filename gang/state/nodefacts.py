"""What the scheduler knows of a node apart from resources: labels, taints, schedulability.

Node JSON is parsed once per node update into an immutable ``NodeFacts`` that the cache keeps
per row and the Filter checks (``gang.scheduling.predicates``) read on the hot path. Malformed
pieces of a node are skipped rather than raised: one odd node must not blind the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from gang.state.podinfo import HostPort

BIND_ALL_HOST_IP: Final = "0.0.0.0"
DEFAULT_PROTOCOL: Final = "TCP"


@dataclass(frozen=True, slots=True)
class Taint:
    """One ``spec.taints`` entry of a node."""

    key: str
    value: str
    effect: str  # NoSchedule / PreferNoSchedule / NoExecute


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the filters need of a node, parsed once per node update."""

    name: str
    # Read-only view; left out of the hash (a mapping is unhashable) but still compared.
    labels: Mapping[str, str] = field(hash=False)
    taints: tuple[Taint, ...]
    unschedulable: bool
    # (ip, protocol, port) in use by pods on the node, maintained by the cache via used_host_ports
    used_host_ports: frozenset[tuple[str, str, int]]


# --------------------------------------------------------------------------- node parsing


def node_facts(
    raw_node: Mapping[str, Any],
    used_host_ports: frozenset[tuple[str, str, int]] = frozenset(),
) -> NodeFacts:
    """Build :class:`NodeFacts` from a raw Node JSON object.

    Malformed pieces (a non-mapping ``metadata``, a label with a non-string value, a taint without
    a string key or effect) are skipped rather than raised: one odd node must not stop the
    scheduler from seeing the others.
    """
    metadata = raw_node.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    spec = raw_node.get("spec")
    if not isinstance(spec, Mapping):
        spec = {}

    name = metadata.get("name")
    raw_labels = metadata.get("labels")
    labels: dict[str, str] = {}
    if isinstance(raw_labels, Mapping):
        labels = {k: v for k, v in raw_labels.items() if isinstance(k, str) and isinstance(v, str)}

    taints: list[Taint] = []
    raw_taints = spec.get("taints")
    if isinstance(raw_taints, list):
        for raw in raw_taints:
            taint = _parse_taint(raw)
            if taint is not None:
                taints.append(taint)

    return NodeFacts(
        name=name if isinstance(name, str) else "",
        labels=MappingProxyType(labels),
        taints=tuple(taints),
        unschedulable=spec.get("unschedulable") is True,
        used_host_ports=used_host_ports,
    )


def _parse_taint(raw: object) -> Taint | None:
    if not isinstance(raw, Mapping):
        return None
    key = raw.get("key")
    effect = raw.get("effect")
    value = raw.get("value")
    if value is None:
        value = ""
    if not isinstance(key, str) or not key or not isinstance(effect, str):
        return None
    if not isinstance(value, str):
        return None
    return Taint(key=key, value=value, effect=effect)


def host_port_key(port: HostPort) -> tuple[str, str, int] | None:
    """The ``(ip, protocol, port)`` a host port occupies, defaulted like the scheduler does.

    An empty IP means all addresses (``0.0.0.0``) and an empty protocol means TCP; a port of 0 or
    less requests no host port at all and yields ``None``.
    """
    if port.port <= 0:
        return None
    return (port.ip or BIND_ALL_HOST_IP, port.protocol or DEFAULT_PROTOCOL, port.port)


def used_host_ports(ports: Iterable[HostPort]) -> frozenset[tuple[str, str, int]]:
    """The ``NodeFacts.used_host_ports`` value for the host ports of the pods on a node.

    The cache passes every :class:`HostPort` of every pod assigned (or reserved) on the node, e.g.
    ``used_host_ports(p for c in pods for p in c.host_ports)``.
    """
    keys = (host_port_key(p) for p in ports)
    return frozenset(k for k in keys if k is not None)
