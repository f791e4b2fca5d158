"""The model's view of a session: the system prompt, then every entry in order, with each
model response's tool results put right after it in the model's call order.

Results are saved as each call finishes (completion order) and a session may hold a call that
never got a result (a task canceled while a tool ran, a question never answered); the chat
API refuses a history where a call has no result, so such a call is given one saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
)

from app.agents.llm.session import SessionEntry, message_of

NO_RESULT = "error: no result (the task ended before this call finished)"


@dataclass(frozen=True)
class Loaded:
    entry_id: str
    message: ModelMessage


def load(entries: Sequence[SessionEntry]) -> list[Loaded]:
    return [Loaded(e.id, message_of(e)) for e in entries]


def tool_returns(messages: Sequence[Loaded]) -> dict[str, ToolReturnPart]:
    out: dict[str, ToolReturnPart] = {}
    for item in messages:
        if isinstance(item.message, ModelRequest):
            for part in item.message.parts:
                if isinstance(part, ToolReturnPart):
                    out.setdefault(part.tool_call_id, part)
    return out


def calls_of(message: ModelMessage) -> list[ToolCallPart]:
    if not isinstance(message, ModelResponse):
        return []
    return [p for p in message.parts if isinstance(p, ToolCallPart)]


def for_model(system_prompt: str, messages: Sequence[Loaded]) -> list[ModelMessage]:
    returns = tool_returns(messages)
    out: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart(system_prompt)])]
    for item in messages:
        message = item.message
        if isinstance(message, ModelRequest):
            parts = [p for p in message.parts if not isinstance(p, ToolReturnPart)]
            if parts:
                out.append(ModelRequest(parts=parts))
            continue
        out.append(message)
        calls = calls_of(message)
        if calls:
            results: list[ModelRequestPart] = []
            for call in calls:
                found = returns.get(call.tool_call_id)
                results.append(
                    found
                    if found is not None
                    else ToolReturnPart(call.tool_name, NO_RESULT, call.tool_call_id)
                )
            out.append(ModelRequest(parts=results))
    return out
