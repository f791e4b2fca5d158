"""The ``llm`` agent kind: a language-model loop with tools, one continuous session per
caller, questions to the human, and durable steps.

A turn goes to the runtime's extension first (it may take it whole), then to the delegating
rounds when the agent delegates (``delegation.rounds``), else to the tool loop (``turn``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.agents.contract import AgentResult, TurnContext
from app.agents.llm.config import LlmConfig, parse_llm_config
from app.agents.llm.delegation.rounds import DelegatingTurn
from app.agents.llm.runtime import LlmRuntime
from app.agents.llm.turn import Turn

__all__ = ["LlmAgent"]


class LlmAgent:
    def __init__(self, config: LlmConfig, runtime: LlmRuntime) -> None:
        self.config = config
        self.runtime = runtime

    @classmethod
    def from_config(cls, config: Mapping[str, Any], runtime: LlmRuntime) -> LlmAgent:
        return cls(parse_llm_config(config), runtime)

    async def run(self, ctx: TurnContext) -> AgentResult:
        extension = self.runtime.extension
        if extension is not None:
            taken = await extension.take_turn(self.config, ctx)
            if taken is not None:
                return taken
        if self.config.delegation is not None:
            return await DelegatingTurn(self.config, self.runtime, ctx).run()
        return await Turn(self.config, self.runtime, ctx).run()
