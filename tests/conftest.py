"""Test databases: each backend gets a fresh database per session, migrated with Alembic, and
emptied before every test that uses it. The suite runs on real PostgreSQL and on SQLite."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import Base

PG_ADMIN_DSN = os.environ.get("LOOPING_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_url(dsn: str, dbname: str) -> str:
    base = dsn.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"{base}/{dbname}"


async def _pg_admin_async(sql: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _pg_admin(sql: str) -> None:
    # Session fixtures may be set up from inside a running event loop (async fixtures):
    # run the admin statement on its own loop in a helper thread.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, _pg_admin_async(sql)).result()


@contextmanager
def scratch_postgres(*, migrated: bool = True) -> Iterator[str]:
    """A PostgreSQL database of its own while the block runs (migrated to head unless not
    ``migrated``), dropped after it."""
    name = f"looping_t_{uuid.uuid4().hex[:12]}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    url = _pg_url(PG_ADMIN_DSN, name)
    try:
        if migrated:
            upgrade_to_head(url)
        yield url
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with scratch_postgres() as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("sqlite") / "edge.db"
    url = f"sqlite+aiosqlite:///{path}"
    upgrade_to_head(url)
    return url


async def _empty(url: str) -> None:
    db = Database(url)
    try:
        async with db.transaction() as s:
            names = [t.name for t in reversed(Base.metadata.sorted_tables)]
            if db.is_sqlite:
                for name in names:
                    await s.execute(text(f"DELETE FROM {name}"))
            else:
                await s.execute(text(f"TRUNCATE {', '.join(names)} RESTART IDENTITY"))
    finally:
        await db.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A migrated, empty database on each backend (the test runs once per backend)."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    await _empty(url)
    yield url


@pytest.fixture
async def pg_url(postgres_url: str) -> AsyncIterator[str]:
    """Only PostgreSQL (multi-process, SKIP LOCKED, LISTEN/NOTIFY tests)."""
    await _empty(postgres_url)
    yield postgres_url


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    """A ``Database`` on a migrated, empty database of each backend, disposed after the test."""
    db = Database(db_url)
    yield db
    await db.dispose()


@pytest.fixture
async def pg_database(pg_url: str) -> AsyncIterator[Database]:
    """A ``Database`` on the migrated, empty PostgreSQL database only, disposed after the test
    (its fast paths, LISTEN/NOTIFY, SKIP LOCKED; tests that start processes on ``pg_url``)."""
    db = Database(pg_url)
    yield db
    await db.dispose()
