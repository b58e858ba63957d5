"""An API server's write latency shape: bounded workers, a service time, and an inflight cap.

Why: left alone the simulator answers every write as fast as Python can, so a binder's
throughput grows without bound with its concurrency, and a benchmark against the simulator says
nothing about a real cluster. A real kube-apiserver serves writes (admission, validation, the
etcd round trip) with a bounded amount of parallelism: throughput rises with client concurrency
and then saturates, and past ``--max-mutating-requests-inflight`` it answers 429. This module
models exactly that, as a closed queueing network a client can reason about:

- every write first pays ``network_seconds`` outside the server (client, network, admission);
  it holds nothing, so it overlaps freely with other writes;
- then it queues, first come first served, for one of ``workers`` servers, and holds it for an
  exponentially distributed service time of mean ``service_seconds`` (seeded RNG); the
  simulator's handler runs at the end of that service, so the write happens then;
- when ``max_inflight`` writes are already queued or in service, the next one is answered 429
  TooManyRequests with ``Retry-After: 1`` and a ``Status`` body, and does not happen.

``expected_throughput`` gives the model's exact closed-system throughput (Mean Value Analysis),
so a benchmark can compare what it measured with what the model allows (``throughput_curve``
for every concurrency up to a bound at once).

The ``real`` profile is calibrated against a real kube-apiserver (2,000 kubelet-free nodes,
8,000 pods): a binder that already knew every answer and only POSTed bindings reached 714 pods/s
with 64 bindings in flight and 909 pods/s with 128 in flight. 16 workers of 17.5 ms mean service
behind a 72 ms network delay give 710 writes/s at 64 clients and 914 at 128 (within 0.6% of
both; the saturation throughput is 16 / 17.5 ms = 914 writes/s), and the inflight cap is
kube-apiserver's default ``--max-mutating-requests-inflight`` of 200.

The ``many-core`` profile is the same fit to a 16-core control plane (kube-apiserver v1.23 +
etcd on 16 cores, 2,000 kubelet-free nodes, 8,000 pods): the answer-knowing binder reached 3,429
pods/s with 128 bindings in flight and 4,227 with 256. 64 workers of 15 ms mean service behind a
22 ms network delay give 3,458 and 4,267 (within 1%; saturation 64 / 15 ms = 4,267 writes/s),
with the same inflight cap. It lets a many-core ratio be tracked on any machine between runs on
a many-core one.

The model is off unless configured (``SimCluster(latency=...)``, ``gang sim serve
--api-latency``). Its knobs are plain attributes and may change while the simulator runs (more
workers take effect at the next write that finishes); reads, lists and watches never pass
through it.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from gang.sim import errors

#: (bindings in flight, pods bound per second) measured on a real kube-apiserver
CALIBRATION: tuple[tuple[int, float], ...] = ((64, 714.0), (128, 909.0))
#: the ``real`` profile fitted to ``CALIBRATION`` (see the module docstring)
REAL_WORKERS = 16
REAL_SERVICE_SECONDS = 0.0175
REAL_NETWORK_SECONDS = 0.072
#: the ``many-core`` profile, fitted to ``MANY_CORE_CALIBRATION`` (16 cores)
MANY_CORE_CALIBRATION: tuple[tuple[int, float], ...] = ((128, 3429.0), (256, 4227.0))
MANY_CORE_WORKERS = 64
MANY_CORE_SERVICE_SECONDS = 0.015
MANY_CORE_NETWORK_SECONDS = 0.022
#: kube-apiserver's default --max-mutating-requests-inflight
REAL_MAX_INFLIGHT = 200
#: the Retry-After a throttled write is told
RETRY_AFTER_SECONDS = 1


@dataclass(slots=True)
class LatencyCounts:
    #: writes that got a worker and were handed to the API (whatever it answered)
    served: int = 0
    #: writes answered 429 because ``max_inflight`` were already queued or in service
    throttled: int = 0
    #: most writes holding a worker at once (at most ``workers``)
    peak_in_service: int = 0
    #: most writes waiting for a worker at once
    peak_queued: int = 0
    #: most writes queued or in service at once (what ``max_inflight`` bounds)
    peak_inflight: int = 0
    #: worker-seconds spent serving writes (busy_seconds / elapsed / workers = utilisation)
    busy_seconds: float = 0.0


@dataclass(slots=True)
class ApiLatency:
    """The write path of one API server. The defaults are the calibrated ``real`` profile."""

    workers: int = REAL_WORKERS
    service_seconds: float = REAL_SERVICE_SECONDS
    network_seconds: float = REAL_NETWORK_SECONDS
    max_inflight: int | None = REAL_MAX_INFLIGHT
    seed: int | None = None
    counts: LatencyCounts = field(default_factory=LatencyCounts, compare=False)
    _rng: random.Random = field(init=False, repr=False, compare=False)
    _busy: int = field(default=0, init=False, repr=False, compare=False)
    _waiting: deque[asyncio.Future[None]] = field(
        default_factory=deque, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")
        if self.service_seconds < 0 or self.network_seconds < 0:
            raise ValueError("service and network times must not be negative")
        if self.max_inflight is not None and self.max_inflight < 1:
            raise ValueError(f"max_inflight must be at least 1, not {self.max_inflight}")
        self._rng = random.Random(self.seed)

    def reseed(self, seed: int | None) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    @property
    def in_service(self) -> int:
        return self._busy

    @property
    def queued(self) -> int:
        return sum(1 for turn in self._waiting if not turn.done())

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        """Around one write: the network delay, the 429 check, a worker for the service time.

        The body (the handler) runs while the worker is still held; the worker is freed when
        the body ends, however it ends.
        """
        if self.network_seconds > 0:
            await asyncio.sleep(self.network_seconds)
        if self.max_inflight is not None and self._busy + self.queued >= self.max_inflight:
            self.counts.throttled += 1
            raise errors.too_many_requests(RETRY_AFTER_SECONDS)
        await self._take_worker()
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            if self.service_seconds > 0:
                await asyncio.sleep(self._rng.expovariate(1.0 / self.service_seconds))
            self.counts.served += 1
            yield
        finally:
            self.counts.busy_seconds += loop.time() - started
            self._free_worker()

    async def _take_worker(self) -> None:
        """Wait, first come first served, until a worker is ours (``_busy`` counts it)."""
        if self._busy < self.workers and not self.queued:
            self._busy += 1
            self._note_peaks()
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        self._note_peaks()
        try:
            await turn  # _free_worker counted us busy before waking us
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._free_worker()  # woken and cancelled in one step: pass the worker on
            raise
        finally:
            if turn in self._waiting:
                self._waiting.remove(turn)
        self._note_peaks()

    def _free_worker(self) -> None:
        self._busy -= 1
        while self._waiting and self._busy < self.workers:
            turn = self._waiting.popleft()
            if not turn.done():  # a cancelled waiter is skipped
                self._busy += 1
                turn.set_result(None)

    def _note_peaks(self) -> None:
        counts, queued = self.counts, self.queued
        counts.peak_in_service = max(counts.peak_in_service, self._busy)
        counts.peak_queued = max(counts.peak_queued, queued)
        counts.peak_inflight = max(counts.peak_inflight, self._busy + queued)


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s)")


def _duration(value: str) -> float:
    match = _DURATION.fullmatch(value)
    if match is None:
        raise ValueError("expected a duration with a unit, e.g. 17ms or 0.5s")
    number = float(match.group(1))
    return number / 1000 if match.group(2) == "ms" else number


def _count(value: str, *, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError("expected a whole number") from None
    if number < minimum:
        raise ValueError(f"must be at least {minimum}")
    return number


def _inflight(value: str) -> int | None:
    return None if value.lower() == "none" else _count(value, minimum=1)


#: spec key -> (ApiLatency field, parser of its value)
_KNOBS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "workers": ("workers", lambda value: _count(value, minimum=1)),
    "service": ("service_seconds", _duration),
    "network": ("network_seconds", _duration),
    "inflight": ("max_inflight", _inflight),
    "seed": ("seed", lambda value: _count(value, minimum=0)),
}
_KEYS = ", ".join(_KNOBS)


def parse_latency(spec: str) -> ApiLatency | None:
    """``none`` (no model), ``real`` (calibrated on a 2-core control plane), ``many-core``
    (on a 16-core one), or ``key=value,...``.

    Keys: ``workers`` (count), ``service`` and ``network`` (durations in ms or s), ``inflight``
    (count, or ``none`` for no cap) and ``seed``; keys left out keep the real profile's values.
    E.g. ``workers=16,service=17ms,network=60ms,inflight=200``. ValueError names a bad part.
    """
    text = spec.strip()
    if text.lower() == "none":
        return None
    if text.lower() == "real":
        return ApiLatency()
    if text.lower() == "many-core":
        return ApiLatency(
            workers=MANY_CORE_WORKERS,
            service_seconds=MANY_CORE_SERVICE_SECONDS,
            network_seconds=MANY_CORE_NETWORK_SECONDS,
        )
    if not text:
        raise ValueError("empty API latency spec: use none, real, many-core, or key=value pairs")
    knobs: dict[str, Any] = {}
    for part in (piece.strip() for piece in text.split(",")):
        key, sep, value = (piece.strip() for piece in part.partition("="))
        if not sep or not key or not value:
            raise ValueError(f"{part!r}: expected key=value (keys: {_KEYS})")
        if key not in _KNOBS:
            raise ValueError(f"{part!r}: unknown key (keys: {_KEYS})")
        knob, convert = _KNOBS[key]
        if knob in knobs:
            raise ValueError(f"{part!r}: {key} given twice")
        try:
            knobs[knob] = convert(value)
        except ValueError as err:
            raise ValueError(f"{part!r}: {err}") from None
    return ApiLatency(**knobs)


def expected_throughput(latency: ApiLatency, clients: int) -> float:
    """Writes per second with ``clients`` writes always in flight (``max_inflight`` ignored).

    Exact Mean Value Analysis of the closed network of two stations: a delay station (every
    write spends ``network_seconds`` there, with no queueing) and a ``workers``-server station
    of exponential service (rate min(j, workers) / service_seconds with j writes present), whose
    queue-length distribution p(j | n) the load-dependent recursion carries from n-1 to n
    writes. p(0 | n) comes from the delay station's own marginal (all n writes in the network),
    not from 1 - sum(p), which loses all precision once the workers are saturated. O(clients²).
    """
    return throughput_curve(latency, clients)[-1]


def throughput_curve(latency: ApiLatency, clients: int) -> list[float]:
    """``expected_throughput`` for 0, 1, ..., ``clients`` clients: the recursion yields them all."""
    if clients < 0:
        raise ValueError(f"clients must not be negative, not {clients}")
    c, s, z = latency.workers, latency.service_seconds, latency.network_seconds
    if s <= 0 and z <= 0:
        return [0.0] + [float("inf")] * clients
    curve = [0.0]
    p = [1.0]  # p[j]: probability that j of the n-1 other writes are at the workers
    for n in range(1, clients + 1):
        # arrival theorem: a write arriving at the workers sees the network with n-1 writes
        residence = sum(j * s / min(j, c) * p[j - 1] for j in range(1, n + 1))
        throughput = n / (z + residence)
        p = [throughput * z / n * p[0]] + [
            throughput * s / min(j, c) * p[j - 1] for j in range(1, n + 1)
        ]
        curve.append(throughput)
    return curve
