"""JSON logs are one parseable object per line; text logs stay readable."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import orjson
import pytest

from gang.app.logs import JsonFormatter, configure_logging


def test_json_lines_carry_level_logger_message_and_exception() -> None:
    formatter = JsonFormatter()
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord(
            "gang.test", logging.ERROR, __file__, 1, "bound %d pods", (3,), sys.exc_info()
        )
    line = formatter.format(record)
    assert "\n" not in line.split('"exception"')[0]
    entry = orjson.loads(line)
    assert entry["level"] == "ERROR" and entry["logger"] == "gang.test"
    assert entry["message"] == "bound 3 pods"
    assert "ValueError: boom" in entry["exception"]
    assert entry["time"].endswith("+00:00")


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root_logger")
def test_configure_logging_switches_format(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", "json")
    logging.getLogger("gang.x").info("hello %s", "world")
    assert orjson.loads(capsys.readouterr().err.strip())["message"] == "hello world"
    configure_logging("WARNING", "text")
    logging.getLogger("gang.x").info("hidden")
    logging.getLogger("gang.x").warning("shown")
    err = capsys.readouterr().err
    assert "hidden" not in err and "WARNING gang.x: shown" in err
