"""Running one model response's tool calls: in parallel unless a tool of the batch is
sequential, each through the plugins' ``before_tool_call``/``after_tool_call`` hooks, with a
timeout and an output cap. Whatever goes wrong becomes the call's result in fixed wording; it
never ends the turn. ``record`` saves each result as it settles (completion order); the
model's view puts them back in call order (``history.for_model``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_ai.messages import ToolCallPart

from app.agents.llm.plugins import PluginSet, maybe_await
from app.agents.llm.tools import Tool, ToolContext, ToolError, ToolOutput, schema_problem
from app.agents.llm.tracing import TOOL_OUTCOME, tool_span

log = logging.getLogger("looping.agent")

JsonDict = dict[str, Any]


def unknown_tool(name: str, known: Sequence[str]) -> str:
    return f"error: there is no tool named '{name[:100]}'; the tools are: {', '.join(known)}"


BAD_JSON = "error: the arguments are not valid JSON; send one JSON object"
NOT_AN_OBJECT = "error: the arguments must be one JSON object"


def bad_arguments(problem: str) -> str:
    return f"error: the arguments do not fit the tool's schema ({problem})"


def tool_raised(exc: BaseException) -> str:
    if isinstance(exc, ToolError):
        return f"error: {exc}"
    return f"error: the tool failed ({type(exc).__name__})"


def timed_out(seconds: float) -> str:
    return f"error: the tool did not finish within {seconds:g} s"


def blocked(reason: str) -> str:
    return f"blocked: {reason}"


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` bytes of UTF-8, saying so when it was cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n[output cut: the first {limit} of {len(data)} bytes are shown]"


@dataclass(frozen=True)
class CallResult:
    call: ToolCallPart
    text: str
    outcome: str  # ok | error | blocked | unknown | bad_arguments | timeout
    artifacts: tuple[JsonDict, ...] = ()


Record = Callable[[CallResult], Awaitable[None]]
ContextFor = Callable[[ToolCallPart, Tool], ToolContext]
Started = Callable[[ToolCallPart], Awaitable[None]]


@dataclass(frozen=True)
class Batch:
    tools: Mapping[str, Tool]  # the tools this tenant's agent may call
    plugins: PluginSet
    timeout_seconds: float
    max_output_bytes: int
    context_for: ContextFor
    started: Started
    record: Record

    async def run(self, calls: Sequence[ToolCallPart]) -> list[CallResult]:
        sequential = any(
            (tool := self.tools.get(c.tool_name)) is not None and tool.sequential for c in calls
        )
        if sequential:
            return [await self._one(call) for call in calls]
        return list(await asyncio.gather(*(self._one(call) for call in calls)))

    async def _one(self, call: ToolCallPart) -> CallResult:
        await self.started(call)
        with tool_span(call.tool_name, call.tool_call_id) as span:
            result = await self._settle(call)
            span.set_attribute(TOOL_OUTCOME, result.outcome)
        result = CallResult(
            call, cut(result.text, self.max_output_bytes), result.outcome, result.artifacts
        )
        await self.record(result)
        return result

    async def _settle(self, call: ToolCallPart) -> CallResult:
        tool = self.tools.get(call.tool_name)
        if tool is None:
            return CallResult(call, unknown_tool(call.tool_name, sorted(self.tools)), "unknown")
        args = arguments(call)
        if isinstance(args, str):
            return CallResult(call, args, "bad_arguments")
        try:
            values = tool.validate(args)
        except ValidationError as exc:
            return CallResult(call, bad_arguments(schema_problem(exc)), "bad_arguments")
        ctx = self.context_for(call, tool)
        for plugin, hook in self.plugins.hooks("before_tool_call"):
            reason = await _hook(plugin.key, hook, ctx, tool.name, dict(args))
            if isinstance(reason, str) and reason:
                return CallResult(call, blocked(reason), "blocked")
        try:
            async with asyncio.timeout(self.timeout_seconds):
                output = await tool.call(ctx, values)
        except TimeoutError:
            return CallResult(call, timed_out(self.timeout_seconds), "timeout")
        except Exception as exc:  # the tool's own failure goes to the model
            log.info("agent.tool_failed", extra={"tool": tool.name, "outcome": type(exc).__name__})
            return CallResult(call, tool_raised(exc), "error")
        text, artifacts = _text_of(output)
        for plugin, hook in self.plugins.hooks("after_tool_call"):
            rewritten = await _hook(plugin.key, hook, ctx, tool.name, dict(args), text)
            if isinstance(rewritten, str):
                text = rewritten
        return CallResult(call, text, "ok", artifacts)


def arguments(call: ToolCallPart) -> JsonDict | str:
    """The call's arguments as an object, or the fixed result saying why not."""
    raw = call.args
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return BAD_JSON
    if not isinstance(raw, dict):
        return NOT_AN_OBJECT
    return raw


def _text_of(output: Any) -> tuple[str, tuple[JsonDict, ...]]:
    if isinstance(output, ToolOutput):
        return output.text, tuple(output.artifacts)
    if isinstance(output, str):
        return output, ()
    try:
        return json.dumps(output, ensure_ascii=False, default=str), ()
    except (TypeError, ValueError):
        return str(output), ()


async def _hook(key: str, hook: Any, *args: Any) -> Any:
    """A plugin hook's answer; one that raises is logged and counts as no answer."""
    try:
        return await maybe_await(hook(*args))
    except Exception as exc:
        log.warning(
            "agent.plugin_hook_failed", extra={"plugin": key, "outcome": type(exc).__name__}
        )
        return None
