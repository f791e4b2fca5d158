"""What a ListTasks page asks for (CONTRACT §5), shared by the ORM path
(``app.tasks.queries``) and the PostgreSQL statement (``app.db.postgres.list_tasks``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 50


@dataclass(frozen=True)
class ListQuery:
    """Filters as the client sent them; an empty ``context_id`` or ``state`` filters nothing."""

    context_id: str | None = None
    state: str | None = None
    status_after: datetime | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    page_token: str = ""
    history_length: int = 0
    include_artifacts: bool = False
