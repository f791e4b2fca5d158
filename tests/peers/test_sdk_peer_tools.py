"""The A2A tools against the official a2a-sdk server (a real loopback port) requiring a
bearer token (``bearer_env``): JSON-RPC and HTTP+JSON, each chosen from the card's order; a
wrong token is UNAUTHORIZED and nothing runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard

from app.agents.llm.config import LlmConfig, parse_llm_config
from app.db.engine import Database
from app.db.storage import open_storage
from app.peers.tools import PeerTools
from app.testing.sdk_peer import SdkPeer
from tests.peers.kit import ctx, peer_tools

TOKEN = "sdk-peer-t0k3n"


class RestFirst(SdkPeer):
    """The same agent, its card listing HTTP+JSON before JSON-RPC."""

    def card(self) -> AgentCard:
        card = super().card()
        interfaces = list(card.supported_interfaces)
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(reversed(interfaces))
        return card


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
def sdk(request: pytest.FixtureRequest) -> Iterator[SdkPeer]:
    kind = SdkPeer if request.param == "JSONRPC" else RestFirst
    with kind(TOKEN, answer=lambda text: f"B says: {text}") as peer:
        yield peer


def _config(peer: SdkPeer) -> LlmConfig:
    return parse_llm_config(
        {
            "model": {"base_url": "http://127.0.0.1:1/v1", "name": "m"},
            "system_prompt": "x",
            "allow_http_loopback": True,
            "agents": {"sdk": {"url": peer.base_url, "auth": {"bearer_env": "SDK_TOKEN"}}},
        }
    )


async def _send(tools: PeerTools, config: LlmConfig, **args: Any) -> Any:
    the_tool = next(t for t in tools.tools(config) if t.name == "a2a_send")
    text = await the_tool.call(ctx(), the_tool.validate(args))
    return json.loads(text.partition("\n")[2])


async def test_an_sdk_agent_answers_through_the_binding_its_card_prefers(
    database: Database, sdk: SdkPeer
) -> None:
    tools = peer_tools(
        open_storage(database), httpx.AsyncHTTPTransport(), environ={"SDK_TOKEN": TOKEN}
    )
    got = await _send(tools, _config(sdk), agent="sdk", text="hello")
    assert got["ok"] and got["state"] == "TASK_STATE_COMPLETED", got
    assert got["text"] == "B says: hello"
    assert [r.text for r in sdk.received] == ["hello"] and sdk.refused == 0
    assert sdk.received[0].message_id == got["messageId"]
    await tools.aclose()


@pytest.mark.parametrize("kind", [SdkPeer, RestFirst], ids=["JSONRPC", "HTTP+JSON"])
async def test_a_wrong_token_is_unauthorized_and_nothing_runs(
    database: Database, kind: type[SdkPeer]
) -> None:
    tools = peer_tools(
        open_storage(database), httpx.AsyncHTTPTransport(), environ={"SDK_TOKEN": "wrong"}
    )
    with kind(TOKEN) as sdk:
        got = await _send(tools, _config(sdk), agent="sdk", text="hello")
    assert got["ok"] is False and got["error"] == "UNAUTHORIZED" and got["code"] == "401"
    assert sdk.received == [] and sdk.refused == 1
    again = await _send(tools, _config(sdk), agent="sdk", text="hello")
    assert again["error"] == "UNAUTHORIZED" and again["resumed"] is True  # kept, not resent
    await tools.aclose()
