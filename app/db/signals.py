"""Wake-ups for queued work: turns for the workers, outbox rows for the push deliverers; and
wake-ups of the streams that follow a task (``TaskEventWakeups``, at the end).

One component for both kinds (``WakeChannel``). A writer that queued work calls
``notify_local()`` after its commit, which wakes every waiter of this process; it asks
``remote_channel()`` first and sends ``NOTIFY`` on that channel inside its transaction (so the
notification is delivered at commit, never for a rolled-back write) only when the answer is
not ``None``:

- ``None`` when a waiter of this process has a free slot (its ``room``): every listening
  waiter of every process wakes for a ``NOTIFY`` and runs a claim, which all but one find
  empty, so with N processes that was N claims a turn or push. A piece of work this process
  can take itself wakes only this process.
- ``None`` when the storage is not shared across processes (SQLite): nobody else to wake.

Waiters in other processes hear the ``NOTIFY`` through ``listen()`` (PostgreSQL ``LISTEN`` on a
dedicated connection, ``app.db.postgres.listen``). All of it is a latency aid: the waiting
loops poll every ``poll_seconds`` regardless, so a lost wake-up delays work, never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Final

from app.db.postgres.listen import Listener

# The channels, the only place they are named (the worker's and the deliverers' LISTEN,
# the writers' NOTIFY). The third is notified by the trigger that logs a task's changes
# (migrations/versions/0008_task_events.py spells it in SQL; a test holds the two equal), with
# the task's ``[tenant, id]`` as JSON payload, and heard by the streams of every process.
TURNS_CHANNEL: Final = "looping_turns"
PUSH_CHANNEL: Final = "looping_push"
TASK_EVENTS_CHANNEL: Final = "looping_task_events"

Notifier = Callable[[str], Awaitable[None]]


class Wakeup:
    """A level-triggered, coalescing signal: many notifications before a wait = one wake-up.

    The ``asyncio.Event`` is created lazily so the instance can be built outside a running loop
    (services are built before the server's loop starts).
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


def _no_room() -> bool:
    return False


class WakeChannel:
    """One kind of work's wake-ups in this process, and its ``NOTIFY`` channel to the others.

    ``database_url`` is given only when the storage is shared across processes (PostgreSQL);
    ``notifier`` sends a ``NOTIFY`` on its own (``notify_everyone``).
    """

    def __init__(
        self, name: str, *, database_url: str | None = None, notifier: Notifier | None = None
    ) -> None:
        self.name = name
        self._url = database_url
        self._notifier = notifier
        # Each local waiter's wake-up and its "can I claim now?".
        self._waiters: dict[Callable[[], None], Callable[[], bool]] = {}

    def subscribe(
        self, wake: Callable[[], None], room: Callable[[], bool] | None = None
    ) -> Callable[[], None]:
        """Register ``wake`` (and its waiter's ``room``; without one, other processes are
        always woken too); returns the function that unregisters it."""
        self._waiters[wake] = room or _no_room

        def unsubscribe() -> None:
            self._waiters.pop(wake, None)

        return unsubscribe

    def notify_local(self) -> None:
        """Wake every waiter of this process (after the commit that made the work visible)."""
        for wake in list(self._waiters):
            wake()

    def local_room(self) -> bool:
        """True when a waiter of this process will claim work committed now."""
        return any(room() for room in list(self._waiters.values()))

    def remote_channel(self) -> str | None:
        """The channel to ``NOTIFY`` for work committed now, or ``None`` when no other process
        needs waking (this process takes it, or nobody else shares the storage)."""
        if self._url is None or self.local_room():
            return None
        return self.name

    async def notify_everyone(self) -> None:
        """Wake every process's waiters now (after a replay, for instance)."""
        if self._url is not None and self._notifier is not None:
            await self._notifier(self.name)
        self.notify_local()

    async def listen(self, on_notify: Callable[[], None]) -> None:
        """Call ``on_notify`` for every notification from other processes, until cancelled;
        returns at once when the storage is not shared (nothing to hear)."""
        if self._url is None:
            return
        await Listener(self._url, self.name, on_notify).run()


TaskKey = tuple[str, str]


class TaskEventWakeups:
    """Wakes the streams of this process that follow a task when its event log grew.

    Where the storage is shared (PostgreSQL), one ``LISTEN`` connection per process, started
    with the first stream, hears the trigger's notifications and wakes the streams of that
    task only; a (re)connect wakes them all, in case one was missed. Elsewhere (SQLite) nothing
    is heard and streams poll. Either way a stream also re-reads the log every
    ``poll_seconds(...)``, so a lost notification delays an event, never loses it.
    """

    def __init__(self, database_url: str | None) -> None:
        self._url = database_url
        self._watchers: dict[TaskKey, set[Wakeup]] = {}
        self._listener: asyncio.Task[None] | None = None
        # Per watched task, how many notifications this process heard for it (``generation``).
        self._heard_count: dict[TaskKey, int] = {}
        self._epoch = 0

    def poll_seconds(self, *, polled: float, listened: float) -> float:
        """How often a stream re-reads its task's log: ``listened`` behind ``LISTEN``,
        ``polled`` where nothing is heard."""
        return polled if self._url is None else listened

    def generation(self, tenant: str, task_id: str) -> tuple[int, int] | None:
        """Changes with every notification heard for the task (and every reconnect): a read of
        the task's log made in one generation stays current until the next. ``None`` where
        nothing is heard (a read is never known to be current)."""
        if self._url is None:
            return None
        return self._epoch, self._heard_count.get((tenant, task_id), 0)

    def watching(self, tenant: str, task_id: str) -> bool:
        """Whether a stream of this process still follows the task."""
        return (tenant, task_id) in self._watchers

    def watch(self, tenant: str, task_id: str) -> tuple[Wakeup, Callable[[], None]]:
        """A wake-up for changes of the task, and the function that stops watching."""
        if self._url is not None and (self._listener is None or self._listener.done()):
            self._listener = asyncio.get_running_loop().create_task(
                Listener(self._url, TASK_EVENTS_CHANNEL, self._wake_all, self._heard).run()
            )
        wakeup = Wakeup()
        key = (tenant, task_id)
        self._watchers.setdefault(key, set()).add(wakeup)

        def unwatch() -> None:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(wakeup)
                if not watchers:
                    del self._watchers[key]
                    self._heard_count.pop(key, None)

        return wakeup, unwatch

    def _heard(self, payload: str) -> None:
        try:
            tenant, task_id = json.loads(payload)
        except (ValueError, TypeError):
            self._wake_all()
            return
        key = (tenant, task_id)
        watchers = self._watchers.get(key)
        if not watchers:
            return
        self._heard_count[key] = self._heard_count.get(key, 0) + 1
        for wakeup in watchers:
            wakeup.notify()

    def _wake_all(self) -> None:
        self._epoch += 1
        for watchers in self._watchers.values():
            for wakeup in watchers:
                wakeup.notify()

    async def close(self) -> None:
        """Stop listening (the storage is being disposed)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener


class Signals:
    """The wake-up channels of one storage: ``turns``, ``pushes`` and ``task_events``."""

    def __init__(self, database_url: str | None = None, notifier: Notifier | None = None) -> None:
        self.turns = WakeChannel(TURNS_CHANNEL, database_url=database_url, notifier=notifier)
        self.pushes = WakeChannel(PUSH_CHANNEL, database_url=database_url, notifier=notifier)
        self.task_events = TaskEventWakeups(database_url)
