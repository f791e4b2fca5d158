"""The ``delegation`` block of an ``llm`` agent config: the example is complete, every policy
string is required, recipes are checked, unknown recipe tools are dropped with a log line."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from app.agents.llm.config import LlmConfigError, parse_llm_config
from app.agents.llm.delegation.config import RoundPolicy, recipe_tools

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "llm-delegation-agent.json"


def example() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return doc


def test_the_example_is_a_complete_config() -> None:
    config = parse_llm_config(example())
    assert config.delegation is not None
    assert config.delegation.max_subtasks == 8 and config.delegation.max_rounds == 20
    assert [r.key for r in config.delegation.recipes] == ["research", "summarize"]


def test_the_defaults() -> None:
    doc = example()
    for name in ("max_subtasks", "max_rounds", "max_wall_seconds", "subagent_limits"):
        doc["delegation"].pop(name)
    delegation = parse_llm_config(doc).delegation
    assert delegation is not None
    assert (delegation.max_subtasks, delegation.max_rounds) == (8, 20)
    assert delegation.max_wall_seconds == 3600
    assert delegation.subagent_limits.max_steps == 20


@pytest.mark.parametrize("name", sorted(RoundPolicy.model_fields))
def test_every_policy_string_is_required(name: str) -> None:
    doc = example()
    doc["delegation"]["policy"].pop(name)
    with pytest.raises(LlmConfigError, match=f"delegation.policy.{name}: required"):
        parse_llm_config(doc)
    doc["delegation"]["policy"][name] = "  "
    with pytest.raises(LlmConfigError, match=f"delegation.policy.{name}: must not be empty"):
        parse_llm_config(doc)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"system_prompt": ""}, "recipes.0.system_prompt: must not be empty"),
        ({"history_window": 0}, "recipes.0.history_window"),
        ({"history_window": 2.5}, "recipes.0.history_window"),
        ({"history_window": "3"}, "recipes.0.history_window"),
        ({"key": "Bad Key"}, "recipes.0.key"),
        ({"model": "gpt"}, "recipes.0.model: unknown field"),  # a recipe cannot name models
        ({"tools": ["a", "a"]}, "recipes.0.tools"),
    ],
)
def test_a_bad_recipe_names_the_field(change: dict[str, Any], field: str) -> None:
    doc = example()
    doc["delegation"]["recipes"][0].update(change)
    with pytest.raises(LlmConfigError, match=field.replace(".", r"\.")):
        parse_llm_config(doc)


def test_two_recipes_with_one_key_are_refused() -> None:
    doc = example()
    doc["delegation"]["recipes"][1]["key"] = "research"
    with pytest.raises(LlmConfigError, match="two recipes have one key"):
        parse_llm_config(doc)


def test_unknown_and_control_tools_are_dropped_with_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    doc = example()
    doc["delegation"]["recipes"][0]["tools"] = ["lookup", "missing", "delegate", "ask_user"]
    delegation = parse_llm_config(doc).delegation
    assert delegation is not None
    with caplog.at_level(logging.WARNING, logger="looping.agent"):
        kept = recipe_tools(delegation.recipes[0], {"lookup", "delegate", "ask_user"})
    assert kept == ("lookup",)
    dropped = [r.tool for r in caplog.records if r.msg == "delegation.recipe_tool_dropped"]  # type: ignore[attr-defined]
    assert dropped == ["missing", "delegate", "ask_user"]
