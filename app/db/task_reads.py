"""The task-reads store: ``GetTask`` and ``ListTasks`` (CONTRACT §5), scoped to the caller.

``TaskReadStore`` is the seam between the query methods (``app.tasks.queries``: parameter
rules, errors) and the backends: the SQLAlchemy reads both can run
(``app.db.shared.task_reads``) and PostgreSQL's batched and one-statement reads, whose answers
come back as JSON text (``RawJson``) to be spliced into the response
(``app.db.postgres.task_reads``). Every read takes the caller scope ``(tenant, identity)``:
another caller's task is simply not found.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from app.db.documents import RawJson
from app.db.list_query import ListQuery
from app.security.caller import CallerScope


class TaskReadStore(Protocol):
    async def get(
        self, scope: CallerScope, task_id: str, history: int
    ) -> dict[str, Any] | RawJson | None:
        """The task with its last ``history`` messages; None if not found in ``scope``."""
        ...

    async def list(
        self, scope: CallerScope, query: ListQuery, cursor: tuple[datetime, str] | None
    ) -> dict[str, Any] | RawJson:
        """One page, newest first, after ``cursor`` (the decoded page token)."""
        ...
