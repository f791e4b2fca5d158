"""A tenant author's agent, as it would live in the author's own package: the ``python``
agent kind's tests import it as ``tests.agents.sample_agent:build``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.agents.contract import AgentReply, AgentResult, TurnContext, text_of

BUILT: list[Mapping[str, Any]] = []  # the configs the factory was called with


class Greeter:
    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    async def run(self, ctx: TurnContext) -> AgentResult:
        await ctx.progress("greeting", "thinking")
        return AgentReply(text=f"{self.greeting}, {text_of(ctx.message)}")


def build(config: Mapping[str, Any]) -> Greeter:
    BUILT.append(dict(config))
    return Greeter(str(config.get("greeting", "hello")))


def broken(config: Mapping[str, Any]) -> Greeter:
    raise RuntimeError("secret-ish detail from the author's code")


def not_an_agent(config: Mapping[str, Any]) -> object:
    return object()


NOT_CALLABLE = 42
