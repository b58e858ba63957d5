"""A token bucket: the client-side QPS/burst limit every well-behaved controller has.

A scheduler that binds a 1,000-pod gang at full speed can flood an apiserver and get the whole
control plane throttled (priority and fairness then answers 429 to everyone). kube-scheduler
limits itself with client-go's token bucket (``--kube-api-qps``/``--kube-api-burst``); this is
the same idea for asyncio: ``await limiter.acquire()`` before each request.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up. Fair: waiters are served FIFO."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not math.isfinite(rate) or rate <= 0 or burst < 1:
            raise ValueError("rate must be a finite number > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self) -> None:
        if not self._lock.locked():  # nobody waits: take a token without queueing (no await
            self._refill()  # between the check and the take, so this cannot race)
            if self._tokens >= 1:
                self._tokens -= 1
                return
        async with self._lock:  # FIFO: the lock queues waiters in arrival order
            self._refill()
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.rate)
                self._refill()
            self._tokens -= 1

    async def acquire_many(self, want: int) -> int:
        """Wait for one token as ``acquire`` does, then take up to ``want - 1`` more that are
        there now (none while others wait: they are first); returns how many were taken."""
        await self.acquire()
        if want <= 1 or self._lock.locked():
            return 1
        self._refill()
        extra = min(want - 1, int(self._tokens))
        self._tokens -= extra
        return 1 + extra
