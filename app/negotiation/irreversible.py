"""Tools that act irreversibly need an agreed settlement with a reference (research §2.4).

A plugin names such tools in ``irreversible`` (tool names, like ``sequential``). A call of one
must carry ``negotiation_id`` naming a negotiation of the caller (their own outbound one, or an
inbound one of the tenant) that settled ``agreed`` on basis ``reference``; otherwise the call is
blocked before it runs and the model is told why. The check is a ``before_tool_call`` hook of a
built-in plugin, so it runs with the others, in order, for every llm agent of the process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.agents.llm.plugins import Plugin, PluginSet
from app.agents.llm.tools import ToolContext
from app.db.negotiations import OUTBOUND, NegotiationStore

KEY = "negotiation-settlement-gate"
ARGUMENT = "negotiation_id"


class IrreversibleGate:
    key = KEY

    def __init__(self, store: NegotiationStore, tools: Iterable[str]) -> None:
        self.store = store
        self.tools = frozenset(tools)

    async def before_tool_call(
        self, ctx: ToolContext, tool: str, args: Mapping[str, Any]
    ) -> str | None:
        if tool not in self.tools:
            return None
        negotiation_id = args.get(ARGUMENT)
        if not isinstance(negotiation_id, str) or not negotiation_id:
            return (
                f"{tool} acts irreversibly: pass {ARGUMENT}, the negotiation that agreed it "
                "by reference"
            )
        found = await self.store.get(ctx.tenant, negotiation_id)
        if found is None or (found.direction == OUTBOUND and found.identity != ctx.identity_key):
            return f'No negotiation "{negotiation_id}".'
        if found.verdict != "agreed" or found.basis != "reference":
            where = found.verdict or "still open"
            return (
                f"negotiation {negotiation_id} is {where} (basis {found.basis or 'none'}); "
                f"{tool} needs it agreed by reference"
            )
        return None


def with_gate(plugins: PluginSet, store: NegotiationStore) -> PluginSet:
    """``plugins`` plus the gate for the tools they declare irreversible (unchanged when none
    does)."""
    names = [
        str(name)
        for plugin in plugins.plugins
        for name in getattr(plugin.obj, "irreversible", None) or ()
    ]
    if not names:
        return plugins
    gate = IrreversibleGate(store, names)
    return PluginSet((*plugins.plugins, Plugin(KEY, gate, (), None, {})), plugins.tools)
