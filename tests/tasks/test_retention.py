"""Retention (CONTRACT §6): terminal tasks older than the configured age are purged."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from app.db.engine import Database
from app.db.models import PushConfigRow, TaskMessageRow, TaskRow, TurnRow
from app.settings import Settings, load_settings
from app.tasks import states
from app.tasks.cancel import TaskCanceller
from app.tasks.retention import purge_expired
from app.tasks.wire import utcnow
from tests.tasks.conftest import GATEWAY, SCOPE, accept, count


async def _age(db: Database, task_id: str, days: float) -> None:
    async with db.transaction() as session:
        await session.execute(
            update(TaskRow)
            .where(TaskRow.id == task_id)
            .values(updated_at=utcnow() - timedelta(days=days))
        )


async def test_purge_expired_terminal_tasks(database: Database, settings: Settings):
    canceller = TaskCanceller(database, default_history_length=50)
    old_done = (await accept(database, settings, message_id="a", require_push=True)).task.id
    new_done = (await accept(database, settings, message_id="b")).task.id
    old_open = (await accept(database, settings, message_id="c")).task.id
    for task_id in (old_done, new_done):
        await canceller.cancel(SCOPE, task_id)
    await _age(database, old_done, 31)
    await _age(database, old_open, 31)  # not terminal: kept whatever its age
    await _age(database, new_done, 29)

    assert await purge_expired(database, settings) == 1
    async with database.transaction() as session:
        remaining = set((await session.execute(select(TaskRow.id))).scalars())
    assert remaining == {new_done, old_open}
    assert await count(database, TurnRow) == 2
    assert await count(database, TaskMessageRow) == 2
    assert await count(database, PushConfigRow) == 0
    assert await purge_expired(database, settings) == 0
    async with database.transaction() as session:
        states_left = set((await session.execute(select(TaskRow.state))).scalars())
    assert states_left == {states.CANCELED, states.SUBMITTED}


async def test_purge_in_batches(database: Database):
    settings = load_settings(gateway_origins=[GATEWAY], task_retention_days=1)
    canceller = TaskCanceller(database, default_history_length=50)
    for n in range(5):
        task_id = (await accept(database, settings, message_id=f"m{n}")).task.id
        await canceller.cancel(SCOPE, task_id)
        await _age(database, task_id, 2)
    assert await purge_expired(database, settings, batch=2) == 5
    assert await count(database, TaskRow) == 0
