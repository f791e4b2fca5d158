"""ask_user: INPUT_REQUIRED with the gateway's HITL request part; the answer (HITL response,
timeout, or plain text) becomes the pending call's result, never a new user message."""

from __future__ import annotations

from typing import Any

from app.agents.contract import AgentQuestion, AgentReply
from app.agents.llm import hitl
from app.agents.llm.session import MemorySessions
from app.testing.fake_model import FakeModelServer, text, tool_call, tool_calls
from tests.agents.llm.kit import run_turn, runtime, turn


def _answer(data: dict[str, Any], label: str, message_id: str = "m-2") -> dict[str, Any]:
    return {
        "messageId": message_id,
        "role": "ROLE_USER",
        "taskId": "t-1",
        "parts": [{"text": label}, {"data": data, "mediaType": "application/json"}],
    }


async def _ask(fake: FakeModelServer, sessions: MemorySessions, options: Any) -> AgentQuestion:
    args = {"question": "Which colour?"} | ({"options": options} if options else {})
    fake.script(tool_call("ask_user", args, call_id="ask1"))
    result = await run_turn(fake, runtime(sessions=sessions), turn("paint it"))
    assert isinstance(result, AgentQuestion)
    return result


async def test_the_question_carries_the_hitl_request_part(fake: FakeModelServer) -> None:
    question = await _ask(fake, MemorySessions(), ["red", "blue"])
    assert question.text == "Which colour?"
    (part,) = question.parts
    assert part["data"] == {
        "type": "io.looping.hitl.request",
        "requestId": hitl.request_id("t-1", 1),
        "requestKind": "choice",
        "prompt": "Which colour?",
        "options": [{"id": "opt-1", "label": "red"}, {"id": "opt-2", "label": "blue"}],
        "allowFreeform": True,
    }


async def test_no_options_means_no_options_member(fake: FakeModelServer) -> None:
    question = await _ask(fake, MemorySessions(), None)
    assert "options" not in question.parts[0]["data"]


async def test_a_chosen_option_becomes_the_calls_result(fake: FakeModelServer) -> None:
    sessions = MemorySessions()
    question = await _ask(fake, sessions, ["red", "blue"])
    rid = question.parts[0]["data"]["requestId"]
    fake.script(text("painted blue"))
    data = {"type": hitl.RESPONSE_TYPE, "requestId": rid, "optionId": "opt-2", "answeredBy": "U1"}
    answer = turn("", kind="resume", message=_answer(data, "blue"))
    result = await run_turn(fake, runtime(sessions=sessions), answer)
    assert result == AgentReply(text="painted blue")
    sent = fake.requests[-1].messages
    assert sent[-1] == {"role": "tool", "tool_call_id": "ask1", "content": "blue"}
    assert [m["content"] for m in sent if m["role"] == "user"] == ["paint it"]


async def test_a_timeout_says_so(fake: FakeModelServer) -> None:
    sessions = MemorySessions()
    question = await _ask(fake, sessions, None)
    rid = question.parts[0]["data"]["requestId"]
    fake.script(text("ok, later"))
    data = {"type": hitl.TIMEOUT_TYPE, "requestId": rid}
    msg = _answer(data, "(No response was received within the allotted time.)")
    await run_turn(fake, runtime(sessions=sessions), turn("", kind="resume", message=msg))
    assert fake.requests[-1].messages[-1]["content"] == hitl.TIMEOUT_RESULT


async def test_plain_text_from_a_general_client_answers_too(fake: FakeModelServer) -> None:
    sessions = MemorySessions()
    await _ask(fake, sessions, None)
    fake.script(text("green it is"))
    answer = turn("green please", kind="resume", message_id="m-2")
    await run_turn(fake, runtime(sessions=sessions), answer)
    assert fake.requests[-1].messages[-1]["content"] == "green please"


async def test_a_retried_answer_turn_does_not_apply_twice(fake: FakeModelServer) -> None:
    sessions = MemorySessions()
    await _ask(fake, sessions, None)
    fake.script(text("once"))
    answer = turn("green", kind="resume", message_id="m-2")
    await run_turn(fake, runtime(sessions=sessions), answer)
    # The same turn again (a takeover after the reply was saved): no model call, same reply.
    again = await run_turn(
        fake, runtime(sessions=sessions), turn("green", kind="resume", message_id="m-2")
    )
    assert again == AgentReply(text="once")
    assert len(fake.requests) == 2


async def test_two_questions_in_one_response_ask_one(fake: FakeModelServer) -> None:
    sessions = MemorySessions()
    fake.script(
        tool_calls(("ask_user", {"question": "A?"}, "q1"), ("ask_user", {"question": "B?"}, "q2"))
    )
    result = await run_turn(fake, runtime(sessions=sessions), turn("go"))
    assert isinstance(result, AgentQuestion) and result.text == "A?"
    fake.script(text("done"))
    await run_turn(fake, runtime(sessions=sessions), turn("yes", kind="resume", message_id="m-2"))
    tools = [m for m in fake.requests[-1].messages if m["role"] == "tool"]
    assert [t["content"] for t in tools] == [
        "yes",
        "error: one question at a time; ask again once this one is answered",
    ]
