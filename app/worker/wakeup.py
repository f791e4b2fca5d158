"""The in-process wake-up hook between accept and the worker.

Accept calls ``notify()`` after a successful commit (both backends, cheap); the worker's claim
loop waits on it with a timeout (the poll fallback). On Postgres the worker's ``LISTEN
looping_turns`` connection calls ``notify()`` too, so one event covers every wake-up source.

Accept asks ``local_room()`` first: when this process's own worker has a free slot, the local
``notify()`` is enough and the accept sends no ``NOTIFY``. Every listening worker of every
process wakes for a ``NOTIFY`` and runs a claim, which all but one find empty; with N
replicas that was N claims a turn (bench/ROUNDS.md, round thirty-seven). A turn the local
worker cannot take (no worker here, or every slot busy) still wakes the others.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class Wakeup:
    """A level-triggered, coalescing signal: many notifications before a wait = one wake-up.

    The ``asyncio.Event`` is created lazily so the instance can be built outside a running loop
    (it lives on ``EdgeServices``, which is built before the server's loop starts).
    """

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self._pending = False
        self._room: Callable[[], bool] | None = None

    def notify(self) -> None:
        self._pending = True
        if self._event is not None:
            self._event.set()

    def offer_room(self, room: Callable[[], bool] | None) -> None:
        """The in-process worker's "can I claim a turn now?" (``None``: no worker here)."""
        self._room = room

    def local_room(self) -> bool:
        """True when a worker in this process will claim a turn accepted now."""
        room = self._room
        return room is not None and room()

    async def wait(self, timeout: float) -> None:  # noqa: ASYNC109 - the shared contract
        """Return when notified (possibly before this call) or after ``timeout`` seconds."""
        if self._event is None:
            self._event = asyncio.Event()
        if not self._pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
        self._pending = False
        self._event.clear()
