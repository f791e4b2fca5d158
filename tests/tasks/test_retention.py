"""Retention (CONTRACT §6): terminal tasks older than the configured age are purged."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event, inspect, select, update
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.engine import Database
from app.db.models import PushConfigRow, SessionEntryRow, TaskMessageRow, TaskRow, TurnRow
from app.db.peer_sends import NewPeerSend
from app.db.postgres.listen import asyncpg_dsn as _asyncpg_dsn
from app.db.sessions import SessionEntry
from app.db.storage import open_storage
from app.security.caller import CallerScope
from app.settings import Settings, load_settings
from app.tasks import states
from app.tasks.cancel import TaskCanceller
from app.tasks.retention import purge_expired
from app.tasks.wire import utcnow
from tests.db.helpers import plan_nodes
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


async def test_purge_takes_the_a2a_sends_of_the_task(database: Database, settings: Settings):
    canceller = TaskCanceller(database, default_history_length=50)
    old = (await accept(database, settings, message_id="a")).task.id
    new = (await accept(database, settings, message_id="b")).task.id
    sends = open_storage(database).peer_sends
    for task_id in (old, new):
        await canceller.cancel(SCOPE, task_id)
        key = f"{task_id}:call-1"
        await sends.record_intent(
            NewPeerSend(SCOPE.tenant, key, "x", task_id, "helper", "https://b.example", "m")
        )
    await _age(database, old, 31)
    assert await purge_expired(database, settings) == 1
    assert await sends.find(SCOPE.tenant, f"{old}:call-1") is None
    assert await sends.find(SCOPE.tenant, f"{new}:call-1") is not None


async def test_purge_in_batches(database: Database):
    settings = load_settings(gateway_origins=[GATEWAY], task_retention_days=1)
    canceller = TaskCanceller(database, default_history_length=50)
    for n in range(5):
        task_id = (await accept(database, settings, message_id=f"m{n}")).task.id
        await canceller.cancel(SCOPE, task_id)
        await _age(database, task_id, 2)
    assert await purge_expired(database, settings, batch=2) == 5
    assert await count(database, TaskRow) == 0


# The tables ``purge_expired`` deletes an expired task's rows from by ``(tenant, task_id)``;
# turns, whose indexes lead with the identity, are deleted by the tasks' identities too.
_BY_TASK = ("task_messages", "push_outbox", "push_configs", "peer_sends")


def _leading_column_sets(conn: Any, table: str) -> list[list[str]]:
    found = inspect(conn)
    keys = [found.get_pk_constraint(table)["constrained_columns"]]
    return keys + [list(ix["column_names"]) for ix in found.get_indexes(table)]


async def test_every_table_the_purge_deletes_from_by_task_has_an_index_by_task(
    db_url: str,
) -> None:
    engine = create_async_engine(db_url)
    try:
        async with engine.connect() as conn:
            for table in _BY_TASK:
                indexes = await conn.run_sync(_leading_column_sets, table)
                assert any(cols[:2] == ["tenant", "task_id"] for cols in indexes), (table, indexes)
    finally:
        await engine.dispose()


_SEED_PG = """
INSERT INTO tasks (tenant, id, identity, context_id, state, status, artifacts, metadata,
                   created_at, updated_at, version)
SELECT 'demo', 'old-' || g, 'u' || (g % 4000), 'c', 'TASK_STATE_COMPLETED', '{}'::jsonb,
       '[]'::jsonb, '{}'::jsonb, now() - interval '40 days', now() - interval '40 days', 1
  FROM generate_series(1, 200) g;
INSERT INTO turns (tenant, identity, message_id, task_id, kind, status, attempts,
                   content_hash, payload)
SELECT 'demo', 'u' || (g % 4000), 'm' || g,
       CASE WHEN g <= 200 THEN 'old-' || g ELSE 'live-' || g END,
       'start', 'done', 1, 'h', '{}'::jsonb
  FROM generate_series(1, 200000) g;
ANALYZE turns;
"""


@pytest.mark.slow  # seeds a large turns table to read the plan against
@pytest.mark.postgres
async def test_the_purge_deletes_turns_by_their_identities_not_the_whole_table(
    pg_url: str, pg_database: Database, settings: Settings
) -> None:
    # Found by measuring: by (tenant, task_id) alone, which no index of turns leads with, each
    # batch of 500 expired tasks read the tenant's whole turns table. An index by task cost
    # every turn pipeline write.
    conn = await asyncpg.connect(_asyncpg_dsn(pg_url))
    db = pg_database
    sent: list[tuple[str, Any]] = []

    def record(_c: Any, _cur: Any, statement: str, params: Any, *_rest: Any) -> None:
        if statement.lstrip().startswith("DELETE FROM turns"):
            sent.append((statement, params))

    try:
        await conn.execute(_SEED_PG)
        event.listen(db.engine.sync_engine, "before_cursor_execute", record)
        try:
            assert await purge_expired(db, settings) == 200
        finally:
            event.remove(db.engine.sync_engine, "before_cursor_execute", record)
        assert await conn.fetchval("SELECT count(*) FROM turns") == 200000 - 200
        ((statement, params),) = sent
        txn = conn.transaction()
        await txn.start()
        try:
            doc = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, *params)
        finally:
            await txn.rollback()
    finally:
        await conn.close()
    nodes = plan_nodes(json.loads(doc)[0]["Plan"])
    on_turns = [
        n for n in nodes if n.get("Relation Name") == "turns" and n["Node Type"] != "ModifyTable"
    ]
    assert on_turns and not any(n["Node Type"] == "Seq Scan" for n in on_turns), doc
    # The 200 identities' own turns (50 each), not the table's 200,000.
    read = sum(
        (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"]
        for n in on_turns
    )
    assert read <= 200 * 50, doc


async def _session(db: Database, scope: CallerScope, entry_id: str, *, days: float) -> None:
    transcript = db.storage.sessions.transcript(scope.tenant, scope.identity)
    await transcript.append(SessionEntry(entry_id, {"kind": "request", "parts": []}, 1))
    async with db.transaction() as session:
        await session.execute(
            update(SessionEntryRow)
            .where(SessionEntryRow.entry_id == entry_id)
            .values(created_at=utcnow() - timedelta(days=days))
        )


async def test_sessions_of_callers_with_no_task_left_are_purged(
    database: Database, settings: Settings
):
    """Issue 48: a caller's ``llm`` session goes with its last task; a caller with a task
    left, or with a session entry written within the window, keeps it."""
    canceller = TaskCanceller(database, default_history_length=50)
    gone, kept, fresh = SCOPE, CallerScope("demo", "user-2"), CallerScope("demo", "user-3")
    old = (await accept(database, settings, message_id="a")).task.id
    await canceller.cancel(gone, old)
    await _age(database, old, 31)
    await accept(database, settings, scope=kept, message_id="b")
    await _session(database, gone, "task:a:user:1", days=32)
    await _session(database, gone, "task:a:reply:final", days=31)
    await _session(database, kept, "task:b:user:1", days=40)
    await _session(database, fresh, "task:c:user:1", days=1)  # its task went by other means
    other_tenant = CallerScope("other", "user-1")  # same identity key, another tenant
    await _session(database, other_tenant, "task:d:user:1", days=1)

    assert await purge_expired(database, settings) == 1
    async with database.transaction() as session:
        left = (await session.execute(select(SessionEntryRow.entry_id))).scalars()
        assert set(left) == {"task:b:user:1", "task:c:user:1", "task:d:user:1"}
    # With the window at now, the sessions with no task go whatever their age; "kept" has one.
    assert await database.storage.sessions.purge(before=utcnow(), batch=10) == 2
    async with database.transaction() as session:
        left = (await session.execute(select(SessionEntryRow.entry_id))).scalars()
        assert set(left) == {"task:b:user:1"}
