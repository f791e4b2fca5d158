"""The lease keeper: one asyncio task per worker process that heartbeats every held lease and
watches the tasks being run (ARCHITECTURE, Durable execution: heartbeat).

It is separate from the turns it protects, so an agent that is busy (or CPU-heavy between its
awaits) cannot starve it, and it uses its own small connection pool on PostgreSQL so turns that
hold every pooled connection cannot either. Each tick:

- every ``lease_seconds/3``: extend all held leases whose fence still matches; a lease that was
  not extended was taken over → the running agent is cancelled and that identity's drain stops;
- every tick (``min(poll_seconds, lease_seconds/3)``): read the state of each running turn's
  task; ``CANCELED`` → signal the agent's cancellation and cancel it (CONTRACT §5: after a
  cancel no further model call is made).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from app.db.engine import Database
from app.tasks import states
from app.worker.lease import Lease, extend, task_states
from app.worker.runner import TurnWatch

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


class LeaseKeeper:
    def __init__(self, db: Database, *, lease_seconds: float, poll_seconds: float) -> None:
        self._db = db
        self._lease_seconds = lease_seconds
        self._extend_every = lease_seconds / 3
        self._tick = min(poll_seconds, self._extend_every)
        self._held: dict[Lease, Holding] = {}
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """End ``run`` after the current tick (never in the middle of a database call)."""
        self._stopping.set()

    def hold(self, lease: Lease) -> Holding:
        holding = Holding(lease)
        self._held[lease] = holding
        return holding

    def drop(self, lease: Lease) -> None:
        self._held.pop(lease, None)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_extend = loop.time() + self._extend_every
        while not self._stopping.is_set():
            delay = max(0.0, min(self._tick, next_extend - loop.time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            if self._stopping.is_set():
                return
            try:
                if loop.time() >= next_extend:
                    next_extend = loop.time() + self._extend_every
                    await self._heartbeat()
                await self._watch_tasks()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # The database is unreachable: keep trying. If this lasts past the lease,
                # another worker takes over and the fence silences this one.
                log.warning("worker.heartbeat_failed", extra={"outcome": type(exc).__name__})

    async def _heartbeat(self) -> None:
        held = [h for h in self._held.values() if not h.lost]
        if not held:
            return
        extended = await extend(
            self._db, [h.lease for h in held], lease_seconds=self._lease_seconds
        )
        for holding in held:
            if holding.lease not in extended and self._held.get(holding.lease) is holding:
                log.warning("worker.lease_lost", extra={"tenant": holding.lease.scope.tenant})
                holding.mark_lost()

    async def _watch_tasks(self) -> None:
        running = [
            h.watch for h in self._held.values() if h.watch is not None and not h.watch.interrupted
        ]
        if not running:
            return
        found = await task_states(self._db, [(w.scope, w.task_id) for w in running])
        for watch in running:
            if found.get((watch.scope, watch.task_id)) == states.CANCELED:
                log.info("turn.cancel_seen", extra={"task_id": watch.task_id})
                watch.stop_agent("canceled")
