"""A round's answer, got through the ladder: the model; up to ``repair_attempts`` repairs on
the same model, each telling it what was wrong with its last answer; then the fallback model
once with the round's own messages; then nothing (the task fails with the policy's text).

A model that does not answer at all (``ModelUnavailable`` after its own retries) goes straight
to the next rung that is another model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from app.agents.llm.config import LlmConfig
from app.agents.llm.delegation import control
from app.agents.llm.model_calls import ModelCaller, ModelUnavailable

log = logging.getLogger("looping.agent")


class Ladder:
    def __init__(self, config: LlmConfig, make: Callable[[LlmConfig], ModelCaller]) -> None:
        assert config.delegation is not None
        self.delegation = config.delegation
        self.primary = make(config.model_copy(update={"fallback_model": None}))
        self.fallback = (
            None
            if config.fallback_model is None
            else make(
                config.model_copy(update={"model": config.fallback_model, "fallback_model": None})
            )
        )

    async def decide(
        self, messages: Sequence[ModelMessage], *, final: bool
    ) -> control.Decision | None:
        tools = control.definitions(self.delegation, final=final)
        asked = list(messages)
        try:
            for attempt in range(1 + self.delegation.repair_attempts):
                response = await self.primary.request(asked, tools)
                decision = control.read(response, self.delegation, final=final)
                if not isinstance(decision, str):
                    return decision
                log.info("delegation.answer_refused", extra={"attempt": attempt + 1})
                asked.extend(repair(response, decision))
        except ModelUnavailable:
            log.warning("delegation.model_unavailable", extra={"model": "primary"})
        if self.fallback is None:
            return None
        try:
            response = await self.fallback.request(list(messages), tools)
        except ModelUnavailable:
            return None
        decision = control.read(response, self.delegation, final=final)
        return None if isinstance(decision, str) else decision


def repair(response: ModelResponse, problem: str) -> list[ModelMessage]:
    """The refused answer and what was wrong with it: as every call's result when it called
    tools (the chat API wants a result per call), else as a user message."""
    calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
    out: list[ModelMessage] = [response] if response.parts else []
    if calls and response.parts:
        parts: list[ModelRequestPart] = [
            ToolReturnPart(c.tool_name, problem, c.tool_call_id) for c in calls
        ]
        out.append(ModelRequest(parts=parts))
    else:
        out.append(ModelRequest(parts=[UserPromptPart(problem)]))
    return out
