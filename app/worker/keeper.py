"""The lease keeper: heartbeats for every lease this process holds, and the cancel watch
(ARCHITECTURE, Durable execution: "heartbeat every TTL/3 from a task a busy turn cannot
starve").

It runs on its **own thread with its own event loop and its own small connection pool**: a turn
that hogs the CPU between its awaits slows every task on the worker's loop (each database
round trip of a heartbeat would wait for the hog's next yield), and turns holding every pooled
connection would make it queue for one. On its thread it only needs the GIL, which Python hands
over every few milliseconds. Each tick:

- every ``lease_seconds/3``: extend all held leases whose fence still matches; a lease that was
  not extended was taken over → the running agent is cancelled and that identity's drain stops;
- every tick (``min(poll_seconds, lease_seconds/3)``): read the state of each running turn's
  task; ``CANCELED`` → signal the agent's cancellation and cancel it (CONTRACT §5: after a
  cancel no further model call is made).

What the keeper decides is applied on the worker's loop (``call_soon_threadsafe``): the turn
objects are only ever touched there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass

from app.db.engine import Database
from app.db.mailbox import Lease
from app.tasks import states
from app.worker.watch import TurnWatch

log = logging.getLogger("looping.worker")


@dataclass
class Holding:
    """A lease this process holds and the turn running under it, if any."""

    lease: Lease
    watch: TurnWatch | None = None
    lost: bool = False

    def mark_lost(self) -> None:
        self.lost = True
        if self.watch is not None:
            self.watch.stop_agent("lost")


def _cancel(watch: TurnWatch) -> None:
    watch.stop_agent("canceled")


class LeaseKeeper:
    def __init__(self, database_url: str, *, lease_seconds: float, poll_seconds: float) -> None:
        self._url = database_url
        self._lease_seconds = lease_seconds
        self._extend_every = lease_seconds / 3
        self._tick = min(poll_seconds, self._extend_every)
        self._held: dict[Lease, Holding] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._owner_loop: asyncio.AbstractEventLoop | None = None
        # The keeper's loop and the event that ends its sleep early, set together by its thread.
        self._waker: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    # --- called on the worker's loop --------------------------------------------------------

    def hold(self, lease: Lease) -> Holding:
        holding = Holding(lease)
        with self._lock:
            self._held[lease] = holding
        return holding

    def drop(self, lease: Lease) -> None:
        with self._lock:
            self._held.pop(lease, None)

    def start(self) -> None:
        self._owner_loop = asyncio.get_running_loop()
        self._stop.clear()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._main()), name="lease-keeper", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        """End the thread at once when it sleeps, else after its current tick (never in the
        middle of a database call). Waiting out the sleep held every shutdown for up to a
        tick (``poll_seconds``, 1 s by default)."""
        self._stop.set()
        waker = self._waker
        if waker is not None:
            loop, wake = waker
            with contextlib.suppress(RuntimeError):  # the keeper's loop already closed
                loop.call_soon_threadsafe(wake.set)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 15.0)
            self._thread = None

    # --- the keeper's own thread ------------------------------------------------------------

    async def _main(self) -> None:
        wake = asyncio.Event()
        # Published before the first check of ``_stop``: a stop that finds no waker yet is
        # seen by that check, one that finds it ends the sleep.
        self._waker = (asyncio.get_running_loop(), wake)
        db = Database(self._url, pool_size=1)
        try:
            await self._loop(db, wake)
        finally:
            self._waker = None
            await db.dispose()

    async def _loop(self, db: Database, wake: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        next_extend = loop.time() + self._extend_every
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    wake.wait(), max(0.0, min(self._tick, next_extend - loop.time()))
                )
            if self._stop.is_set():
                return
            try:
                if loop.time() >= next_extend:
                    next_extend = loop.time() + self._extend_every
                    await self._heartbeat(db)
                await self._watch_tasks(db)
            except Exception as exc:
                # The database is unreachable: keep trying. If this lasts past the lease,
                # another worker takes over and the fence silences this one.
                log.warning("worker.heartbeat_failed", extra={"outcome": type(exc).__name__})

    def _snapshot(self) -> list[Holding]:
        with self._lock:
            return [h for h in self._held.values() if not h.lost]

    def _on_owner_loop(self, callback: object, *args: object) -> None:
        if self._owner_loop is not None:
            with contextlib.suppress(RuntimeError):  # the worker's loop already closed
                self._owner_loop.call_soon_threadsafe(callback, *args)  # type: ignore[arg-type]

    async def _heartbeat(self, db: Database) -> None:
        held = self._snapshot()
        if not held:
            return
        extended = await db.storage.mailbox.extend(
            [h.lease for h in held], lease_seconds=self._lease_seconds
        )
        for holding in held:
            with self._lock:
                current = self._held.get(holding.lease) is holding
            if holding.lease not in extended and current:
                log.warning("worker.lease_lost", extra={"tenant": holding.lease.scope.tenant})
                holding.lost = True  # no more heartbeats for it; the rest on the owner loop
                self._on_owner_loop(holding.mark_lost)

    async def _watch_tasks(self, db: Database) -> None:
        running = [
            h.watch for h in self._snapshot() if h.watch is not None and not h.watch.interrupted
        ]
        if not running:
            return
        found = await db.storage.mailbox.task_states([(w.scope, w.task_id) for w in running])
        for watch in running:
            if found.get((watch.scope, watch.task_id)) == states.CANCELED:
                log.info("turn.cancel_seen", extra={"task_id": watch.task_id})
                self._on_owner_loop(_cancel, watch)
