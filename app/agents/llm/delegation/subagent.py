"""One subagent: a recipe run in isolation for one subtask.

Its model sees the recipe's prompt (and the date line) as the system message, the subtask's
prompt with its params as the user message, and its own transcript; it may call only the
recipe's tools (never the control tools) and finishes by answering in plain text. Its steps
are saved on the subtask's row as they arrive, so a subagent taken over after a crash resumes
from its last saved step. It uses the host's model pair; its budget is the recipe's limits
over the delegation's baseline (then one last call without tools).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.tools import ToolDefinition

from app.agents.llm import compaction, history
from app.agents.llm.batch import Batch, CallResult
from app.agents.llm.delegation.config import Recipe, SubagentLimits
from app.agents.llm.model_calls import ModelCaller, ModelUnavailable
from app.agents.llm.plugins import PluginSet
from app.agents.llm.tools import Tool, ToolContext

ELIDED = "[an earlier tool result, left out of this view]"
JsonDict = dict[str, Any]
SaveSteps = Callable[[Sequence[JsonDict]], Any]


@dataclass(frozen=True)
class Outcome:
    completed: bool
    text: str


def user_text(prompt: str, params: Mapping[str, str]) -> str:
    if not params:
        return prompt
    doc = json.dumps({"params": dict(sorted(params.items()))}, ensure_ascii=False)
    return f"{prompt}\n\n{doc}"


def dump(messages: Sequence[ModelMessage]) -> list[JsonDict]:
    docs: list[JsonDict] = json.loads(ModelMessagesTypeAdapter.dump_json(list(messages)))
    return docs


def load(docs: Sequence[JsonDict]) -> list[ModelMessage]:
    return list(ModelMessagesTypeAdapter.validate_python(list(docs)))


@dataclass
class Subagent:
    recipe: Recipe
    limits: SubagentLimits
    tools: Mapping[str, Tool]
    plugins: PluginSet
    caller: ModelCaller
    tool_timeout_seconds: float
    max_tool_output_bytes: int
    context_for: Callable[[ToolCallPart, Tool], ToolContext]
    clock: Callable[[], float]

    async def run(
        self, prompt: str, params: Mapping[str, str], saved: Sequence[JsonDict], save: SaveSteps
    ) -> Outcome:
        steps = load(saved)
        try:
            async with asyncio.timeout(self.limits.max_wall_seconds):
                return await self._loop(user_text(prompt, params), steps, save)
        except TimeoutError:
            return Outcome(
                False,
                f"error: the subagent did not finish within {self.limits.max_wall_seconds:g} s",
            )
        except ModelUnavailable:
            return Outcome(False, "error: the model did not answer")

    async def _loop(self, user: str, steps: list[ModelMessage], save: SaveSteps) -> Outcome:
        while True:
            pending = _pending(steps)
            if pending:
                steps.append(await self._run_calls(pending))
                await save(dump(steps))
                continue
            used = sum(1 for m in steps if isinstance(m, ModelResponse))
            offer = used < self.limits.max_steps and bool(self.tools)
            response = await self.caller.request(
                self._view(user, steps), self._definitions() if offer else None
            )
            if not history.calls_of(response):
                text = compaction.response_text(response)
                if text.strip():
                    return Outcome(True, text)
                return Outcome(False, "error: the subagent's answer was empty")
            steps.append(response)
            await save(dump(steps))

    async def _run_calls(self, calls: Sequence[ToolCallPart]) -> ModelRequest:
        results: dict[str, CallResult] = {}

        async def record(result: CallResult) -> None:
            results[result.call.tool_call_id] = result

        async def started(_call: ToolCallPart) -> None:
            return None

        batch = Batch(
            tools=self.tools,
            plugins=self.plugins,
            timeout_seconds=self.tool_timeout_seconds,
            max_output_bytes=self.max_tool_output_bytes,
            context_for=self.context_for,
            started=started,
            record=record,
        )
        await batch.run(calls)
        parts: list[ModelRequestPart] = [
            ToolReturnPart(c.tool_name, results[c.tool_call_id].text, c.tool_call_id) for c in calls
        ]
        return ModelRequest(parts=parts)

    def _view(self, user: str, steps: Sequence[ModelMessage]) -> list[ModelMessage]:
        """System and user message, then the steps with only the last ``history_window``
        tool results shown in full."""
        today = time.strftime("%Y-%m-%d", time.gmtime(self.clock()))
        system = f"{self.recipe.system_prompt}\n\nCurrent date (UTC): {today}"
        out: list[ModelMessage] = [
            ModelRequest(parts=[SystemPromptPart(system), UserPromptPart(user)])
        ]
        returns = [
            p.tool_call_id
            for m in steps
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        shown = set(returns[-self.recipe.history_window :])
        for message in steps:
            if isinstance(message, ModelRequest):
                parts: list[ModelRequestPart] = [
                    p
                    if not isinstance(p, ToolReturnPart) or p.tool_call_id in shown
                    else ToolReturnPart(p.tool_name, ELIDED, p.tool_call_id)
                    for p in message.parts
                ]
                out.append(ModelRequest(parts=parts))
            else:
                out.append(message)
        return out

    def _definitions(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.schema)
            for t in self.tools.values()
        ]


def _pending(steps: Sequence[ModelMessage]) -> list[ToolCallPart]:
    """The last response's calls when no results follow it."""
    if not steps or not isinstance(steps[-1], ModelResponse):
        return []
    return history.calls_of(steps[-1])
