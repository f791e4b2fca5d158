"""The TCK's authenticating proxy (app.testing.tck_proxy) in front of the real edge, offline:
the card it serves, the tokens it mints, the tenant it adds, and bodies it must not touch."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.testing.edge import EdgeHarness, edge_harness
from app.testing.gateway import DEFAULT_IDENTITY_CLAIM, DEFAULT_TENANT_CLAIM, GatewayKit
from app.testing.tck_proxy import (
    ProxyConfig,
    TckProxy,
    add_jsonrpc_tenant,
    edge_interfaces,
    rewrite_card,
)
from tests.testing.test_gateway_kit import decode

PROXY = "http://proxy.test"
TCK_AGENT = {"entry": "app.testing.tck_agent:build"}


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url, background=True) as harness:
        await harness.add_tenant(
            "tck", agent="python", agent_config=TCK_AGENT, profile="open",
            require_push_config=False, dedupe_message_ids=False,
        )  # fmt: skip
        yield harness


@pytest.fixture
async def proxy(edge: EdgeHarness) -> AsyncIterator[tuple[TckProxy, httpx.AsyncClient]]:
    config = ProxyConfig(edge_url="http://localhost", tenant="tck", public_origin=PROXY)
    tck_proxy = TckProxy(config, edge.gateway, edge.client)
    transport = httpx.ASGITransport(app=tck_proxy.app())
    async with httpx.AsyncClient(transport=transport, base_url=PROXY) as client:
        yield tck_proxy, client


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _send(message_id: str) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": message_id}
    return _rpc("SendMessage", {"message": message})


async def test_the_card_lists_the_proxy_for_each_interface_and_drops_the_signatures(proxy):
    _, client = proxy
    response = await client.get("/.well-known/agent-card.json")
    assert "max-age" in response.headers["cache-control"] and response.headers["etag"]
    card = response.json()
    jsonrpc = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == "JSONRPC"]
    assert jsonrpc[0]["url"] == PROXY + "/jsonrpc"
    assert all(i["url"].startswith(PROXY) for i in card["supportedInterfaces"])
    assert "signatures" not in card
    assert card["capabilities"]["streaming"] is True


async def test_a_tck_call_reaches_the_open_tenant_as_a_verified_caller(proxy):
    _, client = proxy
    for path in ("/jsonrpc", "/jsonrpc/"):
        response = await client.post(
            path, json=_send(f"tck-complete-task-{path}"), headers={"A2A-Version": "1.0"}
        )
        task = response.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["status"]["message"]["parts"][0]["text"] == "Hello from TCK"
    response = await client.post(
        "/jsonrpc", json=_send("tck-message-response-1"), headers={"A2A-Version": "1.0"}
    )
    assert response.json()["result"]["message"]["parts"][0]["text"] == "Direct message response"


async def test_an_http_json_call_gets_the_tenant_path_prefix(proxy):
    _, client = proxy
    message = {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "tck-complete-task-r"}
    sent = await client.post(
        "/rest/message:send", json={"message": message}, headers={"A2A-Version": "1.0"}
    )
    task = sent.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    got = await client.get(
        f"/rest/tasks/{task['id']}?historyLength=0", headers={"A2A-Version": "1.0"}
    )
    assert got.status_code == 200 and got.json()["id"] == task["id"]
    missing = await client.get("/rest/tasks/no-such-task", headers={"A2A-Version": "1.0"})
    assert missing.status_code == 404


async def test_a_stream_comes_back_through_the_proxy(proxy):
    _, client = proxy
    body = _send("tck-stream-001-p")
    body["method"] = "SendStreamingMessage"
    response = await client.post("/jsonrpc", json=body, headers={"A2A-Version": "1.0"})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line[len("data:") :])["result"]
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]
    assert "task" in events[0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    artifacts = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert artifacts[0]["parts"] == [{"text": "Stream hello from TCK"}]


async def test_the_token_is_the_gateways_for_the_interface_called(proxy, edge: EdgeHarness):
    tck_proxy, _ = proxy
    interfaces = await tck_proxy.interfaces()
    audience = interfaces.url("JSONRPC")
    assert audience == edge.endpoint
    header, claims = decode(tck_proxy.mint(audience))
    assert header["jku"] == edge.gateway.jwks_url and header["alg"] == "EdDSA"
    assert claims["iss"] == edge.gateway.origin and claims["aud"] == edge.endpoint
    assert claims[DEFAULT_TENANT_CLAIM] == "tck"
    assert claims[DEFAULT_IDENTITY_CLAIM] == {"key": "tck", "name": "A2A TCK", "kind": "agent"}


async def test_negative_requests_reach_the_edge_as_written(proxy):
    _, client = proxy
    bad_json = await client.post("/jsonrpc", content=b"{nope", headers={"A2A-Version": "1.0"})
    assert bad_json.json()["error"]["code"] == -32700
    old = await client.post("/jsonrpc", json=_send("tck-v"), headers={"A2A-Version": "0.9"})
    assert old.json()["error"]["code"] == -32009
    versionless = await client.post("/jsonrpc", json=_rpc("GetTask", {"id": "nope"}))
    assert versionless.json()["error"]["code"] == -32009  # no A2A-Version header: 0.3
    unknown = await client.post(
        "/jsonrpc", json=_rpc("GetTask", {"id": "nope"}), headers={"A2A-Version": "1.0"}
    )
    assert unknown.json()["error"]["code"] == -32001


async def test_the_proxy_publishes_its_jwks():
    kit = GatewayKit(origin=PROXY)
    tck_proxy = TckProxy(ProxyConfig("http://edge.test", "t", PROXY), kit, httpx.AsyncClient())
    transport = httpx.ASGITransport(app=tck_proxy.app())
    async with httpx.AsyncClient(transport=transport, base_url=PROXY) as client:
        response = await client.get("/.well-known/jwks.json")
    assert response.json() == kit.jwks()


def test_the_tenant_is_added_only_to_a_request_object_with_object_params():
    assert json.loads(add_jsonrpc_tenant(b'{"method":"GetTask","params":{"id":"x"}}', "t")) == {
        "method": "GetTask",
        "params": {"id": "x", "tenant": "t"},
    }
    assert json.loads(add_jsonrpc_tenant(b'{"method":"GetExtendedAgentCard"}', "t")) == {
        "method": "GetExtendedAgentCard",
        "params": {"tenant": "t"},
    }
    for raw in (b"{nope", b"[1]", b'{"params":[1]}', b'{"params":{"tenant":"other"}}', b"\xff"):
        assert add_jsonrpc_tenant(raw, "t") == raw


def test_the_card_rewrite_keeps_the_bindings_the_proxy_serves():
    card = {
        "name": "edge",
        "signatures": [{"protected": "x", "signature": "y"}],
        "supportedInterfaces": [
            {"url": "https://edge/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://edge/rest", "protocolBinding": "HTTP+JSON"},
            {"url": "edge:50051", "protocolBinding": "GRPC"},
            {"url": "https://edge/other", "protocolBinding": "OTHER"},
        ],
    }
    without_grpc = rewrite_card(card, ProxyConfig("https://edge", "t", PROXY))
    assert [i["url"] for i in without_grpc["supportedInterfaces"]] == [
        PROXY + "/jsonrpc",
        PROXY + "/rest",
    ]
    with_grpc = rewrite_card(card, ProxyConfig("https://edge", "t", PROXY, "127.0.0.1:9"))
    assert with_grpc["supportedInterfaces"][2]["url"] == "127.0.0.1:9"
    assert "signatures" not in with_grpc and card["signatures"]
    assert edge_interfaces(card).urls == {
        "JSONRPC": "https://edge/a2a",
        "HTTP+JSON": "https://edge/rest",
        "GRPC": "edge:50051",
        "OTHER": "https://edge/other",
    }
