"""``CancelTask`` (CONTRACT §5, §6): one compare-and-set to ``CANCELED`` from any non-terminal
state, in the transaction that also cancels the task's queued turns and its undelivered
pushes. No push is queued for the cancel itself: after a cancel nothing more is sent
(CONTRACT §7). A running turn learns of it when its next fenced write is refused (or its
heartbeat reads the state) and aborts the agent. A delegating agent's pending and running
subtasks are canceled next, so a subagent still running can no longer complete one.
"""

from __future__ import annotations

from typing import Any

from app.db.engine import Database
from app.db.subtasks import SubtaskScope
from app.db.task_lifecycle import Cancel
from app.errors import TaskNotCancelable, TaskNotFound
from app.security.caller import CallerScope
from app.tasks import states
from app.tasks.wire import status_doc, utcnow
from app.text import shown


class TaskCanceller:
    def __init__(self, db: Database, *, default_history_length: int) -> None:
        self._store = db.storage.task_lifecycle
        self._subtasks = db.storage.subtasks
        self._default_history = default_history_length

    async def cancel(self, scope: CallerScope, task_id: str) -> dict[str, Any]:
        now = utcnow()
        cancel = Cancel(
            state=states.CANCELED,
            status=status_doc(states.CANCELED, now),
            at=now,
            final=states.TERMINAL,
        )
        done = await self._store.cancel(scope, task_id, cancel, history=self._default_history)
        if done.task is None:
            raise TaskNotFound(f"task '{shown(task_id)}' not found")
        if not done.applied and done.state != states.CANCELED:
            # Already canceled is answered unchanged; any other terminal state is final.
            raise TaskNotCancelable(
                f"task '{shown(task_id)}' is in terminal state {done.state}",
                reason="task_terminal",
            )
        if done.applied:
            await self._subtasks.cancel_open(SubtaskScope(scope.tenant, scope.identity, task_id))
        return done.task
