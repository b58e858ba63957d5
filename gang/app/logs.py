"""Logging set-up: human-readable text for a terminal, one JSON object per line for a cluster.

Log collectors parse JSON lines without regexes, so ``format: json`` is what the Deployment
uses. Nothing here ever logs credentials: kubeconfig contents and tokens never reach a log call.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import orjson
from aiohttp.http_exceptions import BadHttpMessage

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


class MalformedRequests(logging.Filter):
    """aiohttp logs every request its HTTP parser rejects (an unknown method, a broken request
    line) as an ERROR with a traceback, after answering it 400. Anyone who reaches a port could
    fill the log that way, so such a record becomes one line at DEBUG (dropped unless DEBUG is
    on); every other aiohttp error is left as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, BadHttpMessage):
            return True
        record.msg, record.args, record.exc_info, record.exc_text = (
            "malformed request answered 400: %s",
            (error.message,),
            None,
            None,
        )
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


#: installed once on aiohttp's server logger (every HTTP server of the process logs through it)
MALFORMED_REQUESTS = MalformedRequests()


def quiet_malformed_requests() -> None:
    logger = logging.getLogger("aiohttp.server")
    if MALFORMED_REQUESTS not in logger.filters:
        logger.addFilter(MALFORMED_REQUESTS)


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    quiet_malformed_requests()
