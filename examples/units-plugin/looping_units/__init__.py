"""An example plugin for looping-edge's ``llm`` agents (docs/agents-llm.md, "Plugins").

Installed next to looping-edge (``pip install ./examples/units-plugin``), it is found through
its entry point in the group ``looping_edge.plugins``; a tenant's agent config lists the tools
it may call (``"tools": ["convert_temperature", "convert_length"]``).
"""

from __future__ import annotations

from typing import Any, Literal

_TO_METRES = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048}
Length = Literal["mm", "cm", "m", "km", "in", "ft"]


async def convert_temperature(value: float, to: Literal["C", "F"]) -> str:
    """Convert a temperature to Celsius (C) or Fahrenheit (F); ``value`` is in the other
    unit."""
    if to == "C":
        return f"{(value - 32) * 5 / 9:.2f} C"
    return f"{value * 9 / 5 + 32:.2f} F"


async def convert_length(ctx: Any, value: float, unit: Length, to: Length) -> str:
    """Convert a length between mm, cm, m, km, in and ft."""
    return f"{value * _TO_METRES[unit] / _TO_METRES[to]:.4g} {to}"


class UnitsPlugin:
    key = "units"
    contract_version = 1
    tools = (convert_temperature, convert_length)
    capability = "You can convert temperatures and lengths with your unit tools."
    sequential: tuple[str, ...] = ()

    @staticmethod
    def before_tool_call(ctx: Any, tool: str, args: dict[str, Any]) -> str | None:
        """Refuse values no real question needs (a reason blocks the call)."""
        value = args.get("value")
        if isinstance(value, int | float) and abs(value) > 1e12:
            return "the value is out of range"
        return None


plugin = UnitsPlugin()
