"""Plugins for ``llm`` agents: installed packages that declare an entry point in the group
``looping_edge.plugins`` naming an object with:

- ``key`` (str, unique among installed plugins),
- ``tools``: async functions (``app.agents.llm.tools``: name, docstring and annotations make
  the tool; a first parameter ``ctx`` receives the ``ToolContext``),
- optional ``capability`` (text added to the system prompt), ``secrets`` (environment variable
  names the plugin needs; handed to its tools as ``ctx.secrets``), ``sequential`` (tool names
  that must not run in parallel), ``contract_version`` (absent: the current one),
  ``should_handle_turn(turn)`` (a gate, AND-ed with the others; a gate that raises counts as
  yes), ``on_messages_displaced(turn, messages)`` (compacted messages, best-effort),
  ``before_tool_call(ctx, tool, args)`` (return a reason to block the call) and
  ``after_tool_call(ctx, tool, args, result)`` (return text to replace the result),
  ``irreversible`` (tool names that run only with ``negotiation_id`` naming a negotiation
  agreed by reference, ``app.negotiation.irreversible``) and ``on_settled(negotiation,
  settlement)`` (a negotiation settled, ``docs/negotiation.md``).

The plugin set is checked when the process starts (``PluginError``: one line; the CLI exits
78): two plugins with one key, two tools with one name (built-ins included), a missing secret,
a contract version this edge does not speak.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from app.agents.contract import TurnContext
from app.agents.llm.tools import Tool, ToolContext, tool_from_function

log = logging.getLogger("looping.agent")

ENTRY_POINT_GROUP = "looping_edge.plugins"
CONTRACT_VERSION = 1
SUPPORTED_CONTRACT_VERSIONS = frozenset({CONTRACT_VERSION})


class PluginError(ValueError):
    """The installed plugins cannot be used; ``str`` is one line for the operator."""


@dataclass(frozen=True)
class Plugin:
    key: str
    obj: Any
    tools: tuple[Tool, ...]
    capability: str | None
    secrets: Mapping[str, str]

    def hook(self, name: str) -> Any:
        fn = getattr(self.obj, name, None)
        return fn if callable(fn) else None


@dataclass(frozen=True)
class PluginSet:
    plugins: tuple[Plugin, ...] = ()
    tools: Mapping[str, Tool] = field(default_factory=dict)

    def hooks(self, name: str) -> list[tuple[Plugin, Any]]:
        return [(p, h) for p in self.plugins if (h := p.hook(name)) is not None]

    def capabilities(self) -> list[str]:
        return [p.capability for p in self.plugins if p.capability]

    def tool_context(
        self, turn: TurnContext, call_id: str, tool: Tool, idempotency_key: str
    ) -> ToolContext:
        """The ``ctx`` one call of ``tool`` receives: the turn's scope and only the secrets of
        the plugin that brought the tool."""
        plugin = next((p for p in self.plugins if p.key == tool.plugin), None)
        return ToolContext(
            tenant=turn.tenant,
            identity_key=turn.identity_key,
            task_id=turn.task_id,
            call_id=call_id,
            idempotency_key=idempotency_key,
            secrets=dict(plugin.secrets) if plugin is not None else {},
            cancelled=turn.cancelled,
            clock=turn.clock,
            sender=turn.turn.sender,
            channel=turn.turn.channel,
        )


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def build_plugins(
    objects: Iterable[Any], environ: Mapping[str, str], builtins: Sequence[Tool] = ()
) -> PluginSet:
    plugins: list[Plugin] = []
    tools: dict[str, Tool] = {t.name: t for t in builtins}
    for obj in objects:
        key = getattr(obj, "key", None)
        if not isinstance(key, str) or not key:
            raise PluginError(f"plugin {type(obj).__name__} has no key")
        if any(p.key == key for p in plugins):
            raise PluginError(f"two plugins have the key '{key}'")
        version = getattr(obj, "contract_version", None)
        if version is not None and version not in SUPPORTED_CONTRACT_VERSIONS:
            raise PluginError(
                f"plugin '{key}' speaks contract version {version!r}; this edge speaks "
                f"{sorted(SUPPORTED_CONTRACT_VERSIONS)}"
            )
        secrets: dict[str, str] = {}
        for name in getattr(obj, "secrets", None) or ():
            if not environ.get(name):
                raise PluginError(f"plugin '{key}' needs the environment variable {name}")
            secrets[name] = environ[name]
        sequential = set(getattr(obj, "sequential", None) or ())
        own: list[Tool] = []
        for fn in getattr(obj, "tools", None) or ():
            try:
                tool = tool_from_function(fn, sequential=False, plugin=key)
            except TypeError as exc:
                raise PluginError(f"plugin '{key}': {exc}") from None
            if tool.name in tools:
                raise PluginError(f"two tools are named '{tool.name}' (plugin '{key}')")
            if tool.name in sequential:
                tool = Tool(**{**tool.__dict__, "sequential": True})
            tools[tool.name] = tool
            own.append(tool)
        capability = getattr(obj, "capability", None)
        plugins.append(
            Plugin(
                key,
                obj,
                tuple(own),
                capability if isinstance(capability, str) else None,
                secrets,
            )
        )
    return PluginSet(tuple(plugins), tools)


def installed_plugin_objects() -> list[Any]:
    """The objects the installed packages name in ``looping_edge.plugins``."""
    out = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            out.append(entry.load())
        except Exception as exc:
            raise PluginError(
                f"plugin entry point '{entry.name}' ({entry.value}) does not load: "
                f"{type(exc).__name__}"
            ) from None
    return out
