"""``LISTEN`` on PostgreSQL: low-latency wake-ups for the turn workers and push deliverers.

A dedicated asyncpg connection (not from the SQLAlchemy pool: a listening connection must stay
checked out and must not sit behind a transaction-pooling PgBouncer). Losing it costs latency
only: the woken loop polls every ``poll_seconds`` regardless, and every (re)connect triggers a
wake-up in case a notification was missed while disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

_RECONNECT_MAX_SECONDS = 30.0
_CHECK_SECONDS = 5.0

log = logging.getLogger("looping.db")


def asyncpg_dsn(database_url: str) -> str:
    """``postgresql+asyncpg://…`` (SQLAlchemy) → ``postgresql://…`` (asyncpg)."""
    rendered: str = (
        make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    )
    return rendered


class Listener:
    """``run()`` listens on ``channel`` until cancelled, calling ``on_notify`` for every
    notification and once on every (re)connect; ``on_payload``, when given, also receives each
    notification's payload."""

    def __init__(
        self,
        database_url: str,
        channel: str,
        on_notify: Callable[[], None],
        on_payload: Callable[[str], None] | None = None,
    ) -> None:
        self._dsn = asyncpg_dsn(database_url)
        self._channel = channel
        self._on_notify = on_notify
        self._on_payload = on_payload

    def _notified(self, *args: Any) -> None:
        # asyncpg calls (connection, pid, channel, payload).
        if self._on_payload is not None and len(args) == 4 and isinstance(args[3], str):
            self._on_payload(args[3])
        else:
            self._on_notify()

    async def run(self) -> None:
        delay = 1.0
        while True:
            try:
                await self._listen_once()
                delay = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any driver or network failure: the poll covers
                log.warning(
                    "db.listen_failed", extra={"outcome": f"{self._channel}: {type(exc).__name__}"}
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RECONNECT_MAX_SECONDS)

    async def _listen_once(self) -> None:
        conn = await asyncpg.connect(self._dsn)
        closed = asyncio.Event()
        conn.add_termination_listener(lambda _c: closed.set())
        try:
            await conn.add_listener(self._channel, self._notified)
            self._on_notify()  # anything queued while we were not listening
            while not conn.is_closed():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(closed.wait(), _CHECK_SECONDS)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 5)
