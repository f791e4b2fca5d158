"""The task-events store in SQLAlchemy, for both backends (``app.db.task_events``)."""

from __future__ import annotations

from sqlalchemy import and_, func, select

from app.db.engine import Database
from app.db.models import TaskEventRow, TaskRow
from app.db.task_events import EventHead, TaskEvent
from app.security.caller import CallerScope


class SharedTaskEvents:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def head(self, scope: CallerScope, task_id: str) -> EventHead | None:
        last = (
            select(func.coalesce(func.max(TaskEventRow.id), 0))
            .where(TaskEventRow.tenant == scope.tenant, TaskEventRow.task_id == task_id)
            .scalar_subquery()
        )
        query = select(TaskRow.context_id, TaskRow.status, TaskRow.artifacts, last).where(
            TaskRow.tenant == scope.tenant,
            TaskRow.identity == scope.identity,
            TaskRow.id == task_id,
        )
        async with self._db.sessions() as session:
            row = (await session.execute(query)).one_or_none()
        if row is None:
            return None
        context_id, status, artifacts, seq = row
        return EventHead(int(seq), context_id, dict(status), list(artifacts or []))

    async def first(self, scope: CallerScope, task_id: str) -> EventHead | None:
        first_id = (
            select(func.min(TaskEventRow.id))
            .where(TaskEventRow.tenant == scope.tenant, TaskEventRow.task_id == task_id)
            .scalar_subquery()
        )
        created = and_(
            TaskEventRow.tenant == TaskRow.tenant,
            TaskEventRow.task_id == TaskRow.id,
            TaskEventRow.id == first_id,
        )
        query = (
            select(TaskRow.context_id, TaskEventRow.id, TaskEventRow.status, TaskEventRow.artifacts)
            .select_from(TaskRow)
            .outerjoin(TaskEventRow, created)
            .where(
                TaskRow.tenant == scope.tenant,
                TaskRow.identity == scope.identity,
                TaskRow.id == task_id,
            )
        )
        async with self._db.sessions() as session:
            row = (await session.execute(query)).one_or_none()
        if row is None:
            return None
        context_id, seq, status, artifacts = row
        if seq is None:  # no event left of it (purged log): the stream starts at the head
            return await self.head(scope, task_id)
        return EventHead(int(seq), context_id, dict(status), list(artifacts or []))

    async def after(
        self, scope: CallerScope, task_id: str, seq: int, limit: int
    ) -> list[TaskEvent]:
        query = (
            select(TaskEventRow.id, TaskEventRow.status, TaskEventRow.artifacts)
            .where(
                TaskEventRow.tenant == scope.tenant,
                TaskEventRow.task_id == task_id,
                TaskEventRow.id > seq,
            )
            .order_by(TaskEventRow.id)
            .limit(limit)
        )
        async with self._db.sessions() as session:
            rows = (await session.execute(query)).all()
        return [
            TaskEvent(int(i), dict(status), None if arts is None else list(arts))
            for i, status, arts in rows
        ]
