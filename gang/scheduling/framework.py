"""The Scheduling Framework's extension points, as gang implements them.

kube-scheduler's framework (QueueSort, PreFilter, Filter, PostFilter, Score, NormalizeScore,
Reserve/Unreserve, Permit, Bind) is the vocabulary every scheduler author knows, so gang's
built-in behaviours are small units at those points (``gang.scheduling.plugins``) rather than
one long function. Two deliberate differences, both for speed at 5,000 nodes:

- a Filter plugin here checks the *static* facts of one node (labels, taints, schedulability)
  and its verdicts are cached per pod template and node-set version; resources and host ports,
  which change with every placement, are checked by the placer against the snapshot;
- a Score plugin scores all candidate nodes at once (numpy vectors), not one node per call.

Where each point runs: QueueSort in the gang queue; PreFilter and the placement (Filter, Score,
NormalizeScore) in ``gang.scheduling.cycle``; Reserve/Unreserve as cache assume/forget there too;
Permit in the cycle's quorum wait; Bind in ``gang.binding.binder``. PostFilter (preemption) is
not implemented: a gang that does not fit waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gang.scheduling.gang import Gang
from gang.state.cache import Snapshot
from gang.state.nodefacts import NodeFacts
from gang.state.podinfo import Constraints

Scores = npt.NDArray[np.float64]
MAX_NODE_SCORE = 100.0


class Plugin(Protocol):
    @property
    def name(self) -> str:
        """The plugin's name, as configuration and Events refer to it."""


class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, gang: Gang) -> tuple[object, ...]:
        """Smaller keys are scheduled first."""


class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, gang: Gang, snap: Snapshot) -> str | None:
        """A reason the whole gang cannot be scheduled now, or None."""


class FilterPlugin(Plugin, Protocol):
    def filter(self, constraints: Constraints, node: NodeFacts) -> str | None:
        """Why ``node`` cannot take a pod with ``constraints`` (kube-scheduler's wording), or None."""


@dataclass(frozen=True, slots=True)
class ScoreInput:
    """What Score plugins see for one member: every candidate node, as vectors.

    ``utilization`` is per candidate and per considered resource, *after* placing the member:
    ``1 - free_after / allocatable``.
    """

    candidates: npt.NDArray[np.intp]
    utilization: npt.NDArray[np.float64]
    domains: npt.NDArray[np.int64]  # topology domain id per candidate, -1 if unlabelled
    gang_domains: frozenset[int]  # domains already holding members of this gang


class ScorePlugin(Plugin, Protocol):
    def score(self, s: ScoreInput) -> Scores:
        """One raw score per candidate."""

    def normalize(self, scores: Scores) -> Scores:
        """NormalizeScore: map raw scores onto 0..MAX_NODE_SCORE."""
