"""The storage's clock in SQL, for lease and backoff times.

PostgreSQL: the server clock (``now()``), so every replica compares against one clock. SQLite
runs in one process, where the process clock *is* the database clock; it is bound as a
parameter so it is stored and compared in SQLAlchemy's own datetime text format
(``CURRENT_TIMESTAMP`` has another format and second resolution).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, literal

from app.db.models.base import Timestamp


@dataclass(frozen=True)
class SqlClock:
    now: Callable[[], ColumnElement[Any]]
    after: Callable[[float], ColumnElement[Any]]  # now + seconds


def _server_after(seconds: float) -> ColumnElement[Any]:
    return func.now() + func.make_interval(0, 0, 0, 0, 0, 0, literal(float(seconds)))


def _process_now() -> ColumnElement[Any]:
    return literal(datetime.now(UTC), type_=Timestamp)


def _process_after(seconds: float) -> ColumnElement[Any]:
    return literal(datetime.now(UTC) + timedelta(seconds=seconds), type_=Timestamp)


SERVER_CLOCK = SqlClock(now=func.now, after=_server_after)
PROCESS_CLOCK = SqlClock(now=_process_now, after=_process_after)
