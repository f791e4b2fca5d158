"""Asking the human: the built-in ``ask_user`` tool, the Looping gateway's HITL data parts
(``io.looping.hitl.request`` out; ``io.looping.hitl.response`` / ``io.looping.hitl.timeout``
in), and how an answer becomes the pending call's result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.agents.hitl_wire import REQUEST_TYPE, RESPONSE_TYPE, TIMEOUT_TYPE, answer_part
from app.agents.llm.tools import Tool, tool_from_function

__all__ = ["REQUEST_TYPE", "RESPONSE_TYPE", "TIMEOUT_TYPE"]

ASK_USER = "ask_user"
TIMEOUT_RESULT = "the person did not answer in time"
# Leads the attachments of an answer: they follow the call's result as a user message.
ATTACHED = "The person attached this to their answer:"


async def ask_user(question: str, options: list[str] | None = None) -> str:
    """Ask the person you work for a question and wait for the answer. Use it when you
    cannot go on without their decision or information. ``options``: short choices to offer
    (they may still answer in their own words)."""
    raise AssertionError("ask_user is handled by the loop, never called")


ASK_USER_TOOL: Tool = tool_from_function(ask_user, sequential=True)


def request_id(task_id: str, step: int) -> str:
    return f"ask-{step}-{task_id}"


def option_id(index: int) -> str:
    return f"opt-{index + 1}"


def question_part(rid: str, question: str, options: Sequence[str] | None) -> dict[str, Any]:
    """The status message's data part the gateway needs to resume the task."""
    data: dict[str, Any] = {
        "type": REQUEST_TYPE,
        "requestId": rid,
        "requestKind": "choice",
        "prompt": question,
        "allowFreeform": True,
    }
    if options:
        data["options"] = [{"id": option_id(i), "label": o} for i, o in enumerate(options)]
    return {"data": data}


@dataclass(frozen=True)
class Answer:
    request_id: str | None  # None: plain text from a general client
    result: str


def answer_of(message: Mapping[str, Any], text: str, options: Sequence[str] | None) -> Answer:
    """The pending call's result: the chosen option's label, the answer's text, or a line
    saying the person did not answer in time."""
    data = answer_part(message)
    if data is None:
        return Answer(None, text)
    rid = data.get("requestId")
    rid = rid if isinstance(rid, str) else None
    if data.get("type") == TIMEOUT_TYPE:
        return Answer(rid, TIMEOUT_RESULT)
    chosen = data.get("optionId")
    for index, label in enumerate(options or ()):
        if chosen == option_id(index):
            return Answer(rid, label)
    answer = data.get("text")
    if isinstance(answer, str) and answer:
        return Answer(rid, answer)
    return Answer(rid, text or str(chosen or ""))
