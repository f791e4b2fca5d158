"""Wake the push deliverers of this process when an outbox row commits.

Cross-process wake-ups go through ``NOTIFY looping_push`` on PostgreSQL (``app.push.listen``);
inside one process (and always on SQLite) the committing session calls ``notify_local`` from
its ``after_commit`` hook. Both are only latency aids: the deliverer polls every
``poll_seconds`` regardless, so a lost wake-up delays a push, never loses it.

The ``NOTIFY`` is sent only when no deliverer of this process has a free slot
(``remote_channel``): every deliverer that listens wakes for it and runs a claim that all but
one find empty, so with N processes each push cost N claims (bench/ROUNDS.md, round
thirty-seven). A push this process can send itself wakes only this process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

CHANNEL = "looping_push"

# Each local deliverer's wake-up and its "can I claim a push now?".
_listeners: dict[Callable[[], None], Callable[[], bool]] = {}


def _no_room() -> bool:
    return False


def subscribe(
    callback: Callable[[], None], room: Callable[[], bool] | None = None
) -> Callable[[], None]:
    """Register ``callback`` (and its deliverer's ``room``; without one, other processes are
    always woken too); returns the function that unregisters it."""
    _listeners[callback] = room or _no_room

    def unsubscribe() -> None:
        _listeners.pop(callback, None)

    return unsubscribe


def notify_local() -> None:
    for callback in list(_listeners):
        callback()


def local_room() -> bool:
    """True when a deliverer of this process will claim a push committed now."""
    return any(room() for room in list(_listeners.values()))


def remote_channel() -> str | None:
    """The channel to ``NOTIFY`` for a push committed now, or ``None`` when this process's
    own deliverers take it (``notify_local`` wakes them)."""
    return None if local_room() else CHANNEL


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
