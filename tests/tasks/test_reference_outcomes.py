"""REFERENCE-CASES 83 as our design answers it: there is no ``complete(text)`` store call that
could refuse blank text; the agent's reply is kept as given (A2A parts) and the terminal message
carries the deterministic ``<taskId>:final`` id (CONTRACT §7)."""

from __future__ import annotations

from app.db.engine import Database
from app.db.models import PushOutboxRow
from app.settings import Settings
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.tasks.turn_writes import TurnWrites
from tests.tasks.conftest import SCOPE, accept, count, hold_lease, task_row


async def test_case_83_whitespace_reply_is_kept_verbatim_under_the_final_id(
    database: Database, settings: Settings, writes: TurnWrites
) -> None:
    accepted = await accept(database, settings, require_push=True)
    task_id = accepted.task.id
    fence = await hold_lease(database)
    assert await writes.mark_working(SCOPE, task_id, fence)
    assert await writes.finish(SCOPE, task_id, fence, TurnOutcome(states.COMPLETED, text="   "))
    row = await task_row(database, task_id)
    assert row.state == states.COMPLETED
    assert row.status["message"]["parts"] == [{"text": "   "}]
    assert row.status["message"]["messageId"] == f"{task_id}:final"
    assert await count(database, PushOutboxRow) == 1
