"""The task-lifecycle store: cancel a task, read its state, purge expired tasks.

``TaskLifecycleStore`` is the seam between ``CancelTask``, the blocking ``SendMessage`` wait and
retention (``app.tasks``: which states are terminal, the documents, the errors) and the
backends, which run the same SQLAlchemy statements here (``app.db.shared.task_lifecycle``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.security.caller import CallerScope


@dataclass(frozen=True)
class Cancel:
    """What a cancel writes: ``state`` with ``status`` from any state but ``final`` ones."""

    state: str
    status: dict[str, Any]
    at: datetime
    final: frozenset[str]


@dataclass(frozen=True)
class Canceled:
    """``applied``: this call canceled the task. ``task``: the task afterwards (protobuf-JSON
    with its last ``history`` messages) and its state; None when not found in the scope."""

    applied: bool
    task: dict[str, Any] | None
    state: str | None


class TaskLifecycleStore(Protocol):
    async def cancel(
        self, scope: CallerScope, task_id: str, cancel: Cancel, *, history: int
    ) -> Canceled:
        """One unit of work: the compare-and-set to ``cancel.state``, the task's queued turns
        canceled and its undelivered pushes canceled too, then the task read back."""
        ...

    async def state(self, scope: CallerScope, task_id: str) -> str | None:
        """The task's state; None when not found in the scope."""
        ...

    async def purge(self, *, final: frozenset[str], before: datetime, batch: int) -> int:
        """Delete up to ``batch`` tasks in a ``final`` state last updated before ``before``,
        with their history, turns, push configs and outbox rows, one unit of work; returns
        how many tasks were deleted."""
        ...
