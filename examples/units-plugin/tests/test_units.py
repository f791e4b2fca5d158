"""The plugin under looping-edge's test kit: its tools' schemas, the hook, and one turn of an
``llm`` agent against the fake model server."""

from __future__ import annotations

import asyncio
import time

from looping_units import plugin

from app.agents.contract import AgentReply, TurnContext
from app.agents.llm.agent import LlmAgent
from app.agents.llm.plugins import build_plugins
from app.agents.llm.runtime import LlmRuntime
from app.testing.fake_model import FakeModelServer, text, tool_call


async def _progress(_key: str, _text: str) -> None:
    return None


def _turn(text_: str) -> TurnContext:
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text_}]}
    return TurnContext(
        tenant="demo",
        identity_key="u",
        identity={},
        task_id="t-1",
        context_id="c",
        kind="start",
        message=message,
        history=[message],
        resume_answer=None,
        attempt=1,
        cancelled=asyncio.Event(),
        progress_fn=_progress,
        clock=time.time,
    )


def test_the_plugin_set_accepts_it() -> None:
    plugins = build_plugins([plugin], {})
    schema = plugins.tools["convert_length"].schema
    assert schema["properties"]["to"]["enum"] == ["mm", "cm", "m", "km", "in", "ft"]
    assert "ctx" not in schema["properties"]


async def test_a_turn_converts_and_answers() -> None:
    with FakeModelServer() as fake:
        fake.script(
            tool_call("convert_temperature", {"value": 212, "to": "C"}),
            tool_call("convert_length", {"value": 1e13, "unit": "m", "to": "km"}),
            text("Water boils at 100 C."),
        )
        runtime = LlmRuntime(environ={}, failure_text="failed", plugins=build_plugins([plugin], {}))
        config = {
            "model": {"base_url": fake.base_url, "name": "fake"},
            "system_prompt": "You convert units.",
            "tools": ["convert_temperature", "convert_length"],
        }
        result = await LlmAgent.from_config(config, runtime).run(_turn("212 F in C?"))
    assert result == AgentReply(text="Water boils at 100 C.")
    assert "unit tools" in fake.requests[0].messages[0]["content"]
    assert fake.requests[1].messages[-1]["content"] == "100.00 C"
    assert fake.requests[2].messages[-1]["content"] == "blocked: the value is out of range"
