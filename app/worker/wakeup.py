"""The in-process wake-up hook between accept and the worker.

Accept calls ``notify()`` after a successful commit (both backends, cheap); the worker's claim
loop waits on it with a timeout (the poll fallback). On Postgres the worker's ``LISTEN
looping_turns`` connection calls ``notify()`` too, so one event covers every wake-up source.
"""

from __future__ import annotations

import asyncio
import contextlib


class Wakeup:
    """A level-triggered, coalescing signal: many notifications before a wait = one wake-up.

    The ``asyncio.Event`` is created lazily so the instance can be built outside a running loop
    (it lives on ``EdgeServices``, which is built before the server's loop starts).
    """

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self._pending = False

    def notify(self) -> None:
        self._pending = True
        if self._event is not None:
            self._event.set()

    async def wait(self, timeout: float) -> None:  # noqa: ASYNC109 - the shared contract
        """Return when notified (possibly before this call) or after ``timeout`` seconds."""
        if self._event is None:
            self._event = asyncio.Event()
        if not self._pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
        self._pending = False
        self._event.clear()
