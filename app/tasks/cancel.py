"""``CancelTask`` (CONTRACT §5, §6): one compare-and-set to ``CANCELED`` from any non-terminal
state, in the transaction that also cancels the task's queued turns and its undelivered
pushes. No push is queued for the cancel itself: after a cancel nothing more is sent
(CONTRACT §7). A running turn learns of it when its next fenced write is refused (or its
heartbeat reads the state) and aborts the agent.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from app.db.engine import Database
from app.db.models import TaskRow, TurnRow
from app.db.outbox import cancel_undelivered
from app.db.shared.task_rows import load_history, load_task
from app.errors import TaskNotCancelable, TaskNotFound
from app.security.caller import CallerScope
from app.tasks import states
from app.tasks.wire import status_doc, task_doc, utcnow
from app.text import shown


class TaskCanceller:
    def __init__(self, db: Database, *, default_history_length: int) -> None:
        self._db = db
        self._default_history = default_history_length

    async def cancel(self, scope: CallerScope, task_id: str) -> dict[str, Any]:
        now = utcnow()
        async with self._db.transaction() as session:
            result = await session.execute(
                update(TaskRow)
                .where(
                    TaskRow.tenant == scope.tenant,
                    TaskRow.identity == scope.identity,
                    TaskRow.id == task_id,
                    TaskRow.state.not_in(states.TERMINAL),
                )
                .values(
                    state=states.CANCELED,
                    status=status_doc(states.CANCELED, now),
                    updated_at=now,
                    version=TaskRow.version + 1,
                )
                .execution_options(synchronize_session=False)
            )
            applied = int(getattr(result, "rowcount", 0) or 0) == 1
            if applied:
                await session.execute(
                    update(TurnRow)
                    .where(
                        TurnRow.tenant == scope.tenant,
                        TurnRow.identity == scope.identity,
                        TurnRow.task_id == task_id,
                        TurnRow.status == states.TURN_QUEUED,
                    )
                    .values(status=states.TURN_CANCELED, updated_at=now)
                    .execution_options(synchronize_session=False)
                )
                await cancel_undelivered(session, scope=scope, task_id=task_id)
            row = await load_task(session, scope, task_id) if task_id else None
            if row is None:
                raise TaskNotFound(f"task '{shown(task_id)}' not found")
            if not applied and row.state != states.CANCELED:
                # Already canceled is answered unchanged; any other terminal state is final.
                raise TaskNotCancelable(
                    f"task '{shown(task_id)}' is in terminal state {row.state}",
                    reason="task_terminal",
                )
            history = await load_history(session, scope, task_id, self._default_history)
        return task_doc(row, history=history)
