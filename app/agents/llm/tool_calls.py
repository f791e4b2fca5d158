"""Running a model step's tool calls and saving their results.

The agent's tools are ``ask_user`` (always), the configured ones the process has installed,
then the extension's. A step's calls other than ``ask_user`` run as one ``Batch``; each result
is saved to the session as it arrives (``task:<taskId>:step:<n>``) and announced as
``ToolEnded``. One question at a time: a step's first ``ask_user`` becomes the turn's question
(task ``INPUT_REQUIRED``), any further one gets an error result.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_ai.messages import ModelRequest, ToolCallPart, ToolReturnPart
from pydantic_ai.tools import ToolDefinition

from app.agents.contract import AgentQuestion, TurnContext
from app.agents.llm import hitl
from app.agents.llm.attachments import UserTurn
from app.agents.llm.batch import Batch, CallResult, arguments, bad_arguments
from app.agents.llm.config import LlmConfig
from app.agents.llm.events import EventBus, ToolEnded, ToolStarted
from app.agents.llm.runtime import LlmRuntime
from app.agents.llm.tools import Tool, ToolContext, schema_problem
from app.agents.llm.turn_session import TurnSession

__all__ = ["ONE_QUESTION", "ToolCalls", "options_of"]

log = logging.getLogger("looping.agent")

ONE_QUESTION = "error: one question at a time; ask again once this one is answered"


class ToolCalls:
    def __init__(
        self,
        config: LlmConfig,
        runtime: LlmRuntime,
        ctx: TurnContext,
        session: TurnSession,
        events: EventBus,
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.ctx = ctx
        self.session = session
        self.events = events
        self.tools: dict[str, Tool] = {hitl.ASK_USER: hitl.ASK_USER_TOOL}
        for name in config.tools:
            tool = runtime.plugins.tools.get(name)
            if tool is None:
                log.warning("agent.tool_not_installed", extra={"tool": name})
            else:
                self.tools[name] = tool
        if runtime.extension is not None:
            for tool in runtime.extension.tools(config):
                self.tools.setdefault(tool.name, tool)

    async def run(self, calls: Sequence[ToolCallPart], step: int) -> AgentQuestion | None:
        """Run a step's calls; the question to the human, when the step asks one."""
        asks = [c for c in calls if c.tool_name == hitl.ASK_USER]
        others = [c for c in calls if c.tool_name != hitl.ASK_USER]
        for extra in asks[1:]:
            await self.save_result(CallResult(extra, ONE_QUESTION, "error"))
        if others:
            batch = Batch(
                tools={k: v for k, v in self.tools.items() if k != hitl.ASK_USER},
                plugins=self.runtime.plugins,
                timeout_seconds=self.config.tool_timeout_seconds,
                max_output_bytes=self.config.max_tool_output_bytes,
                context_for=self._context,
                started=self._started,
                record=self.save_result,
            )
            await batch.run(others)
        if not asks:
            return None
        return await self._question(asks[0], step)

    async def _question(self, ask: ToolCallPart, step: int) -> AgentQuestion | None:
        try:
            args = hitl.ASK_USER_TOOL.validate(_json_args(ask))
        except (ValidationError, ValueError) as exc:
            text = (
                bad_arguments(schema_problem(exc)) if isinstance(exc, ValidationError) else str(exc)
            )
            await self.save_result(CallResult(ask, text, "bad_arguments"))
            return None
        question, options = str(args["question"]), args.get("options")
        rid = hitl.request_id(self.ctx.task_id, step)
        return AgentQuestion(text=question, parts=(hitl.question_part(rid, question, options),))

    def _context(self, call: ToolCallPart, tool: Tool) -> ToolContext:
        key = f"{self.ctx.task_id}:{call.tool_call_id}"
        return self.runtime.plugins.tool_context(self.ctx, call.tool_call_id, tool, key)

    async def _started(self, call: ToolCallPart) -> None:
        await self.events.emit(ToolStarted(self.ctx.task_id, call.tool_call_id, call.tool_name))

    async def save_result(
        self,
        result: CallResult,
        extra: Mapping[str, Any] | None = None,
        user: UserTurn | None = None,
    ) -> None:
        """Save a call's result; ``user``: what came with it for the model (an answer's
        attachments), saved in the same entry so both join the session or neither does."""
        step = self.session.take_step()
        meta: dict[str, Any] = {"artifacts": list(result.artifacts), **(extra or {})}
        part = ToolReturnPart(
            result.call.tool_name, result.text, result.call.tool_call_id, metadata=meta
        )
        kept = ModelRequest(parts=[part] if user is None else [part, user.kept])
        live = None
        if user is not None and user.live is not user.kept:
            live = ModelRequest(parts=[part, user.live])
        await self.session.save(f"step:{step}", kept, behind=True, live=live)
        await self.events.emit(
            ToolEnded(
                self.ctx.task_id,
                result.call.tool_call_id,
                result.call.tool_name,
                step,
                result.outcome,
                result.text,
            )
        )

    def definitions(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.schema)
            for t in self.tools.values()
        ]


def _json_args(call: ToolCallPart) -> dict[str, Any]:
    args = arguments(call)
    if isinstance(args, str):
        raise ValueError(args)
    return args


def options_of(call: ToolCallPart) -> list[str] | None:
    """An ``ask_user`` call's options, when it gave a list."""
    try:
        options = _json_args(call).get("options")
    except ValueError:
        return None
    return [str(o) for o in options] if isinstance(options, list) else None
