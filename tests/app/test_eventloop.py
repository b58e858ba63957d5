"""Which event loop ``gang run`` takes (the process itself is run on both loops in
tests/scheduler/test_restart.py)."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from gang.app import eventloop
from gang.app.config import load_settings


def test_auto_takes_uvloop_where_it_is_installed_and_asyncio_keeps_the_standard_loop() -> None:
    assert importlib.util.find_spec("uvloop") is not None  # a dependency on this platform
    assert eventloop.loop_name("auto") == "uvloop"
    assert eventloop.loop_name("uvloop") == "uvloop"
    assert eventloop.loop_name("asyncio") == "asyncio"

    async def loop_type() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert eventloop.run(loop_type(), "auto").startswith("uvloop")
    assert eventloop.run(loop_type(), "asyncio").startswith("asyncio")


def test_asking_for_uvloop_where_it_is_missing_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "uvloop" else real_find_spec(name, *a),
    )
    assert eventloop.loop_name("auto") == "asyncio"
    with pytest.raises(eventloop.EventLoopError, match="uvloop is not installed"):
        eventloop.loop_name("uvloop")


def test_the_setting_comes_from_file_environment_or_flag() -> None:
    assert load_settings(environ={}).event_loop == "auto"
    assert load_settings(environ={"GANG_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"
    with pytest.raises(Exception, match="event_loop"):
        load_settings(environ={"GANG_EVENT_LOOP": "trio"})
