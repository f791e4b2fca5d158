"""Structured JSON logs. Tokens, keys, push credentials and prompts are never logged."""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import Any

_FIELDS = (
    "request_id",
    "tenant",
    "method",
    "task_id",
    "turn_id",
    "worker",
    "outcome",
    "agent_kind",
    "reason",  # our own words (e.g. why an agent could not be built), never exception text
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in _FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                doc[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            # The type only: exception text may carry request data.
            doc["error"] = record.exc_info[0].__name__
        return json.dumps(doc, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """Human-readable lines for development (``EDGE_LOG_JSON=false``). A traceback keeps its
    frames but not the exception's text, as the JSON lines keep only its type: a driver's
    error carries the SQL's parameters, prompts included (found by audit)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        # Another handler may have cached the full text in ``exc_text``: never reuse it.
        cached, record.exc_text = record.exc_text, None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatException(self, ei: Any) -> str:
        kind, _, tb = ei
        frames = "".join(traceback.format_tb(tb))
        name = getattr(kind, "__name__", "Exception")
        return f"Traceback (most recent call last):\n{frames}{name} (its text is not logged)"


# Libraries that log data at DEBUG or INFO: aiosqlite and SQLAlchemy's engine log each
# statement with its parameters (prompts, push rows), httpx every request URL (push urls, JWKS
# urls), Alembic every migration context (readiness opens one). They stay at WARNING whatever
# EDGE_LOG_LEVEL says (found by audit: DEBUG logged every prompt through aiosqlite).
_QUIET = ("aiosqlite", "sqlalchemy", "asyncpg", "httpx", "httpcore", "alembic")


def configure_logging(level: str = "INFO", *, json_logs: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_logs else PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
