"""``Extensions``: several turn extensions as one (negotiation and the A2A tools): tools in
order with the first of a name kept, the first turn taken, the instructions joined."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.agents.contract import AgentReply, AgentResult, TurnContext
from app.agents.llm.config import LlmConfig, parse_llm_config
from app.agents.llm.extension import Extensions
from app.agents.llm.tools import Tool, tool_from_function

CONFIG = parse_llm_config({"model": {"base_url": "http://x", "name": "m"}, "system_prompt": "x"})


def _tool(name: str, doc: str) -> Tool:
    async def fn() -> str:
        return doc

    fn.__name__ = name
    fn.__doc__ = doc
    return tool_from_function(fn)


class _Part:
    def __init__(self, tools: list[Tool], takes: str | None, says: str | None) -> None:
        self._tools, self._takes, self._says = tools, takes, says

    def tools(self, config: LlmConfig) -> Sequence[Tool]:
        return self._tools

    async def take_turn(self, config: LlmConfig, ctx: TurnContext) -> AgentResult | None:
        return AgentReply(text=self._takes) if self._takes else None

    async def instructions(self, config: LlmConfig, ctx: TurnContext) -> str | None:
        return self._says


async def test_parts_compose_in_order() -> None:
    ctx: Any = None
    first = _Part([_tool("a", "first a")], None, "one")
    second = _Part([_tool("a", "second a"), _tool("b", "b")], "taken", None)
    third = _Part([], "late", "three")
    both = Extensions(first, second, third)
    assert [(t.name, t.description) for t in both.tools(CONFIG)] == [("a", "first a"), ("b", "b")]
    taken = await both.take_turn(CONFIG, ctx)
    assert isinstance(taken, AgentReply) and taken.text == "taken"
    assert await both.instructions(CONFIG, ctx) == "one\n\nthree"
    assert await Extensions().instructions(CONFIG, ctx) is None
    assert await Extensions(first).take_turn(CONFIG, ctx) is None
