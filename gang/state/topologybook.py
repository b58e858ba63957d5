"""The topologies a cluster declares, and what each gang asks of them.

Topologies come from four places at once — gang's settings, Kueue's and KAI's ``Topology``
objects, Volcano's HyperNodes (one topology whose levels are their tiers) — and change while
gangs wait (a platform team adds a level). The book keeps them in one deterministic order
(settings, then Kueue, then KAI, then Volcano; by name within each), so a level two topologies
share always resolves to the same one, and answers for a gang: its constraint, None
when it asks nothing, or why its ask cannot be honoured (a message for its Event).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gang.models.podgroup import PodGroupInfo
from gang.models.settings import TopologyLevels
from gang.models.topologyapis import (
    KAI_TOPOLOGY,
    KUEUE_TOPOLOGY,
    SETTINGS_TOPOLOGY,
    VOLCANO_TOPOLOGY,
    Topology,
    TopologyAsk,
    TopologyConstraint,
    resolve,
    tier_key,
    topology_of,
)
from gang.state.hypernodes import HyperNode
from gang.state.podinfo import PodInfo

_API_ORDER = {SETTINGS_TOPOLOGY: 0, KUEUE_TOPOLOGY: 1, KAI_TOPOLOGY: 2, VOLCANO_TOPOLOGY: 3}
#: the topology Volcano's HyperNodes make
HYPERNODES = f"{VOLCANO_TOPOLOGY}/hypernodes"


class TopologyBook:
    def __init__(self, settings: Sequence[TopologyLevels] = ()) -> None:
        #: ``api/name`` → the topology (settings' ones never leave)
        self._declared: dict[str, Topology] = {}
        for levels in settings:
            topology = topology_of(levels.name, SETTINGS_TOPOLOGY, levels.levels)
            self._declared[topology.key] = topology
        self._ordered: list[Topology] | None = None

    def upsert(self, topology: Topology) -> bool:
        """Add or replace one; whether anything changed."""
        if self._declared.get(topology.key) == topology:
            return False
        self._declared[topology.key] = topology
        self._ordered = None
        return True

    def remove(self, key: str) -> bool:
        if self._declared.pop(key, None) is None:
            return False
        self._ordered = None
        return True

    def set_hypernodes(self, hypernodes: Iterable[HyperNode]) -> bool:
        """The HyperNodes' tiers as one topology, coarse to fine; whether it changed."""
        usable = [h for h in hypernodes if h.error is None]
        if not usable:
            return self.remove(HYPERNODES)
        tiers = sorted({h.tier for h in usable}, reverse=True)
        names = tuple(sorted({(h.tier_name, h.tier) for h in usable if h.tier_name}))
        levels = tuple(tier_key(t) for t in tiers)
        return self.upsert(Topology("hypernodes", VOLCANO_TOPOLOGY, levels, tier_names=names))

    def ordered(self) -> list[Topology]:
        if self._ordered is None:
            self._ordered = sorted(
                self._declared.values(), key=lambda t: (_API_ORDER.get(t.api, 9), t.name)
            )
        return self._ordered

    def constraint(
        self, group: PodGroupInfo | None, members: Iterable[PodInfo], min_member: int
    ) -> TopologyConstraint | str | None:
        """The gang's constraint from its group's asks and its members' (each distinct ask
        once: the members of a pod set carry the same annotations); slices must divide its
        ``min_member``."""
        asks: dict[TopologyAsk, None] = dict.fromkeys(group.topology if group else ())
        for pod in members:
            if pod.topology:
                asks.update(dict.fromkeys(pod.topology))
        found = resolve(asks, self.ordered())
        if isinstance(found, TopologyConstraint) and min_member % found.slice_size:
            return f"slices of {found.slice_size} members do not divide its minMember {min_member}"
        return found
