"""JSON logs are one parseable object per line; text logs stay readable."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import orjson
import pytest
from aiohttp import web

from gang.app.logs import (
    MALFORMED_REQUESTS,
    JsonFormatter,
    configure_logging,
    quiet_malformed_requests,
)


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


BAD_LENGTH = b"GET /healthz HTTP/1.1\r\nContent-Length: x\r\n\r\n"
BAD_VERSION = b"GET /healthz HTTP/9.9\r\n\r\n"


async def _raw(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read(200)
    writer.close()
    return answer


async def test_malformed_requests_are_answered_400_without_an_error_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without the filter each of these logs an ERROR with a traceback: a cheap log flood."""
    app = web.Application()

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    logger = logging.getLogger("aiohttp.server")
    try:
        caplog.set_level(logging.INFO)
        logger.removeFilter(MALFORMED_REQUESTS)
        assert (await _raw(port, BAD_LENGTH)).split(b"\r\n")[0].endswith(b" 400 Bad Request")
        for _ in range(100):  # aiohttp logs it after answering
            if any(r.levelno == logging.ERROR for r in caplog.records):
                break
            await asyncio.sleep(0.01)
        assert any(r.levelno == logging.ERROR for r in caplog.records)  # the flood, unfiltered
        caplog.clear()
        quiet_malformed_requests()
        for request in (BAD_LENGTH, BAD_VERSION, b"FOO@ / HTTP/1.1\r\n\r\n", b"\x00\x01x\r\n\r\n"):
            assert (await _raw(port, request)).split(b"\r\n")[0].endswith(b" 400 Bad Request")
        assert (
            (await _raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
            .split(b"\r\n")[0]
            .endswith(b" 200 OK")
        )
        await asyncio.sleep(0.1)
        assert [r for r in caplog.records if r.name == "aiohttp.server"] == []
        caplog.set_level(logging.DEBUG)
        await _raw(port, BAD_VERSION)
        await asyncio.sleep(0.1)
        lines = [r for r in caplog.records if r.name == "aiohttp.server"]
        assert [r.levelno for r in lines] == [logging.DEBUG] and lines[0].exc_info is None
        assert "malformed request answered 400" in lines[0].getMessage()
    finally:
        logger.removeFilter(MALFORMED_REQUESTS)
        await runner.cleanup()
