"""Resource vectors: every resource a pod can request, as one column of an int64 matrix.

Filtering 5,000 nodes for a 64-member gang is a handful of vector comparisons if the cluster's
free capacity is a ``nodes x resources`` matrix, and hundreds of thousands of dict lookups if
it is not. ``ResourceIndex`` assigns each resource name a column (cpu in millicores, every other
resource in whole units, as Kubernetes accounts them) and grows when a new extended resource
appears; vectors made earlier stay valid because columns are only ever appended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.int64]
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")


class ResourceIndex:
    def __init__(self, names: Iterable[str] = BASE_RESOURCES) -> None:
        self.names: list[str] = []
        self._column: dict[str, int] = {}
        for name in names:
            self.column(name)

    def __len__(self) -> int:
        return len(self.names)

    def column(self, name: str) -> int:
        """The column of ``name``, appending a new one the first time it is seen."""
        col = self._column.get(name)
        if col is None:
            col = self._column[name] = len(self.names)
            self.names.append(name)
        return col

    def has(self, name: str) -> bool:
        return name in self._column

    def vector(self, amounts: Mapping[str, int]) -> Vector:
        """A vector of the current width; unknown names get new columns first."""
        cols = [(self.column(name), value) for name, value in amounts.items()]
        vec = np.zeros(len(self.names), dtype=np.int64)
        for col, value in cols:
            vec[col] = value
        return vec

    def fit(self, vec: Vector) -> Vector:
        """``vec`` widened with zeros to the current width (columns only ever get appended)."""
        if len(vec) == len(self.names):
            return vec
        out = np.zeros(len(self.names), dtype=np.int64)
        out[: len(vec)] = vec
        return out

    def describe(self, vec: Vector) -> dict[str, int]:
        return {self.names[i]: int(v) for i, v in enumerate(vec) if v}
