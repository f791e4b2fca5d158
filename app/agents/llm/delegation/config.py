"""The ``delegation`` block of an ``llm`` agent's config: the recipes subagents run, the
round budget, the subagents' limits, and the round policy (every string the round loop emits).

The policy has no defaults in the engine: each string is required, so a missing one is refused
at ``tenants add`` naming the field (the engine ships the machine, the tenant writes the words).
A recipe's tools are names; those no installed plugin provides are dropped when the agent is
built (``recipe_tools``), with a log line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection

from pydantic import BaseModel, ConfigDict, Field, field_validator

log = logging.getLogger("looping.agent")

_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
# The round loop's own tools: never a subagent's.
CONTROL_TOOLS = frozenset({"final_reply", "delegate"})


class SubagentLimits(BaseModel):
    """A subagent's budget: model responses with tool calls, then one last call without
    tools; and its wall time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int = Field(default=20, ge=1, le=200)
    max_wall_seconds: float = Field(default=1800.0, gt=0, le=86_400)


class RecipeLimits(BaseModel):
    """A recipe's limits as declared: each one set overrides the delegation's baseline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int | None = Field(default=None, ge=1, le=200)
    max_wall_seconds: float | None = Field(default=None, gt=0, le=86_400)


class Recipe(BaseModel):
    """What a subagent runs: a subtask's ``type`` is the ``key`` of its recipe. A recipe
    cannot name models: subagents use the host's model pair."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    version: int = Field(default=1, ge=1)
    description: str = Field(default="", max_length=2_000)
    system_prompt: str = Field(max_length=100_000)
    tools: tuple[str, ...] = ()
    limits: RecipeLimits = RecipeLimits()
    history_window: int = Field(default=4, strict=True, ge=1, le=1_000)

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not _KEY.fullmatch(value):
            raise ValueError("must be lowercase letters, digits, - or _ after a letter")
        return value

    @field_validator("system_prompt")
    @classmethod
    def _prompt(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _TOOL_NAME.fullmatch(name):
                raise ValueError(f"'{name[:64]}' is not a tool name")
        if len(set(value)) != len(value):
            raise ValueError("a tool is named twice")
        return value

    def limits_over(self, baseline: SubagentLimits) -> SubagentLimits:
        return SubagentLimits(
            max_steps=self.limits.max_steps or baseline.max_steps,
            max_wall_seconds=self.limits.max_wall_seconds or baseline.max_wall_seconds,
        )


class RoundPolicy(BaseModel):
    """Every string the round loop emits; all required, none defaulted.

    ``round_contract`` (added to the system prompt each round; ``{types}`` and
    ``{max_subtasks}`` are replaced by the recipe keys and the cap), ``final_round_note``
    (added when the rounds or the wall time are spent: only ``final_reply`` is offered;
    ``{max_rounds}`` is replaced), ``task_failed`` (the FAILED task's text), ``recovered_reply``
    (a round's acknowledgement when its own text was lost), ``partial_note`` (given to the
    model with a round's results when some subtask did not complete)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    round_contract: str = Field(max_length=20_000)
    final_round_note: str = Field(max_length=20_000)
    task_failed: str = Field(max_length=4_000)
    recovered_reply: str = Field(max_length=4_000)
    partial_note: str = Field(max_length=4_000)

    @field_validator("*")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class DelegationConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    recipes: tuple[Recipe, ...] = Field(min_length=1, max_length=64)
    policy: RoundPolicy
    max_subtasks: int = Field(default=8, ge=1, le=64)
    max_rounds: int = Field(default=20, ge=1, le=200)
    max_wall_seconds: float = Field(default=3600.0, gt=0, le=7 * 86_400)
    subagent_limits: SubagentLimits = SubagentLimits()
    repair_attempts: int = Field(default=3, ge=0, le=10)

    @field_validator("recipes")
    @classmethod
    def _unique(cls, value: tuple[Recipe, ...]) -> tuple[Recipe, ...]:
        keys = [r.key for r in value]
        if len(set(keys)) != len(keys):
            raise ValueError("two recipes have one key")
        return value

    def recipe(self, key: str) -> Recipe | None:
        return next((r for r in self.recipes if r.key == key), None)


def recipe_tools(recipe: Recipe, installed: Collection[str]) -> tuple[str, ...]:
    """The recipe's tools this process can give a subagent: installed ones, never a control
    tool nor ``ask_user`` (a subagent has no human to ask); the others dropped with a log
    line."""
    kept = []
    for name in recipe.tools:
        if name in installed and name not in CONTROL_TOOLS and name != "ask_user":
            kept.append(name)
        else:
            log.warning(
                "delegation.recipe_tool_dropped", extra={"recipe": recipe.key, "tool": name}
            )
    return tuple(kept)
