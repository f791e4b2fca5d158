"""The loop's WORKING progress: one write per saved step, message id ``<taskId>:step-<n>``.

A write runs beside the loop's next move (a tool, the next model call) instead of before it:
the step itself is already saved, and the writes stay in order, one in flight at a time. A
refused write (canceled, lease lost) raises ``TurnStopped`` at the next step.
"""

from __future__ import annotations

import asyncio

from app.agents.contract import TurnContext
from app.agents.llm import hitl
from app.agents.llm.events import LoopEvent, ModelResponded, ToolEnded

__all__ = ["ProgressWriter"]


class ProgressWriter:
    def __init__(self, ctx: TurnContext) -> None:
        self.ctx = ctx
        self.pushing: asyncio.Task[None] | None = None  # the progress write in flight

    async def on_event(self, event: LoopEvent) -> None:
        """The event bus subscriber: a model step with tool calls, or a tool's end (not the
        question's), starts a write."""
        if isinstance(event, ModelResponded) and event.tool_names:
            text = f"calling {', '.join(event.tool_names)}"
        elif isinstance(event, ToolEnded) and event.tool != hitl.ASK_USER:
            text = f"{event.tool}: {event.outcome}"
        else:
            return
        self.refused()
        before = self.pushing

        async def write() -> None:
            if before is not None:
                await before  # in order; an earlier refusal stops the later writes
            await self.ctx.progress(f"step-{event.step}", text)

        self.pushing = asyncio.create_task(write())

    def refused(self) -> None:
        """Raise ``TurnStopped`` (or what the write raised) once a progress write failed."""
        pushing = self.pushing
        if pushing is not None and pushing.done() and not pushing.cancelled():
            error = pushing.exception()
            if error is not None:
                raise error

    async def written(self) -> None:
        """Wait for the progress writes in flight (a refusal raises here)."""
        pushing, self.pushing = self.pushing, None
        if pushing is not None:
            await pushing
