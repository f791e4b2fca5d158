"""Wake the push deliverers of this process when an outbox row commits.

Cross-process wake-ups go through ``NOTIFY looping_push`` on PostgreSQL (``app.push.listen``);
inside one process (and always on SQLite) the committing session calls ``notify_local`` from
its ``after_commit`` hook. Both are only latency aids: the deliverer polls every
``poll_seconds`` regardless, so a lost wake-up delays a push, never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

CHANNEL = "looping_push"

_listeners: set[Callable[[], None]] = set()


def subscribe(callback: Callable[[], None]) -> Callable[[], None]:
    """Register ``callback``; returns the function that unregisters it."""
    _listeners.add(callback)
    return lambda: _listeners.discard(callback)


def notify_local() -> None:
    for callback in list(_listeners):
        callback()


class WakeSignal:
    """An ``asyncio.Event`` with a bounded wait (the poll interval)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._event.wait()
        self._event.clear()
