"""Tests for gang.kube.ratelimit.TokenBucket: burst, pacing at ``rate``, FIFO order, validation.

Most tests run the bucket on a fake clock: its ``asyncio.sleep`` is replaced by one that moves
the fake clock forward by the requested delay (then yields once to the real loop), so the
pacing is checked exactly and instantly. One test uses real time with lower-bound asserts.
"""

from __future__ import annotations

import asyncio
import math
import types

import pytest

from gang.kube import ratelimit
from gang.kube.ratelimit import TokenBucket

_real_sleep = asyncio.sleep


class FakeTime:
    """A clock that only moves when the bucket sleeps (or the test advances it)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []
        #: while set, a sleep never ends by itself (it can only be cancelled)
        self.hang = False
        self.sleeping = asyncio.Event()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.sleeping.set()
        if self.hang:
            await asyncio.Event().wait()
        self.now += delay
        await _real_sleep(0)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    patched = types.SimpleNamespace(Lock=asyncio.Lock, sleep=fake.sleep)
    monkeypatch.setattr(ratelimit, "asyncio", patched)
    return fake


async def acquire_times(bucket: TokenBucket, clock: FakeTime, n: int) -> list[float]:
    """Acquire ``n`` tokens one after another; the fake time (from the start) of each grant."""
    start = clock()
    times = []
    for _ in range(n):
        await bucket.acquire()
        times.append(clock() - start)
    return times


async def test_burst_is_available_at_once(clock: FakeTime) -> None:
    bucket = TokenBucket(rate=2, burst=5, clock=clock)
    assert await acquire_times(bucket, clock, 5) == [0.0] * 5  # the clock never moved
    assert clock.sleeps == []


async def test_after_the_burst_tokens_come_at_rate(clock: FakeTime) -> None:
    bucket = TokenBucket(rate=10, burst=3, clock=clock)
    times = await acquire_times(bucket, clock, 7)
    assert times == pytest.approx([0.0, 0.0, 0.0, 0.1, 0.2, 0.3, 0.4])
    assert clock.sleeps == pytest.approx([0.1] * 4)


async def test_idle_time_refills_but_never_beyond_the_burst(clock: FakeTime) -> None:
    bucket = TokenBucket(rate=4, burst=2, clock=clock)
    await acquire_times(bucket, clock, 2)
    clock.advance(3600)  # an hour idle earns 2 tokens, not 14,400
    assert await acquire_times(bucket, clock, 3) == pytest.approx([0.0, 0.0, 0.25])


async def test_a_partial_token_only_waits_for_the_rest(clock: FakeTime) -> None:
    bucket = TokenBucket(rate=10, burst=1, clock=clock)
    await bucket.acquire()
    clock.advance(0.06)  # 0.6 of a token saved up
    await bucket.acquire()
    assert clock.sleeps == pytest.approx([0.04])


async def test_fractional_rate(clock: FakeTime) -> None:
    bucket = TokenBucket(rate=0.5, burst=1, clock=clock)
    assert await acquire_times(bucket, clock, 3) == pytest.approx([0.0, 2.0, 4.0])


async def test_long_run_average_is_the_rate(clock: FakeTime) -> None:
    bucket = TokenBucket(rate=50, burst=10, clock=clock)
    times = await acquire_times(bucket, clock, 510)
    # 10 free, then 500 more at 50/s
    assert times[-1] == pytest.approx(10.0)


async def test_waiters_are_served_first_come_first_served(clock: FakeTime) -> None:
    bucket = TokenBucket(rate=10, burst=1, clock=clock)
    granted: list[int] = []

    async def worker(i: int) -> None:
        await bucket.acquire()
        granted.append(i)

    tasks = []
    for i in range(6):
        tasks.append(asyncio.create_task(worker(i)))
        await _real_sleep(0)  # let it queue before the next one starts
    await asyncio.gather(*tasks)
    assert granted == list(range(6))
    assert clock() - 1000.0 == pytest.approx(0.5)


async def test_a_cancelled_waiter_does_not_block_the_others(clock: FakeTime) -> None:
    bucket = TokenBucket(rate=10, burst=1, clock=clock)
    await bucket.acquire()
    # the first waiter sleeps "forever" and is cancelled; the next one must still get a token
    clock.hang = True
    first = asyncio.create_task(bucket.acquire())
    await asyncio.wait_for(clock.sleeping.wait(), 1.0)
    clock.hang = False
    second = asyncio.create_task(bucket.acquire())
    await _real_sleep(0)
    assert not second.done()  # queued behind the first
    first.cancel()
    await asyncio.wait_for(second, 1.0)
    assert first.cancelled()
    assert clock() - 1000.0 == pytest.approx(0.1)  # the second paid for its own token


async def test_real_time_pacing_lower_bound() -> None:
    loop = asyncio.get_running_loop()
    bucket = TokenBucket(rate=100, burst=2)
    started = loop.time()
    order: list[int] = []

    async def worker(i: int) -> None:
        await bucket.acquire()
        order.append(i)

    await asyncio.gather(*(worker(i) for i in range(6)))
    elapsed = loop.time() - started
    assert order == list(range(6))
    # 2 from the burst, then 4 at 100/s: at least ~40 ms (a little slack for timer rounding)
    assert elapsed >= 0.035


@pytest.mark.parametrize(
    ("rate", "burst"),
    [(0, 1), (-1, 1), (1, 0), (1, -5), (0, 0)],
)
def test_invalid_parameters_raise(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate must be a finite number > 0 and burst >= 1"):
        TokenBucket(rate, burst)


def test_nan_rate_is_rejected() -> None:
    with pytest.raises(ValueError):
        TokenBucket(math.nan, 1)


async def test_acquire_many_takes_what_is_there_after_one(clock: FakeTime) -> None:
    """A batch waits for one token like anyone, then takes the rest of what is saved up."""
    bucket = TokenBucket(rate=10, burst=5, clock=clock)
    assert await bucket.acquire_many(3) == 3
    assert await bucket.acquire_many(8) == 2  # the burst's last two
    assert clock.sleeps == []
    assert await bucket.acquire_many(8) == 1  # waits for one token, and only one has come
    assert clock.sleeps == [pytest.approx(0.1)]
