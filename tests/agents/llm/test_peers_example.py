"""The example directory of peers (examples/llm-peers-agent.json, issue 54) is a complete
``llm`` config: one peer edge reached with an edge token, one A2A agent with a bearer token
read from the worker's environment; the file names the variable, never a credential."""

from __future__ import annotations

import json
from pathlib import Path

from app.agents.llm.config import parse_llm_config
from app.agents.llm.peer_directory import EDGE_TOKEN, credential_in

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llm-peers-agent.json"


def test_the_example_directory_parses_and_holds_no_credential() -> None:
    doc = json.loads(EXAMPLE.read_text())
    config = parse_llm_config(doc)
    desk, translator = config.agents["travel-desk"], config.agents["translator"]
    assert (desk.auth, desk.tenant, desk.bearer_env) == (EDGE_TOKEN, "travel-desk", None)
    assert (translator.bearer_env, translator.tenant) == ("TRANSLATOR_TOKEN", None)
    assert credential_in(doc["agents"]) is None
    assert not config.allow_http_loopback  # the example names https peers only
