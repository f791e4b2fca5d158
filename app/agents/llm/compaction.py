"""Keeping a caller's session within ``session_max_tokens``: past the budget the oldest whole
tasks are displaced (never the running task's own messages, so a call is never parted from
its result). The model summarises them into one entry put first; when that call fails they
are dropped. Plugins' ``on_messages_displaced`` get the displaced messages, best-effort.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from app.agents.llm.attachments import content_text
from app.agents.llm.session import SessionEntry, entry_of

log = logging.getLogger("looping.agent")

SUMMARY_PREFIX = "summary:"
SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation below for your own later use: the facts, decisions, open "
    "questions and anything the person asked you to remember. Be brief."
)
SUMMARY_HEAD = "Summary of the earlier conversation:\n"

Summarise = Callable[[Sequence[ModelMessage]], Awaitable[str | None]]


def group_of(entry_id: str) -> str:
    """Entries of one task share a group (``task:<id>``); a summary is a group of its own."""
    if entry_id.startswith("task:"):
        return ":".join(entry_id.split(":", 2)[:2])
    return entry_id


def displaced(entries: Sequence[SessionEntry], running: str, budget: int) -> list[SessionEntry]:
    """The oldest whole groups to take out so the rest is at most half the budget (nothing
    when the session is within ``budget``)."""
    total = sum(e.tokens for e in entries)
    if total <= budget:
        return []
    out: list[SessionEntry] = []
    groups: dict[str, list[SessionEntry]] = {}
    for entry in entries:
        groups.setdefault(group_of(entry.id), []).append(entry)
    for group, members in groups.items():
        if total <= budget // 2 or group == running:
            break
        out.extend(members)
        total -= sum(e.tokens for e in members)
    return out


def as_text(messages: Sequence[ModelMessage]) -> str:
    """A plain rendering of messages for the summarising call."""
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                lines.append(f"user: {content_text(part)}")
            elif isinstance(part, TextPart):
                lines.append(f"assistant: {part.content}")
            elif isinstance(part, ToolCallPart):
                lines.append(f"assistant called {part.tool_name}({part.args_as_json_str()})")
            elif isinstance(part, ToolReturnPart):
                lines.append(f"{part.tool_name} returned: {part.model_response_str()}")
    return "\n".join(lines)


def summary_request(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    return [
        ModelRequest(
            parts=[SystemPromptPart(SUMMARY_INSTRUCTIONS), UserPromptPart(as_text(messages))]
        )
    ]


def summary_entry(text: str, serial: int) -> SessionEntry:
    message = ModelRequest(parts=[UserPromptPart(SUMMARY_HEAD + text)])
    return entry_of(f"{SUMMARY_PREFIX}{serial}", message)


def response_text(response: ModelResponse) -> str:
    return "".join(p.content for p in response.parts if isinstance(p, TextPart))
