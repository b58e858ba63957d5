"""What the members placed earlier in a cycle contribute to a rule, kept as the list grows.

Why this exists: a rule between pods is checked for every member of a gang against every member
placed before it, so recomputing "which earlier members match this selector" for each member
costs O(members²) — a quarter of a 64-member placement. The placer only ever appends to its
``placed`` list (a new trial gets a new list), so a memo keyed on the list's identity can resume
where it stopped: each member is matched against each rule once per cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gang.scheduling.framework import Placed
from gang.state.labels import LabelSelector
from gang.state.podinfo import PodInfo

#: a placed member in a label index: its place in the list, itself, and its row
Indexed = tuple[int, PodInfo, int]


@dataclass(slots=True)
class PlacedMemo:
    """Per key: how many placed members were looked at, and what was gathered from them."""

    #: the list followed (held, so its identity cannot be reused while it is followed)
    _placed: Sequence[Placed] | None = None
    _by_key: dict[Hashable, tuple[int, list[Any]]] = field(default_factory=dict)
    #: the first ``_indexed`` members of the list by label pair, in placement order (built
    #: only when a selector is first asked about: :meth:`selected`)
    _by_pair: dict[tuple[str, str], list[Indexed]] = field(default_factory=dict)
    _indexed: int = 0

    def _follow(self, placed: Sequence[Placed]) -> None:
        """Start following ``placed`` (a new list: a new cycle or trial)."""
        self._placed, self._by_key, self._by_pair, self._indexed = placed, {}, {}, 0

    def gather(
        self, placed: Sequence[Placed], key: Hashable, take: Callable[[PodInfo, int], list[Any]]
    ) -> list[Any]:
        """Everything ``take(member, row)`` returned for the placed members, in order
        (``take`` must depend on ``key`` and the member only)."""
        if self._placed is not placed:
            self._follow(placed)
        done, items = self._by_key.get(key, (0, []))
        if done < len(placed):
            for member, row in placed[done:]:
                items.extend(take(member, row))
            self._by_key[key] = (len(placed), items)
        return items

    def groups(
        self,
        placed: Sequence[Placed],
        key: Hashable,
        take: Callable[[PodInfo, int], list[tuple[Hashable, Any]]],
    ) -> dict[Hashable, list[Any]]:
        """``take``'s (group, item) pairs for the placed members, grouped (kept as it grows)."""
        if self._placed is not placed:
            self._follow(placed)
        done, box = self._by_key.get(key, (0, [{}]))
        grouped: dict[Hashable, list[Any]] = box[0]
        if done < len(placed):
            for member, row in placed[done:]:
                for group, item in take(member, row):
                    grouped.setdefault(group, []).append(item)
            self._by_key[key] = (len(placed), box)
        return grouped

    def rows(
        self, placed: Sequence[Placed], key: Hashable, match: Callable[[PodInfo], bool]
    ) -> list[int]:
        """Rows of the placed members that ``match`` (which must depend on ``key`` only)."""
        return self.gather(placed, key, lambda m, row: [row] if match(m) else [])

    def selected(
        self,
        placed: Sequence[Placed],
        key: Hashable,
        selector: LabelSelector,
        match: Callable[[PodInfo], bool],
    ) -> list[int]:
        """:meth:`rows` for a ``match`` that holds only for members ``selector`` selects. A key
        first asked about when members are placed starts from those carrying the label pairs
        of the selector's narrowest requirement, not from every one: a member whose selector is
        its own (a per-replica Service's) would otherwise make a gang's placement quadratic."""
        if self._placed is not placed:
            self._follow(placed)
        if key in self._by_key or not placed:
            return self.rows(placed, key, match)
        by_pair = self._by_pair
        for place in range(self._indexed, len(placed)):
            member, row = placed[place]
            for pair in member.labels.items():
                by_pair.setdefault(pair, []).append((place, member, row))
        self._indexed = len(placed)
        groups = selector.narrowest(by_pair)
        if groups is None:
            return self.rows(placed, key, match)
        found = sorted((place, row) for group in groups for place, m, row in group if match(m))
        rows = [row for _, row in found]
        self._by_key[key] = (len(placed), rows)
        return rows
