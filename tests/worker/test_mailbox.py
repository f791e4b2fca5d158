"""The mailbox's settle-and-read-next unit (``mailbox.settle_and_head``), on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from app.db.models import ActorRow, TurnRow
from app.tasks import states
from tests.db.helpers import record_statements
from tests.worker.helpers import claim_head, scripted_edge, send, turns

LEASE = 30.0


async def test_settle_and_head_settles_the_turn_and_reads_the_next_one(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        await send(edge, "reply a", message_id="m1", who="alice")
        await send(edge, "reply b", message_id="m2", who="alice")
        await send(edge, "reply c", message_id="m3", who="bob")  # another identity's mailbox
        db = edge.services.db
        first, second, _ = await turns(db)
        lease, turn = await claim_head(db, begin=True)
        assert lease.scope.identity == "alice"
        assert turn.id == first.id

        settled = await db.storage.mailbox.settle_and_head(lease, turn.id, states.TURN_DONE)

        assert settled.applied
        assert settled.next_turn is not None and settled.next_turn.id == second.id
        assert settled.next_turn.message_id == "m2" and settled.next_turn.attempts == 0
        assert settled.next_turn.payload["message"]["parts"] == [{"text": "reply b"}]
        rows = {row.id: row for row in await turns(db)}
        assert rows[first.id].status == states.TURN_DONE
        assert rows[second.id].status == states.TURN_QUEUED
        # The last turn settled: nothing is next.
        nxt = await db.storage.mailbox.head_turn(lease)
        assert nxt is not None and await db.storage.mailbox.begin_attempt(lease, nxt)
        last = await db.storage.mailbox.settle_and_head(lease, nxt.id, states.TURN_DEAD, error="x")
        assert last.applied and last.next_turn is None
        assert {row.id: row for row in await turns(db)}[nxt.id].last_error == "x"


async def test_settle_and_head_stops_at_a_turn_waiting_out_its_backoff(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        await send(edge, "reply a", message_id="m1", who="alice")
        await send(edge, "reply b", message_id="m2", who="alice")
        db = edge.services.db
        _, second = await turns(db)
        lease, turn = await claim_head(db, begin=True)
        later = datetime.now(UTC) + timedelta(hours=1)
        async with db.transaction() as s:
            await s.execute(update(TurnRow).where(TurnRow.id == second.id).values(not_before=later))

        settled = await db.storage.mailbox.settle_and_head(lease, turn.id, states.TURN_DONE)

        assert settled.applied and settled.next_turn is None  # the drain stops, and releases


async def test_settle_and_head_of_a_zombie_changes_nothing(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        await send(edge, "reply a", message_id="m1", who="alice")
        await send(edge, "reply b", message_id="m2", who="alice")
        db = edge.services.db
        zombie, turn = await claim_head(db, "old", begin=True)
        async with db.transaction() as s:
            await s.execute(
                update(ActorRow).values(lease_until=datetime.now(UTC) - timedelta(seconds=1))
            )
        await db.storage.mailbox.claim(owner="new", limit=1, lease_seconds=LEASE)

        settled = await db.storage.mailbox.settle_and_head(zombie, turn.id, states.TURN_DONE)

        assert not settled.applied and settled.next_turn is None
        assert (await turns(db))[0].status == states.TURN_RUNNING


@pytest.mark.postgres
async def test_settle_and_head_is_one_statement_on_postgresql(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with scripted_edge(pg_url) as edge:
        db = edge.services.db
        assert db.statement_pool is not None
        await send(edge, "reply a", message_id="m1", who="alice")
        await send(edge, "reply b", message_id="m2", who="alice")
        lease, turn = await claim_head(db, begin=True)
        calls = record_statements(monkeypatch, db.statement_pool)
        settled = await db.storage.mailbox.settle_and_head(lease, turn.id, states.TURN_DONE)
        assert settled.next_turn is not None and len(calls) == 1


async def test_claim_with_heads_hands_each_new_lease_its_head_turn(db_url: str) -> None:
    async with scripted_edge(db_url) as edge:
        await send(edge, "reply a", message_id="m1", who="alice")
        await send(edge, "reply b", message_id="m2", who="alice")
        await send(edge, "reply c", message_id="m3", who="bob")
        db = edge.services.db
        a1, _, b1 = await turns(db)

        claimed = await db.storage.mailbox.claim_with_heads(
            owner="w1", limit=10, lease_seconds=LEASE
        )

        heads = {lease.scope.identity: head for lease, head in claimed}
        assert set(heads) == {"alice", "bob"}
        assert heads["alice"] is not None and heads["alice"].id == a1.id
        assert heads["bob"] is not None and heads["bob"].id == b1.id
        for lease, head in claimed:
            assert lease.fence.owner == "w1" and lease.fence.token == 1
            assert head == await db.storage.mailbox.head_turn(lease)  # what the drain used to read
        # Held: another worker claims nothing.
        assert (
            await db.storage.mailbox.claim_with_heads(owner="w2", limit=10, lease_seconds=LEASE)
            == []
        )


@pytest.mark.postgres
async def test_claim_with_heads_is_one_statement_on_postgresql(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with scripted_edge(pg_url) as edge:
        db = edge.services.db
        assert db.statement_pool is not None
        await send(edge, "reply a", message_id="m1", who="alice")
        await send(edge, "reply b", message_id="m2", who="bob")
        calls = record_statements(monkeypatch, db.statement_pool)
        claimed = await db.storage.mailbox.claim_with_heads(
            owner="w1", limit=10, lease_seconds=LEASE
        )
        assert len(claimed) == 2 and all(head is not None for _, head in claimed)
        assert len(calls) == 1
