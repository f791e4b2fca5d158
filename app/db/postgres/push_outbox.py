"""The push-outbox store on PostgreSQL (``app.db.push_outbox.PushOutboxStore``), on the
statement pool.

Why: through the ORM one delivered push cost three transactions and over a dozen round trips
(claim: BEGIN, advisory lock, ``now()``, candidates, UPDATE, load, COMMIT; the re-check; the
outcome: BEGIN, ``now()``, UPDATE, COMMIT), each paying SQLAlchemy's per-statement CPU, and the
deliverer cost a large share of a turn worker's CPU. Here the claim keeps its one
transaction under the advisory lock in two round trips (``BEGIN`` with the lock, then one
claim-and-load statement), the re-check is one statement that also reads the database clock,
and the outcome one ``UPDATE`` (its time: that clock plus the attempt's elapsed time). The
rules are the shared path's (``app.db.shared.push_outbox``), statement for statement; SQLite
runs that path, and both run the same outbox and delivery tests. The claim runs under one
transaction-scoped advisory lock, so two deliverers never both see "no row of task T in
flight" and claim two of T's rows; ``FOR UPDATE SKIP LOCKED`` keeps claimers from waiting on
rows an outcome write holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from app.db.outbox import PENDING
from app.db.push_outbox import (
    ClaimedPush,
    DeadLetter,
    DeadLetterFilter,
    OutboxGauges,
    PushRecord,
    ReplayReport,
)
from app.db.shared.push_outbox import SharedPushOutbox, claimed
from app.db.statement_pool import StatementPool

# pg_advisory_xact_lock key for the claim step ("lp_claim" as an int64).
_CLAIM_LOCK_KEY = 0x6C705F636C61696D
# Bound on re-check clock readings kept for pushes on the wire (far above any concurrency).
_MAX_CHECKED = 4096

# Opens the claim's transaction and takes its advisory lock in one round trip (simple query
# protocol; the key is a constant of this module, never a value from outside).
_BEGIN_LOCKED_SQL = "BEGIN; SELECT pg_advisory_xact_lock({key})"

# In that transaction, after the lock (so this statement's snapshot sees every committed claim):
# the due rows that are the lowest pending of their push target with no row of their task on the
# wire (``app.db.push_outbox``, "Claiming"), the first per task, leased and read with their push
# target. ``now()`` is the transaction's clock, as the shared path reads it. $1 limit, $2 owner,
# $3 lease seconds. Its cost must not depend on the backlog or on the table's statistics (the
# statement pool plans once per connection, maybe when the outbox was empty): ``due`` walks
# ``ix_push_outbox_due`` in its own order and stops at the limit, the on-the-wire test probes the
# partial ``ix_push_outbox_on_wire``, and the ids are handed to the UPDATE as an array (a
# primary-key probe each; ``IN (SELECT …)`` let the planner scan the whole table instead).
_CLAIM_SQL = """
WITH due AS (
    SELECT o.id, o.tenant, o.task_id, o.next_attempt_at
      FROM push_outbox o
     WHERE o.status = 'pending' AND o.next_attempt_at <= now()
       AND (o.lease_until IS NULL OR o.lease_until <= now())
       AND NOT EXISTS (SELECT 1 FROM push_outbox e
                        WHERE e.tenant = o.tenant AND e.task_id = o.task_id
                          AND e.config_id = o.config_id AND e.status = 'pending'
                          AND e.id < o.id)
       AND NOT EXISTS (SELECT 1 FROM push_outbox f
                        WHERE f.tenant = o.tenant AND f.task_id = o.task_id
                          AND f.status = 'pending' AND f.lease_until > now())
     ORDER BY o.next_attempt_at, o.id
     LIMIT $1
     FOR UPDATE OF o SKIP LOCKED
), first_per_task AS (
    SELECT DISTINCT ON (tenant, task_id) id
      FROM due
     ORDER BY tenant, task_id, next_attempt_at, id
), leased AS (
    UPDATE push_outbox
       SET lease_owner = $2, lease_until = now() + make_interval(secs => $3::float8),
           attempts = attempts + 1, first_attempt_at = coalesce(first_attempt_at, now())
     WHERE id = ANY(ARRAY(SELECT id FROM first_per_task))
    RETURNING id, tenant, identity, task_id, config_id, kind, message_key, payload::text,
              attempts, unauthorized_attempts, first_attempt_at, created_at
)
SELECT l.*, c.url, c.token_enc, c.auth_scheme, c.auth_credentials_enc
  FROM leased l
  LEFT JOIN push_configs c
    ON c.tenant = l.tenant AND c.identity = l.identity AND c.task_id = l.task_id
   AND c.id = l.config_id
 ORDER BY l.id
"""

# The database clock comes back with the answer: the outcome's time is that clock plus the
# attempt's elapsed time on this process's monotonic clock (one round trip less per push).
_STILL_OURS_SQL = "SELECT now() FROM push_outbox WHERE id = $1 AND status = $2 AND lease_owner = $3"

# $1 id, $2 owner, $3 new status, $4 now (delivered_at when delivered), $5 next attempt
# (NULL keeps it), $6 unauthorized attempts, $7 last error, $8 last HTTP status.
_RECORD_SQL = """
UPDATE push_outbox
   SET lease_owner = NULL, lease_until = NULL, status = $3::text,
       delivered_at = CASE WHEN $3::text = 'delivered' THEN $4::timestamptz
                           ELSE delivered_at END,
       next_attempt_at = coalesce($5::timestamptz, next_attempt_at),
       unauthorized_attempts = $6::int, last_error = $7::text, last_status = $8::int
 WHERE id = $1 AND status = 'pending' AND lease_owner = $2
RETURNING 1
"""


def _payload(record: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(record["payload"])
    return doc


@dataclass(frozen=True)
class Checked:
    """When the re-check before a send ran: the database clock and this process's."""

    db_now: datetime
    monotonic: float

    def now(self) -> datetime:
        return self.db_now + timedelta(seconds=time.monotonic() - self.monotonic)


class PostgresPushOutbox:
    def __init__(self, pool: StatementPool, shared: SharedPushOutbox) -> None:
        self._pool = pool
        self._shared = shared
        # The re-check's clock reading per push on the wire (``Checked``).
        self._checked: dict[int, Checked] = {}

    async def claim(self, *, owner: str, lease: timedelta, limit: int) -> list[ClaimedPush]:
        """The leased rows with their push target's columns."""
        if limit <= 0:
            return []
        async with self._pool.connection() as conn:
            await conn.execute(_BEGIN_LOCKED_SQL.format(key=int(_CLAIM_LOCK_KEY)))
            leased: list[asyncpg.Record] = await conn.fetch(
                _CLAIM_SQL, limit, owner, lease.total_seconds()
            )
            await conn.execute("COMMIT")  # an error above drops the connection, and its lock
        return [claimed(r, _payload(r), r) for r in leased]

    async def still_ours(self, push_id: int, owner: str) -> bool:
        db_now = await self._pool.fetchval(_STILL_OURS_SQL, push_id, PENDING, owner)
        if db_now is None:
            return False
        self._checked[push_id] = Checked(db_now, time.monotonic())
        if len(self._checked) > _MAX_CHECKED:  # an attempt that never recorded
            self._checked.pop(next(iter(self._checked)))
        return True

    async def record(
        self, push_id: int, owner: str, decide: Callable[[datetime], PushRecord]
    ) -> bool:
        checked = self._checked.pop(push_id, None)
        now: datetime = (
            checked.now() if checked is not None else await self._pool.fetchval("SELECT now()")
        )
        record = decide(now)
        next_attempt = record.next_attempt_at if record.status == PENDING else None
        applied = await self._pool.fetchval(
            _RECORD_SQL,
            push_id,
            owner,
            record.status,
            now,
            next_attempt,
            record.unauthorized_attempts,
            record.error,
            record.http_status,
        )
        return applied is not None

    async def drop(self, push_id: int, owner: str, *, reason: str) -> bool:
        return await self._shared.drop(push_id, owner, reason=reason)

    async def gauges(self) -> OutboxGauges:
        return await self._shared.gauges()

    async def list_dead(
        self, *, tenant: str | None, limit: int, filters: DeadLetterFilter | None = None
    ) -> list[DeadLetter]:
        return await self._shared.list_dead(tenant=tenant, limit=limit, filters=filters)

    async def replay(self, *, ids: list[int] | None, tenant: str | None) -> ReplayReport:
        return await self._shared.replay(ids=ids, tenant=tenant)

    async def trace_context(self, push: ClaimedPush) -> dict[str, Any] | None:
        return await self._shared.trace_context(push)
