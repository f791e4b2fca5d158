"""Agent kinds → factories. A tenant's definition names a kind (``tenant.agent_kind``) and its
config (``tenant.agent_config``); the worker builds the agent for each turn from both."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.agents.contract import Agent
from app.agents.echo import EchoAgent
from app.agents.entry_point import AgentEntryError, PythonEntryPoints
from app.agents.kinds import AGENT_KINDS
from app.agents.llm.config import LlmConfigError
from app.agents.llm.runtime import LlmRuntime
from app.agents.scripted import ScriptedAgent
from app.settings import Settings

AgentFactory = Callable[[Mapping[str, Any]], Agent]


class AgentUnavailable(LookupError):
    """No agent can run the turn: the tenant's definition is wrong, not the turn."""


class UnknownAgentKind(AgentUnavailable):
    pass


class AgentBuildFailed(AgentUnavailable):
    """The kind's factory refused the tenant's config (``str`` says why, for the log)."""


class AgentRegistry:
    def __init__(self, factories: Mapping[str, AgentFactory] | None = None) -> None:
        self._factories: dict[str, AgentFactory] = {}
        for kind, factory in (factories or {}).items():
            self.register(kind, factory)

    def register(self, kind: str, factory: AgentFactory) -> None:
        if kind in self._factories:
            raise ValueError(f"agent kind '{kind}' is already registered")
        self._factories[kind] = factory

    def kinds(self) -> tuple[str, ...]:
        return tuple(self._factories)

    def build(self, kind: str, config: Mapping[str, Any]) -> Agent:
        factory = self._factories.get(kind)
        if factory is None:
            raise UnknownAgentKind(kind)
        try:
            return factory(config)
        except (AgentEntryError, LlmConfigError) as exc:
            raise AgentBuildFailed(str(exc)) from exc


def default_registry(llm: LlmRuntime | None = None) -> AgentRegistry:
    """The built-in kinds (kept in step with ``app.agents.kinds.AGENT_KINDS``). ``llm``: what
    the process's ``llm`` turns share (without it: no environment, no plugins, sessions in
    memory)."""
    runtime = llm or LlmRuntime(
        environ={}, failure_text=Settings.model_fields["failure_text"].default
    )
    registry = AgentRegistry(
        {
            "echo": EchoAgent.from_config,
            "scripted": ScriptedAgent.from_config,
            "python": PythonEntryPoints().build,
            "llm": runtime.factory(),
        }
    )
    assert set(registry.kinds()) == set(AGENT_KINDS)
    return registry
