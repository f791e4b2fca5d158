"""The task-reads store on PostgreSQL (``app.db.task_reads.TaskReadStore``).

Hand-written on raw driver connections: through the ORM a GetTask was 4 round trips (BEGIN,
task, history, COMMIT) and most of a verified GetTask's CPU, and a checkout from the
SQLAlchemy pool alone costs more CPU than the statement (``app/db/statement_pool.py``). One
SELECT is its own snapshot, so no explicit transaction;
concurrent reads share one statement (``app.db.postgres.batched_reads``), and a ListTasks page
is one statement (``app.db.postgres.list_tasks``). Same scope: tenant AND identity AND id.
The documents come back as text and are spliced into the answer (no decode + re-encode).
"""

from __future__ import annotations

from datetime import datetime

from app.db.documents import RawJson
from app.db.list_query import ListQuery
from app.db.postgres.batched_reads import GetTaskBatcher
from app.db.postgres.list_tasks import list_page
from app.db.statement_pool import StatementPool
from app.security.caller import CallerScope


class PostgresTaskReads:
    def __init__(self, pool: StatementPool) -> None:
        self._pool = pool
        self._batcher = GetTaskBatcher(pool)

    async def get(self, scope: CallerScope, task_id: str, history: int) -> RawJson | None:
        text = await self._batcher.get(scope, task_id, max(history, 0))
        return None if text is None else RawJson(text)

    async def list(
        self, scope: CallerScope, query: ListQuery, cursor: tuple[datetime, str] | None
    ) -> RawJson:
        return await list_page(self._pool, scope, query, cursor)
