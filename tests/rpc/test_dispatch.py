"""The RPC path through the real app: CONTRACT §3 steps 9-12 and the tenant rules of step 10
(REFERENCE-CASES 21-23, 32-39, 47, 49, 101-103)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.testing.edge import EdgeHarness, edge_harness


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url) as harness:
        await harness.add_tenant("demo")
        await harness.add_tenant("sibling")
        yield harness


def _error(response) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.text
    doc = response.json()
    assert "error" in doc, doc
    return doc


async def test_no_bearer_is_401_with_challenge(edge: EdgeHarness) -> None:
    r = await edge.client.post("/a2a", content=b"{}", headers={"A2A-Version": "1.0"})
    assert r.status_code == 401
    assert "invalid_token" in r.headers["www-authenticate"]
    assert r.text.startswith("unauthorized: ")


async def test_token_from_unlisted_origin_is_401(edge: EdgeHarness) -> None:
    from app.testing.gateway import GatewayKit

    evil = GatewayKit(origin="https://evil.test")
    token = evil.mint(audience=edge.endpoint, tenant="demo")
    r = await edge.rpc("GetExtendedAgentCard", {}, token=token)
    assert r.status_code == 401
    assert "not in the allowed gateway origins" in r.text
    assert token not in r.text
    assert evil.fetch_log == [] and edge.gateway.fetch_log == []


async def test_identity_without_key_is_400(edge: EdgeHarness) -> None:
    r = await edge.rpc("GetExtendedAgentCard", {}, identity={"name": "no key"})
    assert r.status_code == 400
    assert "identity missing key" in r.text


async def test_invalid_json_is_parse_error(edge: EdgeHarness) -> None:
    r = await edge.client.post("/a2a", content=b"{not json", headers=edge.headers())
    doc = _error(r)
    assert doc["error"]["code"] == -32700 and doc["id"] is None


async def test_batch_is_invalid_request(edge: EdgeHarness) -> None:
    r = await edge.client.post("/a2a", content=b"[]", headers=edge.headers())
    assert _error(r)["error"]["code"] == -32600


async def test_body_too_large_is_413(edge: EdgeHarness) -> None:
    big = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"x":"' + b"a" * 70_000 + b'"}}'
    r = await edge.client.post("/a2a", content=big, headers=edge.headers())
    assert r.status_code == 413


async def test_body_too_large_without_content_length_is_413(edge: EdgeHarness) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(20):
            yield b"a" * 8192

    r = await edge.client.post("/a2a", content=chunks(), headers=edge.headers())
    assert r.status_code == 413


async def test_missing_tenant_names_the_param_and_the_card_method(edge: EdgeHarness) -> None:
    r = await edge.client.post(
        "/a2a",
        json={"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}},
        headers=edge.headers(),
    )
    doc = _error(r)
    assert doc["id"] == 7 and doc["error"]["code"] == -32602
    assert "params.tenant is required" in doc["error"]["message"]
    assert "GetExtendedAgentCard" in doc["error"]["message"]


async def test_sibling_token_is_401(edge: EdgeHarness) -> None:
    r = await edge.rpc(
        "GetExtendedAgentCard", {"tenant": "demo"}, token=edge.token(tenant="sibling")
    )
    assert r.status_code == 401
    assert "authorizes tenant 'sibling'" in r.text
    assert "addressed 'demo'" in r.text


@pytest.mark.parametrize("claim", [None, ["demo"], 7, ""])
async def test_absent_or_non_string_tenant_claim_is_none(edge: EdgeHarness, claim: object) -> None:
    if claim is None:
        token = edge.gateway.mint(audience=edge.endpoint, tenant=None, identity={"key": "u1"})
    else:
        token = edge.gateway.mint(
            audience=edge.endpoint,
            identity={"key": "u1"},
            claims={"https://loopingai.org/tenant": claim},
        )
    r = await edge.rpc("GetExtendedAgentCard", {"tenant": "demo"}, token=token)
    assert r.status_code == 401
    assert "authorizes tenant '<none>'" in r.text


@pytest.mark.parametrize("name", ["ghost", "__proto__", "constructor", "toString"])
async def test_unknown_tenant(edge: EdgeHarness, name: str) -> None:
    r = await edge.rpc("GetExtendedAgentCard", {"tenant": name}, token=edge.token(tenant=name))
    doc = _error(r)
    assert doc["error"]["code"] == -32602
    assert f"unknown tenant '{name}'" in doc["error"]["message"]


async def test_disabled_tenant_is_unknown(edge: EdgeHarness) -> None:
    await edge.services.tenant_store.update("sibling", enabled=False)
    edge.services.tenants.invalidate()
    r = await edge.rpc(
        "GetExtendedAgentCard", {"tenant": "sibling"}, token=edge.token(tenant="sibling")
    )
    assert "unknown tenant 'sibling'" in _error(r)["error"]["message"]


@pytest.mark.parametrize("version", [None, "0.3", "1.0.0", "2.0"])
async def test_version_other_than_1_0_is_32009(edge: EdgeHarness, version: str | None) -> None:
    headers = edge.headers()
    del headers["A2A-Version"]
    if version is not None:
        headers["A2A-Version"] = version
    r = await edge.client.post(
        "/a2a",
        json={"jsonrpc": "2.0", "id": 11, "method": "GetTask", "params": {"tenant": "demo"}},
        headers=headers,
    )
    doc = _error(r)
    assert doc["id"] == 11
    assert doc["error"]["code"] == -32009
    assert "1.0" in doc["error"]["message"]
    assert doc["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"


@pytest.mark.parametrize("method", ["message/send", "tasks/get", "Nope", "sendMessage"])
async def test_unknown_methods_are_32601(edge: EdgeHarness, method: str) -> None:
    doc = _error(await edge.rpc(method, {}, request_id="abc"))
    assert doc["id"] == "abc" and doc["error"]["code"] == -32601


@pytest.mark.parametrize("method", ["SendStreamingMessage", "SubscribeToTask"])
async def test_streaming_methods_check_params_before_streaming(
    edge: EdgeHarness, method: str
) -> None:
    # Served now (tests/tasks/test_streams.py); bad params are a plain -32602 answer.
    assert _error(await edge.rpc(method, {}))["error"]["code"] == -32602


async def test_extended_card_is_the_addressed_tenants(edge: EdgeHarness) -> None:
    card = await edge.result("GetExtendedAgentCard", {})
    assert card["supportedInterfaces"][0]["tenant"] == "demo"
    assert card["supportedInterfaces"][0]["url"] == "http://localhost/a2a"
    sibling = await edge.result(
        "GetExtendedAgentCard", {"tenant": "sibling"}, token=edge.token(tenant="sibling")
    )
    assert sibling["supportedInterfaces"][0]["tenant"] == "sibling"
    assert card["signatures"] and card["signatures"] != sibling["signatures"]


async def test_internal_fault_is_32603_without_detail(edge: EdgeHarness, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(edge.services.cards, "tenant_card", boom)
    doc = _error(await edge.rpc("GetExtendedAgentCard", {}))
    assert doc["error"]["code"] == -32603
    assert "secret" not in str(doc)


async def test_a_failing_tenant_lookup_is_32603_without_detail(
    edge: EdgeHarness, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    # The tenant lookup reads the database when its snapshot is stale; a database outage
    # there is a real internal fault the gateway should retry (CONTRACT §3), never a 500.
    async def down(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise ConnectionRefusedError("secret connection detail to 10.0.0.5:5432")

    monkeypatch.setattr(edge.services.tenants, "get", down)
    response = await edge.rpc("GetExtendedAgentCard", {}, request_id=41)
    doc = _error(response)
    assert doc["id"] == 41
    assert doc["error"]["code"] == -32603
    assert "secret" not in response.text and "ConnectionRefused" not in response.text


async def test_metrics_count_methods_and_refusals(edge: EdgeHarness) -> None:
    await edge.rpc("GetExtendedAgentCard", {})
    await edge.client.post("/a2a", content=b"{}")
    text = (await edge.client.get("/metrics")).text
    assert 'edge_rpc_requests_total{method="GetExtendedAgentCard",outcome="ok"} 1.0' in text
    assert 'edge_token_verifications_total{result="missing_bearer"} 1.0' in text
    assert 'edge_token_verifications_total{result="ok"} 1.0' in text
