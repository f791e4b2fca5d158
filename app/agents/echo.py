"""The ``echo`` agent: replies with the text of the message (demo and smoke tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.agents.contract import AgentReply, AgentResult, TurnContext, text_of


class EchoAgent:
    @classmethod
    def from_config(cls, _config: Mapping[str, Any]) -> EchoAgent:
        return cls()

    async def run(self, ctx: TurnContext) -> AgentResult:
        return AgentReply(text=text_of(ctx.message))
