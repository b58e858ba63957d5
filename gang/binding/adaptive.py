"""How many bindings to keep in flight: as many as the API server answers more for.

A fixed number is wrong everywhere but one place. Too few leaves a big server idle (measured on
a real kube-apiserver: 32 in flight bound ~500 pods/s where the server took ~900); too many
queues inside the server, raises every client's latency and ends in 429s from priority and
fairness. So the limit follows the server's answers, as TCP Vegas and Netflix's
concurrency-limits do: per *round* (one limit's worth of answers) the mean round trip is
compared with the best recent round (the server's no-queue latency plus our own):

- an answer 429 (the server says it is overloaded) halves the limit;
- a round trip above ``tolerance`` times the best means requests queue in the server — unless
  the server answers more for it: a real kube-apiserver answers more bindings together as more
  are in flight, so its round trips grow with depth while its throughput still grows (on 16
  cores the answer-knowing binder bound 7,845-9,943 pods/s at 256 in flight where 64 gave
  4,832-6,898, while gang's limit had stopped at 53-68). So a round that was
  held back by the limit and answered ``PAYS`` (5 %) more per growth step than each round at a
  lower limit grows the limit on, however long its round trips; the throughput
  is Little's: the mean in flight over the mean round trip. Only when depth no longer pays
  does the limit shrink in proportion to the queueing (at most by 30 % per round), and round
  trips alone never take it below ``latency_floor``;
- below ``latency_floor`` (for "auto": 256) round trips say nothing: a limit that held
  bindings back doubles per round however long they are (TCP's slow start), from 32 to 256 in
  three rounds of 32, 64 and 128 answers. A busy server's round trips are many times its
  idle ones while more in flight still binds more: on a real kube-apiserver on 2 cores,
  alternating runs bound 1,179-1,383 pods/s at a fixed 256 against 952-1,242 with round trips
  in charge from 32 (which held 32-341 in flight), and on 16 cores the answer-knowing binder's
  best segment was mostly at 256.
  A server that is really overloaded says so with 429s (priority and fairness): a 429 halves
  the limit, as everywhere, and lowers the floor to where that left it until ``QUIET``
  seconds pass without one, so the limit does not climb back into the 429s on round trips'
  silence;
- otherwise, if the limit was what held bindings back (the round's peak in flight reached it),
  it grows by 25 % per round;
- while fewer bindings are wanted than the limit allows, it stays where it is (nothing was
  learnt about more).

The best round is the lowest round mean in a sliding window of rounds, so a server that got
slower for good (a bigger cluster, a busier etcd) becomes the new normal instead of being
seen as congestion for ever. Only rounds the limit did not hold back refresh it (a round at
the limit may only lower it): at the limit, round trips sit near ``tolerance`` times the best
by design, and remembering them as the baseline would ratchet the limit up without end.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Final

#: per-round factors (see the module docstring)
GROWTH: Final = 1.25
#: below the floor (TCP's slow start below its threshold): 32 to 256 in three rounds
SLOW_START: Final = 2.0
THROTTLED: Final = 0.5
MAX_SHRINK: Final = 0.7
#: rounds the best round trip (and the throughput at each limit) is remembered over
WINDOW_ROUNDS: Final = 30
#: how much more a deeper limit must answer than every shallower one to grow on past the
#: round-trip tolerance: 5 % more throughput for one growth step (25 % more in flight), and in
#: that proportion for other steps (throughput growing at least as depth ** 0.22). A queue
#: that only holds requests longer answers no more, and noise rarely beats a whole window
PAYS: Final = 1.05
ELASTICITY: Final = math.log(PAYS) / math.log(GROWTH)
#: seconds without a 429 before the limit may again grow to the floor on round trips' silence
QUIET: Final = 300.0


class AdaptiveLimit:
    """A semaphore whose size follows the round trips it is told about.

    Invariant: ``in_flight`` counts the slots between their ``acquire`` (or ``acquire_many``)
    and their ``release``; at most ``int(limit)`` are held at once (a shrink lets the ones in
    flight finish, it never preempts).
    """

    def __init__(
        self,
        initial: int = 32,
        minimum: int = 4,
        maximum: int = 1024,
        tolerance: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        latency_floor: int | None = None,
    ) -> None:
        if not 1 <= minimum <= initial <= maximum:
            raise ValueError("need 1 <= minimum <= initial <= maximum")
        self.limit = float(initial)
        self.minimum, self.maximum = minimum, maximum
        #: below it round trips neither shrink the limit nor stop its growth; 429s go down to
        #: ``minimum``, and lower it (``_floor``) until ``QUIET`` seconds pass without one
        self.latency_floor = float(minimum if latency_floor is None else latency_floor)
        #: where the last 429 left the limit, and when (the floor until QUIET after it)
        self._throttled_to: float | None = None
        self._throttled_at = 0.0
        self.tolerance = tolerance
        self.clock = clock
        self.in_flight = 0
        #: who waits for slots, in order, and how many each wants
        self._waiters: deque[tuple[asyncio.Future[int], int]] = deque()
        #: a hand-over to the waiters is scheduled for this turn of the event loop
        self._handing_over = False
        #: set while no request waits for a slot (lower-priority writers wait for it)
        self._no_backlog: asyncio.Event | None = None
        # the current round
        self._samples = 0
        self._rtt_sum = 0.0
        #: requests in flight when each answer came, summed (Little: throughput = L / W)
        self._depth_sum = 0
        self._peak = 0
        self._throttled = False
        #: the mean round trip of recent rounds (the best is the server's no-queue latency)
        self._rounds: deque[float] = deque(maxlen=WINDOW_ROUNDS)
        #: (limit, throughput) of recent rounds the limit held back, the latest per run of
        #: rounds at one limit
        self._rates: deque[tuple[float, float]] = deque(maxlen=WINDOW_ROUNDS)
        #: counters for /metrics and tests
        self.grown = 0
        self.shrunk = 0

    # --- the semaphore ---------------------------------------------------------------------

    async def acquire(self) -> float:
        """Wait for a slot; returns the clock at which it was granted (pass it to release)."""
        if self.in_flight >= int(self.limit) or self._waiters:
            await self._wait(1)  # _hand_over counts us in flight before it wakes us
        else:
            self.in_flight += 1
        self._peak = max(self._peak, self.in_flight)
        return self.clock()

    async def acquire_many(self, want: int) -> tuple[float, int]:
        """Wait for at least one slot and take up to ``want`` at once (a gang's bindings are
        sent together); returns the clock at which they were granted and how many. Each is
        released on its own."""
        free = int(self.limit) - self.in_flight
        if free > 0 and not self._waiters:
            count = min(want, free)
            self.in_flight += count
        else:
            count = await self._wait(want)
        self._peak = max(self._peak, self.in_flight)
        return self.clock(), count

    async def _wait(self, want: int) -> int:
        """Queue for slots (FIFO); the slots granted, already counted in flight."""
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        entry = (waiter, want)
        self._waiters.append(entry)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted, then cancelled
                self.in_flight -= waiter.result()
                self._hand_over()
            elif entry in self._waiters:
                self._waiters.remove(entry)
            raise

    async def no_backlog(self) -> None:
        """Return once no request waits for a slot: Events and status writes go out between
        bursts of bindings, never ahead of one."""
        while self._waiters:
            if self._no_backlog is None:
                self._no_backlog = asyncio.Event()
            self._no_backlog.clear()
            await self._no_backlog.wait()

    def release(self, granted: float, throttled: bool = False, measured: bool = True) -> None:
        """A request that held a slot since ``granted`` is answered; ``throttled`` if the
        answer was 429; ``measured`` False for answers that say nothing of the server's load
        (a connection refused, a plugin that did not call the API)."""
        if measured:
            self._sample(self.clock() - granted, throttled)
        self.in_flight -= 1
        self._freed()

    def give_back(self, count: int) -> None:
        """``count`` slots taken but not used for a request (a batch that found fewer members
        or tokens than slots): freed, and nothing learnt of the server."""
        if count:
            self.in_flight -= count
            self._freed()

    def _freed(self) -> None:
        if not self._waiters:
            self._hand_over()
        elif not self._handing_over:  # the answers read in this turn are handed over together,
            self._handing_over = True  # so the first in line gets them all (one batch, not many)
            asyncio.get_running_loop().call_soon(self._hand_over)

    def _hand_over(self) -> None:
        self._handing_over = False
        while self._waiters and self.in_flight < int(self.limit):
            waiter, want = self._waiters.popleft()
            if not waiter.done():
                count = min(want, int(self.limit) - self.in_flight)
                self.in_flight += count
                waiter.set_result(count)
        if not self._waiters and self._no_backlog is not None:
            self._no_backlog.set()

    # --- the controller --------------------------------------------------------------------

    def _sample(self, rtt: float, throttled: bool) -> None:
        """One answer, counted while its request is still in flight."""
        self._samples += 1
        self._rtt_sum += rtt
        self._depth_sum += self.in_flight
        self._throttled = self._throttled or throttled
        if self._samples < max(1, int(self.limit)):
            return
        mean = self._rtt_sum / self._samples
        rate = self._depth_sum / self._samples / mean if mean > 0 else 0.0
        limited = self._peak >= int(self.limit)
        self._adjust(mean, limited, rate)
        self._samples, self._rtt_sum, self._depth_sum = 0, 0.0, 0
        self._peak, self._throttled = self.in_flight - 1, False

    def _depth_pays(self, rate: float) -> bool:
        """This round, held back at the limit, answered more than every remembered round at a
        lower limit, by ``PAYS`` per growth step of depth between them."""
        need = 0.0
        for limit, shallower in self._rates:
            if limit < self.limit:
                need = max(need, shallower * (self.limit / limit) ** ELASTICITY)
        return need > 0 and rate >= need

    def _floor(self) -> float:
        """The floor round trips are judged above: ``latency_floor``, or lower where a recent
        429 left the limit."""
        if self._throttled_to is not None:
            if self.clock() - self._throttled_at < QUIET:
                return min(self.latency_floor, self._throttled_to)
            self._throttled_to = None
        return self.latency_floor

    def _remember_rate(self, rate: float) -> None:
        """Rounds in a row at one limit keep one entry, the latest: a limit that holds (at the
        maximum, say) keeps what the shallower limits answered to be judged against."""
        if self._rates and self._rates[-1][0] == self.limit:
            self._rates[-1] = (self.limit, rate)
        else:
            self._rates.append((self.limit, rate))

    def _adjust(self, mean: float, limited: bool, rate: float) -> None:
        best = min(self._rounds, default=mean)
        pays = limited and self._depth_pays(rate)
        if limited:
            self._remember_rate(rate)
        if not self._rounds or not limited or mean < best:
            # a round the limit held back only ever lowers the baseline: kept at the limit,
            # round trips sit at ``tolerance`` times the best, and remembering those would
            # ratchet the baseline (and the limit) up for as long as the load lasts
            self._rounds.append(mean)
        queueing = mean > self.tolerance * best and not pays
        latency_floor = self._floor()
        floor, top = float(self.minimum), float(self.maximum)
        if self._throttled:
            factor = THROTTLED
        elif limited and self.limit < latency_floor:  # round trips say nothing below the floor
            factor, top = SLOW_START, min(top, latency_floor)
        elif queueing and self.limit > latency_floor:
            factor = max(MAX_SHRINK, self.tolerance * best / mean)
            floor = latency_floor  # round trips alone: not below the floor
        elif limited and not queueing:
            factor = GROWTH
        else:
            return
        before = self.limit
        self.limit = min(top, max(floor, self.limit * factor))
        if self._throttled:
            self._throttled_to, self._throttled_at = self.limit, self.clock()
        if self.limit > before:
            self.grown += 1
        elif self.limit < before:
            self.shrunk += 1


#: "auto": where the limit starts, and the floor below which round trips say nothing
AUTO_START: Final = 32
AUTO_FLOOR: Final = 256


def bind_limit(setting: int | str, maximum: int) -> AdaptiveLimit:
    """The limit a ``bind_concurrency`` setting asks for: "auto" adapts from 32 (or from
    ``maximum`` if smaller) up to ``maximum``: doubling to 256 while bindings wait for slots,
    beyond while round trips hold or depth pays, down to 256 on round trips and to 4 on 429s;
    a number is fixed."""
    if isinstance(setting, int):
        return AdaptiveLimit(setting, setting, setting)
    initial = min(AUTO_START, maximum)
    return AdaptiveLimit(initial, min(4, initial), maximum, latency_floor=min(AUTO_FLOOR, maximum))
