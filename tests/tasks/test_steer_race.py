"""A steering message racing the running turn's outcome write (issue 48, point 8), on
PostgreSQL where the two can run at once: the message is either in the history before the
outcome (and the guarded completion sees it) or refused as for any task no longer running,
never an internal error."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy import update

from app.db.engine import Database
from app.db.models import TaskRow
from app.db.postgres.listen import asyncpg_dsn
from app.db.tenants import TenantRecord
from app.errors import UnsupportedOperation
from app.settings import Settings
from app.tasks import states
from app.tasks.accept import Acceptor
from app.tasks.outcome import TurnOutcome
from app.tasks.push_secrets import PushSecrets
from app.tasks.send_params import parse_send_message
from app.tasks.turn_writes import TurnWrites
from tests.tasks.conftest import SCOPE, accept, hold_lease, send_params, task_row


async def test_a_steering_message_behind_an_outcome_write_is_refused(
    pg_database: Database, pg_url: str, settings: Settings
) -> None:
    task_id = (await accept(pg_database, settings, message_id="m-1")).task.id
    async with pg_database.transaction() as session:
        await session.execute(
            update(TaskRow).where(TaskRow.id == task_id).values(state=states.WORKING)
        )
    finishing = await asyncpg.connect(asyncpg_dsn(pg_url))
    try:
        # The outcome write in flight: the task completed and its agent message at the next
        # history position, not committed yet.
        await finishing.execute("BEGIN")
        await finishing.execute(
            "UPDATE tasks SET state = $1, version = version + 1 WHERE id = $2",
            states.COMPLETED,
            task_id,
        )
        await finishing.execute(
            "INSERT INTO task_messages (tenant, task_id, seq, role, message)"
            " VALUES ($1, $2, 2, 'ROLE_AGENT', '{}'::jsonb)",
            SCOPE.tenant,
            task_id,
        )
        tenant = TenantRecord(id=SCOPE.tenant, manifest={}, require_push_config=False)
        params = send_params("m-2", "steer", task_id=task_id)
        request = parse_send_message(params, tenant=tenant, targets=settings.push_targets)
        acceptor = Acceptor(pg_database, PushSecrets(b"x" * 32))
        steering = asyncio.create_task(acceptor.accept(SCOPE, request, steerable=True))
        await asyncio.sleep(0.5)  # the steer is now waiting on the outcome write
        await finishing.execute("COMMIT")
    finally:
        await finishing.close()
    with pytest.raises(UnsupportedOperation):
        await steering


@pytest.mark.parametrize("knows", [True, False], ids=["known", "read"])
async def test_an_outcome_write_behind_a_steering_message_sees_it(
    pg_database: Database, pg_url: str, settings: Settings, knows: bool
) -> None:
    """The other order: the steering message holds the task row when the completion is
    written; the completion waits, finds the row changed and is refused as unseen (the worker
    then runs the agent again), not failed on the history position both would take."""
    writes = TurnWrites(pg_database, settings)
    task_id = (await accept(pg_database, settings, message_id="m-1")).task.id
    fence = await hold_lease(pg_database)
    assert await writes.mark_working(SCOPE, task_id, fence)
    snapshot = await writes.load_turn_context(SCOPE, task_id)
    # The worker's view (one write on it) or none (the store reads the task first).
    known = snapshot.known(snapshot.version) if knows else None
    steering = await asyncpg.connect(asyncpg_dsn(pg_url))
    try:
        # What the steer's transaction does, not committed yet: the row locked, its version
        # bumped and the message at the next history position.
        await steering.execute("BEGIN")
        await steering.execute("UPDATE tasks SET version = version + 1 WHERE id = $1", task_id)
        await steering.execute(
            "INSERT INTO task_messages (tenant, task_id, seq, role, message)"
            " VALUES ($1, $2, 2, 'ROLE_USER', '{}'::jsonb)",
            SCOPE.tenant,
            task_id,
        )
        outcome = TurnOutcome(state=states.COMPLETED, text="done")
        finishing = asyncio.create_task(
            writes.finish_and_settle(SCOPE, task_id, fence, outcome, known, seen_history=1)
        )
        await asyncio.sleep(0.5)  # the completion is now waiting on the steer's row lock
        await steering.execute("COMMIT")
    finally:
        await steering.close()
    done = await finishing
    assert done.unseen and not done.applied
    assert (await task_row(pg_database, task_id)).state == states.WORKING
