"""Shared tools for the bad-input and security tests: garbage generators, a server thread,
a scheduler whose task can be watched, and a log recorder.

Why a server thread: hypothesis drives a synchronous test function one example at a time, and
shrinks a failing one. Keeping the servers (simulator, extender, status server) on an event
loop of their own lets each example be one plain HTTP request, so a failure shrinks to the one
body that caused it, without restarting a server per example.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import http.client
import logging
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from hypothesis import strategies as st

from gang.app.scheduler import GangScheduler
from gang.kube.client import make_api_client
from gang.models.quantity import resource_units
from gang.models.settings import SchedulerConfig
from gang.sim.cluster import SimCluster
from gang.state.podinfo import parse_pod

T = TypeVar("T")
Obj = dict[str, Any]

# --- garbage ----------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
#: any JSON document (no NaN or infinity: JSON has none)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
#: values that look like quantities but mostly are not, and ones that are negative or huge
quantity_garbage = st.one_of(
    st.sampled_from(["lots", "-1", "-500m", "1Qi", "1e", ".", "", " 1", "1 ", "0x10", "1e400"]),
    st.sampled_from(["1e99999999999", "99999999999999999999999Ei", "-0.000000001", "+1", "\u0661"]),
    st.from_regex(
        r"[+-]?[0-9]{0,8}(\.[0-9]{0,4})?([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,4})?",
        fullmatch=True,
    ),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    json_values,
)
#: garbage for one field: a value of the wrong type, an out-of-range number, a bad quantity
field_garbage = st.one_of(
    json_values,
    quantity_garbage,
    st.sampled_from([0, -1, 2**31, 2**63 - 1, "", "x" * 300, [], {}, [None], {"": None}]),
)


def paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into a JSON document (the root excluded)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield (*prefix, key)
            yield from paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield (*prefix, i)
            yield from paths(value, (*prefix, i))


def _holds(node: Any, key: Any) -> bool:
    if isinstance(node, dict):
        return key in node
    return isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node)


def replace_at(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``obj`` with ``value`` at ``path``; unchanged if an earlier change removed it."""
    out = copy.deepcopy(obj)
    node = out
    for key in path[:-1]:
        if not _holds(node, key):
            return out
        node = node[key]
    if _holds(node, path[-1]):
        node[path[-1]] = value
    return out


@st.composite
def mutations(draw: st.DrawFn, template: Any, keep: frozenset[str] = frozenset()) -> Any:
    """``template`` with one to three of its fields replaced by garbage (never a path through
    a key in ``keep``, e.g. ``metadata`` so that an object keeps its name)."""
    choices = [p for p in paths(template) if not any(k in keep for k in p if isinstance(k, str))]
    out = template
    for _ in range(draw(st.integers(1, 3))):
        out = replace_at(out, draw(st.sampled_from(choices)), draw(field_garbage))
    return out


# --- HTTP, synchronously ------------------------------------------------------------------------


def http_request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection; the answer's status, headers and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


class LoopThread:
    """An event loop running in a thread of its own; ``run`` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def cancel_rest() -> None:
            current = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not current]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        self.run(cancel_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    try:
        yield thread
    finally:
        thread.close()


# --- a scheduler whose task the test can watch -----------------------------------------------


@dataclass
class Running:
    scheduler: GangScheduler
    task: asyncio.Task[None]

    def crashed(self) -> BaseException | None:
        """The exception the scheduler's task ended with, if it ended at all."""
        if not self.task.done():
            return None
        if self.task.cancelled():
            return asyncio.CancelledError()
        return self.task.exception() or RuntimeError("the scheduler returned")


@asynccontextmanager
async def scheduler_on(cluster: SimCluster, **config: Any) -> AsyncIterator[Running]:
    """The real scheduler against ``cluster`` (kubeconfig, HTTP), its task exposed."""
    api_client = await make_api_client(str(cluster.kubeconfig_path))
    scheduler = GangScheduler(api_client, SchedulerConfig(**config), instance="badinput")
    task = asyncio.create_task(scheduler.run())
    try:
        await asyncio.wait_for(scheduler.ready.wait(), 10)
        yield Running(scheduler, task)
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await api_client.close()


# --- invariants --------------------------------------------------------------------------------


async def assert_not_overcommitted(cluster: SimCluster) -> int:
    """Per node, the requests of its non-terminal pods fit its allocatable; returns the number of
    bound pods checked. Unbound pods are skipped unread: garbage ones cannot be parsed, and
    take no room."""
    pods = cluster.api.rt_pods.storage_key
    nodes = {
        n["metadata"]["name"]: n for n in cluster.store.items(cluster.api.rt_nodes.storage_key)
    }
    used: dict[str, dict[str, int]] = {}
    checked = 0
    for raw in cluster.store.items(pods):
        if not (raw.get("spec") or {}).get("nodeName"):
            continue
        info = parse_pod(raw)  # a bound pod must be readable: someone placed it
        if info.terminal:
            continue
        checked += 1
        total = used.setdefault(info.node_name, {})
        for resource, amount in info.requests.items():
            total[resource] = total.get(resource, 0) + amount
    for name, total in used.items():
        assert name in nodes, f"pod bound to unknown node {name}"
        allocatable = nodes[name]["status"]["allocatable"]
        capacity = {k: resource_units(k, v) for k, v in allocatable.items()}
        over = {k: (v, capacity.get(k, 0)) for k, v in total.items() if v > capacity.get(k, 0)}
        assert not over, f"node {name} over-committed: {over}"
    return checked


# --- logs ---------------------------------------------------------------------------------------


class LogRecorder(logging.Handler):
    """Keeps every record from every logger while installed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def crashes(self) -> list[logging.LogRecord]:
        """Errors and logged exceptions: what a crash of any task or callback leaves."""
        return [r for r in self.records if r.levelno >= logging.ERROR or r.exc_info]


@contextlib.contextmanager
def recording_logs(level: int = logging.WARNING) -> Iterator[LogRecorder]:
    recorder = LogRecorder()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(recorder)
    root.setLevel(level)
    try:
        yield recorder
    finally:
        root.removeHandler(recorder)
        root.setLevel(old_level)
