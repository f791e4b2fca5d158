"""The push delivery loop: a background service in ``serve`` and ``worker`` (CONTRACT §7).

One claimer task leases due rows (``OutboxStore.claim``: per task in order, one in flight per
task) up to ``push_concurrency`` attempts at a time; each attempt runs as its own task:
re-check the row is still ours and pending (a cancel in between wins), send, record. When an
attempt finishes the claimer is woken at once, so the next push of the same task follows
without waiting for the poll interval.

Crash safety: the lease (attempt deadline plus a margin) is the only in-memory promise. If the
process dies mid-attempt the lease runs out and another deliverer sends the row again: at
least once, with the same message id (the payload is stored, not rebuilt).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import httpx
from opentelemetry.trace import SpanKind

from app.db.engine import Database
from app.db.signals import Wakeup
from app.ops.metrics import Metrics
from app.push.policy import Decision, RetryPolicy, Verdict
from app.push.sender import PushSender
from app.push.store import ClaimedPush, OutboxStore
from app.tracing.spans import TENANT, annotate, span
from app.tracing.spans import enabled as tracing_enabled

log = logging.getLogger(__name__)

# Lease = twice the attempt deadline + this margin (re-check, send, record): long enough that
# a live attempt never loses its row, short enough that a crashed one is retried soon.
LEASE_MARGIN_SECONDS = 5.0
# On stop, attempts on the wire get this long to finish; the rest keep their lease and are
# sent again by another deliverer once it runs out (at least once, same message id).
STOP_GRACE_SECONDS = 5.0
GAUGE_INTERVAL_SECONDS = 5.0


@dataclass(frozen=True)
class DelivererConfig:
    concurrency: int
    poll_seconds: float
    attempt_timeout: float
    listen: bool = True


class PushDeliverer:
    """``BackgroundService``: ``start()`` returns at once, ``stop()`` drains gracefully."""

    def __init__(
        self,
        *,
        db: Database,
        store: OutboxStore,
        sender: PushSender,
        policy: RetryPolicy,
        metrics: Metrics,
        config: DelivererConfig,
        client: httpx.AsyncClient | None = None,
        pinned_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._db = db
        self._store = store
        self._sender = sender
        self._policy = policy
        self._metrics = metrics
        self._config = config
        # Closed on stop when given (the deliverer owns them).
        self._clients = [c for c in (client, pinned_client) if c is not None]
        self._wake = Wakeup()
        self._stopping = False
        self._inflight: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._listen_task: asyncio.Task[None] | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._last_gauges = 0.0

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def wake_threadsafe() -> None:
            with contextlib.suppress(RuntimeError):  # loop already closed at shutdown
                loop.call_soon_threadsafe(self._wake.notify)

        pushes = self._db.signals.pushes
        self._unsubscribe.append(pushes.subscribe(wake_threadsafe, self._has_room))
        if self._config.listen:
            self._listen_task = asyncio.create_task(
                pushes.listen(self._wake.notify), name="push-listen"
            )
        self._loop_task = asyncio.create_task(self._run(), name="push-deliverer")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.notify()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        if self._listen_task is not None:
            self._listen_task.cancel()
            await asyncio.gather(self._listen_task, return_exceptions=True)
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)
        if self._inflight:
            # Let attempts on the wire finish (bounded by their deadline); a cancelled one keeps
            # its lease, which runs out so another deliverer sends it again.
            grace = min(self._config.attempt_timeout + 1.0, STOP_GRACE_SECONDS)
            _, pending = await asyncio.wait(set(self._inflight), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for client in self._clients:
            await client.aclose()

    def wake(self) -> None:
        self._wake.notify()

    def _has_room(self) -> bool:
        """A free slot: a wake-up now makes this deliverer claim (``WakeChannel.local_room``)."""
        return not self._stopping and len(self._inflight) < self._config.concurrency

    # --- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            free = self._config.concurrency - len(self._inflight)
            claimed: list[ClaimedPush] = []
            if free > 0:
                try:
                    claimed = await self._store.claim(free)
                except Exception as exc:  # database hiccup: keep the loop alive, poll again
                    log.warning("push claim failed (%s)", type(exc).__name__)
            for push in claimed:
                self._spawn(push)
            await self._maybe_update_gauges()
            if self._stopping:
                break
            if not claimed or len(claimed) < free:
                await self._wake.wait(self._config.poll_seconds)

    def _spawn(self, push: ClaimedPush) -> None:
        task = asyncio.create_task(self._deliver(push), name=f"push-{push.id}")
        self._inflight.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._inflight.discard(finished)
            self._wake.notify()

        task.add_done_callback(done)

    async def _deliver(self, push: ClaimedPush) -> None:
        try:
            await self._attempt(push)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the lease runs out and the row is tried again
            self._metrics.push_deliveries.labels("error").inc()
            log.warning("push %s attempt failed internally (%s)", push.id, type(exc).__name__)

    async def _attempt(self, push: ClaimedPush) -> None:
        if push.url is None:
            if await self._store.drop(push, reason="push config was deleted"):
                self._metrics.push_deliveries.labels("dropped").inc()
            return
        # A cancel may have committed since the claim: nothing after a cancel is sent.
        if not await self._store.still_ours(push):
            self._metrics.push_deliveries.labels("canceled").inc()
            return
        parent = await self._store.trace_parent(push) if tracing_enabled() else None
        with span(
            "push.attempt",
            kind=SpanKind.CLIENT,
            attributes={
                TENANT: push.tenant,
                "http.request.method": "POST",
                "looping_edge.push.kind": push.kind,
                "looping_edge.push.attempt": push.attempts,
                "looping_edge.push.retry": push.attempts > 1,
            },
            parent=parent,
        ) as current:
            decision = await self._send_and_record(push)
            if decision is not None:
                current.set_attribute("looping_edge.push.outcome", decision.verdict.value)

    async def _send_and_record(self, push: ClaimedPush) -> Decision | None:
        result = await self._sender.attempt(push)
        if result.status is not None:
            annotate({"http.response.status_code": result.status})

        def decide(now: datetime) -> Decision:
            return self._policy.decide(
                result,
                attempts=push.attempts,
                unauthorized_attempts=push.unauthorized_attempts,
                first_attempt_at=push.first_attempt_at,
                now=now,
            )

        decision = await self._store.record(push, result.status, decide)
        label = "superseded" if decision is None else decision.verdict.value
        self._metrics.push_deliveries.labels(label).inc()
        if decision is not None and decision.verdict is Verdict.DEAD:
            log.warning(
                "push dead letter",
                extra={
                    "push_id": push.id,
                    "tenant": push.tenant,
                    "task_id": push.task_id,
                    "error": decision.error,
                },
            )
        return decision

    async def _maybe_update_gauges(self) -> None:
        now = time.monotonic()
        if now - self._last_gauges < GAUGE_INTERVAL_SECONDS:
            return
        self._last_gauges = now
        try:
            gauges = await self._store.gauges()
        except Exception as exc:
            log.warning("push gauges failed (%s)", type(exc).__name__)
            return
        self._metrics.push_outbox_depth.set(gauges.depth)
        self._metrics.push_oldest_pending_seconds.set(gauges.oldest_pending_seconds)
