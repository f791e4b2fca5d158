"""Fresh PostgreSQL databases for one run (created at start, dropped at the end)."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import asyncpg

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def admin_dsn() -> str:
    return os.environ.get("BENCH_PG_DSN", DEFAULT_DSN)


def dsn_for(database: str) -> str:
    """The admin DSN pointed at ``database`` (plain libpq form, for asyncpg)."""
    parts = urlsplit(admin_dsn())
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, ""))


def sqlalchemy_url(database: str) -> str:
    return dsn_for(database).replace("postgresql://", "postgresql+asyncpg://", 1)


@dataclass
class Databases:
    """The databases of one run; names carry the pid and time so runs never collide."""

    prefix: str = field(default_factory=lambda: f"bench_{os.getpid()}_{int(time.time())}")
    created: list[str] = field(default_factory=list)

    def name(self, role: str) -> str:
        return f"{self.prefix}_{role}"

    def create(self, role: str, *, template: str | None = None) -> str:
        """A new empty database, or a copy of ``template`` (which nobody may be connected to)."""
        name = self.name(role)
        copy = "" if template is None else f' TEMPLATE "{template}"'
        asyncio.run(_admin(f'CREATE DATABASE "{name}"{copy}'))
        self.created.append(name)
        return name

    def drop_all(self) -> None:
        for name in reversed(self.created):
            try:
                asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            except Exception as exc:  # best effort: report, keep dropping the others
                print(f"  warning: could not drop database {name}: {type(exc).__name__}")
        self.created.clear()


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(admin_dsn())
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def server_version() -> str:
    async def read() -> str:
        conn = await asyncpg.connect(admin_dsn())
        try:
            return str(await conn.fetchval("SHOW server_version"))
        finally:
            await conn.close()

    try:
        return asyncio.run(read()).split(" ", 1)[0]
    except Exception:
        return "?"


async def execute(database: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn_for(database))
    try:
        for sql in statements:
            await conn.execute(sql)
    finally:
        await conn.close()


async def transactions(database: str) -> int:
    """Transactions committed and rolled back in ``database`` so far (``pg_stat_database``).
    Each autocommit statement is one. PostgreSQL publishes a busy backend's counts about
    once a second, so read it around a window of many seconds."""
    conn = await asyncpg.connect(admin_dsn())
    try:
        count = await conn.fetchval(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1",
            database,
        )
    finally:
        await conn.close()
    return int(count or 0)
