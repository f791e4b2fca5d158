"""``GetTask`` and ``ListTasks`` (CONTRACT §5), scoped to the caller.

ListTasks pages newest first with a keyset cursor over ``(created_at, id)`` — the index
``ix_tasks_scope_created (tenant, identity, created_at, id)`` serves both the filter and the
order, and a page costs the same wherever it is (never OFFSET). The cursor is opaque to
clients (base64url of JSON); a forged one can only move within the caller's own tasks.
"""

from __future__ import annotations

import json
from typing import Any

from app.db.cursor import decode_cursor
from app.db.documents import RawJson
from app.db.engine import Database
from app.db.list_query import MAX_PAGE_SIZE, ListQuery
from app.errors import InvalidParams, TaskNotFound
from app.security.caller import CallerScope
from app.text import shown


class TaskQueries:
    def __init__(self, db: Database, *, default_history_length: int) -> None:
        self._store = db.storage.task_reads
        self._default_history = default_history_length

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
        """``get``, answered as JSON text when the store builds it so (PostgreSQL)."""
        if history_length is not None and history_length < 0:
            raise InvalidParams("params.historyLength must not be negative")
        limit = self._default_history if history_length is None else history_length
        if not task_id:
            raise TaskNotFound("task '' not found")
        found = await self._store.get(scope, task_id, limit)
        if found is None:
            raise TaskNotFound(f"task '{shown(task_id)}' not found")
        return found

    async def list_wire(self, scope: CallerScope, query: ListQuery) -> dict[str, Any] | RawJson:
        """One page, answered as JSON text when the store builds it so (PostgreSQL)."""
        if not 1 <= query.page_size <= MAX_PAGE_SIZE:
            raise InvalidParams(f"params.pageSize must be between 1 and {MAX_PAGE_SIZE}")
        if query.history_length < 0:
            raise InvalidParams("params.historyLength must not be negative")
        cursor = decode_cursor(query.page_token) if query.page_token else None
        return await self._store.list(scope, query, cursor)
