"""A round's ``ask_user`` without a database: the question from the saved call (a run again
before the answer asks no model), the answer as the call's result in the next round, the
wait not counted against the delegation's wall time, a malformed question repaired."""

from __future__ import annotations

from dataclasses import replace

from app.agents.contract import AgentQuestion, AgentReply
from app.agents.llm import hitl
from app.agents.llm.agent import LlmAgent
from app.agents.llm.session import MemorySessions
from app.testing.fake_model import FakeModelServer
from tests.agents.llm.delegation.kit import ask, config, final
from tests.agents.llm.kit import runtime, turn


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_asked_again_without_the_model_then_answered_at_the_next_round(
    fake: FakeModelServer,
) -> None:
    fake.script(ask("Blue or green?", ["blue", "green"]), final("Green it is."))
    sessions = MemorySessions()
    clock = Clock(1_000.0)
    agent = LlmAgent.from_config(config(fake, max_wall_seconds=60), runtime(sessions=sessions))
    start = replace(turn("paint"), clock=clock)
    first = await agent.run(start)
    assert isinstance(first, AgentQuestion) and first.text == "Blue or green?"
    assert await agent.run(start) == first  # a run again before the answer: same question
    assert len(fake.requests) == 1
    assert first.parts[0]["data"]["requestId"] == "ask-1-t-1"
    clock.now += 3_600  # the human answered an hour later: not the rounds' working time
    answer = replace(turn("green", message_id="a-1", kind="resume"), clock=clock)
    assert await agent.run(answer) == AgentReply(text="Green it is.")
    round2 = fake.requests[1]
    assert sorted(round2.tool_names) == ["ask_user", "delegate", "final_reply"]  # not final
    assert round2.messages[-1] == {"role": "tool", "tool_call_id": "q1", "content": "green"}
    ids = [e.id for e in sessions.transcript("demo", "user-1").items]
    assert ids == [
        "task:t-1:user:m-1",
        "task:t-1:round:1:ask",
        "task:t-1:round:1:results",
        "task:t-1:reply:final",
    ]
    # The answer again (a retried resume turn) is taken once: nothing more is asked.
    assert await agent.run(answer) == AgentReply(text="Green it is.")
    assert len(fake.requests) == 2


async def test_a_question_without_text_is_repaired(fake: FakeModelServer) -> None:
    fake.script(ask(" "), ask("Which colour?"))
    result = await LlmAgent.from_config(config(fake), runtime()).run(turn("q"))
    assert isinstance(result, AgentQuestion) and result.text == "Which colour?"
    assert result.parts[0]["data"]["type"] == hitl.REQUEST_TYPE
    assert "ask_user needs a non-empty 'question'" in fake.requests[1].messages[-1]["content"]
