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
Matrix = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
#: amounts below this divide exactly enough as floats (see copies_fitting)
EXACT_FLOAT = 2**52
#: bound on remembered request vectors (distinct request maps seen); cleared when reached
REQUEST_VECTORS = 8192
#: up to this many rows, ``copies_fitting_rows`` counts with Python integers (measured: the
#: same cost as numpy at about 24 rows of five resources, a third of it at one row)
FEW_ROWS = 16


class ResourceIndex:
    def __init__(self, names: Iterable[str] = BASE_RESOURCES) -> None:
        self.names: list[str] = []
        self._column: dict[str, int] = {}
        #: id(requests) -> (requests, its vector): see ``requests_vector``
        self._requests: dict[int, tuple[Mapping[str, int], Vector]] = {}
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

    def requests_vector(self, requests: Mapping[str, int]) -> Vector:
        """``vector(requests)`` for a pod's request map, which never changes once parsed (the
        members of a template share one, see ``gang.state.podinfo``): remembered by identity,
        so the placer, the cache and the cycle ask for it without rebuilding it. Always of the
        current width (no ``fit`` needed). Read-only."""
        found = self._requests.get(id(requests))
        if found is not None and found[0] is requests and len(found[1]) == len(self.names):
            return found[1]
        vec = self.vector(requests)
        vec.flags.writeable = False
        if len(self._requests) >= REQUEST_VECTORS:
            self._requests.clear()
        self._requests[id(requests)] = (requests, vec)  # held: its id is not reused meanwhile
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


# Row-wise questions about a ``nodes x resources`` matrix, asked one column at a time: numpy
# reduces along a short axis (``axis=1`` over a handful of resources) row by row, about four
# times slower at 5,000 nodes than the same comparisons made on whole columns and combined.


def rows_fitting(free: Matrix, vec: Vector) -> Mask:
    """Per row: every column of ``free`` is at least ``vec``'s."""
    if free.shape[1] == 0:
        return np.ones(free.shape[0], dtype=np.bool_)
    result: Mask = free[:, 0] >= vec[0]
    for col in range(1, free.shape[1]):
        result &= free[:, col] >= vec[col]
    return result


def rows_differing(before: Matrix, after: Matrix) -> npt.NDArray[np.intp]:
    """The rows (ascending) where two matrices of one shape differ in any column: one
    element-wise comparison, then the few differing elements' rows (a few times faster than
    ``(before != after).any(axis=1)`` when few rows moved)."""
    moved = (before != after).ravel().nonzero()[0]
    if not len(moved):
        return np.zeros(0, dtype=np.intp)
    return np.array(sorted(set((moved // before.shape[1]).tolist())), dtype=np.intp)


def copies_fitting(free: Matrix, vec: Vector) -> Vector:
    """Per row: how many copies of ``vec`` fit in it, counting only the columns ``vec`` asks
    for (at least 0); ``vec`` must ask for something.

    Divided as floats, half the cost of numpy's integer floor division: a quotient of integers
    below 2**52 is exact to well under one unit, so truncating it (and clamping at 0) gives the
    floor; a column holding larger amounts is divided as integers."""
    result: npt.NDArray[np.float64] | None = None
    for col in np.flatnonzero(vec > 0):
        column, amount = free[:, col], int(vec[col])
        if len(column) and max(int(column.max()), -int(column.min())) >= EXACT_FLOAT:
            copies = (column // amount).astype(np.float64)
        else:
            copies = column / float(amount)
        result = copies if result is None else np.minimum(result, copies, out=result)
    if result is None:
        raise ValueError("copies_fitting: the vector asks for nothing")
    out: Vector = np.maximum(result, 0.0, out=result).astype(np.int64)
    return out


def copies_fitting_rows(
    free: Matrix,
    rows: npt.NDArray[np.intp],
    vec: Vector,
    asked: tuple[tuple[int, int], ...] | None = None,
) -> Vector:
    """``copies_fitting(free[rows], vec)``. A few rows (the ones that moved since a count was
    kept) are counted with Python integers: numpy's calls per column cost more than the
    arithmetic on a handful of values. ``asked``: ``asked_columns(vec)``, where the caller
    keeps it."""
    if len(rows) > FEW_ROWS:
        return copies_fitting(free[rows], vec)
    lines = free[rows].tolist()
    return np.array(copies_in_lines(lines, asked or asked_columns(vec)), dtype=np.int64)


def asked_columns(vec: Vector) -> tuple[tuple[int, int], ...]:
    """The columns ``vec`` asks for and the amounts, as Python integers (what
    ``copies_in_lines`` divides by); at least one."""
    asked = tuple((int(col), int(vec[col])) for col in np.flatnonzero(vec > 0))
    if not asked:
        raise ValueError("asked_columns: the vector asks for nothing")
    return asked


def copies_in_lines(lines: list[list[int]], asked: tuple[tuple[int, int], ...]) -> list[int]:
    """Per row of free capacity given as Python integers: how many copies of the request
    ``asked`` (``asked_columns``) fit in it, at least 0. Plain loops: a generator per row
    cost as much as the division."""
    counts = []
    for line in lines:
        fits: int | None = None
        for col, amount in asked:
            copies = line[col] // amount
            if fits is None or copies < fits:
                fits = copies
        counts.append(fits if fits is not None and fits > 0 else 0)
    return counts
