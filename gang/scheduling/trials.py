"""Trial placements: one gang placed on variants of one snapshot, for decisions that ask "what if".

Preemption asks "would the gang fit if these pods were evicted?", reservation "would it fit once
these pods have finished?" and "would it fit the cluster if it were empty?". Both answer through
the *same* placement every gang goes through, so every placement rule holds for the answer: the
variant is the base snapshot with capacity added back (``free``), host ports released and the
removed pods taken out of the pod index for the duration of the (synchronous) trial.

A cheap necessary condition (:meth:`Trials.bound_ok`: free slots per member shape on the nodes
its static filters allow) skips placements that cannot succeed.

Capacity held by reservations: a snapshot whose ``free`` had reservation holds subtracted keeps
the free *before* them in ``unheld`` and the holds in ``held``. A trial adds capacity to the
unheld free and subtracts the holds again (never below zero, and never from what the gang held
itself, ``kept``), so capacity freed on a held node stays held — unless the trial passes
holds of its own (``held``: reservation planning, where holds ahead come free in their turn).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from gang.models.topologyapis import TopologyConstraint
from gang.scheduling.placement import Placement, Placer, Unplaceable
from gang.state.cache import PodRecord, Snapshot
from gang.state.podindex import PodIndex
from gang.state.podinfo import PodInfo
from gang.state.podrules import NO_RULES
from gang.state.resources import ResourceIndex, copies_fitting

Key = tuple[str, str]
Free = npt.NDArray[np.int64]
#: per distinct member shape: the rows its static filters allow, its request vector, how many
Template = tuple[npt.NDArray[np.bool_], Free, int]


class Trials:
    """Place ``need`` of ``pods`` on variants of ``base`` (state lives for one decision)."""

    def __init__(
        self,
        base: Snapshot,
        pods: Sequence[PodInfo],
        need: int,
        anchors: Sequence[str],
        placer: Placer,
        index: ResourceIndex,
        topology: TopologyConstraint | None = None,
        required: Sequence[PodInfo] = (),
    ) -> None:
        self.base = base
        self.topology = topology
        self.pods = pods
        self.need = need
        #: members placed first, as a whole (``Placer.place``): the cycle's own order
        self.required = required
        self.anchors = anchors
        self.placer = placer
        self.index = index
        self.width = base.free.shape[1]
        #: placements run so far
        self.count = 0
        #: each pod's request vector, cut to the snapshot's width
        self.vectors: dict[Key, Free] = {}
        self.templates = self._templates()
        self.rules_matter = self._rules_matter()

    @property
    def unheld(self) -> Free:
        """The base free capacity before any reservation hold (a copy to mutate)."""
        base = self.base
        return (base.unheld if base.unheld is not None else base.free).copy()

    def usable(self, unheld: Free, held: Free | None = None) -> Free:
        """What the gang may use of ``unheld``: the holds (``held``, else the snapshot's) taken
        off again, never below zero, except from what the gang itself held (``Snapshot.kept``)."""
        return usable(unheld, self.base.held if held is None else held, self.base.kept)

    def vector(self, rec: PodRecord) -> Free:
        return self.index.fit(rec.vector)[: self.width]

    def add(self, free: Free, records: Sequence[PodRecord], sign: int, row_of: Any) -> None:
        """Give back (``sign`` +1) or take (-1) the records' requests on their nodes."""
        for rec in records:
            row = row_of(rec.node)
            if row is not None:
                free[row] += sign * self.vector(rec)

    # --- the checks -------------------------------------------------------------------------

    def bound_ok(self, unheld: Free, held: Free | None = None) -> bool:
        """A necessary condition for placing ``need`` members: enough free slots per shape."""
        return _bound(self.templates, self.usable(unheld, held), self.need)

    def slots(self, room: Free, row: int) -> int:
        """How many members of the gang's main shape fit in ``room`` on node ``row``."""
        mask, vec, _ = self.templates[0]
        if not mask[row]:
            return 0
        positive = vec > 0
        if not positive.any():
            return self.need
        return max(0, int(np.min(room[positive] // vec[positive])))

    def place(
        self,
        unheld: Free,
        removed: Sequence[PodRecord],
        counted: bool = True,
        held: Free | None = None,
    ) -> Placement | None:
        """Place the gang on the snapshot with ``unheld`` free capacity and ``removed`` gone
        (and ``held`` held, when some holds are taken to have ended)."""
        if counted:
            self.count += 1
        base = self.base
        ports = dict(base.used_ports)
        for rec in removed:
            if rec.host_ports and rec.node in ports:
                counter = ports[rec.node].copy()
                counter.subtract(rec.host_ports)
                ports[rec.node] = +counter
        released = base.devices.released_by(rec.uid for rec in removed)
        snap = replace(
            base,
            free=self.usable(unheld, held).copy(),
            used_ports=ports,
            released_claims=base.released_claims | released,
            trial="later",
        )
        with without(base.pods, removed, self.rules_matter):
            result = self.placer.place(
                snap, self.pods, self.need, self.anchors, self.topology, self.required
            )
        return result if isinstance(result, Placement) else None

    def place_empty(self) -> Placement | None:
        """Place the gang on the cluster as if no pod ran anywhere and nothing were held."""
        result = self.empty_result()
        return result if isinstance(result, Placement) else None

    def empty_result(self) -> Placement | Unplaceable:
        """The placement on the empty cluster, or why it fails there (the gang can never fit)."""
        base = self.base
        snap = replace(
            base,
            free=np.where(base.valid[:, None], base.allocatable, 0),
            used_ports={},
            pods=PodIndex(),
            released_claims=base.devices.every_claim(),
            unheld=None,
            held=None,
            kept=None,
            trial="empty",
        )
        return self.placer.place(snap, self.pods, self.need, (), self.topology, self.required)

    def fits_empty(self) -> bool:
        """Whether the gang fits the cluster were it empty: the bound first, then placement."""
        empty = np.where(self.base.valid[:, None], self.base.allocatable, 0)
        return _bound(self.templates, empty, self.need) and self.place_empty() is not None

    # --- set-up -------------------------------------------------------------------------------

    def _templates(self) -> list[Template]:
        found: dict[tuple[Any, bytes], list[Any]] = {}
        for pod in self.pods:
            vec = self.index.requests_vector(pod.requests)[: self.width]
            self.vectors[pod.key] = vec
            key = (pod.constraints, vec.tobytes())
            entry = found.get(key)
            if entry is None:
                mask = self.placer.static(self.base, pod.constraints).mask
                found[key] = [mask, vec, 1]
            else:
                entry[2] += 1
        return [(m, v, n) for m, v, n in found.values()]

    def useful_rows(self) -> npt.NDArray[np.bool_]:
        """Nodes some member's static filters allow."""
        useful = np.zeros(len(self.base.names), dtype=np.bool_)
        for mask, _, _ in self.templates:
            useful |= mask
        return useful

    def _rules_matter(self) -> bool:
        """Whether placement may look at other pods (else the index need not change)."""
        base = self.base
        return (
            base.pods.has_terms()
            or any(p.rules is not NO_RULES for p in self.pods)
            or bool(base.selecting.services or base.selecting.controllers)
        )


def usable(unheld: Free, held: Free | None, kept: Free | None) -> Free:
    """Free capacity with reservation holds taken off, except what the gang held itself; never
    more than ``unheld`` (a dropped nomination on a node whose victims still run frees nothing
    yet), and never below zero unless ``unheld`` already is."""
    if held is None:
        return unheld
    own = 0 if kept is None else np.minimum(kept, np.maximum(unheld, 0))
    out: Free = np.minimum(unheld, np.maximum(unheld - own - held, 0) + own)
    return out


def _bound(templates: Sequence[Template], free: Free, need: int) -> bool:
    """Enough free slots for ``need`` members, counting each shape on the rows it may use."""
    slots = 0
    for mask, vec, count in templates:
        positive = vec > 0
        if not positive.any():
            slots += count
            continue
        rows = free[mask]
        if len(rows):
            slots += min(count, int(copies_fitting(rows, vec).sum()))
    return slots >= need


@contextmanager
def without(index: PodIndex, records: Sequence[PodRecord], active: bool) -> Iterator[None]:
    """The pod index without ``records`` for the duration (synchronous: nothing else runs)."""
    removed: list[tuple[PodInfo, str]] = []
    if active:
        for rec in records:
            if rec.info is not None and rec.key in index.pods:
                removed.append((rec.info, rec.node))
                index.remove(rec.key)
    try:
        yield
    finally:
        for info, node in removed:
            index.add(info, node)
