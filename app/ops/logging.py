"""Structured logs: JSON lines, or plain lines for development. Only the fields named in
``_FIELDS`` leave a record (never its other extras): tokens, keys, push credentials and prompts
are never logged."""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from datetime import UTC, datetime
from typing import Any

from app.tracing.spans import current_ids
from app.tracing.spans import enabled as tracing_enabled

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
    "origin",  # an allowlisted gateway origin (a JWKS fetch that failed)
    "result",  # a fixed label (how that fetch failed)
    "variable",  # the name (never the value) of an environment variable a turn needs
    "model",  # an llm agent's configured model name
    "tool",  # an llm agent's tool name
    "peer",  # the directory name of an A2A agent an llm agent called (app.peers)
    "plugin",  # an installed plugin's key
    "attempt",  # which model call of a step
    "event",  # a loop event's type name
    "admin_token",  # the name (never the token) of the admin token behind a write
    "action",  # which admin write (a fixed label such as tenants.create)
)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's loggable extras, in ``_FIELDS`` order, then the trace and span ids of
    the span it was written in (``TraceIds``, issue 53)."""
    found = {name: getattr(record, name, None) for name in _FIELDS}
    fields = {name: value for name, value in found.items() if value is not None}
    trace_id = getattr(record, "trace_id", None)
    if trace_id is not None:
        fields["trace_id"] = trace_id
        fields["span_id"] = getattr(record, "span_id", None)
    return fields


class TraceIds(logging.Filter):
    """Stamps a record written inside a span with its ``trace_id`` and ``span_id`` (hex, as
    trace backends show them). A handler filter: it runs in the thread and task that logged,
    where the span is current."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not tracing_enabled():
            return True
        ids = current_ids()
        if ids is not None:
            record.trace_id, record.span_id = ids
        return True


# A value printed bare: no space, quote, backslash or ``=``, so ``key=value`` pairs split back
_BARE = re.compile(r"[^\s\"\\=]+")


def _plain_value(value: Any) -> str:
    """``value`` bare when it reads back unambiguously, else quoted with JSON's escapes (a
    newline or control character in a value can neither split the line nor restyle it)."""
    text = str(value)
    if _BARE.fullmatch(text) and text.isprintable():
        return text
    return json.dumps(text, ensure_ascii=not text.isprintable())


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(_fields(record))
        if record.exc_info and record.exc_info[0] is not None:
            # The type only: exception text may carry request data.
            doc["error"] = record.exc_info[0].__name__
        return json.dumps(doc, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """Human-readable lines for development (``EDGE_LOG_JSON=false``): the message, then the
    fields the JSON lines carry as ``key=value`` (found by trying the quickstart: the plain
    lines had dropped them all). A traceback keeps its frames but not the exception's text,
    as the JSON lines keep only its type: a driver's error carries the SQL's parameters,
    prompts included (found by audit)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        # Another handler may have cached the full text in ``exc_text``: never reuse it.
        cached, record.exc_text = record.exc_text, None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:
        pairs = [f"{name}={_plain_value(value)}" for name, value in _fields(record).items()]
        return " ".join([super().formatMessage(record), *pairs])

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
    handler.addFilter(TraceIds())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
