"""The outbox as the deliverer sees it: claim due rows, re-check, record outcomes.

The claiming rules and both backends' statements are the storage's push-outbox store
(``app.db.push_outbox.PushOutboxStore``); this class holds one deliverer's owner name and
lease, and turns the retry policy's ``Decision`` into the stored outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from app.db.engine import Database
from app.db.outbox import DEAD, DELIVERED, PENDING
from app.db.push_outbox import ClaimedPush as ClaimedPush
from app.db.push_outbox import OutboxGauges as OutboxGauges
from app.db.push_outbox import PushRecord
from app.push.policy import Decision, Verdict
from app.tracing.spans import well_formed


class OutboxStore:
    def __init__(self, db: Database, *, owner: str, lease_seconds: float) -> None:
        self._store = db.storage.push_outbox
        self.owner = owner
        self.lease = timedelta(seconds=lease_seconds)

    async def claim(self, limit: int) -> list[ClaimedPush]:
        """Lease up to ``limit`` eligible rows (at most one per task) for this owner."""
        return await self._store.claim(owner=self.owner, lease=self.lease, limit=limit)

    async def still_ours(self, push: ClaimedPush) -> bool:
        """Right before sending: still pending (not canceled) and still leased to us."""
        return await self._store.still_ours(push.id, self.owner)

    async def record(
        self, push: ClaimedPush, status: int | None, decide: Callable[[datetime], Decision]
    ) -> Decision | None:
        """Write the outcome if the row is still ours and pending; None if it was not."""
        decided: list[Decision] = []

        def outcome(now: datetime) -> PushRecord:
            decision = decide(now)
            decided.append(decision)
            stored = {Verdict.DELIVERED: DELIVERED, Verdict.DEAD: DEAD}.get(
                decision.verdict, PENDING
            )
            return PushRecord(
                status=stored,
                next_attempt_at=decision.next_attempt_at,
                unauthorized_attempts=decision.unauthorized_attempts,
                error=decision.error,
                http_status=status,
            )

        applied = await self._store.record(push.id, self.owner, outcome)
        return decided[-1] if applied and decided else None

    async def drop(self, push: ClaimedPush, *, reason: str) -> bool:
        """Cancel a row that can never be sent (its push config is gone)."""
        return await self._store.drop(push.id, self.owner, reason=reason)

    async def gauges(self) -> OutboxGauges:
        return await self._store.gauges()

    async def trace_parent(self, push: ClaimedPush) -> dict[str, str] | None:
        """The trace context of the turn that queued the push, to continue its trace (read
        only when tracing is on: the caller checks)."""
        return well_formed(await self._store.trace_context(push))
