"""Concurrent GetTask reads coalesced into one statement (app/tasks/batched_reads.py).

PostgreSQL only: SQLite answers GetTask through the ORM path. What must hold: every request
gets its own document, in its own scope, with its own history length, however reads are
grouped; fewer statements than requests under concurrency; a statement the database
refuses fails only the read whose key it refused (a lost connection, the whole batch); a
cancelled request does not disturb the others.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlalchemy import update

from app.db.engine import Database
from app.db.models import TaskRow
from app.db.postgres.batched_reads import GetTaskBatcher, TaskReadFailed, task_text
from app.db.shared.task_rows import load_history, load_task
from app.security.caller import CallerScope
from app.settings import Settings
from app.tasks import states
from app.tasks.outcome import TurnOutcome
from app.tasks.turn_writes import TurnWrites
from app.tasks.wire import task_doc
from app.testing.edge import EdgeHarness
from tests.tasks.conftest import SCOPE, accept, hold_lease, send_params

OTHER = CallerScope(tenant="demo", identity="user-2")


def _batcher(db: Database, **kwargs: Any) -> GetTaskBatcher:
    assert db.statement_pool is not None
    return GetTaskBatcher(db.statement_pool, **kwargs)


@pytest.mark.postgres
async def test_concurrent_reads_share_statements_and_get_their_own_tasks(
    pg_database: Database, settings: Settings
) -> None:
    mine = [
        (await accept(pg_database, settings, message_id=f"m-{i}", text=f"t{i}")).task.id
        for i in range(12)
    ]
    batcher = _batcher(pg_database)
    docs = await asyncio.gather(*(batcher.get(SCOPE, task_id, 10) for task_id in mine))
    assert [d and json.loads(d)["id"] for d in docs] == mine
    assert batcher.statements < len(mine)  # two in flight, the rest grouped


@pytest.mark.postgres
async def test_a_batch_keeps_each_callers_scope(pg_database: Database, settings: Settings) -> None:
    mine = (await accept(pg_database, settings, message_id="m-1")).task.id
    theirs = (await accept(pg_database, settings, scope=OTHER, message_id="m-2")).task.id
    batcher = _batcher(pg_database, max_in_flight=1)
    # With one slot, everything after the first read lands in one batch: the same task ids
    # asked by both callers, and only each owner finds its own.
    reads = [
        batcher.get(SCOPE, mine, 5),
        batcher.get(SCOPE, mine, 5),
        batcher.get(OTHER, mine, 5),
        batcher.get(SCOPE, theirs, 5),
        batcher.get(OTHER, theirs, 5),
        batcher.get(CallerScope(tenant="open", identity=SCOPE.identity), mine, 5),
    ]
    docs = await asyncio.gather(*reads)
    found = [d is not None for d in docs]
    assert found == [True, True, False, False, True, False]
    assert batcher.statements == 2


async def test_each_read_gets_its_own_history_length(edge: EdgeHarness) -> None:
    task_id = (await edge.result("SendMessage", send_params("m-1")))["task"]["id"]
    limits = [0, 1, 0, 1, None, 0]
    params = [{"id": task_id} | ({} if n is None else {"historyLength": n}) for n in limits]
    docs = await asyncio.gather(*(edge.result("GetTask", p) for p in params))
    for limit, doc in zip(limits, docs, strict=True):
        assert doc["id"] == task_id
        assert ("history" in doc) == (limit != 0), (limit, doc)


@pytest.mark.postgres
async def test_a_key_the_database_refuses_fails_only_its_own_read(
    pg_database: Database, settings: Settings
) -> None:
    # A task id with U+0000 (the RPC envelope refuses it; the batcher must not rely on that):
    # PostgreSQL refuses the whole batch statement, and the other callers' reads still answer.
    task_id = (await accept(pg_database, settings)).task.id
    batcher = _batcher(pg_database, max_in_flight=1)
    first = asyncio.ensure_future(batcher.get(SCOPE, task_id, 1))  # goes alone
    await asyncio.sleep(0)
    batch = [
        asyncio.ensure_future(batcher.get(SCOPE, task_id, 1)),
        asyncio.ensure_future(batcher.get(OTHER, "poison\x00id", 1)),
        asyncio.ensure_future(batcher.get(SCOPE, task_id, 1)),
        asyncio.ensure_future(batcher.get(SCOPE, "no-such-task", 1)),
    ]
    assert await first is not None
    outcomes = await asyncio.gather(*batch, return_exceptions=True)
    assert isinstance(outcomes[1], TaskReadFailed)
    assert outcomes[0] is not None and json.loads(outcomes[0])["id"] == task_id  # type: ignore[arg-type]
    assert outcomes[2] is not None and json.loads(outcomes[2])["id"] == task_id  # type: ignore[arg-type]
    assert outcomes[3] is None
    assert await batcher.get(SCOPE, task_id, 1) is not None  # nothing left in flight


@pytest.mark.postgres
async def test_a_lost_connection_fails_its_batch_only(
    pg_database: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not a value the database refused: reads one by one would each wait for the same
    # failure, so the batch fails at once (and only that batch).
    task_id = (await accept(pg_database, settings)).task.id
    batcher = _batcher(pg_database, max_in_flight=1)
    assert pg_database.statement_pool is not None
    real_fetch = pg_database.statement_pool.fetch
    calls = 0

    async def failing_once(query: str, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionResetError("lost")
        return await real_fetch(query, *args)

    monkeypatch.setattr(pg_database.statement_pool, "fetch", failing_once)
    first = asyncio.ensure_future(batcher.get(SCOPE, task_id, 1))  # goes alone
    await asyncio.sleep(0)
    batch = [asyncio.ensure_future(batcher.get(SCOPE, task_id, 1)) for _ in range(3)]
    assert await first is not None
    outcomes = await asyncio.gather(*batch, return_exceptions=True)
    assert all(isinstance(o, TaskReadFailed) for o in outcomes)
    assert isinstance(outcomes[0].__cause__, ConnectionResetError)  # type: ignore[union-attr]
    assert batcher.statements == 2  # no read run again alone
    # The next batch is read normally.
    again = [asyncio.ensure_future(batcher.get(SCOPE, task_id, 1)) for _ in range(3)]
    assert all(doc is not None for doc in await asyncio.gather(*again))


@pytest.mark.postgres
async def test_a_cancelled_read_leaves_the_others_answered(
    pg_database: Database, settings: Settings
) -> None:
    task_id = (await accept(pg_database, settings)).task.id
    batcher = _batcher(pg_database, max_in_flight=1)
    first = asyncio.ensure_future(batcher.get(SCOPE, task_id, 1))
    await asyncio.sleep(0)
    queued = [asyncio.ensure_future(batcher.get(SCOPE, task_id, 1)) for _ in range(3)]
    await asyncio.sleep(0)
    queued[1].cancel()
    assert await first is not None
    assert await queued[0] is not None and await queued[2] is not None
    assert queued[1].cancelled()
    assert await batcher.get(SCOPE, task_id, 1) is not None  # nothing left in flight


async def test_concurrent_get_task_over_the_app_on_many_identities(edge: EdgeHarness) -> None:
    identities = [{"key": f"user-{i}", "name": f"U{i}", "kind": "user"} for i in range(8)]
    tasks = []
    for ident in identities:
        answer = await edge.result("SendMessage", send_params("m-1"), identity=ident)
        tasks.append(answer["task"]["id"])
    reads = [
        edge.result("GetTask", {"id": task_id}, identity=ident)
        for ident, task_id in zip(identities, tasks, strict=True)
    ]
    crossed = [
        edge.rpc("GetTask", {"id": task_id}, identity=ident)
        for ident, task_id in zip(identities, tasks[1:] + tasks[:1], strict=True)
    ]
    docs = await asyncio.gather(*reads)
    assert [doc["id"] for doc in docs] == tasks
    for response in await asyncio.gather(*crossed):
        assert response.json()["error"]["code"] == -32001  # another caller's task: not found


class _StuckThenFine:
    """A statement runner whose first statement never answers (its loop dies with it)."""

    def __init__(self) -> None:
        self.calls = 0

    async def fetchrow(self, query: str, *args: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            await asyncio.Event().wait()
        return (args[2], "c", "{}", None, None, [])

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        return [
            (n, task_id, "c", "{}", None, None, []) for n, task_id in enumerate(args[2], start=1)
        ]


def test_a_new_event_loop_starts_over() -> None:
    runner = _StuckThenFine()
    batcher = GetTaskBatcher(runner, max_in_flight=1)

    async def abandon() -> None:
        stuck = asyncio.ensure_future(batcher.get(SCOPE, "t-1", 1))
        await asyncio.sleep(0.01)
        assert not stuck.done()  # the only slot is taken when this loop ends

    # A loop dropped without cancelling its tasks (asyncio.run would cancel them, and the
    # read's ``finally`` would give its slot back): the slot is never released there.
    old_loop = asyncio.new_event_loop()
    # The abandoned task is reported when collected ("destroyed but it is pending"): expected.
    old_loop.set_exception_handler(lambda _loop, _context: None)
    try:
        old_loop.run_until_complete(abandon())
    finally:
        old_loop.close()

    async def read() -> str | None:
        return await asyncio.wait_for(batcher.get(SCOPE, "t-2", 1), timeout=2)

    assert asyncio.run(read()) == '{"id":"t-2","contextId":"c","status":{}}'


@pytest.mark.postgres
async def test_the_text_is_the_orm_document_single_and_batched(
    pg_database: Database, settings: Settings
) -> None:
    # Every piece present: two turns of history, artifacts, metadata with characters that
    # need escaping; the database's text and ``task_doc`` (the SQLite path) must agree.
    task_id = (await accept(pg_database, settings, message_id="m-0")).task.id
    writes = TurnWrites(pg_database, settings)
    fence = await hold_lease(pg_database)
    artifact = {"artifactId": "a-1", "parts": [{"text": 'quote " and \\ and é'}]}
    assert await writes.mark_working(SCOPE, task_id, fence)
    assert await writes.finish(
        SCOPE, task_id, fence, TurnOutcome(states.COMPLETED, "done", artifacts=(artifact,))
    )
    async with pg_database.transaction() as session:
        await session.execute(
            update(TaskRow)
            .where(TaskRow.tenant == SCOPE.tenant, TaskRow.id == task_id)
            .values(metadata_={"k": ["ü", None, 1.5], "nested": {"a": "\n"}})
        )
    for limit in (0, 1, 2, 10):
        async with pg_database.transaction() as session:
            row = await load_task(session, SCOPE, task_id)
            assert row is not None
            expected = task_doc(row, history=await load_history(session, SCOPE, task_id, limit))
        alone = await _batcher(pg_database).get(SCOPE, task_id, limit)
        batcher = _batcher(pg_database, max_in_flight=1)
        grouped = await asyncio.gather(*(batcher.get(SCOPE, task_id, limit) for _ in range(3)))
        assert batcher.statements == 2  # one alone, two in one batch
        for text in [alone, *grouped]:
            assert text is not None
            assert json.loads(text) == expected, limit


def test_task_text_encodes_the_ids_and_leaves_out_empty_pieces() -> None:
    text = task_text(('t"1', "c\\1", '{"state": "x"}', None, None, []))
    assert json.loads(text) == {"id": 't"1', "contextId": "c\\1", "status": {"state": "x"}}
    full = task_text(("t", "c", "{}", "[1]", '{"m": 1}', ['{"n": 2}', '{"n": 1}']))
    assert json.loads(full) == {
        "id": "t",
        "contextId": "c",
        "status": {},
        "artifacts": [1],
        "history": [{"n": 1}, {"n": 2}],  # oldest first
        "metadata": {"m": 1},
    }
