"""The main agent's system prompt in a round: the tenant's prompt, the plugins' capability
text, the policy's round contract (``{types}``, ``{max_subtasks}`` filled in), in the last
round the policy's final-round note (``{max_rounds}``), and the date line."""

from __future__ import annotations

import time
from collections.abc import Sequence

from app.agents.llm.config import LlmConfig


def system_prompt(
    config: LlmConfig, capabilities: Sequence[str], now: float, *, final: bool
) -> str:
    delegation = config.delegation
    assert delegation is not None
    types = "; ".join(
        f"{r.key}: {r.description}" if r.description else r.key for r in delegation.recipes
    )
    contract = delegation.policy.round_contract.replace("{types}", types).replace(
        "{max_subtasks}", str(delegation.max_subtasks)
    )
    parts = [config.system_prompt, *capabilities, contract]
    if final:
        parts.append(
            delegation.policy.final_round_note.replace("{max_rounds}", str(delegation.max_rounds))
        )
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    parts.append(f"Current date (UTC): {today}")
    return "\n\n".join(part.strip("\n") for part in parts)
