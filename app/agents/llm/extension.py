"""What a layer above the ``llm`` agent may add to its turns (``LlmRuntime.extension``):
tools for an agent whose config asks for them, and turns it answers itself instead of the
loop. Negotiation (``app.negotiation``) is one: it sits above the agents, which know it only
through this role."""

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
