"""What every ``llm`` turn of a process shares, built once where the worker is built: the
environment mapping (model keys are read from it at turn time), the plugins, the session
store, the subtasks store (delegation), one HTTP client for model servers, the operator's
failure text and the metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx2
from prometheus_client import CollectorRegistry

from app.agents.llm.delegation.memory import MemorySubtasks
from app.agents.llm.events import Subscriber
from app.agents.llm.extension import TurnExtension
from app.agents.llm.metrics import LlmMetrics
from app.agents.llm.model_calls import ModelClients
from app.agents.llm.plugins import PluginSet, build_plugins, installed_plugin_objects
from app.agents.llm.session import MemorySessions, SessionStore
from app.db.subtasks import SubtaskStore


@dataclass(frozen=True)
class LlmRuntime:
    environ: Mapping[str, str]
    failure_text: str
    plugins: PluginSet = field(default_factory=PluginSet)
    sessions: SessionStore = field(default_factory=MemorySessions)
    http_client: httpx2.AsyncClient | None = None
    metrics: LlmMetrics | None = None
    subscribers: tuple[Subscriber, ...] = ()
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    model_clients: ModelClients = field(default_factory=ModelClients)
    subtasks: SubtaskStore = field(default_factory=MemorySubtasks)  # delegating agents' rounds
    extension: TurnExtension | None = None  # e.g. negotiation (app.agents.llm.extension)

    def with_subscribers(self, *subscribers: Subscriber) -> LlmRuntime:
        return replace(self, subscribers=(*self.subscribers, *subscribers))

    async def aclose(self) -> None:
        if self.http_client is not None:
            await self.http_client.aclose()

    def factory(self) -> Callable[[Mapping[str, Any]], Any]:
        from app.agents.llm.agent import LlmAgent  # the agent imports this module

        def build(config: Mapping[str, Any]) -> LlmAgent:
            return LlmAgent.from_config(config, self)

        return build


def build_llm_runtime(
    environ: Mapping[str, str],
    *,
    failure_text: str,
    sessions: SessionStore,
    registry: CollectorRegistry | None = None,
    subtasks: SubtaskStore | None = None,
) -> LlmRuntime:
    """The process's runtime with the installed plugins checked (``PluginError``: one line)."""
    from app.agents.llm.hitl import ASK_USER_TOOL

    plugins = build_plugins(installed_plugin_objects(), environ, builtins=[ASK_USER_TOOL])
    return LlmRuntime(
        environ=dict(environ),
        failure_text=failure_text,
        plugins=plugins,
        sessions=sessions,
        http_client=httpx2.AsyncClient(trust_env=False, follow_redirects=False),
        metrics=LlmMetrics(registry),
        subtasks=subtasks if subtasks is not None else MemorySubtasks(),
    )
