"""The agent kinds a tenant definition may name."""

from __future__ import annotations

AGENT_KINDS: tuple[str, ...] = ("echo", "scripted", "python", "llm")
