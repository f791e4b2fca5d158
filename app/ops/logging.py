"""Structured JSON logs. Tokens, keys, push credentials and prompts are never logged."""

from __future__ import annotations

import json
import logging
import sys
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


def configure_logging(level: str = "INFO", *, json_logs: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json_logs:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic narrates every migration context at INFO (readiness checks open one).
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # httpx logs every request URL at INFO: push urls and JWKS urls are not for the log stream.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
