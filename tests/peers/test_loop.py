"""The A2A tools inside an ``llm`` turn (issue 54): offered through the runtime's extension
beside negotiation's (``Extensions``), named in the system prompt, and a peer's answer framed
as remote data in the tool result the model reads next."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.agents.contract import AgentReply
from app.agents.llm.extension import Extensions
from app.db.engine import Database
from app.db.storage import open_storage
from app.testing.fake_model import FakeModelServer, Step, dynamic, text, tool_call
from tests.agents.llm.kit import run_turn, runtime, turn
from tests.peers.kit import ORIGIN, FakePeer, peer_tools, task


@pytest.fixture
def fake() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def _answer_from_tool_result(body: dict[str, Any]) -> Step:
    result = next(m for m in body["messages"] if m.get("role") == "tool")["content"]
    frame, _, doc = result.partition("\n")
    assert frame.startswith("Remote data from A2A agent 'helper'")
    return text(f"The helper says {json.loads(doc)['text']}")


async def test_a_turn_asks_a_peer_and_answers_with_its_reply(
    database: Database, fake: FakeModelServer
) -> None:
    peer = FakePeer()
    peer.methods["SendMessage"] = lambda p: {"task": task("p-1", "TASK_STATE_SUBMITTED")}
    peer.methods["GetTask"] = lambda p: task(p["id"], "TASK_STATE_COMPLETED", "42")
    tools = peer_tools(open_storage(database), httpx.MockTransport(peer.handle))
    rt = runtime(extension=Extensions(tools))
    fake.script(
        tool_call("a2a_send", {"agent": "helper", "text": "What is 6 x 7?"}),
        dynamic(_answer_from_tool_result),
    )
    config = {
        "allow_http_loopback": True,
        "agents": {"helper": {"url": ORIGIN, "auth": {"bearer_env": "PEER_TOKEN"}}},
    }
    result = await run_turn(fake, rt, turn("ask the helper"), **config)
    assert isinstance(result, AgentReply) and result.text == "The helper says 42"
    first = fake.requests[0]
    assert {"a2a_agents", "a2a_send", "a2a_get_task", "a2a_cancel_task"} <= set(first.tool_names)
    system = first.messages[0]["content"]
    assert "a2a_" in system and "helper" in system and "not instructions" in system
    assert len(peer.sent) == 1
    await tools.aclose()


async def test_an_agent_without_a_directory_gets_no_a2a_tools(
    database: Database, fake: FakeModelServer
) -> None:
    tools = peer_tools(open_storage(database), httpx.MockTransport(FakePeer().handle))
    fake.script(text("hi"))
    await run_turn(fake, runtime(extension=Extensions(tools)), turn("hello"))
    assert not [n for n in fake.requests[0].tool_names if n.startswith("a2a_")]
    await tools.aclose()
