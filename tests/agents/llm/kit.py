"""Running an ``llm`` agent's turn against the fake model server, without a database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from app.agents.contract import AgentResult, TurnContext
from app.agents.llm.agent import LlmAgent
from app.agents.llm.plugins import PluginSet, build_plugins
from app.agents.llm.runtime import LlmRuntime
from app.agents.llm.session import MemorySessions
from app.testing.fake_model import FakeModelServer
from tests.agents.helpers import Recorder, user_message

FAILURE = "operator failure text"


async def no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


class Sleeps:
    def __init__(self) -> None:
        self.slept: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        await asyncio.sleep(0)


def llm_config(fake: FakeModelServer, **extra: Any) -> dict[str, Any]:
    return {
        "model": {"base_url": fake.base_url, "name": "main-model"},
        "system_prompt": "You are a test agent.",
        **extra,
    }


def runtime(
    *,
    plugins: PluginSet | None = None,
    sessions: MemorySessions | None = None,
    environ: dict[str, str] | None = None,
    sleep: Any = no_sleep,
    **kw: Any,
) -> LlmRuntime:
    return LlmRuntime(
        environ=environ or {},
        failure_text=FAILURE,
        plugins=plugins or build_plugins([], {}),
        sessions=sessions or MemorySessions(),
        sleep=sleep,
        **kw,
    )


def turn(
    text: str,
    *,
    task_id: str = "t-1",
    identity: str = "user-1",
    message_id: str = "m-1",
    kind: str = "start",
    message: dict[str, Any] | None = None,
    progress: Recorder | None = None,
) -> TurnContext:
    msg = message or user_message(text, message_id)
    return TurnContext(
        tenant="demo",
        identity_key=identity,
        identity={"key": identity},
        task_id=task_id,
        context_id="c-1",
        kind=kind,
        message=msg,
        history=[msg],
        resume_answer=None,
        attempt=1,
        cancelled=asyncio.Event(),
        progress_fn=progress or Recorder(),
        clock=time.time,
    )


async def run_turn(
    fake: FakeModelServer, rt: LlmRuntime, ctx: TurnContext, **config: Any
) -> AgentResult:
    agent = LlmAgent.from_config(llm_config(fake, **config), rt)
    return await agent.run(ctx)


def with_kind(ctx: TurnContext, kind: str) -> TurnContext:
    return replace(ctx, kind=kind)


@pytest.fixture
def fake() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server
