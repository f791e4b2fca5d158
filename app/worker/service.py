"""The turn worker: a background service that claims identities and drains their turns.

- Claim loop: claims up to ``worker_concurrency`` identities with due work, each with its head
  turn (``mailbox.claim_with_heads``), and starts one drain task per identity; waits for a
  wake-up (``app.db.signals``: accept's in-process wake-up, the ``LISTEN`` connection on
  PostgreSQL, a finished drain) or ``poll_seconds`` (the fallback that also works through
  PgBouncer and picks up retries whose backoff has passed).
- Drain: the identity's head turn (its lowest unfinished ``turns.id``), then the lease is
  released: one turn per claim, so a free slot always goes to whoever the claim ranks first
  (``app.db.mailbox``: fair shares between tenants, round robin between identities).
- Lease keeper: heartbeats and cancel checks (``app.worker.keeper``).
- Retention: ``app.tasks.retention.purge_expired`` about every hour (CONTRACT §6).

On start nothing special happens for recovery: unfinished turns are just rows in ``turns``
whose leases are free or expired, and the claim loop picks them up like new ones.

Stop (SIGTERM, end of ``serve``): no new claims; running turns get ``drain_grace_seconds`` to
finish; the rest are interrupted and handed back (``queued``, attempt not counted) and their
leases released, so another worker resumes them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable

from app.db.engine import Database
from app.db.mailbox import Lease, QueuedTurn
from app.db.signals import Wakeup
from app.db.sqlite.worker_lock import WorkerLock
from app.settings import Settings
from app.tasks.retention import purge_expired
from app.tasks.states import TURN_DEAD
from app.worker.keeper import Holding, LeaseKeeper
from app.worker.runner import TurnRunner, backoff_seconds
from app.worker.watch import TurnWatch

log = logging.getLogger("looping.worker")

RETENTION_INTERVAL_SECONDS = 3600.0
_STOP_WAIT_SECONDS = 5.0


async def _finish(task: asyncio.Task[None], wait: float) -> None:
    """Let ``task`` end on its own for up to ``wait`` seconds, then cancel it."""
    if not task.done() and wait > 0:
        await asyncio.wait({task}, timeout=wait)
    if not task.done():
        task.cancel()
    with contextlib.suppress(BaseException):
        await task


class TurnWorker:
    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        runner: TurnRunner,
        owner: str,
        concurrency: int | None = None,
        worker_lock: WorkerLock | None = None,
        drain_grace_seconds: float = 10.0,
    ) -> None:
        self.db = db
        self.settings = settings
        self.runner = runner
        self.owner = owner
        self.concurrency = concurrency or settings.worker_concurrency
        self._wakeup = Wakeup()
        self._unsubscribe: Callable[[], None] | None = None
        self._keeper = LeaseKeeper(
            db.url,
            lease_seconds=settings.lease_seconds,
            poll_seconds=settings.poll_seconds,
        )
        self._worker_lock = worker_lock
        self._grace = drain_grace_seconds
        self._stopping = False
        self._drains: dict[asyncio.Task[None], Holding] = {}
        self._loops: list[asyncio.Task[None]] = []
        self._claimer: asyncio.Task[None] | None = None

    @property
    def active(self) -> int:
        return len(self._drains)

    async def start(self) -> None:
        if self._worker_lock is not None:
            self._worker_lock.acquire()  # ConfigError: a second worker on the storage is refused
        self._stopping = False
        turns = self.db.signals.turns
        self._unsubscribe = turns.subscribe(self._wakeup.notify, self._has_room)
        self._claimer = asyncio.create_task(self._claim_loop(), name="worker-claim")
        self._keeper.start()
        self._loops.append(asyncio.create_task(self._retention_loop(), name="worker-retention"))
        listen = turns.listen(self._wakeup.notify)
        self._loops.append(asyncio.create_task(listen, name="worker-listen"))
        log.info("worker.started", extra={"worker": self.owner})

    async def stop(self) -> None:
        self._stopping = True
        if self._unsubscribe is not None:
            self._unsubscribe()  # turns accepted from now on wake the other processes
            self._unsubscribe = None
        self._wakeup.notify()
        # The claim loop and the keeper are asked to stop, not cancelled, so no database call
        # is abandoned half-way (cancelling one leaves the driver with work for a dead loop).
        if self._claimer is not None:
            await _finish(self._claimer, _STOP_WAIT_SECONDS)
        if self._drains:
            await asyncio.wait(set(self._drains), timeout=self._grace)
        for holding in self._drains.values():
            if holding.watch is not None:
                holding.watch.stop_agent("shutdown")
        if self._drains:
            await asyncio.wait(set(self._drains), timeout=_STOP_WAIT_SECONDS)
        for task in list(self._drains):
            await _finish(task, 0)
        await self._keeper.stop()
        for task in self._loops:
            await _finish(task, 0)
        self._loops.clear()
        self._claimer = None
        if self._worker_lock is not None:
            self._worker_lock.release()
        log.info("worker.stopped", extra={"worker": self.owner})

    # --- claiming ---------------------------------------------------------------------------

    def _has_room(self) -> bool:
        """A free slot: a wake-up now makes this worker claim (``WakeChannel.local_room``)."""
        return not self._stopping and len(self._drains) < self.concurrency

    async def _claim_loop(self) -> None:
        while not self._stopping:
            free = self.concurrency - len(self._drains)
            if free > 0:
                try:
                    claimed = await self.db.storage.mailbox.claim_with_heads(
                        owner=self.owner,
                        limit=free,
                        lease_seconds=self.settings.lease_seconds,
                    )
                except Exception as exc:
                    log.warning("worker.claim_failed", extra={"outcome": type(exc).__name__})
                    claimed = []
                for lease, head in claimed:
                    self._start_drain(lease, head)
            await self._wakeup.wait(self.settings.poll_seconds)

    def _start_drain(self, lease: Lease, head: QueuedTurn | None) -> None:
        holding = self._keeper.hold(lease)
        task = asyncio.create_task(self._drain(holding, head), name=f"drain:{lease.scope.tenant}")
        self._drains[task] = holding
        task.add_done_callback(self._drain_done)

    def _drain_done(self, task: asyncio.Task[None]) -> None:
        self._drains.pop(task, None)
        if not self._stopping:
            self._wakeup.notify()  # a slot is free, and turns may have queued meanwhile

    # --- draining ---------------------------------------------------------------------------

    async def _drain(self, holding: Holding, head: QueuedTurn | None) -> None:
        """Run the identity's head turn (``head``, as the claim read it), then give the slot
        back: release the lease, which records the identity as just served.

        One turn per lease, whether or not other identities wait (issue 47, row 3). Who runs
        next is decided in one place, the claim (``app.db.mailbox``: tenants with the fewest
        leases first, then the identity that has waited longest since it was last served),
        for every process at once; a drain that went on "while nobody waits" would have to
        ask the database that same question after each turn, and would still be blind to a
        newcomer accepted a moment later. The cost is a claim and a release per turn of an
        identity with a backlog; when no other identity waits, the freed slot's wake-up
        (``_drain_done``) makes this worker claim the same identity again at once."""
        lease = holding.lease
        try:
            if head is not None and not self._stopping and not holding.lost:
                await self._run_one(holding, head)
        except Exception as exc:
            log.warning("worker.drain_failed", extra={"outcome": type(exc).__name__})
        finally:
            self._keeper.drop(lease)
            if not holding.lost:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.db.storage.mailbox.release(lease))

    async def _run_one(self, holding: Holding, turn: QueuedTurn) -> None:
        """One turn under the watch the keeper's cancel checks reach; a fault parks it."""
        lease = holding.lease
        watch = TurnWatch(scope=lease.scope, task_id=turn.task_id)
        holding.watch = watch
        try:
            # The runner's verdict and the next head it read no longer matter here: the
            # identity's next turn waits for the next claim.
            await self.runner.run(lease, turn, watch)
        except Exception as exc:
            log.error(
                "turn.internal_error",
                extra={"turn_id": turn.id, "outcome": type(exc).__name__},
            )
            await self._park(lease, turn)
        finally:
            holding.watch = None
            holding.lost = holding.lost or watch.lost

    async def _park(self, lease: Lease, turn: QueuedTurn) -> None:
        """An unexpected error (a bug or the database): back off and run the turn again. Its
        attempts are counted, so the run after the last one fails the task with the
        operator's text and a final push (the runner's out-of-attempts path; found by audit:
        settling the turn dead here left its task WORKING forever, with no push). Only when
        that run fails as well is the turn settled dead without it, so the identity's later
        turns are not blocked forever."""
        attempt = turn.attempts + 1
        with contextlib.suppress(Exception):
            if attempt > self.settings.turn_max_attempts:
                log.error("turn.dead_unsettled_task", extra={"task_id": turn.task_id})
                await self.db.storage.mailbox.settle(lease, turn.id, TURN_DEAD, error="internal")
            else:
                delay = backoff_seconds(self.settings, attempt)
                await self.db.storage.mailbox.retry_later(
                    lease, turn.id, delay=delay, error="internal"
                )

    # --- retention --------------------------------------------------------------------------

    async def _retention_loop(self) -> None:
        while True:
            # Not at start: replicas restarting together would all purge at once.
            await asyncio.sleep(RETENTION_INTERVAL_SECONDS * random.uniform(0.5, 1.0))
            try:
                await purge_expired(self.db, self.settings)
            except Exception as exc:
                log.warning("worker.retention_failed", extra={"outcome": type(exc).__name__})
