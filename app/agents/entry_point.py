"""The ``python`` agent kind: the tenant author's own agent, from their own package.

The tenant's agent config names a factory as ``{"entry": "package.module:factory"}`` (the
rest of the config is the factory's); the worker imports the module from its own environment
(the author's package is installed next to looping-edge, e.g. in the image), calls
``factory(config)`` once per turn and runs the object it returns (``app.agents.contract``).

Why an import path and not code in the database: the registry holds data an operator wrote,
never code; what runs is what the operator installed. Resolved factories are kept per entry,
so a turn pays the import once per process.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from app.agents.contract import Agent

# ``package.module:attribute`` (dotted identifiers on both sides), as Python's entry points.
_ENTRY = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
ENTRY_KEY = "entry"


class AgentEntryError(ValueError):
    """The entry cannot give an agent; ``str`` says why without the module's exception text."""


def entry_of(config: Mapping[str, Any]) -> str:
    """The checked ``entry`` of a ``python`` agent config (``AgentEntryError`` otherwise)."""
    entry = config.get(ENTRY_KEY)
    if not isinstance(entry, str) or not _ENTRY.fullmatch(entry):
        raise AgentEntryError(
            'the python agent kind needs "entry": "package.module:factory" in its agent config'
        )
    return entry


class PythonEntryPoints:
    """Builds agents from entries, importing each module once."""

    def __init__(self, importer: Callable[[str], Any] = importlib.import_module) -> None:
        self._import = importer
        self._factories: dict[str, Callable[[Mapping[str, Any]], Any]] = {}

    def build(self, config: Mapping[str, Any]) -> Agent:
        entry = entry_of(config)
        factory = self._factories.get(entry) or self._resolve(entry)
        own = {k: v for k, v in config.items() if k != ENTRY_KEY}
        try:
            agent = factory(own)
        except Exception as exc:  # the author's code: report its class, keep its text out
            raise AgentEntryError(f"{entry} raised {type(exc).__name__}") from exc
        if not callable(getattr(agent, "run", None)):
            raise AgentEntryError(f"{entry} returned an object without a run method")
        return agent  # type: ignore[no-any-return]

    def _resolve(self, entry: str) -> Callable[[Mapping[str, Any]], Any]:
        module_name, _, attribute = entry.partition(":")
        try:
            target: Any = self._import(module_name)
        except Exception as exc:  # ImportError, or the module's own top level failing
            raise AgentEntryError(f"cannot import {module_name} ({type(exc).__name__})") from exc
        for name in attribute.split("."):
            target = getattr(target, name, None)
            if target is None:
                raise AgentEntryError(f"{module_name} has no {attribute}")
        if not callable(target):
            raise AgentEntryError(f"{entry} is not callable")
        self._factories[entry] = target
        return target  # type: ignore[no-any-return]
