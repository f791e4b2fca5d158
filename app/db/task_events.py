"""The task-events store: what a stream reads (A2A 1.0 §3.1.2 SendStreamingMessage, §3.1.6
SubscribeToTask).

Rows are appended by triggers on ``tasks`` (``app.db.models.task_events``), so this store only
reads. ``head`` is the task's status and artifacts together with the position in its event log
they correspond to, read in one statement (one snapshot: nothing is both in the first Task and
replayed, and nothing in between is skipped); ``first`` is the same at the task's creation,
for the stream of the SendStreamingMessage that created it; ``after`` reads the log on from a
position, a bounded batch at a time, so a slow reader holds at most one batch in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from app.security.caller import CallerScope


@dataclass(frozen=True)
class EventHead:
    """A task's state at log position ``seq`` (0 when its log is empty)."""

    seq: int
    context_id: str
    status: dict[str, Any]
    artifacts: list[Any]


@dataclass(frozen=True)
class TaskEvent:
    """One change: the status after it, and the artifacts after it when they changed."""

    seq: int
    status: dict[str, Any]
    artifacts: list[Any] | None


class TaskEventStore(Protocol):
    async def head(self, scope: CallerScope, task_id: str) -> EventHead | None:
        """The task's status, artifacts and log position; None if not found in ``scope``."""
        ...

    async def first(self, scope: CallerScope, task_id: str) -> EventHead | None:
        """The task as its first event (its creation) left it, at that event's position; a
        stream of a task it has just created replays every change from there. ``head``
        when the log holds no event of it; None if not found in ``scope``."""
        ...

    async def after(
        self, scope: CallerScope, task_id: str, seq: int, limit: int
    ) -> list[TaskEvent]:
        """At most ``limit`` events past ``seq``, oldest first. Call only for a task ``head``
        found in ``scope`` (the log is keyed by the task)."""
        ...
