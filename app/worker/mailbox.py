"""An identity's mailbox: the ``turns`` rows a lease holder drains, in ``turns.id`` order.

Turn statuses: ``queued`` → ``running`` → ``done`` | ``dead`` (failed for good) | ``canceled``.
Every update here is fenced (``app.tasks.fence.fence_holds``) in the same statement, so a
zombie worker that lost its lease cannot move a turn the new holder owns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select, update

from app.db.engine import Database
from app.db.models import TurnRow
from app.tasks.fence import db_now, fence_holds
from app.tasks.states import TURN_QUEUED, TURN_RUNNING
from app.worker.lease import UNFINISHED, Lease, lease_deadline, locking_transaction

# last_error holds a category, never exception text (it may carry secrets or prompts).
ERROR_TIMEOUT = "timeout"
ERROR_AGENT = "agent_error"
ERROR_INTERRUPTED = "interrupted"
ERROR_REFUSED = "write_refused"


@dataclass(frozen=True)
class QueuedTurn:
    id: int
    task_id: str
    message_id: str
    kind: str
    status: str
    attempts: int
    payload: dict[str, Any]


async def head_turn(db: Database, lease: Lease) -> QueuedTurn | None:
    """The identity's lowest unfinished turn if it is due, else ``None`` (drain stops)."""
    scope = lease.scope
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
                        or_(
                            TurnRow.not_before.is_(None), TurnRow.not_before <= db_now(db.is_sqlite)
                        ),
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


async def _fenced_update(db: Database, lease: Lease, turn_id: int, **values: Any) -> bool:
    stmt = (
        update(TurnRow)
        .where(
            TurnRow.id == turn_id,
            TurnRow.tenant == lease.scope.tenant,
            TurnRow.identity == lease.scope.identity,
            TurnRow.status.in_(UNFINISHED),
            fence_holds(lease.scope, lease.fence, is_sqlite=db.is_sqlite),
        )
        .values(updated_at=db_now(db.is_sqlite), **values)
        .execution_options(synchronize_session=False)
    )
    async with locking_transaction(db) as s:
        result = await s.execute(stmt)
    return bool(getattr(result, "rowcount", 0))


async def begin_attempt(db: Database, lease: Lease, turn: QueuedTurn) -> bool:
    """``running`` and one more attempt, before anything else happens: a worker that dies
    mid-turn leaves ``running`` behind and its attempt has been counted."""
    return await _fenced_update(
        db, lease, turn.id, status=TURN_RUNNING, attempts=TurnRow.attempts + 1
    )


async def settle(
    db: Database, lease: Lease, turn_id: int, status: str, *, error: str | None = None
) -> bool:
    """Final turn status: ``done`` | ``dead`` | ``canceled``."""
    return await _fenced_update(db, lease, turn_id, status=status, last_error=error)


async def retry_later(
    db: Database, lease: Lease, turn_id: int, *, delay: float, error: str
) -> bool:
    """Back to ``queued``, not before ``now + delay`` (the identity's later turns wait)."""
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
    return await _fenced_update(
        db,
        lease,
        turn_id,
        status=TURN_QUEUED,
        attempts=TurnRow.attempts - 1,
        last_error=ERROR_INTERRUPTED,
    )
