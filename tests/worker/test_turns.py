"""Turns run in-process (``edge_harness(background=True)``) on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.db.engine import Database
from app.tasks import states
from app.testing.edge import EdgeHarness, edge_harness
from tests.worker.helpers import (
    actor,
    eventually,
    history,
    outbox,
    reached,
    send,
    settled_turn,
    status_text,
    task_row,
    turns,
)

FAST = {
    "poll_seconds": 0.1,
    "turn_retry_base_seconds": 0.01,
    "lease_seconds": 5,
}
FINAL = (states.COMPLETED, states.FAILED, states.CANCELED, states.INPUT_REQUIRED)


@asynccontextmanager
async def running_edge(
    db_url: str, agent: str = "scripted", **overrides: Any
) -> AsyncIterator[tuple[EdgeHarness, Database]]:
    async with edge_harness(db_url, background=True, **{**FAST, **overrides}) as edge:
        await edge.add_tenant("demo", agent=agent)
        yield edge, edge.services.db


async def test_scripted_turn_completes_with_reply_in_status_and_history(db_url: str) -> None:
    async with running_edge(db_url) as (edge, db):
        task_id = await send(
            edge, "progress thinking\nartifact text note\nreply done", message_id="m1"
        )
        row = await eventually(lambda: reached(db, task_id, *FINAL))
        assert row.state == states.COMPLETED
        assert status_text(row) == "done"
        assert row.status["message"]["messageId"] == f"{task_id}:final"
        assert row.artifacts == [{"artifactId": "artifact-2", "parts": [{"text": "note"}]}]
        msgs = await history(db, task_id)
        assert [m["role"] for m in msgs] == ["ROLE_USER", "ROLE_AGENT"]
        assert msgs[-1]["parts"] == [{"text": "done"}]
        (turn,) = await turns(db, task_id)
        assert (turn.status, turn.attempts) == (states.TURN_DONE, 1)
        keys = [(o.kind, o.message_key) for o in await outbox(db, task_id)]
        assert keys == [("progress", "line-1"), ("final", "final")]
        got = await edge.result("GetTask", {"id": task_id})
        assert got["status"]["state"] == states.COMPLETED
        # The lease is given back once the identity's mailbox is empty.
        held = await actor(db, "user-1")
        assert held.lease_owner is None and held.fence == 1
        assert edge.services.metrics.turns.labels("completed")._value.get() == 1


async def test_echo_agent_replies_with_the_text(db_url: str) -> None:
    async with running_edge(db_url, agent="echo") as (edge, db):
        task_id = await send(edge, "hello edge", message_id="m1")
        row = await eventually(lambda: reached(db, task_id, *FINAL))
        assert (row.state, status_text(row)) == (states.COMPLETED, "hello edge")


async def test_ask_then_resume_continues_the_script(db_url: str) -> None:
    async with running_edge(db_url) as (edge, db):
        task_id = await send(edge, "ask colour?\nreply got {answer}", message_id="m1")
        row = await eventually(lambda: reached(db, task_id, *FINAL))
        assert (row.state, status_text(row)) == (states.INPUT_REQUIRED, "colour?")
        assert await send(edge, "blue", message_id="m2", task_id=task_id) == task_id
        row = await eventually(lambda: reached(db, task_id, states.COMPLETED, states.FAILED))
        assert (row.state, status_text(row)) == (states.COMPLETED, "got blue")
        assert [t.kind for t in await turns(db, task_id)] == ["start", "resume"]
        roles = [m["role"] for m in await history(db, task_id)]
        assert roles == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER", "ROLE_AGENT"]


async def test_crash_is_retried_with_backoff_then_succeeds(db_url: str) -> None:
    async with running_edge(db_url) as (edge, db):
        task_id = await send(edge, "crash 2\nreply ok on attempt {attempt}", message_id="m1")
        row = await eventually(lambda: reached(db, task_id, *FINAL))
        assert (row.state, status_text(row)) == (states.COMPLETED, "ok on attempt 3")
        (turn,) = await turns(db, task_id)
        assert (turn.status, turn.attempts) == (states.TURN_DONE, 3)
        assert turn.not_before is not None  # the retries were scheduled, not immediate
        assert edge.services.metrics.turns.labels("retry")._value.get() == 2


async def test_poison_turn_fails_with_operator_text_and_does_not_block(db_url: str) -> None:
    async with running_edge(db_url, turn_max_attempts=2, failure_text="Sorry, try later.") as (
        edge,
        db,
    ):
        poison = await send(edge, "crash\nreply never", message_id="m1")
        later = await send(edge, "reply after the poison", message_id="m2")
        row = await eventually(lambda: reached(db, poison, *FINAL))
        assert (row.state, status_text(row)) == (states.FAILED, "Sorry, try later.")
        assert "crash" not in str(row.status)  # never the exception's text
        (turn,) = await turns(db, poison)
        assert (turn.status, turn.attempts, turn.last_error) == (
            states.TURN_DEAD,
            2,
            "agent_error",
        )
        row = await eventually(lambda: reached(db, later, *FINAL))
        assert (row.state, status_text(row)) == (states.COMPLETED, "after the poison")
        assert edge.services.metrics.turns.labels("failed")._value.get() == 1


async def test_turn_timeout_counts_as_a_failed_attempt(db_url: str) -> None:
    async with running_edge(db_url, turn_max_attempts=1, turn_timeout_seconds=0.2) as (edge, db):
        task_id = await send(edge, "sleep 30\nreply late", message_id="m1")
        row = await eventually(lambda: reached(db, task_id, *FINAL))
        assert row.state == states.FAILED
        (turn,) = await turns(db, task_id)
        assert (turn.status, turn.last_error) == (states.TURN_DEAD, "timeout")


async def test_agent_failure_is_a_final_answer_not_a_retry(db_url: str) -> None:
    async with running_edge(db_url) as (edge, db):
        task_id = await send(edge, "fail cannot do that", message_id="m1")
        row = await eventually(lambda: reached(db, task_id, *FINAL))
        assert (row.state, status_text(row)) == (states.FAILED, "cannot do that")
        (turn,) = await turns(db, task_id)
        assert (turn.status, turn.attempts) == (states.TURN_DONE, 1)


async def test_cancel_during_a_running_turn(db_url: str) -> None:
    async with running_edge(db_url) as (edge, db):
        task_id = await send(
            edge, "progress one\nsleep 30\nprogress two\nreply never", message_id="m1"
        )

        async def working_with_one() -> bool:
            row = await task_row(db, task_id)
            return row.state == states.WORKING and status_text(row) == "one"

        await eventually(working_with_one)
        canceled = await edge.result("CancelTask", {"id": task_id})
        assert canceled["status"]["state"] == states.CANCELED
        turn = await eventually(lambda: settled_turn(db, task_id, states.TURN_CANCELED))
        assert turn.attempts == 1
        row = await task_row(db, task_id)
        assert row.state == states.CANCELED
        assert [m["role"] for m in await history(db, task_id)] == ["ROLE_USER"]
        # Only the progress before the cancel was ever queued: no "two", no final push.
        assert [o.message_key for o in await outbox(db, task_id)] == ["line-1"]
        assert edge.services.metrics.turns.labels("canceled")._value.get() == 1


async def test_identity_turns_run_in_order_and_identities_in_parallel(db_url: str) -> None:
    async with running_edge(db_url) as (edge, db):
        ids = []
        for n in range(3):
            for who in ("alice", "bob"):
                ids.append(await send(edge, f"reply {who} {n}", message_id=f"{who}-{n}", who=who))
        for task_id in ids:
            row = await eventually(lambda t=task_id: reached(db, t, *FINAL))  # type: ignore[misc]
            assert row.state == states.COMPLETED
        done = sorted((t for t in await turns(db)), key=lambda t: t.updated_at)
        for who in ("alice", "bob"):
            mine = [t.message_id for t in done if t.identity == who]
            assert mine == [f"{who}-0", f"{who}-1", f"{who}-2"]


async def test_an_unstorable_agent_result_fails_the_task_instead_of_leaving_it_working(
    db_url: str,
) -> None:
    # Found by audit: an artifact holding U+0000 (PostgreSQL refuses it) or an unpaired
    # surrogate failed the terminal write on every attempt; the turn went dead and its task
    # stayed WORKING forever, with no push. Now it is the agent's fault: retried, then FAILED.
    async with running_edge(db_url, turn_max_attempts=2, failure_text="Sorry.") as (edge, db):
        nul = await send(edge, 'artifact data "a\\u0000b"\nreply x', message_id="m1")
        lone = await send(edge, 'artifact data "\\ud800"\nreply y', message_id="m2")
        for task_id in (nul, lone):
            row = await eventually(lambda t=task_id: reached(db, t, *FINAL))
            assert (row.state, status_text(row)) == (states.FAILED, "Sorry.")
            (turn,) = await turns(db, task_id)
            assert (turn.status, turn.last_error) == (states.TURN_DEAD, "agent_error")
            finals = [o for o in await outbox(db, task_id) if o.kind == "final"]
            assert len(finals) == 1


async def test_an_internal_error_on_every_attempt_still_fails_the_task_with_a_final_push(
    db_url: str,
) -> None:
    # The write path itself failing (a bug, a database refusal) on each attempt: after the
    # last one the task fails with the operator's text and its final push, as for a crash.
    async with running_edge(db_url, turn_max_attempts=2, failure_text="Sorry.") as (edge, db):
        writes = edge.services.background[0].runner.writes  # type: ignore[attr-defined]
        real_finish = writes.finish_and_settle
        calls: list[str] = []

        async def failing_finish(*args: Any, **kwargs: Any) -> Any:
            outcome = args[3]
            if outcome.text == "never stored":  # this agent answer: refused every time
                calls.append("refused")
                raise RuntimeError("the write failed")
            return await real_finish(*args, **kwargs)

        writes.finish_and_settle = failing_finish
        task_id = await send(edge, "reply never stored", message_id="m1")
        later = await send(edge, "reply after it", message_id="m2")
        row = await eventually(lambda: reached(db, task_id, *FINAL))
        assert (row.state, status_text(row)) == (states.FAILED, "Sorry.")
        assert calls == ["refused", "refused"]
        (turn,) = await turns(db, task_id)
        assert turn.status == states.TURN_DEAD
        assert [o.message_key for o in await outbox(db, task_id) if o.kind == "final"] == ["final"]
        writes.finish_and_settle = real_finish
        row = await eventually(lambda: reached(db, later, *FINAL))
        assert (row.state, status_text(row)) == (states.COMPLETED, "after it")
