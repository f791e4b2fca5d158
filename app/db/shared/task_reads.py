"""The task-reads store as SQLAlchemy reads (``app.db.task_reads.TaskReadStore``).

SQLite runs it; on PostgreSQL it is the reference the one-statement reads are tested
against. ListTasks pages newest first with a keyset cursor over ``(created_at, id)``: the
index ``ix_tasks_scope_created (tenant, identity, created_at, id)`` serves both the filter and
the order, and a page costs the same wherever it is (never OFFSET).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.sql import ColumnElement

from app.db.cursor import encode_cursor
from app.db.documents import RawJson, task_doc
from app.db.engine import Database
from app.db.list_query import ListQuery
from app.db.models import TaskRow
from app.db.shared.task_rows import load_history, load_task
from app.security.caller import CallerScope


def _filters(scope: CallerScope, query: ListQuery) -> list[ColumnElement[bool]]:
    filters: list[ColumnElement[bool]] = [
        TaskRow.tenant == scope.tenant,
        TaskRow.identity == scope.identity,
    ]
    if query.context_id:
        filters.append(TaskRow.context_id == query.context_id)
    if query.state:
        filters.append(TaskRow.state == query.state)
    if query.status_after is not None:
        # status.timestamp and updated_at are written together by every state change.
        filters.append(TaskRow.updated_at > query.status_after)
    return filters


class SharedTaskReads:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(
        self, scope: CallerScope, task_id: str, history: int
    ) -> dict[str, Any] | RawJson | None:
        async with self._db.transaction() as session:
            row = await load_task(session, scope, task_id)
            if row is None:
                return None
            messages = await load_history(session, scope, task_id, history)
        return task_doc(row, history=messages)

    async def list(
        self, scope: CallerScope, query: ListQuery, cursor: tuple[datetime, str] | None
    ) -> dict[str, Any]:
        filters = _filters(scope, query)
        page = select(TaskRow).where(*filters)
        if cursor is not None:
            page = page.where(tuple_(TaskRow.created_at, TaskRow.id) < cursor)
        page = page.order_by(TaskRow.created_at.desc(), TaskRow.id.desc()).limit(
            query.page_size + 1
        )
        async with self._db.transaction() as session:
            rows = list((await session.execute(page)).scalars().all())
            total = (
                await session.execute(select(func.count()).select_from(TaskRow).where(*filters))
            ).scalar_one()
            more = len(rows) > query.page_size
            rows = rows[: query.page_size]
            tasks = []
            for row in rows:
                history = (
                    await load_history(session, scope, row.id, query.history_length)
                    if query.history_length
                    else []
                )
                tasks.append(
                    task_doc(row, history=history, include_artifacts=query.include_artifacts)
                )
        next_token = encode_cursor(rows[-1].created_at, rows[-1].id) if more else ""
        return {
            "tasks": tasks,
            "nextPageToken": next_token,
            "pageSize": query.page_size,  # the size used, as the SDK's stores answer
            "totalSize": int(total),
        }
