"""Dead letters: list them, and re-queue them (``looping-edge push dead|replay``).

A replayed row starts over: ``pending``, zero attempts, due now, a fresh retry budget.
It becomes the head of its task's queue again, so per-task order still holds.

One exception (documented in the README's design notes): a dead row whose task already had a
later push delivered to the same target is skipped as superseded, whatever its kind; sending it
would show the gateway an older state after a newer one (a stale "working" update, or a
question (``INPUT_REQUIRED``, stored as a final push) after the turn that answered it).
Rows of a canceled task are never dead (``cancel_undelivered`` cancels dead letters too), so a
replay cannot push after a cancel.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, exists, select, update
from sqlalchemy.orm import aliased

from app.db.engine import Database
from app.db.models import PushOutboxRow
from app.db.outbox import DEAD, DELIVERED, PENDING
from app.push.store import as_utc, db_now, wake_deliverers


@dataclass(frozen=True)
class DeadLetter:
    id: int
    tenant: str
    task_id: str
    kind: str
    message_key: str
    attempts: int
    last_status: int | None
    last_error: str | None
    created_at: datetime

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "taskId": self.task_id,
            "kind": self.kind,
            "messageId": f"{self.task_id}:{self.message_key}",
            "attempts": self.attempts,
            "lastStatus": self.last_status,
            "lastError": self.last_error,
            "createdAt": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class ReplayReport:
    requeued: tuple[int, ...]
    superseded: tuple[int, ...]
    not_dead: tuple[int, ...]


async def list_dead(
    db: Database, *, tenant: str | None = None, limit: int = 1000
) -> list[DeadLetter]:
    o = PushOutboxRow
    query = select(o).where(o.status == DEAD).order_by(o.id).limit(limit)
    if tenant is not None:
        query = query.where(o.tenant == tenant)
    async with db.transaction() as session:
        rows = (await session.execute(query)).scalars().all()
    return [
        DeadLetter(
            id=r.id,
            tenant=r.tenant,
            task_id=r.task_id,
            kind=r.kind,
            message_key=r.message_key,
            attempts=r.attempts,
            last_status=r.last_status,
            last_error=r.last_error,
            created_at=as_utc(r.created_at),
        )
        for r in rows
    ]


async def replay(
    db: Database, *, ids: list[int] | None = None, tenant: str | None = None
) -> ReplayReport:
    """Re-queue the dead rows ``ids`` (or every dead row when ``ids`` is None)."""
    o = PushOutboxRow
    later = aliased(PushOutboxRow)
    # CONTRACT §7: per task, pushes arrive in order; an older one after a newer is not replayed.
    superseded = exists().where(
        and_(
            later.tenant == o.tenant,
            later.task_id == o.task_id,
            later.config_id == o.config_id,
            later.status == DELIVERED,
            later.id > o.id,
        )
    )
    scope = [o.status == DEAD]
    if ids is not None:
        scope.append(o.id.in_(ids))
    if tenant is not None:
        scope.append(o.tenant == tenant)
    async with db.transaction() as session:
        dead = (await session.execute(select(o.id, superseded).where(*scope))).all()
        skip = tuple(sorted(row_id for row_id, is_superseded in dead if is_superseded))
        requeue = sorted(row_id for row_id, is_superseded in dead if not is_superseded)
        if requeue:
            now = await db_now(db, session)
            await session.execute(
                update(o)
                .where(o.id.in_(requeue), o.status == DEAD)
                .values(
                    status=PENDING,
                    attempts=0,
                    unauthorized_attempts=0,
                    first_attempt_at=None,
                    next_attempt_at=now,
                    lease_owner=None,
                    lease_until=None,
                )
                .execution_options(synchronize_session=False)
            )
    if requeue:
        await wake_deliverers(db)
    found = {row_id for row_id, _ in dead}
    missing = tuple(sorted(set(ids or ()) - found))
    return ReplayReport(requeued=tuple(requeue), superseded=skip, not_dead=missing)
