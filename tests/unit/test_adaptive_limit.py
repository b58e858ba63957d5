"""The adaptive bind concurrency, round by round on a fake clock.

A closed loop against a modelled server (a fixed no-queue latency up to a knee, then round
trips growing with what is in flight, as an M/M/c queue past saturation) shows where the
controller settles; single rounds pin each rule of the module docstring.
"""

from __future__ import annotations

import asyncio
import math
import random

import pytest

from gang.binding.adaptive import AUTO_FLOOR, QUIET, AdaptiveLimit, bind_limit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def full_round(limit: AdaptiveLimit, clock: Clock, rtt: float, throttled: bool = False) -> None:
    """One round with every slot in use, each answered after ``rtt``."""
    count = int(limit.limit)
    granted = []
    for _ in range(count):
        limit.in_flight += 1
        limit._peak = max(limit._peak, limit.in_flight)
        granted.append(clock.now)
    clock.now += rtt
    for at in granted:
        limit.release(at, throttled=throttled)


def test_grows_while_round_trips_hold_and_the_limit_is_what_binds() -> None:
    clock = Clock()
    limit = AdaptiveLimit(32, 4, 1024, clock=clock)
    for _ in range(10):
        full_round(limit, clock, 0.08)
    assert limit.limit > 32 * 1.25**8  # ~25 % per round
    assert limit.shrunk == 0


def test_a_429_halves_it() -> None:
    clock = Clock()
    limit = AdaptiveLimit(64, 4, 1024, clock=clock)
    full_round(limit, clock, 0.08)
    before = limit.limit
    full_round(limit, clock, 0.08, throttled=True)
    assert limit.limit == pytest.approx(before * 0.5)


def test_rising_round_trips_shrink_it_in_proportion_at_most_30_percent() -> None:
    clock = Clock()
    limit = AdaptiveLimit(64, 4, 1024, clock=clock)
    full_round(limit, clock, 0.05)  # the best round: 50 ms
    before = limit.limit
    full_round(limit, clock, 0.125)  # 2.5x the best, tolerance 2: x0.8
    assert limit.limit == pytest.approx(before * 0.8)
    before = limit.limit
    full_round(limit, clock, 1.0)  # 20x: capped at x0.7
    assert limit.limit == pytest.approx(before * 0.7)


def test_an_unused_limit_does_not_grow() -> None:
    clock = Clock()
    limit = AdaptiveLimit(64, 4, 1024, clock=clock)
    for _ in range(5):  # only 8 bindings wanted at a time
        for _ in range(32):
            limit.in_flight += 1
            limit._peak = max(limit._peak, min(8, limit.in_flight))
            limit.in_flight -= 1
            limit.in_flight += 1
            start = clock.now
            clock.now += 0.01
            limit.release(start)
    assert limit.limit == 64


def test_bounds_hold() -> None:
    clock = Clock()
    limit = AdaptiveLimit(8, 4, 16, clock=clock)
    for _ in range(20):
        full_round(limit, clock, 0.05)
    assert limit.limit == 16
    for _ in range(20):
        full_round(limit, clock, 0.05, throttled=True)
    assert limit.limit == 4


def test_settles_past_the_knee_of_a_saturating_server() -> None:
    """A server taking 1,000 writes/s with an 80 ms no-queue round trip: up to 80 in flight
    the round trip holds; beyond, every extra request waits its turn (n / 1000 s). The
    limit must end past the knee (the server saturated: the ceiling reached) but not far
    into the queue (round trips within the tolerance of twice the best)."""
    clock = Clock()
    limit = AdaptiveLimit(16, 4, 4096, clock=clock)

    def rtt(in_flight: int) -> float:
        return max(0.08, in_flight / 1000)

    for _ in range(200):
        full_round(limit, clock, rtt(int(limit.limit)))
    assert 80 <= limit.limit <= 2 * 0.08 * 1000 * 1.25


def test_grows_on_past_the_tolerance_while_deeper_still_answers_more() -> None:
    """A server that answers more together the more it is given, as a real kube-apiserver
    does: round trips grow with the square root of what is in flight, so 4x the depth doubles
    the round trip and still doubles the throughput. Round trips alone (Vegas) would stop near
    4 x 32 = 128 in flight; the throughput each deeper round buys takes it to the maximum."""
    clock = Clock()
    auto = AdaptiveLimit(32, 4, 512, clock=clock, latency_floor=32)

    def rtt(in_flight: int) -> float:
        return 0.02 * math.sqrt(in_flight / 32)

    for _ in range(60):
        full_round(auto, clock, rtt(int(auto.limit)))
    assert auto.limit == 512
    assert auto.shrunk == 0


def test_a_flat_throughput_with_noisy_round_trips_does_not_run_away() -> None:
    """Past its knee (100 in flight) this server only queues: 2,000 answers a second however
    deep, its round trips jittering by 10 % either way. Noise must not pass for throughput
    bought by depth: the limit stays past the knee and within the tolerance's reach of it."""
    clock = Clock()
    auto = AdaptiveLimit(32, 4, 512, clock=clock, latency_floor=32)
    jitter = random.Random(7)
    seen = []
    for _ in range(400):
        base = max(0.05, int(auto.limit) / 2000)
        full_round(auto, clock, base * jitter.uniform(0.9, 1.1))
        seen.append(auto.limit)
    settled = seen[100:]
    assert min(settled) >= 32
    assert max(settled) <= 2 * 0.05 * 2000 * 1.25 * 1.1
    assert sum(settled) / len(settled) >= 100 * 0.9


def test_fixed_setting_never_moves_and_auto_starts_at_32() -> None:
    clock = Clock()
    fixed = bind_limit(7, 512)
    fixed.clock = clock
    for _ in range(5):
        full_round(fixed, clock, 0.01)
    full_round(fixed, clock, 0.01, throttled=True)
    assert fixed.limit == 7
    auto = bind_limit("auto", 512)
    assert (auto.limit, auto.minimum, auto.maximum) == (32, 4, 512)


async def test_waiters_are_served_in_order_and_a_cancelled_one_gives_its_slot_on() -> None:
    limit = AdaptiveLimit(1, 1, 1)
    first = await limit.acquire()
    order: list[str] = []

    async def take(name: str) -> None:
        granted = await limit.acquire()
        order.append(name)
        limit.release(granted, measured=False)

    b = asyncio.create_task(take("b"))
    c = asyncio.create_task(take("c"))
    d = asyncio.create_task(take("d"))
    await asyncio.sleep(0)
    c.cancel()
    limit.release(first, measured=False)
    await asyncio.gather(b, d)
    assert order == ["b", "d"]
    assert limit.in_flight == 0


async def test_lower_priority_writers_wait_until_no_binding_queues() -> None:
    limit = AdaptiveLimit(1, 1, 1)
    first = await limit.acquire()
    await asyncio.wait_for(limit.no_backlog(), 1)  # nobody queued yet: no wait
    queued = asyncio.create_task(limit.acquire())
    await asyncio.sleep(0)
    writer = asyncio.create_task(limit.no_backlog())
    await asyncio.sleep(0.01)
    assert not writer.done()  # a binding waits for a slot: the Event waits too
    limit.release(first, measured=False)
    second = await queued
    await asyncio.wait_for(writer, 1)
    limit.release(second, measured=False)


async def test_acquire_many_takes_what_is_free_and_waiters_are_served_in_order() -> None:
    """A gang's batch takes up to what it wants; once slots run out, waiters queue in order
    and each is handed as many as are free for it when slots come back."""
    clock = Clock()
    limit = AdaptiveLimit(8, 8, 8, clock=clock)
    at, count = await limit.acquire_many(5)
    assert count == 5 and limit.in_flight == 5
    _, rest = await limit.acquire_many(10)
    assert rest == 3 and limit.in_flight == 8
    big = asyncio.create_task(limit.acquire_many(6))
    small = asyncio.create_task(limit.acquire())
    await asyncio.sleep(0)
    assert not big.done() and not small.done()
    for _ in range(4):  # answers read in one turn of the loop
        limit.release(at)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert big.done() and big.result()[1] == 4  # first in line: all four
    assert not small.done()  # behind it, still waiting
    limit.release(at)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert small.done() and limit.in_flight == 8


async def test_a_cancelled_batch_waiter_gives_back_what_it_was_granted() -> None:
    limit = AdaptiveLimit(4, 4, 4)
    granted, _ = await limit.acquire_many(4)
    waiter = asyncio.create_task(limit.acquire_many(3))
    await asyncio.sleep(0)
    for _ in range(3):
        limit.release(granted)
    await asyncio.sleep(0)  # handed to the waiter...
    waiter.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limit.in_flight == 1


async def test_slots_given_back_unused_free_them_and_teach_nothing() -> None:
    clock = Clock()
    limit = AdaptiveLimit(4, 4, 4, clock=clock)
    _, count = await limit.acquire_many(4)
    waiter = asyncio.create_task(limit.acquire_many(3))
    await asyncio.sleep(0)
    limit.give_back(count - 1)  # a batch that found one member to send
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert waiter.done() and waiter.result()[1] == 3 and limit.in_flight == 4
    assert limit._samples == 0  # no round trip was measured


def test_auto_grows_to_256_whatever_the_round_trips_and_only_429s_take_it_lower() -> None:
    """Below 256 round trips say nothing (a busy kube-apiserver's are many times its idle ones
    while more in flight still binds more): 50x the best neither stops the growth nor brings
    it back. A 429 halves it and lowers the floor to where that left it, so round trips hold
    it there instead of growing it back into the 429s, until QUIET seconds pass without one."""
    clock = Clock()
    auto = bind_limit("auto", 512)
    auto.clock = clock
    full_round(auto, clock, 0.01)  # the best round
    climb = []
    for _ in range(12):
        full_round(auto, clock, 0.5)  # 50x the best, round after round
        climb.append(auto.limit)
    assert climb[:3] == [128, 256, 256]  # doubling per round (slow start) from 32, to the floor
    assert auto.limit == AUTO_FLOOR and auto.shrunk == 0
    for _ in range(5):
        full_round(auto, clock, 0.5)
    assert auto.limit == AUTO_FLOOR  # held: not below the floor, and no growth past it
    full_round(auto, clock, 0.5, throttled=True)
    assert auto.limit == AUTO_FLOOR / 2
    for _ in range(5):
        full_round(auto, clock, 0.5)
    assert auto.limit == AUTO_FLOOR / 2  # round trips neither grow nor shrink it now
    full_round(auto, clock, 0.5, throttled=True)
    assert auto.limit == AUTO_FLOOR / 4  # each 429 halves it
    clock.now += QUIET
    for _ in range(10):  # long quiet: below the floor round trips say nothing again
        full_round(auto, clock, 0.5)
    assert auto.limit == AUTO_FLOOR


def test_a_fixed_maximum_below_the_floor_is_the_floor() -> None:
    clock = Clock()
    auto = bind_limit("auto", 100)
    auto.clock = clock
    full_round(auto, clock, 0.01)
    for _ in range(12):
        full_round(auto, clock, 0.5)
    assert auto.limit == 100
