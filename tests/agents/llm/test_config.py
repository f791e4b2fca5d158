"""The ``llm`` agent config's model endpoints: the key's environment variable is a name, and
never one of the edge's own settings (the key is sent to ``base_url``)."""

from __future__ import annotations

import pytest

from app.agents.llm.config import LlmConfigError, parse_llm_config


@pytest.mark.parametrize("variable", ["A2A_SIGNING_KEY", "DATABASE_URL", "edge_push_secret_key"])
@pytest.mark.parametrize("endpoint", ["model", "fallback_model"])
def test_a_model_key_may_not_be_one_of_the_edges_settings(variable: str, endpoint: str) -> None:
    model = {"base_url": "https://models.example/v1", "name": "m"}
    doc = {"model": model, endpoint: {**model, "api_key_env": variable}, "system_prompt": "x"}
    with pytest.raises(LlmConfigError, match=f"{endpoint}.api_key_env: must not name"):
        parse_llm_config(doc)


def test_a_model_key_of_its_own_is_kept() -> None:
    model = {"base_url": "https://models.example/v1", "name": "m", "api_key_env": "EDGE_MODEL_KEY"}
    assert parse_llm_config({"model": model, "system_prompt": "x"}).model.api_key_env == (
        "EDGE_MODEL_KEY"
    )
