"""The task-event log streams read (app/db/task_events.py), on both backends: the triggers on
``tasks`` log every change of status or artifacts and nothing else, a task's log goes with it,
``head`` and ``after`` are scoped, and the NOTIFY channel is the one signals.py names."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import delete, update

from app.db.engine import Database
from app.db.models import TaskRow
from app.db.signals import TASK_EVENTS_CHANNEL
from app.security.caller import CallerScope
from app.settings import load_settings
from tests.tasks.conftest import SCOPE, accept


async def test_every_change_of_status_or_artifacts_is_logged_once(database: Database):
    settings = load_settings(gateway_origins=["https://gateway.test"])
    task_id = (await accept(database, settings)).task.id
    store = database.storage.task_events
    head = await store.head(SCOPE, task_id)
    assert head is not None and head.seq > 0
    assert head.status["state"] == "TASK_STATE_SUBMITTED" and head.artifacts == []
    working = {"state": "TASK_STATE_WORKING", "timestamp": "2026-01-01T00:00:00Z"}
    artifact = {"artifactId": "a-1", "parts": [{"text": "A"}]}
    where = (TaskRow.tenant == SCOPE.tenant) & (TaskRow.id == task_id)
    async with database.transaction() as session:
        await session.execute(update(TaskRow).where(where).values(status=working))
        await session.execute(update(TaskRow).where(where).values(metadata_={"x": 1}))
        await session.execute(update(TaskRow).where(where).values(artifacts=[artifact]))
    events = await store.after(SCOPE, task_id, head.seq, 10)
    assert [(e.status, e.artifacts) for e in events] == [(working, None), (working, [artifact])]
    assert await store.after(SCOPE, task_id, events[-1].seq, 10) == []
    assert len(await store.after(SCOPE, task_id, head.seq, 1)) == 1
    moved = await store.head(SCOPE, task_id)
    assert moved is not None and moved.seq == events[-1].seq and moved.artifacts == [artifact]
    # Another caller's task is not found; a task's log goes with it.
    assert await store.head(CallerScope(tenant="demo", identity="user-2"), task_id) is None
    async with database.transaction() as session:
        await session.execute(delete(TaskRow).where(where))
    assert await store.after(SCOPE, task_id, 0, 10) == []


def test_the_trigger_notifies_the_channel_signals_names():
    migration = Path(__file__).parents[2] / "migrations" / "versions" / "0008_task_events.py"
    assert f"pg_notify('{TASK_EVENTS_CHANNEL}'" in migration.read_text()


async def test_first_is_the_task_at_its_creation_and_scoped(database: Database):
    settings = load_settings(gateway_origins=["https://gateway.test"])
    task_id = (await accept(database, settings)).task.id
    store = database.storage.task_events
    created = await store.head(SCOPE, task_id)
    assert created is not None
    working = {"state": "TASK_STATE_WORKING", "timestamp": "2026-01-01T00:00:00Z"}
    artifact = {"artifactId": "a-1", "parts": [{"text": "A"}]}
    where = (TaskRow.tenant == SCOPE.tenant) & (TaskRow.id == task_id)
    async with database.transaction() as session:
        await session.execute(update(TaskRow).where(where).values(status=working))
        await session.execute(update(TaskRow).where(where).values(artifacts=[artifact]))
    first = await store.first(SCOPE, task_id)
    assert first == created  # the creation's position and state, not the task's latest
    replayed = await store.after(SCOPE, task_id, first.seq, 10)
    assert [(e.status, e.artifacts) for e in replayed] == [
        (working, None),
        (working, [artifact]),
    ]
    assert await store.first(CallerScope(tenant="demo", identity="user-2"), task_id) is None
