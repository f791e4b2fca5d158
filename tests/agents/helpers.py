"""Build a ``TurnContext`` by hand: agents are plain objects, testable without a database."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from app.agents.contract import TurnContext


def user_message(text: str, message_id: str = "m-1") -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}


def agent_message(text: str, message_id: str = "t-1:final") -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"text": text}]}


class Recorder:
    def __init__(self, *, refuse: bool = False) -> None:
        self.steps: list[tuple[str, str]] = []
        self.refuse = refuse

    async def __call__(self, step_key: str, text: str) -> None:
        from app.agents.contract import TurnStopped

        if self.refuse:
            raise TurnStopped
        self.steps.append((step_key, text))


def context(
    message: dict[str, Any],
    *,
    history: list[dict[str, Any]] | None = None,
    kind: str = "start",
    attempt: int = 1,
    progress: Recorder | None = None,
    resume_answer: str | None = None,
) -> TurnContext:
    return TurnContext(
        tenant="demo",
        identity_key="user-1",
        identity={"key": "user-1"},
        task_id="t-1",
        context_id="c-1",
        kind=kind,
        message=message,
        history=history if history is not None else [message],
        resume_answer=resume_answer,
        attempt=attempt,
        cancelled=asyncio.Event(),
        progress_fn=progress or Recorder(),
        clock=time.time,
    )
