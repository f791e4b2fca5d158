"""The transactional push outbox (CONTRACT §7): rows are written by the caller's transaction,
the one that makes the state change they report, so a commit means "will be pushed"."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import event, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.db.models import PushConfigRow, PushOutboxRow
from app.db.signals import WakeChannel
from app.security.caller import CallerScope

PushKind = Literal["progress", "final"]

PENDING = "pending"
DELIVERED = "delivered"
DEAD = "dead"
CANCELED = "canceled"
STATUSES = (PENDING, DELIVERED, DEAD, CANCELED)

_WAKE_KEY = "looping_push_wake"


async def enqueue_push(
    session: AsyncSession,
    wake: WakeChannel,
    *,
    scope: CallerScope,
    task_id: str,
    kind: PushKind,
    message_key: str,
    payload: dict[str, Any],
    trace_context: dict[str, str] | None = None,
) -> int:
    """Queue ``payload`` (a protobuf-JSON ``StreamResponse``) for every push config of the task,
    with ``trace_context``: the W3C context of the turn that queues it (its attempts' parent).

    Returns the number of rows written (0 when the task has no push config). ``wake``: the
    deliverers' channel of the storage ``session`` belongs to, woken at commit.
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
                trace_context=trace_context,
                status=PENDING,
                attempts=0,
            )
        )
    await session.flush()
    if configs:
        await _wake_on_commit(session, wake)
    return len(configs)


async def _wake_on_commit(session: AsyncSession, wake: WakeChannel) -> None:
    """Wake deliverers once this transaction commits (never before: the row must be visible)."""
    if session.info.get(_WAKE_KEY):
        return
    session.info[_WAKE_KEY] = True
    channel = wake.remote_channel()
    if channel is not None:
        # NOTIFY is transactional: delivered to listeners at commit, dropped on rollback.
        await session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})

    def after_commit(sync_session: Session) -> None:
        sync_session.info.pop(_WAKE_KEY, None)
        wake.notify_local()

    def after_rollback(sync_session: Session, _previous: object) -> None:
        sync_session.info.pop(_WAKE_KEY, None)

    event.listen(session.sync_session, "after_commit", after_commit, once=True)
    event.listen(session.sync_session, "after_soft_rollback", after_rollback, once=True)


async def cancel_undelivered(session: AsyncSession, *, scope: CallerScope, task_id: str) -> int:
    """After a cancel nothing more is sent for the task (CONTRACT §5 CancelTask, §7).

    Dead letters are canceled too, so an operator's ``push replay --all`` can never send a
    push for a task the gateway has canceled. A row whose attempt is already on the wire is
    marked canceled here; the deliverer re-reads the status right before every send and
    records no outcome over a canceled row.
    """
    result = await session.execute(
        update(PushOutboxRow)
        .where(
            PushOutboxRow.tenant == scope.tenant,
            PushOutboxRow.identity == scope.identity,
            PushOutboxRow.task_id == task_id,
            PushOutboxRow.status.in_((PENDING, DEAD)),
        )
        .values(status=CANCELED, lease_owner=None, lease_until=None)
    )
    return int(getattr(result, "rowcount", 0) or 0)
