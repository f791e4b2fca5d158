"""The GetTask read pool (app/db/statement_pool.py): reuse, bound, and no reuse after a failure."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import pytest

from app.db.engine import Database
from app.db.statement_pool import StatementPool


def _pool(db: Database) -> StatementPool:
    assert db.statement_pool is not None
    return db.statement_pool


async def test_sqlite_has_no_statement_pool(sqlite_url: str) -> None:
    db = Database(sqlite_url)
    try:
        assert db.statement_pool is None
    finally:
        await db.dispose()


@pytest.mark.postgres
async def test_connection_is_reused(pg_database: Database) -> None:
    pool = _pool(pg_database)
    first = await pool.fetchval("SELECT pg_backend_pid()")
    second = await pool.fetchval("SELECT pg_backend_pid()")
    assert first == second
    assert await pool.fetchval("SELECT $1::int + 1", 41) == 42


@pytest.mark.postgres
async def test_failed_statement_drops_its_connection(pg_database: Database) -> None:
    pool = _pool(pg_database)
    before = await pool.fetchval("SELECT pg_backend_pid()")
    with pytest.raises(asyncpg.DivisionByZeroError):
        await pool.fetchval("SELECT 1 / 0")
    after = await pool.fetchval("SELECT pg_backend_pid()")
    assert after != before  # never reused after a failure: its state is unknown


@pytest.mark.postgres
async def test_cancelled_statement_drops_its_connection(pg_database: Database) -> None:
    pool = _pool(pg_database)
    before = await pool.fetchval("SELECT pg_backend_pid()")
    task = asyncio.create_task(pool.fetchval("SELECT pg_sleep(5)"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    after = await pool.fetchval("SELECT pg_backend_pid()")
    assert after != before


@pytest.mark.postgres
async def test_concurrent_reads_are_bounded_by_the_pool_size(pg_database: Database) -> None:
    pool = StatementPool(pg_database._driver_connect_args(), size=2)
    try:
        pids = await asyncio.gather(
            *(pool.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.05)") for _ in range(6))
        )
        assert len(set(pids)) <= 2
    finally:
        await pool.close()


@pytest.mark.postgres
async def test_closed_idle_connection_is_replaced(pg_database: Database) -> None:
    pool = _pool(pg_database)
    pid = await pool.fetchval("SELECT pg_backend_pid()")
    other = await asyncpg.connect(**pg_database._driver_connect_args())
    try:
        await other.execute(f"SELECT pg_terminate_backend({int(pid)})")
    finally:
        await other.close()
    await asyncio.sleep(0.1)
    # The terminated backend's connection is either seen closed (skipped) or fails once
    # and is dropped; the read after that runs on a fresh connection.
    with contextlib.suppress(
        asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError, OSError
    ):
        await pool.fetchval("SELECT 1")
    assert await pool.fetchval("SELECT pg_backend_pid()") != pid


@pytest.mark.postgres
async def test_reads_plan_once_per_connection_and_fetch_returns_rows(pg_database: Database) -> None:
    # A generic plan: re-planning the batched GetTask on every execution cost PostgreSQL
    # ~150 µs each time (app/db/engine.py).
    pool = _pool(pg_database)
    assert await pool.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
    rows = await pool.fetch("SELECT n, n * 2 FROM unnest($1::int[]) AS n", [1, 2, 3])
    assert [tuple(r) for r in rows] == [(1, 2), (2, 4), (3, 6)]


@pytest.mark.postgres
async def test_failed_unit_drops_its_connection(pg_database: Database) -> None:
    # connection() (a unit of several statements) and the single-statement path share the
    # checkout; a unit that fails leaves its connection in an unknown state: never reused.
    pool = _pool(pg_database)
    async with pool.connection() as conn:
        before = await conn.fetchval("SELECT pg_backend_pid()")
    assert await pool.fetchval("SELECT pg_backend_pid()") == before  # returned, reused
    with pytest.raises(asyncpg.DivisionByZeroError):
        async with pool.connection() as conn:
            await conn.execute("BEGIN")
            await conn.fetchval("SELECT 1 / 0")
    assert await pool.fetchval("SELECT pg_backend_pid()") != before


@pytest.mark.postgres
async def test_a_paused_transaction_on_this_pool_loses_its_locks(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by audit: this pool's connections lacked the SQLAlchemy pool's limit on a session
    # idle in a transaction, so a worker stopped (SIGSTOP) inside the push claim held the claim
    # lock, and every process's delivery with it, for as long as it stayed stopped.
    from app.db import engine

    assert engine.IDLE_IN_TRANSACTION_MS == 10_000
    monkeypatch.setattr(
        engine, "_PAUSED_SESSION_LIMIT", {"idle_in_transaction_session_timeout": "300"}
    )
    db = Database(pg_url)
    other = await asyncpg.connect(pg_url.replace("+asyncpg", "", 1))
    try:
        pool = _pool(db)
        assert await pool.fetchval("SHOW idle_in_transaction_session_timeout") == "300ms"
        async with pool.connection() as paused:
            await paused.execute("BEGIN; SELECT pg_advisory_xact_lock(424242)")
            # The holder now does nothing, as a stopped process would: the server ends its
            # session, and another session gets the lock (it would wait forever otherwise).
            await other.execute("SET lock_timeout = '5s'")
            await other.execute("SELECT pg_advisory_lock(424242)")
            paused.terminate()  # what is left of it
        assert await other.fetchval("SELECT pg_advisory_unlock(424242)") is True
    finally:
        await other.close()
        await db.dispose()
