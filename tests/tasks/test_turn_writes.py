"""Guarded writes (CONTRACT §6; REFERENCE-CASES 77-80, 85): compare-and-set in SQL, fenced."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.db.engine import Database
from app.db.fence import Fence
from app.db.models import PushOutboxRow, TaskMessageRow
from app.db.statement_pool import StatementPool
from app.db.turns import SettleTurn
from app.errors import TaskNotCancelable, TaskNotFound
from app.security.caller import CallerScope
from app.settings import Settings
from app.tasks import states
from app.tasks.cancel import TaskCanceller
from app.tasks.outcome import TurnOutcome
from app.tasks.push_secrets import PushSecrets
from app.tasks.turn_writes import TurnWrites
from tests.db.helpers import record_statements
from tests.tasks.conftest import SCOPE, accept, count, hold_lease, task_row, turns

DONE = TurnOutcome(state=states.COMPLETED, text="done")


@pytest.fixture
def canceller(database: Database) -> TaskCanceller:
    return TaskCanceller(database, default_history_length=50)


PgWrites = tuple[Database, TurnWrites, StatementPool]


@pytest.fixture
def pg_writes(pg_database: Database, settings: Settings) -> PgWrites:
    """PostgreSQL's ``TurnWrites`` and the statement pool its one-statement units run on."""
    assert pg_database.statement_pool is not None
    return pg_database, TurnWrites(pg_database, settings), pg_database.statement_pool


async def _working(database: Database, settings: Settings, writes: TurnWrites) -> tuple[str, Fence]:
    accepted = await accept(database, settings)
    fence = await hold_lease(database)
    assert await writes.mark_working(SCOPE, accepted.task.id, fence)
    return accepted.task.id, fence


async def test_mark_working_then_finish(database: Database, settings: Settings, writes: TurnWrites):
    task_id, fence = await _working(database, settings, writes)
    assert (await task_row(database, task_id)).state == states.WORKING
    outcome = TurnOutcome(
        state=states.COMPLETED,
        text="the answer",
        artifacts=({"artifactId": "a1", "parts": [{"text": "file"}]},),
    )
    assert await writes.finish(SCOPE, task_id, fence, outcome)
    row = await task_row(database, task_id)
    assert row.state == states.COMPLETED
    assert row.status["message"]["messageId"] == f"{task_id}:final"
    assert row.status["message"]["role"] == "ROLE_AGENT"
    assert row.artifacts == [{"artifactId": "a1", "parts": [{"text": "file"}]}]
    snapshot = await writes.load_turn_context(SCOPE, task_id)
    assert [m["role"] for m in snapshot.history] == ["ROLE_USER", "ROLE_AGENT"]
    assert snapshot.task["artifacts"][0]["artifactId"] == "a1"
    assert snapshot.state == states.COMPLETED


async def test_mark_working_after_cancel_is_refused(
    database: Database, settings: Settings, writes: TurnWrites, canceller: TaskCanceller
):
    # REFERENCE-CASES 78
    accepted = await accept(database, settings)
    fence = await hold_lease(database)
    await canceller.cancel(SCOPE, accepted.task.id)
    assert not await writes.mark_working(SCOPE, accepted.task.id, fence)
    assert (await task_row(database, accepted.task.id)).state == states.CANCELED


async def test_finish_after_cancel_is_refused_and_pushes_nothing(
    database: Database, settings: Settings, writes: TurnWrites, canceller: TaskCanceller
):
    # REFERENCE-CASES 80, 85: a canceled snapshot is never overwritten; no callback follows.
    task_id, fence = await _working(database, settings, writes)
    await canceller.cancel(SCOPE, task_id)
    assert not await writes.finish(SCOPE, task_id, fence, DONE)
    assert not await writes.record_progress(SCOPE, task_id, fence, step_key="s1", text="x")
    assert (await task_row(database, task_id)).state == states.CANCELED
    assert await count(database, PushOutboxRow) == 0


async def test_cancel_of_completed_is_refused_and_row_stays(
    database: Database, settings: Settings, writes: TurnWrites, canceller: TaskCanceller
):
    # REFERENCE-CASES 79: canceling a completed task changes nothing.
    task_id, fence = await _working(database, settings, writes)
    assert await writes.finish(SCOPE, task_id, fence, DONE)
    with pytest.raises(TaskNotCancelable):
        await canceller.cancel(SCOPE, task_id)
    assert (await task_row(database, task_id)).state == states.COMPLETED


async def test_terminal_is_never_replaced_by_another(
    database: Database, settings: Settings, writes: TurnWrites
):
    task_id, fence = await _working(database, settings, writes)
    assert await writes.finish(SCOPE, task_id, fence, DONE)
    failed = TurnOutcome(state=states.FAILED, text="boom")
    assert not await writes.finish(SCOPE, task_id, fence, failed)
    assert not await writes.mark_working(SCOPE, task_id, fence)
    row = await task_row(database, task_id)
    assert row.state == states.COMPLETED
    assert row.status["message"]["parts"] == [{"text": "done"}]


async def test_same_terminal_again_is_a_noop_success(
    database: Database, settings: Settings, writes: TurnWrites
):
    task_id, fence = await _working(database, settings, writes)
    assert await writes.finish(SCOPE, task_id, fence, DONE)
    version = (await task_row(database, task_id)).version
    assert await writes.finish(SCOPE, task_id, fence, TurnOutcome(state=states.COMPLETED, text="x"))
    row = await task_row(database, task_id)
    assert row.version == version
    assert row.status["message"]["parts"] == [{"text": "done"}]
    async with database.transaction() as session:
        agent_messages = (
            await session.execute(select(TaskMessageRow).where(TaskMessageRow.role == "ROLE_AGENT"))
        ).all()
    assert len(agent_messages) == 1
    assert await count(database, PushOutboxRow) == 0  # the task has no push config


async def test_stale_fence_changes_nothing(
    database: Database, settings: Settings, writes: TurnWrites
):
    accepted = await accept(database, settings)
    task_id = accepted.task.id
    zombie = await hold_lease(database, owner="worker-a", token=1)
    # Another worker took the identity over: new owner, bumped fence.
    current = await hold_lease(database, owner="worker-b", token=2)
    assert not await writes.mark_working(SCOPE, task_id, zombie)
    assert await writes.mark_working(SCOPE, task_id, current)
    assert not await writes.record_progress(SCOPE, task_id, zombie, step_key="s", text="t")
    assert not await writes.finish(SCOPE, task_id, zombie, DONE)
    assert (await task_row(database, task_id)).state == states.WORKING
    # Same fence number but another owner, or an expired lease: refused as well.
    assert not await writes.finish(SCOPE, task_id, Fence(owner="worker-a", token=2), DONE)
    expired = await hold_lease(database, owner="worker-b", token=2, seconds=-1)
    assert not await writes.finish(SCOPE, task_id, expired, DONE)
    assert (await task_row(database, task_id)).state == states.WORKING


async def test_progress_updates_status_and_queues_one_push(
    database: Database, settings: Settings, writes: TurnWrites
):
    accepted = await accept(database, settings, require_push=True)
    task_id = accepted.task.id
    fence = await hold_lease(database)
    assert await writes.mark_working(SCOPE, task_id, fence)
    assert await writes.record_progress(SCOPE, task_id, fence, step_key="step-1", text="half")
    row = await task_row(database, task_id)
    assert row.state == states.WORKING
    assert row.status["message"]["messageId"] == f"{task_id}:step-1"
    assert await writes.finish(SCOPE, task_id, fence, DONE)
    async with database.transaction() as session:
        pushes = list(
            (await session.execute(select(PushOutboxRow).order_by(PushOutboxRow.id))).scalars()
        )
    assert [(p.kind, p.message_key) for p in pushes] == [("progress", "step-1"), ("final", "final")]
    final = pushes[1].payload["task"]
    assert final["status"]["state"] == states.COMPLETED
    assert final["status"]["message"]["messageId"] == f"{task_id}:final"


async def test_progress_with_the_known_context_id_writes_and_pushes_it(
    database: Database, settings: Settings, writes: TurnWrites
):
    """The worker passes the task's context id (one statement on PostgreSQL); a context id
    that is not the task's is refused, so a push never names another context."""
    accepted = await accept(database, settings, require_push=True)
    task_id, context_id = accepted.task.id, accepted.task.context_id
    fence = await hold_lease(database)
    assert await writes.mark_working(SCOPE, task_id, fence)
    assert not await writes.record_progress(
        SCOPE, task_id, fence, step_key="step-1", text="x", context_id="another"
    )
    assert await writes.record_progress(
        SCOPE, task_id, fence, step_key="step-1", text="half", context_id=context_id
    )
    row = await task_row(database, task_id)
    assert row.status["message"]["messageId"] == f"{task_id}:step-1"
    async with database.transaction() as session:
        pushes = list((await session.execute(select(PushOutboxRow))).scalars())
    assert [(p.kind, p.message_key) for p in pushes] == [("progress", "step-1")]
    assert pushes[0].payload["task"]["contextId"] == context_id


async def test_progress_needs_working(database: Database, settings: Settings, writes: TurnWrites):
    accepted = await accept(database, settings)
    fence = await hold_lease(database)
    assert not await writes.record_progress(SCOPE, accepted.task.id, fence, step_key="s", text="t")
    assert not await writes.finish(SCOPE, accepted.task.id, fence, DONE)
    assert (await task_row(database, accepted.task.id)).state == states.SUBMITTED


async def test_final_failure_lands_from_submitted(
    database: Database, settings: Settings, writes: TurnWrites
):
    accepted = await accept(database, settings)
    fence = await hold_lease(database)
    failed = TurnOutcome(state=states.FAILED, text=settings.failure_text)
    assert await writes.finish(SCOPE, accepted.task.id, fence, failed)
    assert (await task_row(database, accepted.task.id)).state == states.FAILED


async def test_interruptions_get_distinct_message_ids(
    database: Database, settings: Settings, writes: TurnWrites
):
    secrets = PushSecrets(b"y" * 32)
    task_id, fence = await _working(database, settings, writes)
    ask = TurnOutcome(state=states.INPUT_REQUIRED, text="which one?")
    assert await writes.finish(SCOPE, task_id, fence, ask)
    first = (await task_row(database, task_id)).status["message"]["messageId"]
    await accept(database, settings, message_id="m-2", task_id=task_id, secrets=secrets)
    assert await writes.mark_working(SCOPE, task_id, fence)
    assert await writes.finish(SCOPE, task_id, fence, ask)
    second = (await task_row(database, task_id)).status["message"]["messageId"]
    assert first != second
    assert first.startswith(f"{task_id}:interrupt-")


async def test_unknown_task_and_bad_outcome(database: Database, writes: TurnWrites):
    fence = Fence(owner="w", token=1)
    assert not await writes.mark_working(SCOPE, "nope", fence)
    assert not await writes.finish(SCOPE, "nope", fence, DONE)
    with pytest.raises(TaskNotFound):
        await writes.load_turn_context(SCOPE, "nope")
    with pytest.raises(ValueError):
        await writes.finish(SCOPE, "nope", fence, TurnOutcome(state=states.CANCELED))


async def test_invalid_agent_result_writes_nothing(
    database: Database, settings: Settings, writes: TurnWrites
):
    task_id, fence = await _working(database, settings, writes)
    bad_artifact = TurnOutcome(states.COMPLETED, "x", artifacts=({"artifactId": 5},))
    with pytest.raises(ValueError, match="invalid artifact"):
        await writes.finish(SCOPE, task_id, fence, bad_artifact)
    bad_part = TurnOutcome(states.COMPLETED, parts=({"text": "a", "url": "b"},))
    with pytest.raises(ValueError, match="invalid part"):
        await writes.finish(SCOPE, task_id, fence, bad_part)
    assert (await task_row(database, task_id)).state == states.WORKING
    assert await count(database, PushOutboxRow) == 0


@pytest.mark.postgres
async def test_finish_refuses_when_history_moved_after_its_read(
    pg_writes: PgWrites, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    # PostgreSQL's finish reads, then writes in one statement that re-checks the history
    # position it read (the agent message's seq, and an interruption's key, come from it).
    # A message appended in between makes the write refuse and leaves nothing behind.
    database, writes, pool = pg_writes
    task_id, fence = await _working(database, settings, writes)
    real_fetchrow = pool.fetchrow
    calls = 0

    async def append_after_read(query: str, *args: object) -> object:
        nonlocal calls
        calls += 1
        row = await real_fetchrow(query, *args)
        if calls == 1:  # the read: another message lands before the write
            async with database.transaction() as session:
                session.add(
                    TaskMessageRow(
                        tenant=SCOPE.tenant,
                        task_id=task_id,
                        seq=2,
                        role="ROLE_USER",
                        message={"messageId": "m-late", "role": "ROLE_USER", "parts": []},
                    )
                )
        return row

    monkeypatch.setattr(pool, "fetchrow", append_after_read)
    assert not await writes.finish(SCOPE, task_id, fence, DONE)
    assert calls == 2
    assert (await task_row(database, task_id)).state == states.WORKING
    assert await count(database, PushOutboxRow) == 0
    monkeypatch.undo()
    assert await writes.finish(SCOPE, task_id, fence, DONE)  # the next attempt lands at seq 3
    history = (await writes.load_turn_context(SCOPE, task_id)).history
    assert [m["messageId"] for m in history] == ["m-1", "m-late", f"{task_id}:final"]


# --- finish on what the runner knows (app.db.turns.KnownTask) -------------------------------

ASK = TurnOutcome(
    state=states.INPUT_REQUIRED,
    text="which one?",
    artifacts=({"artifactId": "a1", "parts": [{"text": "draft"}]},),
)
ANSWER = TurnOutcome(
    state=states.COMPLETED,
    text="that one",
    artifacts=({"artifactId": "a2", "parts": [{"text": "final"}]},),
)


async def _two_turns(
    database: Database, settings: Settings, writes: TurnWrites, *, use_known: bool, who: str
) -> tuple[str, list[PushOutboxRow]]:
    """A question, the user's answer, the final reply; ``finish`` told what the runner knows
    (snapshot version + its own writes) or not. Returns the task and its pushes."""
    scope = CallerScope(tenant=SCOPE.tenant, identity=who)
    accepted = await accept(database, settings, scope=scope, require_push=True)
    task_id = accepted.task.id
    fence = await hold_lease(database, scope=scope)
    for outcome, follow_up in ((ASK, "m-2"), (ANSWER, None)):
        snapshot = await writes.load_turn_context(scope, task_id)
        assert await writes.mark_working(scope, task_id, fence)
        known = snapshot.known(snapshot.version + 1) if use_known else None
        assert await writes.finish(scope, task_id, fence, outcome, known)
        if follow_up is not None:
            await accept(database, settings, scope=scope, message_id=follow_up, task_id=task_id)
    async with database.transaction() as session:
        pushes = (
            await session.execute(
                select(PushOutboxRow)
                .where(PushOutboxRow.task_id == task_id)
                .order_by(PushOutboxRow.id)
            )
        ).scalars()
        return task_id, list(pushes)


def _same_shape(doc: object, task_id: str) -> object:
    """``doc`` with the task id replaced and timestamps dropped, to compare two tasks."""
    text = json.dumps(doc, sort_keys=True).replace(task_id, "<task>")
    loaded = json.loads(text)
    stack = [loaded]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            item.pop("timestamp", None)
            item.pop("contextId", None)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return loaded


async def test_finish_on_what_the_runner_knows_writes_what_a_read_would(
    database: Database, settings: Settings, writes: TurnWrites
):
    read_id, read_pushes = await _two_turns(
        database, settings, writes, use_known=False, who="reader"
    )
    known_id, known_pushes = await _two_turns(
        database, settings, writes, use_known=True, who="knower"
    )
    by_read = await writes.load_turn_context(CallerScope(SCOPE.tenant, "reader"), read_id)
    by_known = await writes.load_turn_context(CallerScope(SCOPE.tenant, "knower"), known_id)
    assert by_known.state == by_read.state == states.COMPLETED
    assert _same_shape(by_known.task, known_id) == _same_shape(by_read.task, read_id)
    assert [m["messageId"] for m in by_known.history] == [
        "m-1",
        f"{known_id}:interrupt-2",
        "m-2",
        f"{known_id}:final",
    ]
    assert [a["artifactId"] for a in by_known.task["artifacts"]] == ["a1", "a2"]
    assert [(p.kind, p.message_key) for p in known_pushes] == [
        (p.kind, p.message_key) for p in read_pushes
    ]
    assert [_same_shape(p.payload, known_id) for p in known_pushes] == [
        _same_shape(p.payload, read_id) for p in read_pushes
    ]


async def test_finish_on_stale_knowledge_reads_the_task_and_still_lands(
    database: Database, settings: Settings, writes: TurnWrites
):
    task_id, fence = await _working(database, settings, writes)
    snapshot = await writes.load_turn_context(SCOPE, task_id)
    stale = snapshot.known(snapshot.version - 1)  # as if a write of its own was not counted
    assert await writes.finish(SCOPE, task_id, fence, DONE, stale)
    row = await task_row(database, task_id)
    assert row.state == states.COMPLETED
    assert row.status["message"]["messageId"] == f"{task_id}:final"
    history = (await writes.load_turn_context(SCOPE, task_id)).history
    assert [m["messageId"] for m in history] == ["m-1", f"{task_id}:final"]


async def test_finish_on_knowledge_a_cancel_made_stale_is_refused(
    database: Database, settings: Settings, writes: TurnWrites, canceller: TaskCanceller
):
    task_id, fence = await _working(database, settings, writes)
    snapshot = await writes.load_turn_context(SCOPE, task_id)
    await canceller.cancel(SCOPE, task_id)
    assert not await writes.finish(SCOPE, task_id, fence, DONE, snapshot.known(snapshot.version))
    assert (await task_row(database, task_id)).state == states.CANCELED
    assert await count(database, TaskMessageRow) == 1
    assert await count(database, PushOutboxRow) == 0


@pytest.mark.postgres
async def test_finish_on_what_the_runner_knows_is_one_statement(
    pg_writes: PgWrites, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    database, writes, pool = pg_writes
    task_id, fence = await _working(database, settings, writes)
    snapshot = await writes.load_turn_context(SCOPE, task_id)
    queries = record_statements(monkeypatch, pool)
    assert await writes.finish(SCOPE, task_id, fence, DONE, snapshot.known(snapshot.version))
    assert len(queries) == 1
    queries.clear()
    # Stale: the write is refused, then the usual read and write.
    other = (await accept(database, settings, message_id="m-9")).task.id
    assert await writes.mark_working(SCOPE, other, fence)
    stale = (await writes.load_turn_context(SCOPE, other)).known(0)
    queries.clear()
    assert await writes.finish(SCOPE, other, fence, DONE, stale)
    assert len(queries) == 3


# --- finish and settle the worker's turn in one statement (app.db.turns.SettleTurn) ---------


async def test_finish_and_settle_settles_the_turn_with_the_outcome(
    database: Database, settings: Settings, writes: TurnWrites
):
    task_id, fence = await _working(database, settings, writes)
    later = (await accept(database, settings, message_id="m-2", task_id=None)).task.id
    first, second = await turns(database)
    assert first.task_id == task_id and second.task_id == later
    done = await writes.finish_and_settle(
        SCOPE, task_id, fence, DONE, settle=SettleTurn(first.id, states.TURN_DONE)
    )
    assert done.applied
    assert (await task_row(database, task_id)).state == states.COMPLETED
    if database.statement_pool is None:
        # SQLite: the caller settles the turn itself (mailbox.settle_and_head).
        assert not done.settled and (await turns(database))[0].status == states.TURN_QUEUED
        return
    assert done.settled
    assert [t.status for t in await turns(database)] == [states.TURN_DONE, states.TURN_QUEUED]
    # The next head as a turn (``None`` would mean: none is due).
    assert done.next_head is not None and done.next_head.id == second.id
    assert done.next_head.task_id == later


@pytest.mark.postgres
async def test_finish_and_settle_refused_settles_nothing(pg_writes: PgWrites, settings: Settings):
    database, writes, _ = pg_writes
    canceller = TaskCanceller(database, default_history_length=50)
    task_id, fence = await _working(database, settings, writes)
    (turn,) = await turns(database)
    await canceller.cancel(SCOPE, task_id)
    status_after_cancel = (await turns(database))[0].status
    settle = SettleTurn(turn.id, states.TURN_DEAD, "agent_error")
    failed = TurnOutcome(state=states.FAILED, text="gave up")
    done = await writes.finish_and_settle(SCOPE, task_id, fence, failed, settle=settle)
    assert not done.applied and not done.settled
    (after,) = await turns(database)
    assert after.status == status_after_cancel and after.last_error is None


@pytest.mark.postgres
async def test_finish_and_settle_dead_turn_keeps_its_error_in_one_statement(
    pg_writes: PgWrites, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    database, writes, pool = pg_writes
    task_id, fence = await _working(database, settings, writes)
    (turn,) = await turns(database)
    snapshot = await writes.load_turn_context(SCOPE, task_id)
    queries = record_statements(monkeypatch, pool)
    failed = TurnOutcome(state=states.FAILED, text="gave up")
    done = await writes.finish_and_settle(
        SCOPE,
        task_id,
        fence,
        failed,
        snapshot.known(snapshot.version),
        SettleTurn(turn.id, states.TURN_DEAD, "agent_error"),
    )
    assert done.applied and done.settled and done.next_head is None
    assert len(queries) == 1
    (after,) = await turns(database)
    assert (after.status, after.last_error) == (states.TURN_DEAD, "agent_error")
    assert (await task_row(database, task_id)).state == states.FAILED
