"""Which nodes' free capacity changed since a moment: the cache's journal of changed rows.

Why: consecutive scheduling cycles differ, in free capacity, only on the few nodes the gang
before went to (and where pods came and went meanwhile). Placement keeps counts and scores from
one gang to the next and redoes only those rows. Finding them by comparing the whole free matrix
with a kept copy costs a pass over every node per cycle (most of the cycle's node-proportional
work at 5,000 nodes); the cache, which makes every change, can say which rows it touched.

A snapshot's ``free`` is the cache's free capacity at one point of the journal (its
:class:`FreeOrigin`) only until somebody changes it: a placement consuming it, the cycle lending
or holding capacity on it, or a variant made with another ``free`` array. :func:`intact_origin`
answers None then, and placement falls back to comparing matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: how many changes the journal keeps; a stamp older than that is answered None (compare instead)
JOURNAL_KEEP = 1 << 16


class RowJournal:
    """The rows of the cache's capacity matrices in the order they changed.

    Invariant: every change to a row's ``requested`` or ``allocatable`` after stamp ``s`` has
    that row in ``since(s)`` (a row may appear without a net change, or twice); ``since(s)`` is
    None where that can no longer be told (trimmed, or the matrices were reshaped: ``reset``)."""

    def __init__(self, keep: int = JOURNAL_KEEP) -> None:
        self._keep = keep
        self._rows: list[int] = []
        #: the stamp of ``_rows[0]``; stamps below it are no longer answered
        self._start = 0

    def note(self, row: int) -> None:
        rows = self._rows
        rows.append(row)
        if len(rows) > 2 * self._keep:
            del rows[: self._keep]
            self._start += self._keep

    def stamp(self) -> int:
        """The current position: ``since(stamp())`` is empty."""
        return self._start + len(self._rows)

    def since(self, stamp: int) -> list[int] | None:
        """Rows changed after ``stamp`` (in order, repeats kept), or None if not known."""
        at = stamp - self._start
        return None if at < 0 else self._rows[at:]

    def reset(self) -> None:
        """Every row may have changed (the matrices were reshaped): no older stamp is answered."""
        self._start = self.stamp()
        self._rows.clear()


@dataclass(slots=True)
class FreeOrigin:
    """Where a snapshot's ``free`` came from: the cache's free capacity at ``stamp`` of
    ``journal``. ``free`` is that very array (a variant with another array is not from here);
    ``intact`` is cleared by whoever changes the array in place."""

    journal: RowJournal
    stamp: int
    free: npt.NDArray[np.int64]
    intact: bool = True


def intact_origin(origin: FreeOrigin | None, free: npt.NDArray[np.int64]) -> FreeOrigin | None:
    """``origin`` if ``free`` is still exactly what it describes, else None."""
    if origin is None or not origin.intact or origin.free is not free:
        return None
    return origin
