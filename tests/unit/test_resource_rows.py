"""The row-wise resource questions the Filter and the slot counts ask, against numpy's plain
answer (``axis=1`` reductions, integer floor division) on random matrices, including negative
free amounts (an over-committed node) and amounts too large to divide as floats."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gang.state.podinfo import parse_pod
from gang.state.resources import (
    EXACT_FLOAT,
    ResourceIndex,
    copies_fitting,
    copies_fitting_rows,
    rows_differing,
    rows_fitting,
)

amounts = st.one_of(
    st.integers(-(10**6), 10**13),  # millicores, bytes: what clusters hold
    st.integers(EXACT_FLOAT - 5, 2**62),  # beyond exact floats: the integer path
)


@st.composite
def matrix_and_vector(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    rows = draw(st.integers(0, 40))
    cols = draw(st.integers(1, 6))
    free = draw(hnp.arrays(np.int64, (rows, cols), elements=amounts))
    vec = draw(hnp.arrays(np.int64, (cols,), elements=st.integers(0, 10**10)))
    if not (vec > 0).any():
        vec[draw(st.integers(0, cols - 1))] = draw(st.integers(1, 10**4))
    return free, vec


@settings(max_examples=300, deadline=None)
@given(matrix_and_vector())
def test_rows_fitting_is_every_column_at_least_the_request(
    case: tuple[np.ndarray, np.ndarray],
) -> None:
    free, vec = case
    expected = np.all(free >= vec, axis=1)
    assert rows_fitting(free, vec).tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(matrix_and_vector())
def test_copies_fitting_is_the_floor_of_the_scarcest_requested_column(
    case: tuple[np.ndarray, np.ndarray],
) -> None:
    free, vec = case
    asked = vec > 0
    expected = np.clip(np.min(free[:, asked] // vec[asked], axis=1), 0, None)
    got = copies_fitting(free, vec)
    assert got.dtype == np.int64
    # a count of copies beyond what a float holds exactly is "more than any gang asks"
    exact = expected < EXACT_FLOAT
    assert got[exact].tolist() == expected[exact].tolist()
    assert (got[~exact] >= EXACT_FLOAT).all()


@settings(max_examples=300, deadline=None)
@given(matrix_and_vector(), st.data())
def test_copies_fitting_rows_counts_the_chosen_rows_as_copies_fitting_does(
    case: tuple[np.ndarray, np.ndarray], data: st.DataObject
) -> None:
    """Few rows (Python integers) or many (numpy): the same counts as ``copies_fitting`` on
    the rows taken out."""
    free, vec = case
    height = free.shape[0]
    rows = np.array(
        sorted(data.draw(st.sets(st.integers(0, max(height - 1, 0)), max_size=height))),
        dtype=np.intp,
    )
    got = copies_fitting_rows(free, rows, vec)
    expected = copies_fitting(free[rows], vec)
    assert got.dtype == np.int64
    exact = expected < EXACT_FLOAT
    assert got[exact].tolist() == expected[exact].tolist()
    assert (got[~exact] >= EXACT_FLOAT).all()


@settings(max_examples=300, deadline=None)
@given(matrix_and_vector(), st.lists(st.tuples(st.integers(0, 39), st.integers(0, 5))))
def test_rows_differing_are_the_rows_with_any_column_changed(
    case: tuple[np.ndarray, np.ndarray], edits: list[tuple[int, int]]
) -> None:
    before, _ = case
    after = before.copy()
    for row, col in edits:
        if row < after.shape[0] and col < after.shape[1]:
            after[row, col] += 1
    expected = np.flatnonzero((before != after).any(axis=1)).tolist()
    assert rows_differing(before, after).tolist() == expected


def test_copies_fitting_needs_a_request() -> None:
    free = np.ones((3, 2), dtype=np.int64)
    try:
        copies_fitting(free, np.zeros(2, dtype=np.int64))
    except ValueError as err:
        assert "asks for nothing" in str(err)
    else:
        raise AssertionError("no error for an empty request")


def test_a_pods_request_vector_is_built_once_per_request_map_and_cannot_be_written() -> None:
    """Members of a template share one parsed request map (interned at parse), and its vector
    is remembered by identity; a column added later gives a wider vector, built afresh."""

    def pod(name: str, gpus: str) -> dict[str, object]:
        limits = {"cpu": "1", "nvidia.com/gpu": gpus}
        container = {"name": "c", "image": "x", "resources": {"limits": limits}}
        return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"containers": [container]}}

    a, b, other = (parse_pod(pod("a", "2")), parse_pod(pod("b", "2")), parse_pod(pod("c", "4")))
    assert a.requests is b.requests and a.requests is not other.requests
    index = ResourceIndex()
    vec = index.requests_vector(a.requests)
    assert index.requests_vector(b.requests) is vec
    assert index.describe(vec) == {"cpu": 1000, "nvidia.com/gpu": 2, "pods": 1}
    assert not vec.flags.writeable
    index.column("example.com/fpga")
    wider = index.requests_vector(a.requests)
    assert len(wider) == len(vec) + 1 and np.array_equal(wider[: len(vec)], vec)
    assert index.describe(index.requests_vector(other.requests))["nvidia.com/gpu"] == 4
