"""The cache's journal of changed rows (gang.state.journal): what it answers and when it cannot.

Placement trusts ``since(stamp)`` to name every row whose free capacity moved; a row missing
would be an over-commit waiting to happen, so the cache's every capacity write is checked
against it here, and the cases where it must say "not known" (trimmed, reshaped) are pinned.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gang.state.cache import ClusterCache
from gang.state.journal import RowJournal, intact_origin
from tests.unit.test_cache import make_info, make_node


def test_since_names_the_rows_noted_after_the_stamp_in_order() -> None:
    journal = RowJournal()
    journal.note(3)
    stamp = journal.stamp()
    for row in (5, 1, 5):
        journal.note(row)
    assert journal.since(stamp) == [5, 1, 5]
    assert journal.since(journal.stamp()) == []


def test_a_trimmed_or_reset_journal_does_not_answer_for_older_stamps() -> None:
    journal = RowJournal(keep=4)
    old = journal.stamp()
    for row in range(9):  # past twice ``keep``: the oldest four are dropped
        journal.note(row)
    assert journal.since(old) is None
    recent = journal.stamp() - 3
    assert journal.since(recent) == [6, 7, 8]
    journal.reset()
    assert journal.since(recent) is None
    assert journal.since(journal.stamp()) == []


def test_every_capacity_write_of_the_cache_is_in_its_journal() -> None:
    """Pods assumed, confirmed, forgotten, bound by others and removed; nodes resized and
    removed: the rows whose free capacity differs between two snapshots are all in the
    journal between their stamps."""
    cache = ClusterCache()
    for i in range(6):
        cache.upsert_node(make_node(f"n{i}", cpu="8"))
    a, b = make_info("a", cpu="1"), make_info("b", cpu="2")
    for pod in (a, b):
        cache.index.vector(pod.requests)
    steps = [
        lambda: cache.assume(a, "n1"),
        lambda: cache.assume_all([(b, "n4")]),
        lambda: cache.upsert_pod(replace(a, node_name="n1")),  # confirmed: nothing moves
        lambda: cache.forget(b.key),
        lambda: cache.upsert_pod(make_info("other", node="n2", cpu="3")),
        lambda: cache.remove_pod(("default", "other")),
        lambda: cache.upsert_node(make_node("n3", cpu="4")),
        lambda: cache.remove_node("n5"),
    ]
    for step in steps:
        before = cache.snapshot()
        step()
        after = cache.snapshot()
        assert before.origin is not None and after.origin is not None
        moved = set(np.flatnonzero((before.free != after.free).any(axis=1)).tolist())
        noted = cache.journal.since(before.origin.stamp)
        assert noted is not None and moved <= set(noted)
    cache.check()


def test_a_snapshot_free_is_intact_until_changed_or_replaced() -> None:
    cache = ClusterCache()
    cache.upsert_node(make_node("n0", cpu="8"))
    snap = cache.snapshot()
    assert intact_origin(snap.origin, snap.free) is snap.origin
    variant = replace(snap, free=snap.free.copy())  # another array: not the cache's
    assert intact_origin(variant.origin, variant.free) is None
    assert snap.origin is not None
    snap.origin.intact = False  # changed in place
    assert intact_origin(snap.origin, snap.free) is None
