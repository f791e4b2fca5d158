"""The A2A tools against a real looping-edge as the peer (in process): its signed stub card
verified and pinned, an edge token it accepts (our origin in its PEER_ORIGINS), the tenant's
own card through GetExtendedAgentCard, and a send its agent answers, followed to the end."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.agents.llm.config import parse_llm_config
from app.db.storage import open_storage
from app.peers.client import PeerClients
from app.peers.tools import PeerTools
from app.security.keys import SigningKey
from app.testing.edge import EDGE_PUBLIC_URL, EdgeHarness, demo_manifest, edge_harness
from app.testing.gateway import GatewayKit
from tests.peers.kit import ctx, settings

US = GatewayKit(origin="https://edge-a.test", kid="edge-a-key")  # our edge, as B sees it
FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01, "stream_poll_seconds": 0.02}


@pytest.fixture
async def edge_b(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url, background=True, peers=[US], **FAST) as edge:
        await edge.add_tenant(
            "helper",
            manifest=demo_manifest("Helper"),
            profile="open",
            require_push_config=False,
        )
        yield edge


def _tools(edge: EdgeHarness, transport: httpx.AsyncBaseTransport | None = None) -> PeerTools:
    ours = settings(public_url=US.origin, peer_wait_seconds=10.0, peer_request_seconds=10.0)
    key = SigningKey.from_private_key(US.kid, US.key)
    storage = open_storage(edge.services.db)
    transport = transport or httpx.ASGITransport(app=edge.app)
    clients = PeerClients(ours, key, storage.peer_pins, {}, transport)

    async def party_name(tenant: str) -> str:
        return "Asker"

    return PeerTools(clients, storage.peer_sends, party_name=party_name)


CONFIG = parse_llm_config(
    {
        "model": {"base_url": "http://127.0.0.1:1/v1", "name": "m"},
        "system_prompt": "x",
        "allow_http_loopback": True,
        "agents": {"b": {"url": EDGE_PUBLIC_URL, "tenant": "helper", "auth": "edge-token"}},
        "tool_timeout_seconds": 30,
    }
)


async def _call(tools: PeerTools, name: str, **args: Any) -> Any:
    the_tool = next(t for t in tools.tools(CONFIG) if t.name == name)
    text = await the_tool.call(ctx(), the_tool.validate(args))
    return json.loads(text.partition("\n")[2])


async def test_an_edge_answers_a_send_with_an_edge_token(edge_b: EdgeHarness) -> None:
    tools = _tools(edge_b)
    started = time.monotonic()
    got = await _call(tools, "a2a_send", agent="b", text="hello over there")
    assert got["ok"] and got["state"] == "TASK_STATE_COMPLETED", got
    assert "hello over there" in got["text"] and got["truncated"] is False
    assert time.monotonic() - started < 10
    pinned = await open_storage(edge_b.services.db).peer_pins.pinned(EDGE_PUBLIC_URL)
    assert pinned is not None  # its signed card verified, its key pinned
    read = await _call(tools, "a2a_get_task", agent="b", task_id=got["taskId"])
    assert read["state"] == "TASK_STATE_COMPLETED" and read["text"] == got["text"]
    await tools.aclose()


async def test_the_agents_tool_shows_the_tenants_own_card(edge_b: EdgeHarness) -> None:
    tools = _tools(edge_b)
    got = await _call(tools, "a2a_agents")
    (entry,) = got["agents"]
    assert entry["cardName"] == "Helper" and entry["streaming"] is True, entry
    await tools.aclose()


async def test_an_unknown_tenant_is_refused_by_the_edge(edge_b: EdgeHarness) -> None:
    tools = _tools(edge_b)
    config = CONFIG.model_copy(
        update={
            "agents": {"b": CONFIG.agents["b"].model_copy(update={"tenant": "nobody"})},
        }
    )
    the_tool = next(t for t in tools.tools(config) if t.name == "a2a_send")
    text = await the_tool.call(ctx(), the_tool.validate({"agent": "b", "text": "x"}))
    got = json.loads(text.partition("\n")[2])
    assert got["ok"] is False and got["error"] in {"UNAUTHORIZED", "PEER_ERROR"}, got
    await tools.aclose()


class _RestFirst(httpx.AsyncBaseTransport):
    """Edge B as an agent whose card prefers HTTP+JSON (unsigned here: the reordered card no
    longer matches B's signature, and nothing is pinned yet)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        response = await self.inner.handle_async_request(request)
        if request.url.path != "/.well-known/agent-card.json":
            return response
        doc = json.loads(await response.aread())
        doc.pop("signatures", None)
        doc["supportedInterfaces"].sort(key=lambda i: i["protocolBinding"] != "HTTP+JSON")
        return httpx.Response(200, json=doc)


async def test_an_edge_token_over_http_json_names_that_interface(edge_b: EdgeHarness) -> None:
    """The token's aud is the HTTP+JSON interface's url when the card prefers it: edge B
    accepts it on that binding, the tenant in the path."""
    transport = _RestFirst(httpx.ASGITransport(app=edge_b.app))
    tools = _tools(edge_b, transport)
    got = await _call(tools, "a2a_send", agent="b", text="hello by rest")
    assert got["ok"] and got["state"] == "TASK_STATE_COMPLETED", got
    assert "hello by rest" in got["text"]
    assert any(p.endswith("/message:send") for p in transport.paths), transport.paths
    await tools.aclose()
