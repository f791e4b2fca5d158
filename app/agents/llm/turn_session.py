"""One turn's part of the caller's session: the entries under ``task:<taskId>:``, the next
step number, and the saves in flight.

Every model response and tool result is saved as it arrives (``task:<taskId>:step:<n>``), so a
turn taken over after a crash resumes from the last saved step. Some saves run beside the
loop's next move (``behind``); every other save first waits for those, so the stored order is
the loop's.

A user message with images is saved as the session keeps it (each image described) and shown
to the model in its live form (the images themselves) for the rest of this run (``live``,
kept across the reloads a compaction makes).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)

from app.agents.llm import history
from app.agents.llm.session import SessionEntry, Transcript, entry_of

__all__ = ["TurnSession", "step_number"]


class TurnSession:
    def __init__(self, transcript: Transcript, task_id: str) -> None:
        self.transcript = transcript
        self.prefix = f"task:{task_id}:"
        self.entries: list[SessionEntry] = []
        self.loaded: list[history.Loaded] = []
        self.next_step = 1
        self.saving: list[asyncio.Task[bool]] = []  # tool results being written
        self.live: dict[str, ModelMessage] = {}  # entry id -> what the model gets in this run

    async def reload(self) -> None:
        self.entries = await self.transcript.entries()
        self.loaded = [
            history.Loaded(item.entry_id, self.live.get(item.entry_id, item.message))
            for item in history.load(self.entries)
        ]
        steps = [step_number(e.id, self.prefix) for e in self.entries]
        self.next_step = max([s for s in steps if s is not None], default=0) + 1

    def own(self) -> list[history.Loaded]:
        return [item for item in self.loaded if item.entry_id.startswith(self.prefix)]

    def entry(self, suffix: str) -> SessionEntry | None:
        return next((e for e in self.entries if e.id == self.prefix + suffix), None)

    def take_step(self) -> int:
        step, self.next_step = self.next_step, self.next_step + 1
        return step

    async def save(
        self,
        suffix: str,
        message: ModelRequest | ModelResponse,
        *,
        behind: bool = False,
        live: ModelRequest | None = None,
    ) -> None:
        """Append to the session. ``behind``: a tool result or the turn's message, whose write
        may run beside the next model call (lost with a crash, the tool runs again or the
        retried turn takes its message again); every other save first waits for those, so
        the stored order is the loop's. ``live``: what the model gets in place of
        ``message`` during this run (``show``)."""
        entry = entry_of(self.prefix + suffix, message)
        self.entries.append(entry)
        self.loaded.append(history.Loaded(entry.id, message))
        if live is not None:
            self.show(suffix, live)
        if behind:
            self.saving.append(asyncio.create_task(self.transcript.append(entry)))
            return
        await self.written()
        await self.transcript.append(entry)

    def show(self, suffix: str, live: ModelRequest) -> None:
        """The model gets ``live`` in place of the saved entry ``suffix`` during this run."""
        entry_id = self.prefix + suffix
        self.live[entry_id] = live
        self.loaded = [
            history.Loaded(entry_id, live) if item.entry_id == entry_id else item
            for item in self.loaded
        ]

    async def written(self) -> None:
        """Wait for the saves in flight."""
        saving, self.saving = self.saving, []
        if saving:
            await asyncio.gather(*saving)

    def pending_calls(self) -> tuple[list[ToolCallPart], int]:
        """The calls of this task's last model response that have no saved result yet, and
        that response's step number."""
        own = self.own()
        returns = history.tool_returns(own)
        for item in reversed(own):
            if isinstance(item.message, ModelResponse):
                calls = history.calls_of(item.message)
                pending = [c for c in calls if c.tool_call_id not in returns]
                return pending, step_number(item.entry_id, self.prefix) or 0
        return [], 0

    def model_steps(self) -> int:
        return sum(1 for item in self.own() if isinstance(item.message, ModelResponse))

    def applied(self, message_id: str) -> bool:
        """Whether a user message is in the session already: as a user entry, or as the
        answer to a question (a tool result naming it)."""
        return (
            self.entry(f"user:{message_id}") is not None or self.answered_in(message_id) is not None
        )

    def answered_in(self, message_id: str) -> str | None:
        """The suffix of the entry holding the tool result that ``message_id`` answered."""
        for item in self.own():
            if isinstance(item.message, ModelRequest):
                for part in item.message.parts:
                    meta = part.metadata if isinstance(part, ToolReturnPart) else None
                    if isinstance(meta, dict) and meta.get("answer") == message_id:
                        return item.entry_id[len(self.prefix) :]
        return None

    def artifacts(self) -> tuple[dict[str, Any], ...]:
        out: list[dict[str, Any]] = []
        for item in self.own():
            if isinstance(item.message, ModelRequest):
                for part in item.message.parts:
                    if isinstance(part, ToolReturnPart) and isinstance(part.metadata, dict):
                        out.extend(part.metadata.get("artifacts") or ())
        return tuple(out)


def step_number(entry_id: str, prefix: str) -> int | None:
    head = prefix + "step:"
    if entry_id.startswith(head) and entry_id[len(head) :].isdigit():
        return int(entry_id[len(head) :])
    return None
