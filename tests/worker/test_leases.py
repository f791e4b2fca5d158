"""Leases and fences at the database level: claim, heartbeat, takeover, zombie writes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from app.db.engine import Database
from app.db.models import ActorRow, TurnRow
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.tasks.turn_writes import TurnWrites
from app.testing.edge import edge_harness
from tests.worker.helpers import (
    actor,
    claim_head,
    eventually,
    reached,
    scripted_edge,
    send,
    status_text,
    task_row,
    turns,
)

LEASE = 30.0


async def _expire(db: Database, who: str) -> None:
    async with db.transaction() as s:
        await s.execute(
            update(ActorRow)
            .where(ActorRow.identity == who)
            .values(lease_until=datetime.now(UTC) - timedelta(seconds=1))
        )


async def test_claim_sets_owner_fence_and_excludes_other_workers(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        await send(edge, "reply a", message_id="m1", who="alice")
        db = edge.services.db
        (first,) = await db.storage.mailbox.claim(owner="w1", limit=10, lease_seconds=LEASE)
        assert (first.scope.identity, first.fence.owner, first.fence.token) == ("alice", "w1", 1)
        row = await actor(db, "alice")
        assert row.lease_owner == "w1" and row.lease_until is not None
        assert await db.storage.mailbox.claim(owner="w2", limit=10, lease_seconds=LEASE) == []
        assert await db.storage.mailbox.still_held(first)
        # Expired: the next worker takes it over with a new fence; the old holder is out.
        await _expire(db, "alice")
        (second,) = await db.storage.mailbox.claim(owner="w2", limit=10, lease_seconds=LEASE)
        assert second.fence.token == 2
        assert not await db.storage.mailbox.still_held(first)
        assert await db.storage.mailbox.extend([first, second], lease_seconds=LEASE) == {second}
        assert not await db.storage.mailbox.release(first)
        assert await db.storage.mailbox.release(second)
        assert (await actor(db, "alice")).lease_owner is None


async def test_only_identities_whose_head_turn_is_due_are_claimed(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        db = edge.services.db
        assert await db.storage.mailbox.claim(owner="w1", limit=10, lease_seconds=LEASE) == []
        await send(edge, "reply a", message_id="m1", who="alice")
        await send(edge, "reply b", message_id="m2", who="alice")
        head, nxt = await turns(db)
        later = datetime.now(UTC) + timedelta(hours=1)
        async with db.transaction() as s:
            await s.execute(update(TurnRow).where(TurnRow.id == head.id).values(not_before=later))
        # The head waits out its backoff, and it holds the identity's later turn with it.
        assert await db.storage.mailbox.claim(owner="w1", limit=10, lease_seconds=LEASE) == []
        async with db.transaction() as s:
            await s.execute(
                update(TurnRow).where(TurnRow.id == head.id).values(status=states.TURN_DEAD)
            )
        (lease,) = await db.storage.mailbox.claim(owner="w1", limit=10, lease_seconds=LEASE)
        queued = await db.storage.mailbox.head_turn(lease)
        assert queued is not None and queued.id == nxt.id


async def test_zombie_writes_are_refused_after_takeover(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        task_id = await send(edge, "reply a", message_id="m1", who="alice")
        db = edge.services.db
        writes = TurnWrites(db, edge.settings)
        zombie, turn = await claim_head(db, "old", begin=True)
        assert await writes.mark_working(zombie.scope, task_id, zombie.fence)
        await _expire(db, "alice")
        (holder,) = await db.storage.mailbox.claim(owner="new", limit=1, lease_seconds=LEASE)
        scope = zombie.scope
        done = TurnOutcome(state=states.COMPLETED, text="from the zombie")
        assert not await writes.mark_working(scope, task_id, zombie.fence)
        assert not await writes.record_progress(
            scope, task_id, zombie.fence, step_key="s", text="zombie progress"
        )
        assert not await writes.finish(scope, task_id, zombie.fence, done)
        assert not await db.storage.mailbox.settle(zombie, turn.id, states.TURN_DONE)
        row = await task_row(db, task_id)
        assert row.state == states.WORKING and status_text(row) is None
        # The new holder's writes land.
        ok = TurnOutcome(state=states.COMPLETED, text="from the holder")
        assert await writes.finish(scope, task_id, holder.fence, ok)
        assert await db.storage.mailbox.settle(holder, turn.id, states.TURN_DONE)
        assert status_text(await task_row(db, task_id)) == "from the holder"


async def test_unfinished_turns_are_resumed_on_start(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        task_id = await send(edge, "reply recovered {attempt}", message_id="m1")
        db = edge.services.db
        # A worker that died mid-turn: turn running, attempt counted, lease expired.
        await claim_head(db, "ghost", begin=True)
        await _expire(db, "user-1")
    async with edge_harness(db_url, background=True, poll_seconds=0.1) as edge:
        db = edge.services.db
        row = await eventually(lambda: reached(db, task_id, states.COMPLETED, states.FAILED))
        assert status_text(row) == "recovered 2"
        (done,) = await turns(db, task_id)
        assert (done.status, done.attempts) == (states.TURN_DONE, 2)
        assert (await actor(db, "user-1")).fence == 2


async def test_concurrent_claims_never_share_an_identity(pg_url: str) -> None:
    async with scripted_edge(pg_url) as edge:
        for n in range(20):
            await send(edge, "reply x", message_id=f"m{n}", who=f"user-{n}")
        dbs = [Database(pg_url) for _ in range(4)]
        try:
            batches = await asyncio.gather(
                *(
                    db.storage.mailbox.claim(owner=f"w{i}", limit=8, lease_seconds=LEASE)
                    for i, db in enumerate(dbs)
                )
            )
        finally:
            for db in dbs:
                await db.dispose()
        claimed = [lease.scope.identity for batch in batches for lease in batch]
        assert len(claimed) == len(set(claimed)) == 20
