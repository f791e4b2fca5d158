"""CONTRACT.md rules that no area test pinned through the real app (the rule-by-rule map is the
second section of ``REFERENCE_CASES.md``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.tenants.registry import TenantRecord
from app.testing.edge import EdgeHarness, demo_manifest, edge_harness


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url) as harness:
        await harness.add_tenant("demo")
        yield harness


# --- §2 routes -----------------------------------------------------------------------------------


async def test_section_2_jwks_path_is_configurable_and_only_served_there(db_url: str) -> None:
    async with edge_harness(db_url, jwks_path="/keys.json") as edge:
        served = await edge.client.get("/keys.json")
        assert served.status_code == 200
        assert served.headers["cache-control"] == "public, max-age=3600"
        assert [k["kid"] for k in served.json()["keys"]] == ["edge-test-key"]
        assert (await edge.client.get("/.well-known/jwks.json")).status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/agent-card.json/",
        "/.well-known/Agent-Card.json",
        "/.well-known/agent.json",
        "/.well-known/agent-card.json/x",
    ],
)
async def test_section_2_card_is_served_on_the_exact_path_only(
    edge: EdgeHarness, path: str
) -> None:
    assert (await edge.client.get(path)).status_code == 404


# --- §3 order: the token before anything else --------------------------------------------------


@pytest.mark.parametrize(
    "body", [b"{not json", b"x" * 100_000, b"[]", b'{"jsonrpc":"2.0","id":1,"method":"Nope"}']
)
async def test_section_3_the_token_is_checked_before_the_body_is_read(
    edge: EdgeHarness, body: bytes
) -> None:
    for auth in ({}, {"Authorization": "Bearer a.b.c"}):
        r = await edge.client.post("/a2a", content=body, headers={"A2A-Version": "1.0", **auth})
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        assert r.text.startswith("unauthorized: ")


async def test_section_3_step_10_tenant_mismatch_is_decided_before_the_tenant_lookup(
    edge: EdgeHarness,
) -> None:
    # A token for 'demo' cannot probe which other tenants exist: 401 either way.
    for addressed in ("ghost", "sibling-that-does-not-exist"):
        r = await edge.rpc("GetExtendedAgentCard", {"tenant": addressed}, token=edge.token())
        assert r.status_code == 401
        assert f"addressed '{addressed}'" in r.text


@pytest.mark.parametrize(
    ("method", "params", "code", "reason"),
    [
        ("Nope", {}, -32601, "METHOD_NOT_FOUND"),
        ("GetTask", {"id": "00000000-0000-0000-0000-000000000000"}, -32001, "TASK_NOT_FOUND"),
        ("CancelTask", {"id": "missing"}, -32001, "TASK_NOT_FOUND"),
        ("GetTask", {}, -32602, "INVALID_PARAMS"),
        ("SendStreamingMessage", {}, -32602, "INVALID_PARAMS"),
    ],
)
async def test_section_3_every_error_echoes_the_id_and_carries_error_info(
    edge: EdgeHarness, method: str, params: dict[str, object], code: int, reason: str
) -> None:
    for request_id in (17, "req-17"):
        r = await edge.rpc(method, params, request_id=request_id)
        assert r.status_code == 200
        doc = r.json()
        assert doc["jsonrpc"] == "2.0" and doc["id"] == request_id
        assert doc["error"]["code"] == code
        (info,) = doc["error"]["data"]
        assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
        assert (info["reason"], info["domain"]) == (reason, "a2a-protocol.org")


# --- §8 tenants ----------------------------------------------------------------------------------


async def test_section_8_a_running_edge_sees_registry_changes_without_restart(
    db_url: str,
) -> None:
    # Written straight to the store (as the CLI does from another process): no invalidate().
    async with edge_harness(db_url, tenant_refresh_seconds=0.05) as edge:
        unknown = await edge.rpc("GetExtendedAgentCard", {})
        assert "unknown tenant 'demo'" in unknown.json()["error"]["message"]
        await edge.services.tenant_store.add(
            TenantRecord(
                id="demo",
                manifest=demo_manifest(),
                agent_kind="echo",
                agent_config={},
                require_push_config=True,
                dedupe_message_ids=True,
            )
        )
        await asyncio.sleep(0.2)
        card = await edge.result("GetExtendedAgentCard", {})
        assert card["supportedInterfaces"][0]["tenant"] == "demo"
        await edge.services.tenant_store.update("demo", enabled=False)
        await asyncio.sleep(0.2)
        gone = await edge.rpc("GetExtendedAgentCard", {})
        assert "unknown tenant 'demo'" in gone.json()["error"]["message"]
