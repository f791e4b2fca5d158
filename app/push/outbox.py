"""The transactional push outbox (CONTRACT §7): rows are written by the caller's transaction,
the one that makes the state change they report, so a commit means "will be pushed"."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import PushConfigRow, PushOutboxRow
from app.security.caller import CallerScope

PushKind = Literal["progress", "final"]

PENDING = "pending"
DELIVERED = "delivered"
DEAD = "dead"
CANCELED = "canceled"


async def enqueue_push(
    session: AsyncSession,
    *,
    scope: CallerScope,
    task_id: str,
    kind: PushKind,
    message_key: str,
    payload: dict[str, Any],
) -> int:
    """Queue ``payload`` (a protobuf-JSON ``StreamResponse``) for every push config of the task.

    Returns the number of rows written (0 when the task has no push config).
    """
    configs = (
        (
            await session.execute(
                select(PushConfigRow.id).where(
                    PushConfigRow.tenant == scope.tenant,
                    PushConfigRow.identity == scope.identity,
                    PushConfigRow.task_id == task_id,
                )
            )
        )
        .scalars()
        .all()
    )
    for config_id in configs:
        session.add(
            PushOutboxRow(
                tenant=scope.tenant,
                identity=scope.identity,
                task_id=task_id,
                config_id=config_id,
                message_key=message_key,
                kind=kind,
                payload=payload,
                status=PENDING,
                attempts=0,
            )
        )
    await session.flush()
    return len(configs)


async def cancel_undelivered(session: AsyncSession, *, scope: CallerScope, task_id: str) -> int:
    """After a cancel nothing more is sent for the task (CONTRACT §5 CancelTask, §7)."""
    result = await session.execute(
        update(PushOutboxRow)
        .where(
            PushOutboxRow.tenant == scope.tenant,
            PushOutboxRow.identity == scope.identity,
            PushOutboxRow.task_id == task_id,
            PushOutboxRow.status == PENDING,
        )
        .values(status=CANCELED)
    )
    return int(getattr(result, "rowcount", 0) or 0)
