"""Helpers for tests that look at the statements a unit sends, the plans they get and the
notifications they raise."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest

from app.db.postgres.listen import asyncpg_dsn
from app.db.statement_pool import StatementPool


def record_statements(monkeypatch: pytest.MonkeyPatch, pool: StatementPool) -> list[str]:
    """Every statement ``pool`` runs from now on (``fetch``, ``fetchrow``, ``fetchval``), in
    order: the one-statement checks of the PostgreSQL fast paths count them."""
    seen: list[str] = []

    def spy(name: str) -> Any:
        real = getattr(pool, name)

        async def recorded(query: str, *args: Any) -> Any:
            seen.append(query)
            return await real(query, *args)

        return recorded

    for name in ("fetch", "fetchrow", "fetchval"):
        monkeypatch.setattr(pool, name, spy(name))
    return seen


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of an ``EXPLAIN (FORMAT JSON)`` plan, the root first."""
    found = [plan]
    for child in plan.get("Plans", []):
        found += plan_nodes(child)
    return found


# Markers go on a channel of their own: one on a watched channel would wake whatever listens
# there (a worker's claim loop), and the test would see its own marker's work.
MARKER_CHANNEL = "looping_test_marker"


class Notifications:
    """``LISTEN`` on PostgreSQL channels from a connection of its own (``notifications``)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.backend_pid: int = conn.get_server_pid()
        self.heard: list[tuple[str, str]] = []
        self._arrived = asyncio.Event()

    def _on(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        self.heard.append((channel, payload))
        self._arrived.set()

    async def settle(self) -> list[str]:
        """The watched channels notified so far (in commit order), once every transaction
        committed before this call has had its notifications delivered: PostgreSQL delivers
        a session's notifications in commit order, so a marker sent now arrives after them."""
        marker = f"marker-{len(self.heard)}"
        await self._conn.execute(f"SELECT pg_notify('{MARKER_CHANNEL}', '{marker}')")
        async with asyncio.timeout(10):
            while (MARKER_CHANNEL, marker) not in self.heard:
                self._arrived.clear()
                await self._arrived.wait()
        return [c for c, _ in self.heard if c != MARKER_CHANNEL]


@asynccontextmanager
async def notifications(pg_url: str, *channels: str) -> AsyncIterator[Notifications]:
    """Every notification on ``channels`` while the block runs."""
    conn = await asyncpg.connect(asyncpg_dsn(pg_url))
    heard = Notifications(conn)
    try:
        for channel in (*channels, MARKER_CHANNEL):
            await conn.add_listener(channel, heard._on)
        yield heard
    finally:
        await conn.close()
