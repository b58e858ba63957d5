"""Tests for gang.queue.gangqueue: active ordering, backoff, the unschedulable pool and events.

Timers run on the real event loop with delays of a few tens of milliseconds; elapsed times are
measured with ``loop.time()`` (the clock the timers use) and only bounded from below.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gang.models.queueapis import DEFAULT_QUEUE
from gang.queue.gangqueue import GangKey, GangQueue

TICK = 0.05  # the base delay used throughout
PATIENCE = 2.0  # how long a test waits for something that must happen


def queue(
    *, backoff_initial: float = TICK, backoff_max: float = 1.0, flush_after: float = 60.0
) -> GangQueue:
    return GangQueue(
        backoff_initial=backoff_initial, backoff_max=backoff_max, flush_after=flush_after
    )


async def pop_soon(q: GangQueue) -> GangKey:
    """Pop, failing the test instead of hanging if nothing becomes active."""
    return await asyncio.wait_for(q.pop(), PATIENCE)


async def assert_nothing_pops(q: GangQueue, within: float = 0.02) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.pop(), within)


async def drain(q: GangQueue) -> list[GangKey]:
    """Pop every active gang (without waiting for any to become active)."""
    keys: list[GangKey] = []
    while q.counts()["active"]:
        keys.append(await pop_soon(q))
    return keys


async def popped(
    q: GangQueue,
    key: GangKey,
    sort_key: tuple[int, ...] = (0,),
    queue_name: str = DEFAULT_QUEUE,
    priority: int = 0,
) -> None:
    """Add ``key`` and take it out again, as a scheduling cycle would before ``done``."""
    q.add(key, sort_key, queue_name, priority)
    assert await pop_soon(q) == key
    assert q.where(key) == ""


# --------------------------------------------------------------------------------------------
# Ordering and membership


async def test_pop_follows_the_sort_key_not_the_insertion_order() -> None:
    q = queue()
    q.add("low", (1, 0, "b"))
    q.add("high", (0, -100, "z"))
    q.add("mid-b", (1, -5, "b"))
    q.add("mid-a", (1, -5, "a"))
    assert await drain(q) == ["high", "mid-a", "mid-b", "low"]


async def test_equal_sort_keys_pop_in_insertion_order() -> None:
    q = queue()
    for key in ("c", "a", "b"):
        q.add(key, (0,))
    assert await drain(q) == ["c", "a", "b"]


async def test_pop_waits_until_a_gang_is_added() -> None:
    q = queue()
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    q.add("g", (0,))
    assert await asyncio.wait_for(waiter, PATIENCE) == "g"
    assert q.where("g") == ""
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 1}


async def test_adding_an_active_gang_again_with_the_same_key_does_not_duplicate_it() -> None:
    q = queue()
    q.add("a", (0,))
    q.add("a", (0,))
    assert len(q) == 1
    assert await pop_soon(q) == "a"
    await assert_nothing_pops(q)


async def test_promoting_an_active_gang_reorders_it() -> None:
    q = queue()
    q.add("a", (9,))
    q.add("b", (5,))
    q.add("a", (0,))
    assert await drain(q) == ["a", "b"]
    await assert_nothing_pops(q)  # the stale (9,) entry of "a" is skipped


async def test_demoting_an_active_gang_reorders_it() -> None:
    q = queue()
    q.add("a", (0,))
    q.add("b", (5,))
    q.add("a", (9,))  # a lost priority
    assert await drain(q) == ["b", "a"]


async def test_a_removed_then_re_added_gang_takes_its_new_place() -> None:
    q = queue()
    q.add("a", (0,))
    q.remove("a")
    q.add("a", (9,))
    q.add("b", (5,))
    assert await drain(q) == ["b", "a"]


async def test_remove_forgets_a_gang_wherever_it_is() -> None:
    q = queue(flush_after=TICK)
    q.add("active", (0,))
    q.add("parked", (1,))
    q.add("backing-off", (2,))
    assert await drain(q) == ["active", "parked", "backing-off"]
    q.done("active", "requeue")
    q.done("parked", "unschedulable")
    q.done("backing-off", "backoff")
    assert q.counts() == {"active": 1, "backoff": 1, "unschedulable": 1, "in_flight": 0}

    for key in ("active", "parked", "backing-off"):
        q.remove(key)
        assert key not in q
        assert q.where(key) is None
    q.remove("never-added")  # harmless
    assert len(q) == 0
    # neither the heap entry nor the (cancelled) timers bring anything back
    await assert_nothing_pops(q, within=3 * TICK)
    assert q.attempts("parked") == 0


async def test_counts_and_where_follow_each_gang() -> None:
    q = queue()
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 0}
    for key in ("a", "b", "c", "d"):
        q.add(key, (ord(key),))
    assert q.counts() == {"active": 4, "backoff": 0, "unschedulable": 0, "in_flight": 0}
    assert [await pop_soon(q) for _ in range(3)] == ["a", "b", "c"]
    q.done("a", "unschedulable")
    q.done("b", "backoff")
    assert q.counts() == {"active": 1, "backoff": 1, "unschedulable": 1, "in_flight": 1}
    assert (q.where("a"), q.where("b"), q.where("c"), q.where("d")) == (
        "unschedulable",
        "backoff",
        "",
        "active",
    )
    assert len(q) == 4
    assert "a" in q and "zzz" not in q
    assert q.where("zzz") is None
    q.done("c", "scheduled")
    assert "c" not in q
    assert q.counts() == {"active": 1, "backoff": 1, "unschedulable": 1, "in_flight": 0}


# --------------------------------------------------------------------------------------------
# After a cycle: done()


async def test_scheduled_forgets_the_gang_and_its_attempts() -> None:
    q = queue()
    await popped(q, "g")
    q.done("g", "backoff")
    q.remove("g")
    await popped(q, "g")
    q.done("g", "scheduled")
    assert "g" not in q
    assert q.attempts("g") == 0


async def test_requeue_makes_it_active_at_once() -> None:
    q = queue()
    await popped(q, "g")
    q.done("g", "requeue")
    assert q.where("g") == "active"
    assert q.attempts("g") == 0
    assert await pop_soon(q) == "g"


async def test_done_for_an_unknown_gang_is_ignored_and_an_unknown_outcome_raises() -> None:
    q = queue()
    q.done("ghost", "unschedulable")
    assert "ghost" not in q
    await popped(q, "g")
    with pytest.raises(ValueError, match="unknown outcome 'bogus'"):
        q.done("g", "bogus")


async def test_unschedulable_parks_until_activate_unschedulable() -> None:
    q = queue()
    await popped(q, "a", (0,))
    await popped(q, "b", (1,))
    q.done("a", "unschedulable")
    q.done("b", "unschedulable")
    assert q.attempts("a") == 1
    await assert_nothing_pops(q)

    q.add("c", (2,))
    q.done("c", "requeue")
    assert await pop_soon(q) == "c"
    q.done("c", "backoff")  # backoff is pacing, not capacity: stays put

    assert q.activate_unschedulable() == 2
    assert q.where("c") == "backoff"
    assert await drain(q) == ["a", "b"]
    assert q.activate_unschedulable() == 0


async def test_unschedulable_returns_by_itself_after_flush_after() -> None:
    loop = asyncio.get_running_loop()
    q = queue(flush_after=TICK)
    await popped(q, "g")
    parked_at = loop.time()
    q.done("g", "unschedulable")
    assert await pop_soon(q) == "g"
    assert loop.time() - parked_at >= TICK


async def test_activate_moves_one_unschedulable_gang_only() -> None:
    q = queue()
    for key in ("a", "b"):
        await popped(q, key)
        q.done(key, "unschedulable")
    await popped(q, "c")
    q.done("c", "backoff")

    q.activate("b")
    q.activate("c")  # backing off: not moved
    q.activate("ghost")  # unknown: ignored
    assert (q.where("a"), q.where("b"), q.where("c")) == ("unschedulable", "active", "backoff")
    assert await pop_soon(q) == "b"
    await assert_nothing_pops(q)


async def test_add_activates_an_unschedulable_gang_but_not_a_backing_off_one() -> None:
    q = queue(backoff_initial=60.0, backoff_max=60.0)
    await popped(q, "parked")
    q.done("parked", "unschedulable")
    await popped(q, "backing-off")
    q.done("backing-off", "backoff")

    q.add("parked", (0,))
    q.add("backing-off", (0,))
    assert q.where("parked") == "active"
    assert q.where("backing-off") == "backoff"
    assert await pop_soon(q) == "parked"
    await assert_nothing_pops(q)


async def test_add_while_in_flight_leaves_the_decision_to_done() -> None:
    q = queue()
    await popped(q, "g", (5,))
    q.add("g", (1,))
    assert q.where("g") == ""
    await assert_nothing_pops(q)
    q.done("g", "requeue")
    assert await pop_soon(q) == "g"


# --------------------------------------------------------------------------------------------
# Backoff


async def test_backoff_for_doubles_from_the_initial_delay_and_is_capped() -> None:
    q = queue(backoff_initial=1.0, backoff_max=10.0)
    assert [q.backoff_for(n) for n in range(7)] == [1.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


async def test_backoff_outcome_waits_initial_times_two_to_the_attempts_minus_one() -> None:
    loop = asyncio.get_running_loop()
    q = queue(backoff_initial=TICK, backoff_max=1.0)
    await popped(q, "g")
    for attempt in (1, 2):
        started = loop.time()
        q.done("g", "backoff")
        assert q.attempts("g") == attempt
        assert q.where("g") == "backoff"
        assert q.backoff_for(attempt) == TICK * 2 ** (attempt - 1)
        q.activate_unschedulable()  # no effect on a backing-off gang
        assert await pop_soon(q) == "g"
        assert loop.time() - started >= TICK * 2 ** (attempt - 1)


async def test_backoff_is_capped_at_backoff_max() -> None:
    loop = asyncio.get_running_loop()
    q = queue(backoff_initial=TICK, backoff_max=1.5 * TICK)
    await popped(q, "g")
    q.done("g", "backoff")
    for _ in range(9):  # attempts 10: uncapped, 2**9 ticks (25 s) would outlast PATIENCE
        q.backoff("g")
    assert q.attempts("g") == 10
    assert q.backoff_for(10) == 1.5 * TICK
    started = loop.time()
    assert await pop_soon(q) == "g"
    assert loop.time() - started >= 1.5 * TICK


async def test_backoff_delays_a_known_gang_and_counts_an_attempt() -> None:
    loop = asyncio.get_running_loop()
    q = queue(backoff_initial=TICK, backoff_max=1.0)
    q.backoff("ghost")  # unknown: nothing happens
    assert "ghost" not in q

    q.add("g", (0,))  # active; a Permit timeout backs it off anyway
    started = loop.time()
    q.backoff("g")
    assert q.where("g") == "backoff"
    assert q.attempts("g") == 1
    assert await pop_soon(q) == "g"
    assert loop.time() - started >= TICK

    q.backoff("g")
    assert q.attempts("g") == 2
    started = loop.time()
    assert await pop_soon(q) == "g"
    assert loop.time() - started >= 2 * TICK


async def test_backoff_of_an_unschedulable_gang_replaces_its_flush_timer() -> None:
    """A parked gang backed off (e.g. its Permit wait ended) returns after the backoff, not
    after ``flush_after``."""
    loop = asyncio.get_running_loop()
    q = queue(backoff_initial=TICK, flush_after=60.0)
    await popped(q, "g")
    q.done("g", "unschedulable")
    started = loop.time()
    q.backoff("g")
    assert q.where("g") == "backoff"
    assert await pop_soon(q) == "g"
    assert loop.time() - started >= 2 * TICK  # attempts 2: initial x 2


# --------------------------------------------------------------------------------------------
# A gang that may now be a victim wakes those that could take its place


async def parked(q: GangQueue, key: GangKey, queue_name: str, priority: int) -> None:
    await popped(q, key, (0,), queue_name, priority)
    q.done(key, "unschedulable")


async def test_activate_outranking_wakes_higher_priority_and_other_queues_only() -> None:
    q = queue(backoff_initial=60.0, backoff_max=60.0)
    await parked(q, "equal", "team-a", 5)
    await parked(q, "lower", "team-a", 1)
    await parked(q, "higher", "team-a", 9)
    await parked(q, "other-queue", "team-b", 0)
    q.add("backing-off", (0,), "team-a", 9)
    assert await pop_soon(q) == "backing-off"
    q.done("backing-off", "backoff")

    assert q.activate_outranking(5, "team-a") == 2
    assert {k: q.where(k) for k in ("equal", "lower", "higher", "other-queue")} == {
        "equal": "unschedulable",
        "lower": "unschedulable",
        "higher": "active",
        "other-queue": "active",
    }
    assert q.where("backing-off") == "backoff"  # pacing, not capacity
    assert q.activate_outranking(5, "team-a") == 0
    assert sorted(await drain(q)) == ["higher", "other-queue"]


async def test_activate_outranking_sees_a_gang_parked_after_the_last_call() -> None:
    """The parked gangs' summary is taken lazily; a gang parked (or woken) since must count."""
    q = queue()
    await parked(q, "equal", "", 5)
    assert q.activate_outranking(5, "") == 0  # summary taken: nothing outranks
    await parked(q, "urgent", "", 7)
    assert q.activate_outranking(5, "") == 1
    assert await pop_soon(q) == "urgent"
    assert q.activate_outranking(5, "") == 0


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "pop", "remove", "activate", "all", "outranking", "backoff"]),
        st.sampled_from(["g0", "g1", "g2", "g3", "g4"]),
        st.integers(0, 3),  # priority
        st.sampled_from(["", "team-b"]),
        st.sampled_from(["scheduled", "unschedulable", "backoff", "requeue"]),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS)
def test_parked_gangs_and_their_wakers_follow_every_move(ops: list[Any]) -> None:
    """Whatever runs, the parked set is exactly the unschedulable gangs, and
    ``activate_outranking`` wakes exactly those a scan of every gang would pick."""

    async def run() -> None:
        q = queue(backoff_initial=60.0, backoff_max=60.0, flush_after=60.0)
        priorities: dict[GangKey, tuple[int, str]] = {}
        for op, key, priority, queue_name, outcome in ops:
            if op == "add":
                q.add(key, (priority,), queue_name, priority)
                priorities[key] = (priority, queue_name)
            elif op == "pop" and q.counts()["active"]:
                q.done(await pop_soon(q), outcome)
            elif op == "remove":
                q.remove(key)
            elif op == "activate":
                q.activate(key)
            elif op == "all":
                q.activate_unschedulable()
            elif op == "backoff":
                q.backoff(key)
            elif op == "outranking":
                expected = {
                    k
                    for k, (p, qn) in priorities.items()
                    if q.where(k) == "unschedulable" and (p > priority or qn != queue_name)
                }
                assert q.activate_outranking(priority, queue_name) == len(expected)
                assert all(q.where(k) == "active" for k in expected)
            unschedulable = {k for k in priorities if q.where(k) == "unschedulable"}
            assert set(q._parked) == unschedulable
        for k in priorities:
            q.remove(k)  # cancels the timers

    asyncio.run(run())
