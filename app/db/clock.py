"""The storage's clock in SQL, for lease and backoff times.

PostgreSQL: the server clock (``now()``), so every replica compares against one clock. SQLite
runs in one process, where the process clock *is* the database clock; it is bound as a
parameter so it is stored and compared in SQLAlchemy's own datetime text format
(``CURRENT_TIMESTAMP`` has another format and second resolution).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.documents import as_utc
from app.db.models.base import Timestamp


@dataclass(frozen=True)
class SqlClock:
    now: Callable[[], ColumnElement[Any]]
    after: Callable[[float], ColumnElement[Any]]  # now + seconds
    read: Callable[[AsyncSession], Awaitable[datetime]]  # the time now, in a transaction


def _server_after(seconds: float) -> ColumnElement[Any]:
    return func.now() + func.make_interval(0, 0, 0, 0, 0, 0, literal(float(seconds)))


def _process_now() -> ColumnElement[Any]:
    return literal(datetime.now(UTC), type_=Timestamp)


def _process_after(seconds: float) -> ColumnElement[Any]:
    return literal(datetime.now(UTC) + timedelta(seconds=seconds), type_=Timestamp)


async def _server_read(session: AsyncSession) -> datetime:
    return as_utc((await session.execute(select(func.now()))).scalar_one())


async def _process_read(_session: AsyncSession) -> datetime:
    return datetime.now(UTC)


SERVER_CLOCK = SqlClock(now=func.now, after=_server_after, read=_server_read)
PROCESS_CLOCK = SqlClock(now=_process_now, after=_process_after, read=_process_read)
