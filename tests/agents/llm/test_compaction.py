"""Compaction on the real sessions stores (both backends): past ``session_max_tokens`` the
oldest whole tasks are summarised by the model into one entry read first, or dropped when the
summary call fails; plugins' ``on_messages_displaced`` get the displaced messages; a retried
turn doubles nothing (issue 48, point 4)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart

from app.agents.contract import AgentFailure, AgentReply
from app.agents.llm.compaction import SUMMARY_HEAD, SUMMARY_INSTRUCTIONS, response_text
from app.agents.llm.plugins import build_plugins
from app.agents.llm.runtime import LlmRuntime
from app.db.engine import Database
from app.testing.fake_model import FakeModelServer, error, text
from tests.agents.llm.kit import FAILURE, run_turn, runtime, turn

BUDGET = 1000
LONG = "a" * 8000  # far past the budget on its own


class Displaced:
    """A plugin whose ``on_messages_displaced`` records what it was given."""

    def __init__(self) -> None:
        self.calls: list[list[ModelMessage]] = []
        self.plugin = SimpleNamespace(key="mem", tools=(), on_messages_displaced=self.hook)

    async def hook(self, _ctx: object, messages: list[ModelMessage]) -> None:
        self.calls.append(list(messages))


def _runtime(database: Database, displaced: Displaced) -> LlmRuntime:
    plugins = build_plugins([displaced.plugin], {})
    return runtime(plugins=plugins, sessions=database.storage.sessions)  # type: ignore[arg-type]


async def _ids(database: Database) -> list[str]:
    entries = await database.storage.sessions.transcript("demo", "user-1").entries()
    return [e.id for e in entries]


async def _first_task(fake: FakeModelServer, rt: LlmRuntime) -> None:
    fake.script(text(LONG))
    result = await run_turn(fake, rt, turn("first", task_id="t-1"), session_max_tokens=BUDGET)
    assert result == AgentReply(text=LONG)


def _texts(messages: list[ModelMessage]) -> list[Any]:
    out: list[Any] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            out.extend(p.content for p in message.parts if isinstance(p, UserPromptPart))
        elif isinstance(message, ModelResponse):
            out.append(response_text(message))
    return out


async def test_past_the_budget_the_oldest_task_becomes_the_models_summary(
    fake: FakeModelServer, database: Database
) -> None:
    displaced = Displaced()
    rt = _runtime(database, displaced)
    await _first_task(fake, rt)
    fake.script(text("they said first"), text("second answer"))
    second = turn("second", task_id="t-2", message_id="m-2")
    result = await run_turn(fake, rt, second, session_max_tokens=BUDGET)

    assert result == AgentReply(text="second answer")
    summary_call, answer_call = fake.requests[-2], fake.requests[-1]
    assert summary_call.messages[0]["content"] == SUMMARY_INSTRUCTIONS
    assert "user: first" in summary_call.messages[1]["content"]
    assert summary_call.tool_names == []  # the summary is asked with no tools
    assert answer_call.messages[1]["content"] == SUMMARY_HEAD + "they said first"
    assert [m.get("content") for m in answer_call.messages[2:]] == ["second"]
    ids = await _ids(database)
    assert ids[0].startswith("summary:")
    assert ids[1:] == ["task:t-2:user:m-2", "task:t-2:reply:final"]
    assert [_texts(m) for m in displaced.calls] == [["first", LONG]]


async def test_the_oldest_task_is_dropped_when_the_summary_fails(
    fake: FakeModelServer, database: Database
) -> None:
    displaced = Displaced()
    rt = _runtime(database, displaced)
    await _first_task(fake, rt)
    fake.script(error(400), text("second answer"))  # a 400 is not asked again
    second = turn("second", task_id="t-2", message_id="m-2")
    result = await run_turn(fake, rt, second, session_max_tokens=BUDGET)

    assert result == AgentReply(text="second answer")
    assert [m.get("content") for m in fake.requests[-1].messages[1:]] == ["second"]
    assert await _ids(database) == ["task:t-2:user:m-2", "task:t-2:reply:final"]
    assert [_texts(m) for m in displaced.calls] == [["first", LONG]]


async def test_a_retried_turn_compacts_and_saves_once(
    fake: FakeModelServer, database: Database
) -> None:
    """The turn fails after its compaction (the model down for the answer); its retry finds
    the session already compacted: one summary, one user entry, one hook call, and the retry
    of the finished turn asks the model nothing."""
    displaced = Displaced()
    rt = _runtime(database, displaced)
    await _first_task(fake, rt)
    second = turn("second", task_id="t-2", message_id="m-2")
    config = {"session_max_tokens": BUDGET, "model_attempts": 1}
    fake.script(text("they said first"), error(500))
    assert await run_turn(fake, rt, second, **config) == AgentFailure(FAILURE)
    after_failure = await _ids(database)
    assert after_failure[0].startswith("summary:")
    assert after_failure[1:] == ["task:t-2:user:m-2"]

    fake.script(text("second answer"))
    assert await run_turn(fake, rt, second, **config) == AgentReply(text="second answer")
    asked = len(fake.requests)
    assert await run_turn(fake, rt, second, **config) == AgentReply(text="second answer")
    assert len(fake.requests) == asked  # the finished turn is answered from the session
    assert await _ids(database) == [*after_failure, "task:t-2:reply:final"]
    assert len(displaced.calls) == 1
    assert fake.requests[-1].messages[1]["content"] == SUMMARY_HEAD + "they said first"
