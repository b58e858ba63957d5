"""Which event loop runs ``gang run``: uvloop where it is installed, asyncio's otherwise.

The scheduler is one process whose event loop carries every watch event, binding and answer;
on a many-core control plane that one core is the limit. uvloop (libuv under asyncio's API)
moves the loop's own bookkeeping — ready queue, timers, socket reads and writes — into C.
Nothing in gang depends on which loop runs it, so the choice is a setting (``event_loop``):
``auto`` takes uvloop when it can be imported (it is a dependency on Linux and macOS),
``asyncio`` keeps the standard loop (to rule uvloop out when chasing a problem).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]
T = TypeVar("T")


class EventLoopError(Exception):
    """``event_loop: uvloop`` asked for, but uvloop cannot be imported here."""


def loop_name(choice: EventLoopChoice) -> str:
    """The loop ``choice`` resolves to on this machine: ``uvloop`` or ``asyncio``."""
    available = importlib.util.find_spec("uvloop") is not None
    if choice == "uvloop" and not available:
        raise EventLoopError("event_loop: uvloop, but uvloop is not installed")
    return "uvloop" if choice != "asyncio" and available else "asyncio"


def loop_factory(choice: EventLoopChoice) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """A factory for ``asyncio.Runner``; None means asyncio's default loop."""
    if loop_name(choice) != "uvloop":
        return None
    import uvloop

    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice) -> T:
    """``asyncio.run`` on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)
