"""Who a peer edge's token may reach (CONTRACT §10, issues 51 and 54): open tenants only, five
methods, and only what its namespaced identity owns."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.testing.edge import EdgeHarness, edge_harness
from app.testing.gateway import GatewayKit
from tests.tasks.sse_client import SseCall

PEER = "https://peer.test"


@pytest.fixture
def peer() -> GatewayKit:
    return GatewayKit(origin=PEER, kid="peer-key")


@pytest.fixture
async def edge(db_url: str, peer: GatewayKit) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url, peers=[peer]) as harness:
        await harness.add_tenant("shop", profile="open", require_push_config=False)
        await harness.add_tenant("desk", profile="gateway")
        yield harness


def peer_token(edge: EdgeHarness, peer: GatewayKit, tenant: str, key: str = "user-1") -> str:
    return peer.mint(audience=edge.endpoint, tenant=tenant, identity={"key": key})


def _message(text: str = "hi") -> dict[str, Any]:
    return {
        "message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": True},  # no worker runs here
    }


async def test_a_peer_reads_an_open_tenants_card(edge: EdgeHarness, peer: GatewayKit) -> None:
    r = await edge.rpc(
        "GetExtendedAgentCard", {}, tenant="shop", token=peer_token(edge, peer, "shop")
    )
    assert r.status_code == 200 and "result" in r.json(), r.text


async def test_a_peer_token_on_a_gateway_tenant_is_401(edge: EdgeHarness, peer: GatewayKit) -> None:
    token = peer_token(edge, peer, "desk")
    for method in ("GetExtendedAgentCard", "SendMessage", "GetTask"):
        r = await edge.rpc(method, {"id": "x"}, tenant="desk", token=token)
        assert r.status_code == 401, r.text
        assert "accepted only by open tenants" in r.text
        assert token not in r.text


async def test_a_gateway_token_still_reaches_an_open_tenant(edge: EdgeHarness) -> None:
    r = await edge.rpc("GetExtendedAgentCard", {}, tenant="shop")
    assert r.status_code == 200 and "result" in r.json()


@pytest.mark.parametrize(
    "method", ["ListTasks", "CreateTaskPushNotificationConfig", "SendStreamingMessage"]
)
async def test_a_peer_may_not_call_other_methods(
    edge: EdgeHarness, peer: GatewayKit, method: str
) -> None:
    r = await edge.rpc(
        method, {"taskId": "t", "id": "t"}, tenant="shop", token=peer_token(edge, peer, "shop")
    )
    doc = r.json()
    assert doc["error"]["code"] == -32601, doc
    assert "not available to peer callers" in doc["error"]["message"]


async def test_a_peer_never_reaches_a_gateway_callers_task(
    edge: EdgeHarness, peer: GatewayKit
) -> None:
    # The gateway caller and the peer both say "user-1": the peer is peer:<origin>:user-1.
    created = await edge.result("SendMessage", _message("mine"), tenant="shop")
    task_id = created["task"]["id"]
    token = peer_token(edge, peer, "shop")
    for method in ("GetTask", "SubscribeToTask", "CancelTask"):
        r = await edge.rpc(method, {"id": task_id}, tenant="shop", token=token)
        assert r.json()["error"]["code"] == -32001, r.text


async def test_a_peer_sends_and_reads_its_own_task(edge: EdgeHarness, peer: GatewayKit) -> None:
    token = peer_token(edge, peer, "shop", key="agent-7")
    sent = await edge.result("SendMessage", _message("peer"), tenant="shop", token=token)
    task_id = sent["task"]["id"]
    got = await edge.result("GetTask", {"id": task_id}, tenant="shop", token=token)
    assert got["id"] == task_id
    # The same key from the gateway is someone else.
    r = await edge.rpc("GetTask", {"id": task_id}, tenant="shop", identity={"key": "agent-7"})
    assert r.json()["error"]["code"] == -32001


async def test_a_peer_follows_its_own_task_to_the_end(db_url: str, peer: GatewayKit) -> None:
    """Issue 54: an A2A tool waiting on a task it sent follows it with SubscribeToTask."""
    async with edge_harness(db_url, peers=[peer], background=True, poll_seconds=0.05) as edge:
        await edge.add_tenant("shop", agent="scripted", profile="open", require_push_config=False)
        token = peer_token(edge, peer, "shop", key="agent-7")
        sent = await edge.result(
            "SendMessage", _message("sleep 1\nreply done"), tenant="shop", token=token
        )
        task_id = sent["task"]["id"]
        async with SseCall(
            edge, "SubscribeToTask", {"id": task_id}, tenant="shop", token=token
        ) as call:
            results = await call.events()
    assert results[0]["task"]["id"] == task_id
    last = results[-1]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_COMPLETED"
    assert last["message"]["parts"][0]["text"] == "done"
