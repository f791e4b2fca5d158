"""The ``echo`` agent: replies with the text of the message (demo and smoke tests); a file
part is named by a bounded description, never echoed (issue 55)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.agents.contract import AgentReply, AgentResult, TurnContext, text_of
from app.attachments.images import describe_part


class EchoAgent:
    @classmethod
    def from_config(cls, _config: Mapping[str, Any]) -> EchoAgent:
        return cls()

    async def run(self, ctx: TurnContext) -> AgentResult:
        files = [d for p in ctx.message.get("parts") or () if (d := describe_part(p))]
        if not files:
            return AgentReply(text=text_of(ctx.message))
        return AgentReply(text="\n".join([t for t in (text_of(ctx.message),) if t] + files))
