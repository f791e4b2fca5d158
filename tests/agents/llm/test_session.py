"""One continuous session per caller: the second task sees the first's exchange, another
caller's does not; appending an existing id is a no-op."""

from __future__ import annotations

from app.agents.contract import AgentReply
from app.agents.llm.session import MemorySessions, MemoryTranscript, SessionEntry
from app.db.engine import Database
from app.testing.fake_model import FakeModelServer, text, tool_call
from tests.agents.llm.kit import run_turn, runtime, turn


async def test_the_second_task_sees_the_first_and_another_caller_does_not(
    fake: FakeModelServer,
) -> None:
    rt = runtime(sessions=MemorySessions())
    fake.script(text("nice to meet you, Ada"), text("you are Ada"), text("I do not know"))
    await run_turn(fake, rt, turn("my name is Ada", task_id="t-1"))
    second = await run_turn(fake, rt, turn("who am I?", task_id="t-2", message_id="m-2"))
    assert second == AgentReply(text="you are Ada")
    seen = [m.get("content") for m in fake.requests[1].messages[1:]]
    assert seen == ["my name is Ada", "nice to meet you, Ada", "who am I?"]
    other = turn("who am I?", task_id="t-3", identity="user-2", message_id="m-3")
    await run_turn(fake, rt, other)
    assert [m.get("content") for m in fake.requests[2].messages[1:]] == ["who am I?"]


async def test_entry_ids_are_stable_and_counted_across_the_task(fake: FakeModelServer) -> None:
    sessions = MemorySessions()
    fake.script(tool_call("ask_user", {"question": "x?"}, call_id="a"), text("done"))
    rt = runtime(sessions=sessions)
    await run_turn(fake, rt, turn("go"))
    await run_turn(fake, rt, turn("yes", kind="resume", message_id="m-2"))
    ids = [e.id for e in sessions.transcript("demo", "user-1").items]
    assert ids == [
        "task:t-1:user:m-1",
        "task:t-1:step:1",
        "task:t-1:step:2",
        "task:t-1:reply:final",
    ]


async def test_appending_an_existing_id_is_a_no_op() -> None:
    transcript = MemoryTranscript()
    entry = SessionEntry("task:t:user:m", {"kind": "request", "parts": []}, 1)
    assert await transcript.append(entry) is True
    assert await transcript.append(entry) is False
    assert len(await transcript.entries()) == 1


async def test_an_unanswered_call_of_an_old_task_gets_a_result_for_the_model(
    fake: FakeModelServer,
) -> None:
    rt = runtime(sessions=MemorySessions())
    fake.script(tool_call("ask_user", {"question": "x?"}, call_id="a"), text("fresh"))
    await run_turn(fake, rt, turn("go", task_id="t-1"))  # never answered
    await run_turn(fake, rt, turn("new", task_id="t-2", message_id="m-2"))
    tool = next(m for m in fake.requests[1].messages if m["role"] == "tool")
    assert tool["content"].startswith("error: no result")


async def test_two_tasks_of_one_caller_share_the_stored_session(
    fake: FakeModelServer, database: Database
) -> None:
    rt = runtime(sessions=database.storage.sessions)  # type: ignore[arg-type]
    fake.script(text("noted: Ada"), text("you are Ada"), text("I do not know"))
    await run_turn(fake, rt, turn("my name is Ada", task_id="t-1"))
    await run_turn(fake, rt, turn("who am I?", task_id="t-2", message_id="m-2"))
    seen = [m.get("content") for m in fake.requests[1].messages[1:]]
    assert seen == ["my name is Ada", "noted: Ada", "who am I?"]
    other = turn("who am I?", task_id="t-3", identity="user-2", message_id="m-3")
    await run_turn(fake, rt, other)
    assert [m.get("content") for m in fake.requests[2].messages[1:]] == ["who am I?"]
    # A retried turn (the same task and message again) doubles nothing.
    await run_turn(fake, rt, turn("who am I?", task_id="t-2", message_id="m-2"))
    stored = await database.storage.sessions.transcript("demo", "user-1").entries()
    assert [e.id for e in stored] == [
        "task:t-1:user:m-1",
        "task:t-1:reply:final",
        "task:t-2:user:m-2",
        "task:t-2:reply:final",
    ]


async def test_past_the_budget_old_tasks_are_dropped_when_the_summary_fails(
    fake: FakeModelServer,
) -> None:
    from app.testing.fake_model import error

    sessions = MemorySessions()
    rt = runtime(sessions=sessions)
    fake.script(text("a" * 8000))
    await run_turn(fake, rt, turn("first", task_id="t-1"), session_max_tokens=1000)
    fake.script(error(400), text("second answer"))  # the summary call fails
    result = await run_turn(
        fake, rt, turn("second", task_id="t-2", message_id="m-2"), session_max_tokens=1000
    )
    assert result == AgentReply(text="second answer")
    ids = [e.id for e in sessions.transcript("demo", "user-1").items]
    assert ids == ["task:t-2:user:m-2", "task:t-2:reply:final"]
    assert [m.get("content") for m in fake.requests[-1].messages[1:]] == ["second"]
