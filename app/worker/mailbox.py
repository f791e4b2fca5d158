"""An identity's mailbox: the ``turns`` rows a lease holder drains, in ``turns.id`` order.

Turn statuses: ``queued`` → ``running`` → ``done`` | ``dead`` (failed for good) | ``canceled``.
Every update here is fenced (``app.db.fence.fence_holds``) in the same statement, so a
zombie worker that lost its lease cannot move a turn the new holder owns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select, update

from app.db.engine import Database
from app.db.fence import FENCE_SQL, Fence, fence_holds, fence_params
from app.db.models import TurnRow
from app.db.postgres.turn_heads import HEAD_COLUMNS_SQL, head_join_sql
from app.db.statement_pool import StatementPool
from app.security.caller import CallerScope
from app.tasks.states import TURN_QUEUED, TURN_RUNNING
from app.worker.lease import (
    CLAIM_SQL,
    UNFINISHED,
    Lease,
    claim,
    lease_deadline,
    locking_transaction,
)

# last_error holds a category, never exception text (it may carry secrets or prompts).
ERROR_TIMEOUT = "timeout"
ERROR_AGENT = "agent_error"
ERROR_INTERRUPTED = "interrupted"
ERROR_REFUSED = "write_refused"

# PostgreSQL: each unit below is one autocommit statement on the statement pool. Through the
# ORM each was a transaction of 3-4 round trips (BEGIN, ``SET LOCAL``, the statement, COMMIT)
# and ~1 ms of worker CPU; the turn benchmark was bound by them (bench/README). Same rules as
# the ORM statements: scope, unfinished status and the fence (``app.db.fence.FENCE_SQL``)
# in the same WHERE, the database clock for every time.
_HEAD_SQL = (
    f"SELECT {HEAD_COLUMNS_SQL} FROM (SELECT 1) AS one"  # noqa: S608 (constant fragments only)
    + head_join_sql(tenant="$1", identity="$2")
)

# $5 turn id; $6 new status; $7 attempts delta; $8 seconds until due (NULL: keep
# not_before); $9 whether to set last_error, $10 its value.
_FENCED_UPDATE_SQL = (
    """
UPDATE turns
   SET status = $6,
       attempts = attempts + $7,
       not_before = CASE WHEN $8::float8 IS NULL THEN not_before
                         ELSE now() + make_interval(secs => $8::float8) END,
       last_error = CASE WHEN $9::bool THEN $10::text ELSE last_error END,
       updated_at = now()
 WHERE id = $5 AND tenant = $1 AND identity = $2 AND status = ANY($11::text[])
   AND """
    + FENCE_SQL
    + """
RETURNING 1
"""
)


# ``settle`` and the read of the identity's next head in one statement: the drain reads the
# head after every settled turn, so apart they were two round trips per turn (bench/ROUNDS.md,
# round seven). Every part of a statement sees the same snapshot, taken before its UPDATE
# runs, so the settled turn still looks unfinished to the head read: it is left out by id
# (it was the head, so the next head has a higher id). The head is only used when the
# settle applied. $5 turn id, $6 new status, $7 last error, $8 unfinished statuses.
_SETTLE_AND_HEAD_SQL = (
    """
WITH settled AS (
    UPDATE turns SET status = $6, last_error = $7::text, updated_at = now()
     WHERE id = $5 AND tenant = $1 AND identity = $2 AND status = ANY($8::text[])
       AND """  # noqa: S608 (constant fragments only)
    + FENCE_SQL
    + """
    RETURNING 1
)
SELECT (SELECT count(*) FROM settled) AS applied, """
    + HEAD_COLUMNS_SQL
    + " FROM (SELECT 1) AS one"
    + head_join_sql(tenant="$1", identity="$2", extra="id <> $5")
)


# The claim (``lease.CLAIM_SQL``) and each claimed identity's head turn in one statement: a
# drain starts by reading its head, one more round trip per claimed identity (bench/ROUNDS.md,
# round seven). The head read sees the statement's snapshot, and so does the claim's search
# for identities whose head is due; a holder that lost its lease before that snapshot cannot
# write after it (its fence requires an unexpired lease, and the lease had expired).
_CLAIM_WITH_HEADS_SQL = (
    "WITH claimed AS ("  # noqa: S608 (constant fragments only)
    + CLAIM_SQL
    + ") SELECT c.tenant, c.identity, c.fence, "
    + HEAD_COLUMNS_SQL
    + " FROM claimed c"
    + head_join_sql(tenant="c.tenant", identity="c.identity")
)


@dataclass(frozen=True)
class QueuedTurn:
    id: int
    task_id: str
    message_id: str
    kind: str
    status: str
    attempts: int
    payload: dict[str, Any]


async def claim_with_heads(
    db: Database, *, owner: str, limit: int, lease_seconds: float
) -> list[tuple[Lease, QueuedTurn | None]]:
    """``lease.claim`` and, for each new lease, its identity's head turn (``head_turn``):
    one statement on PostgreSQL."""
    if db.statement_pool is None or limit <= 0:
        leases = await claim(db, owner=owner, limit=limit, lease_seconds=lease_seconds)
        return [(lease, await head_turn(db, lease)) for lease in leases]
    rows = await db.statement_pool.fetch(_CLAIM_WITH_HEADS_SQL, owner, float(lease_seconds), limit)
    return [
        (
            Lease(
                CallerScope(tenant=row["tenant"], identity=row["identity"]),
                Fence(owner=owner, token=int(row["fence"])),
            ),
            queued_turn(row),
        )
        for row in rows
    ]


async def head_turn(db: Database, lease: Lease) -> QueuedTurn | None:
    """The identity's lowest unfinished turn if it is due, else ``None`` (drain stops)."""
    scope = lease.scope
    if db.statement_pool is not None:
        return await _head_turn_pg(db.statement_pool, lease)
    async with db.transaction() as s:
        row = (
            await s.execute(
                select(TurnRow)
                .where(
                    TurnRow.tenant == scope.tenant,
                    TurnRow.identity == scope.identity,
                    TurnRow.status.in_(UNFINISHED),
                )
                .order_by(TurnRow.id)
                .limit(1)
            )
        ).scalar_one_or_none()
        if row is None:
            return None
        if row.not_before is not None:
            due = (
                await s.execute(
                    select(TurnRow.id).where(
                        TurnRow.id == row.id,
                        or_(TurnRow.not_before.is_(None), TurnRow.not_before <= db.clock()),
                    )
                )
            ).first()
            if due is None:
                return None
        return QueuedTurn(
            id=row.id,
            task_id=row.task_id,
            message_id=row.message_id,
            kind=row.kind,
            status=row.status,
            attempts=row.attempts,
            payload=dict(row.payload or {}),
        )


async def _head_turn_pg(pool: StatementPool, lease: Lease) -> QueuedTurn | None:
    row = await pool.fetchrow(_HEAD_SQL, lease.scope.tenant, lease.scope.identity)
    return queued_turn(row)


def queued_turn(row: Any) -> QueuedTurn | None:
    """A head row (``turn_heads.HEAD_COLUMNS_SQL``) as a turn, or None when there is no
    head or it is not yet due."""
    if row is None or row["id"] is None or not row["due"]:
        return None
    return QueuedTurn(
        id=row["id"],
        task_id=row["task_id"],
        message_id=row["message_id"],
        kind=row["kind"],
        status=row["status"],
        attempts=row["attempts"],
        payload=json.loads(row["payload"]) if row["payload"] else {},
    )


@dataclass(frozen=True)
class _TurnChange:
    """What one fenced turn update sets (the PostgreSQL statement's parameters)."""

    status: str
    attempts_delta: int = 0
    due_in: float | None = None  # seconds from now; None keeps not_before
    set_error: bool = False
    error: str | None = None


async def _fenced_update_pg(
    pool: StatementPool, lease: Lease, turn_id: int, change: _TurnChange
) -> bool:
    scope, fence = lease.scope, lease.fence
    applied = await pool.fetchval(
        _FENCED_UPDATE_SQL,
        *fence_params(scope, fence),
        turn_id,
        change.status,
        change.attempts_delta,
        change.due_in,
        change.set_error,
        change.error,
        list(UNFINISHED),
    )
    return applied is not None


async def _fenced_update(db: Database, lease: Lease, turn_id: int, **values: Any) -> bool:
    stmt = (
        update(TurnRow)
        .where(
            TurnRow.id == turn_id,
            TurnRow.tenant == lease.scope.tenant,
            TurnRow.identity == lease.scope.identity,
            TurnRow.status.in_(UNFINISHED),
            fence_holds(lease.scope, lease.fence, now=db.clock()),
        )
        .values(updated_at=db.clock(), **values)
        .execution_options(synchronize_session=False)
    )
    async with locking_transaction(db) as s:
        result = await s.execute(stmt)
    return bool(getattr(result, "rowcount", 0))


async def begin_attempt(db: Database, lease: Lease, turn: QueuedTurn) -> bool:
    """``running`` and one more attempt, before anything else happens: a worker that dies
    mid-turn leaves ``running`` behind and its attempt has been counted."""
    if db.statement_pool is not None:
        change = _TurnChange(TURN_RUNNING, attempts_delta=1)
        return await _fenced_update_pg(db.statement_pool, lease, turn.id, change)
    return await _fenced_update(
        db, lease, turn.id, status=TURN_RUNNING, attempts=TurnRow.attempts + 1
    )


async def settle(
    db: Database, lease: Lease, turn_id: int, status: str, *, error: str | None = None
) -> bool:
    """Final turn status: ``done`` | ``dead`` | ``canceled``."""
    if db.statement_pool is not None:
        change = _TurnChange(status, set_error=True, error=error)
        return await _fenced_update_pg(db.statement_pool, lease, turn_id, change)
    return await _fenced_update(db, lease, turn_id, status=status, last_error=error)


@dataclass(frozen=True)
class Settled:
    """What ``settle_and_head`` found: whether the settle applied (False: fenced out, the
    turn belongs to another holder now) and, if it did, the identity's next due turn."""

    applied: bool
    next_turn: QueuedTurn | None = None


async def settle_and_head(
    db: Database, lease: Lease, turn_id: int, status: str, *, error: str | None = None
) -> Settled:
    """``settle`` the turn, then read the identity's next head (``head_turn``): one
    statement on PostgreSQL, two units on SQLite."""
    if db.statement_pool is None:
        if not await settle(db, lease, turn_id, status, error=error):
            return Settled(applied=False)
        return Settled(applied=True, next_turn=await head_turn(db, lease))
    scope, fence = lease.scope, lease.fence
    row = await db.statement_pool.fetchrow(
        _SETTLE_AND_HEAD_SQL,
        *fence_params(scope, fence),
        turn_id,
        status,
        error,
        list(UNFINISHED),
    )
    if row is None or row["applied"] != 1:
        return Settled(applied=False)
    return Settled(applied=True, next_turn=queued_turn(row))


async def retry_later(
    db: Database, lease: Lease, turn_id: int, *, delay: float, error: str
) -> bool:
    """Back to ``queued``, not before ``now + delay`` (the identity's later turns wait)."""
    if db.statement_pool is not None:
        change = _TurnChange(TURN_QUEUED, due_in=float(delay), set_error=True, error=error)
        return await _fenced_update_pg(db.statement_pool, lease, turn_id, change)
    return await _fenced_update(
        db,
        lease,
        turn_id,
        status=TURN_QUEUED,
        not_before=lease_deadline(db, delay),
        last_error=error,
    )


async def give_back(db: Database, lease: Lease, turn_id: int) -> bool:
    """Shutdown interrupted the turn: queue it again and do not count the attempt."""
    if db.statement_pool is not None:
        change = _TurnChange(
            TURN_QUEUED, attempts_delta=-1, set_error=True, error=ERROR_INTERRUPTED
        )
        return await _fenced_update_pg(db.statement_pool, lease, turn_id, change)
    return await _fenced_update(
        db,
        lease,
        turn_id,
        status=TURN_QUEUED,
        attempts=TurnRow.attempts - 1,
        last_error=ERROR_INTERRUPTED,
    )
