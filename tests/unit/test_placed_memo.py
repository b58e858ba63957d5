"""What the members placed earlier in a cycle contribute to a rule (``PlacedMemo``): a selector
first asked about starts from the members its narrowest requirement could select, and finds what
matching every member finds, in placement order, as the list grows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gang.scheduling.framework import Placed
from gang.scheduling.placedmemo import PlacedMemo
from gang.state.labels import LabelSelector, parse_selector
from gang.state.podinfo import PodInfo
from tests.unit.test_cache import make_info

SELECTORS = [
    {"matchLabels": {"job": "j1"}},
    {"matchLabels": {"group": "g", "job": "j1", "index": "1"}},
    {
        "matchLabels": {"group": "g"},
        "matchExpressions": [{"key": "index", "operator": "In", "values": ["0", "2"]}],
    },
    {"matchExpressions": [{"key": "index", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "job", "operator": "NotIn", "values": ["j0"]}]},
    {"matchLabels": {"job": "none"}},
]
labels_st = st.fixed_dictionaries(
    {"group": st.just("g")},
    optional={"job": st.sampled_from(("j0", "j1")), "index": st.sampled_from(("0", "1", "2"))},
)


def _member(i: int, labels: dict[str, str], namespace: str) -> Placed:
    info = make_info(f"m{i}")
    return replace(info, labels=labels, namespace=namespace), i % 3


def _match(selector: LabelSelector) -> Callable[[PodInfo], bool]:
    return lambda m: m.namespace == "ml" and selector.matches(m.labels)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(labels_st, st.sampled_from(("ml", "other"))), max_size=12),
    st.lists(st.tuples(st.integers(0, 12), st.sampled_from(range(len(SELECTORS)))), max_size=10),
)
def test_a_selector_finds_what_matching_every_placed_member_finds(
    members: list[tuple[dict[str, str], str]], asks: list[tuple[int, int]]
) -> None:
    placed: list[Placed] = []
    memo = PlacedMemo()
    for upto, which in sorted(asks):  # members are appended between the questions
        while len(placed) < min(upto, len(members)):
            labels, namespace = members[len(placed)]
            placed.append(_member(len(placed), labels, namespace))
        selector = parse_selector(SELECTORS[which], "test")
        found = memo.selected(placed, ("ml", selector), selector, _match(selector))
        expected = [row for m, row in placed if _match(selector)(m)]
        assert found == expected


def test_a_member_s_own_selector_visits_the_members_carrying_its_rarest_label() -> None:
    """64 members with the same ``group`` label, each with its own index: the selector of a
    per-replica Service (group and index) is matched against one member, not 64."""
    placed = [_member(i, {"group": "g", "index": str(i)}, "ml") for i in range(64)]
    asked: list[str] = []

    def match(m: PodInfo) -> bool:
        asked.append(m.name)
        return True

    selector = parse_selector({"matchLabels": {"group": "g", "index": "7"}}, "test")
    assert PlacedMemo().selected(placed, "k", selector, match) == [7 % 3]
    assert asked == ["m7"]
