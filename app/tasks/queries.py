"""``GetTask`` and ``ListTasks`` (CONTRACT §5), scoped to the caller.

ListTasks pages newest first with a keyset cursor over ``(created_at, id)`` — the index
``ix_tasks_scope_created (tenant, identity, created_at, id)`` serves both the filter and the
order, and a page costs the same wherever it is (never OFFSET). The cursor is opaque to
clients (base64url of JSON); a forged one can only move within the caller's own tasks.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.sql import ColumnElement

from app.db.engine import Database
from app.db.models import TaskRow
from app.db.postgres.batched_reads import GetTaskBatcher
from app.db.shared.task_rows import load_history, load_task
from app.errors import InvalidParams, TaskNotFound
from app.rpc.responses import RawJson
from app.security.caller import CallerScope
from app.tasks.cursor import decode_cursor, encode_cursor
from app.tasks.list_pg import list_page
from app.tasks.list_query import MAX_PAGE_SIZE, ListQuery
from app.tasks.wire import task_doc
from app.text import shown


class TaskQueries:
    def __init__(self, db: Database, *, default_history_length: int) -> None:
        self._db = db
        self._default_history = default_history_length
        self._batcher = None if db.statement_pool is None else GetTaskBatcher(db.statement_pool)

    async def get(
        self, scope: CallerScope, task_id: str, history_length: int | None
    ) -> dict[str, Any]:
        """History: ``0`` → none, ``n`` → the last n, absent → at most the default."""
        doc = await self.get_wire(scope, task_id, history_length)
        if isinstance(doc, RawJson):
            loaded: dict[str, Any] = json.loads(doc.text)
            return loaded
        return doc

    async def get_wire(
        self, scope: CallerScope, task_id: str, history_length: int | None
    ) -> dict[str, Any] | RawJson:
        """``get``, answered as JSON text when the database builds it (PostgreSQL)."""
        if history_length is not None and history_length < 0:
            raise InvalidParams("params.historyLength must not be negative")
        limit = self._default_history if history_length is None else history_length
        if not task_id:
            raise TaskNotFound("task '' not found")
        if not self._db.is_sqlite:
            return await self._get_pg(scope, task_id, limit)
        async with self._db.transaction() as session:
            row = await load_task(session, scope, task_id)
            if row is None:
                raise TaskNotFound(f"task '{shown(task_id)}' not found")
            history = await load_history(session, scope, task_id, limit)
        return task_doc(row, history=history)

    async def _get_pg(self, scope: CallerScope, task_id: str, limit: int) -> RawJson:
        # Hand-written on raw driver connections: through the ORM this read was 4 round trips
        # (BEGIN, task, history, COMMIT) and ~60 % of a verified GetTask's CPU, and a checkout
        # from the SQLAlchemy pool alone costs more CPU than the statement (bench/README,
        # app/db/statement_pool.py). One SELECT is its own snapshot, so no explicit transaction;
        # concurrent reads share one statement (app/tasks/batched_reads.py). Same scope:
        # tenant AND identity AND id, so another caller's task is simply not found. The
        # document comes back as text and is spliced into the answer (no decode + re-encode).
        assert self._batcher is not None  # PostgreSQL always has a read pool
        text = await self._batcher.get(scope, task_id, max(limit, 0))
        if text is None:
            raise TaskNotFound(f"task '{shown(task_id)}' not found")
        return RawJson(text)

    def _filters(self, scope: CallerScope, query: ListQuery) -> list[ColumnElement[bool]]:
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

    async def list_wire(self, scope: CallerScope, query: ListQuery) -> dict[str, Any] | RawJson:
        """One page, answered as JSON text on PostgreSQL (``app.tasks.list_pg``)."""
        if not 1 <= query.page_size <= MAX_PAGE_SIZE:
            raise InvalidParams(f"params.pageSize must be between 1 and {MAX_PAGE_SIZE}")
        if query.history_length < 0:
            raise InvalidParams("params.historyLength must not be negative")
        if self._db.statement_pool is None:
            return await self.list_through_orm(scope, query)
        cursor = decode_cursor(query.page_token) if query.page_token else None
        return await list_page(self._db.statement_pool, scope, query, cursor)

    async def list_through_orm(self, scope: CallerScope, query: ListQuery) -> dict[str, Any]:
        """The portable path (SQLite; on PostgreSQL the reference its statement is tested
        against). ``query`` is validated by ``list_wire``."""
        filters = self._filters(scope, query)
        page = select(TaskRow).where(*filters)
        if query.page_token:
            created_at, task_id = decode_cursor(query.page_token)
            page = page.where(tuple_(TaskRow.created_at, TaskRow.id) < (created_at, task_id))
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
