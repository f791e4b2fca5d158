"""The task-lifecycle store as SQLAlchemy transactions, for both backends
(``app.db.task_lifecycle.TaskLifecycleStore``)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from sqlalchemy import ColumnElement, delete, select, update

from app.db.documents import task_doc
from app.db.engine import Database
from app.db.models import (
    PeerSendRow,
    PushConfigRow,
    PushOutboxRow,
    TaskMessageRow,
    TaskRow,
    TurnAttachmentRow,
    TurnRow,
)
from app.db.outbox import cancel_undelivered
from app.db.shared.task_rows import load_history, load_task
from app.db.states import TURN_CANCELED, TURN_QUEUED
from app.db.task_lifecycle import Cancel, Canceled
from app.security.caller import CallerScope


def _queued_turns(scope: CallerScope, task_id: str) -> tuple[ColumnElement[bool], ...]:
    """The caller's queued turns of the task."""
    return (
        TurnRow.tenant == scope.tenant,
        TurnRow.identity == scope.identity,
        TurnRow.task_id == task_id,
        TurnRow.status == TURN_QUEUED,
    )


class SharedTaskLifecycle:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def cancel(
        self, scope: CallerScope, task_id: str, cancel: Cancel, *, history: int
    ) -> Canceled:
        async with self._db.transaction() as session:
            # Lock order: the task's queued turns before the task, as a worker beginning a
            # turn takes them (its turn, then the task): the other order deadlocked a cancel
            # racing that begin on PostgreSQL. (SQLite writes one transaction at a time.)
            await session.execute(
                select(TurnRow.id).where(*_queued_turns(scope, task_id)).with_for_update()
            )
            result = await session.execute(
                update(TaskRow)
                .where(
                    TaskRow.tenant == scope.tenant,
                    TaskRow.identity == scope.identity,
                    TaskRow.id == task_id,
                    TaskRow.state.not_in(cancel.final),
                )
                .values(
                    state=cancel.state,
                    status=cancel.status,
                    updated_at=cancel.at,
                    version=TaskRow.version + 1,
                )
                .execution_options(synchronize_session=False)
            )
            applied = int(getattr(result, "rowcount", 0) or 0) == 1
            if applied:
                await session.execute(
                    update(TurnRow)
                    .where(*_queued_turns(scope, task_id))
                    .values(status=TURN_CANCELED, updated_at=cancel.at)
                    .execution_options(synchronize_session=False)
                )
                await cancel_undelivered(session, scope=scope, task_id=task_id)
            row = await load_task(session, scope, task_id) if task_id else None
            if row is None:
                return Canceled(applied=applied, task=None, state=None)
            messages = await load_history(session, scope, task_id, history)
        return Canceled(applied=applied, task=task_doc(row, history=messages), state=row.state)

    async def state(self, scope: CallerScope, task_id: str) -> str | None:
        async with self._db.transaction() as session:
            found: str | None = (
                await session.execute(
                    select(TaskRow.state).where(
                        TaskRow.tenant == scope.tenant,
                        TaskRow.identity == scope.identity,
                        TaskRow.id == task_id,
                    )
                )
            ).scalar_one_or_none()
        return found

    async def purge(self, *, final: frozenset[str], before: datetime, batch: int) -> int:
        async with self._db.transaction() as session:
            rows = (
                await session.execute(
                    select(TaskRow.tenant, TaskRow.identity, TaskRow.id)
                    .where(TaskRow.state.in_(final), TaskRow.updated_at < before)
                    .limit(batch)
                )
            ).all()
            by_tenant: dict[str, list[str]] = defaultdict(list)
            identities: dict[str, set[str]] = defaultdict(set)
            for tenant, identity, task_id in rows:
                by_tenant[tenant].append(task_id)
                identities[tenant].add(identity)
            for tenant, ids in by_tenant.items():
                tables = (TaskMessageRow, PushOutboxRow, PushConfigRow, PeerSendRow)
                for table in (*tables, TurnAttachmentRow):
                    await session.execute(
                        delete(table).where(table.tenant == tenant, table.task_id.in_(ids))
                    )
                # No index of turns leads with the task (one would cost every turn pipeline
                # write, for a purge that runs hourly): the tasks' identities bound the
                # delete to their turns through the mailbox index, not the tenant's table.
                await session.execute(
                    delete(TurnRow).where(
                        TurnRow.tenant == tenant,
                        TurnRow.identity.in_(identities[tenant]),
                        TurnRow.task_id.in_(ids),
                    )
                )
                await session.execute(
                    delete(TaskRow).where(
                        TaskRow.tenant == tenant,
                        TaskRow.id.in_(ids),
                        TaskRow.state.in_(final),
                    )
                )
        return len(rows)
