"""A small pool of raw asyncpg connections for single autocommit statements on PostgreSQL:
GetTask and ListTasks reads, the new-task accept (``app.db.postgres.accepts``), the turn
pipeline's one-statement units (the worker's fenced turn and task updates, its mailbox reads,
lease claim and release; ``app.db.postgres.mailbox``,
``app.db.postgres.turn_writes``, ``app.push.store_pg``), and through ``connection()`` the push
claim's short transaction.

Why not the SQLAlchemy pool: a checkout and return through ``AsyncEngine.connect`` (greenlet
hop, pool events, reset-on-return) costs several times the CPU of the statement itself. Why not
asyncpg's own pool, even with its reset on release turned off (``reset=``): measured slower on
this statement shape at every concurrency (``bench/pool_compare.py``,
``bench/results/statement-pool.md``). A statement that runs alone in autocommit leaves no
session state behind (no transaction, no ``SET``, no ``LISTEN``), so a returned connection
needs no reset. asyncpg prepares each statement once per connection and reuses it.

A single statement is its own transaction: it holds row locks only while it runs, so these
units need none of ``locking_transaction``'s idle-in-transaction guard.

The semaphore bounds the concurrent statements to the pool size: at high concurrency requests wait
here, cheaply, instead of opening more backends for PostgreSQL to schedule on the same cores.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import asyncpg


class StatementPool:
    def __init__(self, connect_kwargs: dict[str, Any], size: int) -> None:
        self._connect_kwargs = connect_kwargs
        self._size = size
        self._idle: list[asyncpg.Connection] = []
        self._slots = asyncio.Semaphore(size)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _bind(self) -> None:
        # Connections belong to the loop that opened them; a Database used from a new loop
        # (tests, CLI commands) starts over instead of touching the old loop's sockets.
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            for conn in self._idle:
                conn.terminate()
            self._idle = []
            self._slots = asyncio.Semaphore(self._size)
            self._loop = loop

    async def fetchval(self, query: str, *args: Any) -> Any:
        """One statement in autocommit on a pooled connection; its first column or None."""
        return await self._run("value", query, args)

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        """One statement in autocommit on a pooled connection; its first row or None.

        ``_run`` written out once more: every GetTask that finds no queue comes through here,
        and each coroutine layer between it and the driver costs a share of its CPU."""
        self._bind()
        slots = self._slots
        await slots.acquire()
        try:
            conn = self._idle_connection() or await self._connect()
            try:
                row: asyncpg.Record | None = await conn.fetchrow(query, *args)
            except BaseException:
                # Lost, cancelled mid-statement or failed: its state is unknown, never reuse it.
                conn.terminate()
                raise
            self._idle.append(conn)
            return row
        finally:
            slots.release()

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """One statement in autocommit on a pooled connection; all its rows."""
        rows: list[asyncpg.Record] = await self._run("rows", query, args)
        return rows

    async def _run(
        self, shape: Literal["value", "row", "rows"], query: str, args: tuple[Any, ...]
    ) -> Any:
        # The same checkout and return as ``connection()``, written out: the hot path avoids
        # the generator-based context manager's overhead (and ``async with``'s two coroutines).
        self._bind()
        slots = self._slots
        await slots.acquire()
        try:
            conn = self._idle_connection() or await self._connect()
            try:
                if shape == "rows":
                    result = await conn.fetch(query, *args)
                elif shape == "row":
                    result = await conn.fetchrow(query, *args)
                else:
                    result = await conn.fetchval(query, *args)
            except BaseException:
                # Lost, cancelled mid-statement or failed: its state is unknown, never reuse it.
                conn.terminate()
                raise
            self._idle.append(conn)
            return result
        finally:
            slots.release()

    def _idle_connection(self) -> asyncpg.Connection | None:
        while self._idle:
            candidate = self._idle.pop()
            if not candidate.is_closed():
                return candidate
        return None

    async def _connect(self) -> asyncpg.Connection:
        return await asyncpg.connect(**self._connect_kwargs)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection; a unit of several statements must leave it as it found it (a
        transaction it opens, it ends). Terminated instead of pooled on any error."""
        self._bind()
        async with self._slots:
            conn = self._idle_connection() or await self._connect()
            try:
                yield conn
            except BaseException:
                # Lost, cancelled mid-statement or failed: its state is unknown, never reuse it.
                conn.terminate()
                raise
            self._idle.append(conn)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        same_loop = self._loop is asyncio.get_running_loop()
        for conn in idle:
            if not same_loop:
                conn.terminate()
                continue
            try:
                await conn.close(timeout=2)
            except Exception:  # closing is best effort; drop it either way
                conn.terminate()
