"""What a layer above the ``llm`` agent may add to its turns (``LlmRuntime.extension``; several
compose with ``Extensions``): tools for an agent whose config asks for them, and turns it
answers itself instead of the loop. Negotiation (``app.negotiation``) and the A2A tools
(``app.peers``) are two: they sit above the agents, which know them only through this role."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.agents.contract import AgentResult, TurnContext
from app.agents.llm.config import LlmConfig
from app.agents.llm.tools import Tool


class TurnExtension(Protocol):
    def tools(self, config: LlmConfig) -> Sequence[Tool]:
        """Extra tools for a turn of an agent with ``config``."""
        ...

    async def take_turn(self, config: LlmConfig, ctx: TurnContext) -> AgentResult | None:
        """The turn's result when this extension answers it, else ``None`` (the loop runs)."""
        ...

    async def instructions(self, config: LlmConfig, ctx: TurnContext) -> str | None:
        """Text for the system prompt of this turn (read once per turn), or ``None``."""
        ...


class Extensions:
    """Several extensions as one (negotiation and the A2A tools, say): the tools of each in
    order (the first of a name wins), the turn of the first that takes it, and their
    instructions joined."""

    def __init__(self, *parts: TurnExtension) -> None:
        self.parts = parts

    def tools(self, config: LlmConfig) -> Sequence[Tool]:
        found: dict[str, Tool] = {}
        for part in self.parts:
            for tool in part.tools(config):
                found.setdefault(tool.name, tool)
        return tuple(found.values())

    async def take_turn(self, config: LlmConfig, ctx: TurnContext) -> AgentResult | None:
        for part in self.parts:
            taken = await part.take_turn(config, ctx)
            if taken is not None:
                return taken
        return None

    async def instructions(self, config: LlmConfig, ctx: TurnContext) -> str | None:
        texts = [await part.instructions(config, ctx) for part in self.parts]
        joined = "\n\n".join(t for t in texts if t)
        return joined or None
