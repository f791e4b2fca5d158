"""The database handle: one async engine and session factory per process.

``DATABASE_URL`` picks the backend: ``postgresql+asyncpg://`` in production and tests,
``sqlite+aiosqlite:///`` as the embedded single-process default (ARCHITECTURE, Storage).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import NullPool

from app.db.signals import Signals
from app.db.sqlite_file import make_private
from app.db.statement_pool import StatementPool
from app.errors import ConfigError

if TYPE_CHECKING:
    from app.db.storage import Storage

_SUPPORTED_DRIVERS = ("postgresql+asyncpg", "sqlite+aiosqlite")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers proceed during a write; busy_timeout turns writer contention into a
    # short wait instead of "database is locked"; foreign keys are off by default in SQLite.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


# A process paused (SIGSTOP, a stalled VM) inside a transaction must not hold row or advisory
# locks that block another worker's takeover (CONTRACT §6): the server ends such a session
# after 10 s idle in a transaction. Both pools' connections carry it.
IDLE_IN_TRANSACTION_MS = 10_000
_PAUSED_SESSION_LIMIT = {"idle_in_transaction_session_timeout": str(IDLE_IN_TRANSACTION_MS)}


class Database:
    """Owns the engine; hands out short transactions (one per unit of work)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        echo: bool = False,
    ) -> None:
        try:
            parsed = make_url(url)
        except Exception:
            raise ConfigError("DATABASE_URL: not a valid database URL") from None
        if parsed.drivername not in _SUPPORTED_DRIVERS:
            raise ConfigError(
                "DATABASE_URL: use postgresql+asyncpg://... or sqlite+aiosqlite:///path"
            )
        self.url = url
        self.dialect = "sqlite" if parsed.drivername.startswith("sqlite") else "postgresql"
        kwargs: dict[str, Any] = {"echo": echo}
        if self.dialect == "postgresql":
            # Overflow connections are closed when returned, so every burst past pool_size
            # pays a connect (and asyncpg's TLS attempt); keep the overflow a small margin
            # and size pool_size to the concurrency instead (EDGE_DB_POOL_SIZE).
            kwargs.update(
                pool_size=pool_size,
                max_overflow=max(pool_size // 4, 1),
                pool_pre_ping=False,
                connect_args={"server_settings": dict(_PAUSED_SESSION_LIMIT)},
            )
        else:
            kwargs.update(poolclass=NullPool) if parsed.database in (None, "", ":memory:") else None
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        if self.dialect == "sqlite":
            make_private(url)
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # Hot single statements (GetTask, the turn pipeline) bypass the SQLAlchemy pool
        # (app/db/statement_pool.py).
        # A quarter of the pool size (8 by default): measured on 2 cores, 8 connections
        # answered c = 16/64 faster than 4, 16 or 32, with a much shorter tail.
        self.statement_pool: StatementPool | None = (
            StatementPool(self._read_connect_args(), size=max(2, pool_size // 4))
            if self.dialect == "postgresql"
            else None
        )
        # Wake-ups of queued turns and pushes; NOTIFY/LISTEN only where several processes
        # share the database (app/db/signals.py).
        shared = self.dialect == "postgresql"
        self.signals = Signals(url if shared else None, self._notify if shared else None)

    def _driver_connect_args(self) -> dict[str, Any]:
        """asyncpg.connect() arguments for the same URL, as SQLAlchemy's dialect builds them."""
        _, opts = self.engine.dialect.create_connect_args(self.engine.url)
        kwargs = dict(opts)
        # Options the SQLAlchemy adapter consumes itself rather than passing to asyncpg.
        kwargs.pop("async_creator_fn", None)
        kwargs.pop("prepared_statement_name_func", None)
        cache = kwargs.pop("prepared_statement_cache_size", None)
        if cache is not None:
            kwargs["statement_cache_size"] = cache
        return kwargs

    def _read_connect_args(self) -> dict[str, Any]:
        kwargs = self._driver_connect_args()
        # The statements on this pool are written so that their best plan does not depend on
        # the values or on the table's statistics (key lookups, index walks that stop at a
        # limit: app/push/store_pg.py), so plan once per connection: left to "auto",
        # PostgreSQL re-plans the batched GetTask (its array parameters look worth a custom
        # plan) on every execution, a measurable share of its CPU each time.
        settings = dict(kwargs.get("server_settings") or {})
        settings["plan_cache_mode"] = "force_generic_plan"
        # This pool runs transactions too (the push claim holds its advisory lock in one):
        # the same limit on a paused holder as the SQLAlchemy pool's (found by audit: a worker
        # stopped inside the claim stalled every process's push delivery for as long).
        settings.update(_PAUSED_SESSION_LIMIT)
        kwargs["server_settings"] = settings
        return kwargs

    async def _notify(self, channel: str) -> None:
        async with self.transaction() as session:
            await session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})

    @functools.cached_property
    def storage(self) -> Storage:
        """The stores on this database (``app.db.storage``), built on first use."""
        from app.db.storage import open_storage  # the stores import this module

        return open_storage(self)

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """One short transaction: commit on success, roll back on any exception."""
        async with self.sessions() as session, session.begin():
            yield session

    async def dispose(self) -> None:
        await self.signals.task_events.close()
        if self.statement_pool is not None:
            await self.statement_pool.close()
        await self.engine.dispose()
