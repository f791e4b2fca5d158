"""Starting an attempt (``turn_start.begin``): the counted attempt and the task it runs on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, update

from app.db.models import ActorRow, TaskMessageRow, TaskRow, TurnRow
from app.security.caller import CallerScope
from app.tasks import states
from app.tasks.turn_writes import TurnWrites
from app.worker import turn_start
from tests.db.helpers import record_statements
from tests.worker.helpers import claim_head, scripted_edge, send, turns

LEASE = 30.0


def identity_scope(who: str) -> CallerScope:
    return CallerScope(tenant="demo", identity=who)


async def test_begin_counts_the_attempt_and_reads_the_task(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        task_id = await send(edge, "reply a", message_id="m1", who="alice")
        db = edge.services.db
        writes = TurnWrites(db, edge.settings)
        lease, turn = await claim_head(db)

        begun = await turn_start.begin(db, lease, turn)

        assert begun.applied and begun.snapshot is not None
        (row,) = await turns(db)
        assert (row.status, row.attempts) == (states.TURN_RUNNING, 1)
        # The task as it was when the attempt began, history included.
        now = await writes.load_turn_context(lease.scope, task_id)
        assert begun.snapshot.state == states.SUBMITTED
        assert begun.snapshot.history == now.history
        assert [m["messageId"] for m in begun.snapshot.history] == ["m1"]
        if db.statement_pool is None:
            # SQLite: two units; the runner marks the task working itself.
            assert not begun.marked and now == begun.snapshot
        else:
            # PostgreSQL, first attempt: marked working by the same statement.
            assert begun.marked and now.state == states.WORKING
            assert now.version == begun.snapshot.version + 1


async def test_a_retry_or_a_canceled_task_is_not_marked_working(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        retried = await send(edge, "reply a", message_id="m1", who="alice")
        canceled = await send(edge, "reply b", message_id="m2", who="bob")
        db = edge.services.db
        writes = TurnWrites(db, edge.settings)
        leases = await db.storage.mailbox.claim(owner="w1", limit=10, lease_seconds=LEASE)
        assert sorted(lease.scope.identity for lease in leases) == ["alice", "bob"]
        async with db.transaction() as s:
            # alice's turn: an earlier attempt died; bob's task: canceled since the claim.
            await s.execute(update(TurnRow).where(TurnRow.task_id == retried).values(attempts=1))
            await s.execute(
                update(TaskRow).where(TaskRow.id == canceled).values(state=states.CANCELED)
            )
        for lease in leases:
            turn = await db.storage.mailbox.head_turn(lease)
            assert turn is not None
            begun = await turn_start.begin(db, lease, turn)
            assert begun.applied and begun.snapshot is not None and not begun.marked
        assert (await writes.load_turn_context(identity_scope("alice"), retried)).state == (
            states.SUBMITTED
        )
        assert (await writes.load_turn_context(identity_scope("bob"), canceled)).state == (
            states.CANCELED
        )


async def test_begin_for_a_task_that_is_gone_counts_the_attempt(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        task_id = await send(edge, "reply a", message_id="m1", who="alice")
        db = edge.services.db
        lease, turn = await claim_head(db)
        async with db.transaction() as s:  # purged by retention meanwhile
            await s.execute(delete(TaskMessageRow).where(TaskMessageRow.task_id == task_id))
            await s.execute(delete(TaskRow).where(TaskRow.id == task_id))

        begun = await turn_start.begin(db, lease, turn)

        assert begun.applied and begun.snapshot is None  # the runner settles it as done
        assert (await turns(db))[0].attempts == 1


async def test_begin_of_a_zombie_changes_nothing_and_reads_nothing(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        await send(edge, "reply a", message_id="m1", who="alice")
        db = edge.services.db
        zombie, turn = await claim_head(db, "old")
        async with db.transaction() as s:
            await s.execute(
                update(ActorRow).values(lease_until=datetime.now(UTC) - timedelta(seconds=1))
            )
        await db.storage.mailbox.claim(owner="new", limit=1, lease_seconds=LEASE)

        begun = await turn_start.begin(db, zombie, turn)

        assert not begun.applied and begun.snapshot is None and not begun.marked
        (row,) = await turns(db)
        assert (row.status, row.attempts) == (states.TURN_QUEUED, 0)
        task = await TurnWrites(db, edge.settings).load_turn_context(zombie.scope, turn.task_id)
        assert task.state == states.SUBMITTED


@pytest.mark.postgres
async def test_begin_is_one_statement_on_postgresql(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with scripted_edge(pg_url) as edge:
        db = edge.services.db
        assert db.statement_pool is not None
        await send(edge, "reply a", message_id="m1", who="alice")
        lease, turn = await claim_head(db)
        calls = record_statements(monkeypatch, db.statement_pool)
        begun = await turn_start.begin(db, lease, turn)
        assert begun.snapshot is not None and len(calls) == 1
