"""Public routes (CONTRACT §2; REFERENCE-CASES 15-20, 57, 104-105)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.db.engine import Database
from app.main import create_app
from app.ops.health import Readiness
from app.ops.metrics import CONTENT_TYPE_LATEST
from app.testing.edge import EdgeHarness, demo_manifest, edge_harness


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url) as harness:
        await harness.add_tenant("demo")
        yield harness


def _b64json(segment: str) -> dict:  # type: ignore[type-arg]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


async def test_jwks_is_public_and_cacheable(edge: EdgeHarness) -> None:
    r = await edge.client.get("/.well-known/jwks.json")
    assert r.status_code == 200
    assert r.headers["cache-control"] == "public, max-age=3600"
    (key,) = r.json()["keys"]
    assert "d" not in key
    assert key == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": key["x"],
        "kid": "edge-test-key",
        "use": "sig",
        "alg": "EdDSA",
    }


async def test_stub_card_names_no_tenant_and_is_signed(edge: EdgeHarness) -> None:
    r = await edge.client.get("/.well-known/agent-card.json")
    assert r.status_code == 200
    card = r.json()
    assert card["capabilities"]["extendedAgentCard"] is True
    assert card["capabilities"]["pushNotifications"] is True
    iface, rest = card["supportedInterfaces"]
    assert iface == {
        "url": "http://localhost/a2a",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert rest == {
        "url": "http://localhost",
        "protocolBinding": "HTTP+JSON",
        "protocolVersion": "1.0",
    }
    header = _b64json(card["signatures"][0]["protected"])
    assert header == {
        "alg": "EdDSA",
        "kid": "edge-test-key",
        "typ": "JOSE",
        "jku": "http://localhost/.well-known/jwks.json",
    }
    assert "max-age=" in r.headers["cache-control"]


async def test_card_etag_and_304(edge: EdgeHarness) -> None:
    first = await edge.client.get("/.well-known/agent-card.json")
    etag = first.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    again = await edge.client.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    other = await edge.client.get(
        "/.well-known/agent-card.json", headers={"If-None-Match": '"other"'}
    )
    assert other.status_code == 200


async def test_card_urls_come_from_public_url_never_from_host(edge: EdgeHarness) -> None:
    r = await edge.client.get(
        "/.well-known/agent-card.json",
        headers={
            "Host": "evil.test",
            "X-Forwarded-Host": "evil.test",
            "X-Forwarded-Proto": "https",
        },
    )
    assert "evil" not in r.text
    assert r.json()["supportedInterfaces"][0]["url"] == "http://localhost/a2a"


async def test_audience_is_not_taken_from_forwarded_headers(edge: EdgeHarness) -> None:
    token = edge.gateway.mint(
        audience="https://evil.test/a2a", tenant="demo", identity={"key": "u1"}
    )
    r = await edge.rpc(
        "GetExtendedAgentCard",
        {},
        token=token,
        headers={"X-Forwarded-Host": "evil.test", "X-Forwarded-Proto": "https"},
    )
    assert r.status_code == 401
    assert r.text == "unauthorized: token audience is not this endpoint"


@pytest.mark.parametrize("host", ["evil.test", "evil.test:443", "localhost:8443"])
async def test_audience_is_not_taken_from_the_host_header(edge: EdgeHarness, host: str) -> None:
    # CONTRACT §2: a token minted for the host an attacker names in Host is still refused.
    scheme = "http" if host.startswith("localhost") else "https"
    token = edge.gateway.mint(
        audience=f"{scheme}://{host}/a2a", tenant="demo", identity={"key": "u1"}
    )
    r = await edge.rpc("GetExtendedAgentCard", {}, token=token, headers={"Host": host})
    assert r.status_code == 401
    assert r.text == "unauthorized: token audience is not this endpoint"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/nope"),
        ("POST", "/a2a/"),
        ("POST", "/rpc"),
        ("GET", "/a2a"),
        ("POST", "/.well-known/agent-card.json"),
        ("DELETE", "/.well-known/jwks.json"),
        # FastAPI's documentation routes are off unless EDGE_OPENAPI_DOCS turns them on.
        ("GET", "/docs"),
        ("GET", "/redoc"),
        ("GET", "/openapi.json"),
    ],
)
async def test_anything_else_is_404(edge: EdgeHarness, method: str, path: str) -> None:
    r = await edge.client.request(method, path, headers=edge.headers())
    assert r.status_code == 404


async def test_health_routes(edge: EdgeHarness) -> None:
    assert (await edge.client.get("/livez")).status_code == 200
    ready = await edge.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["schema"] == "ok"
    metrics = await edge.client.get("/metrics")
    assert metrics.status_code == 200
    assert "edge_rpc_requests_total" in metrics.text
    # Prometheus' text exposition format, as scrapers negotiate it.
    assert metrics.headers["content-type"] == CONTENT_TYPE_LATEST
    assert metrics.headers["content-type"].startswith("text/plain; version=")


async def test_readyz_fails_while_draining(edge: EdgeHarness) -> None:
    edge.services.readiness.draining = True
    r = await edge.client.get("/readyz")
    assert r.status_code == 503
    assert r.json()["draining"] == "yes"


async def test_readyz_fails_without_the_signing_key(edge: EdgeHarness) -> None:
    edge.services.readiness.key_loaded = False
    r = await edge.client.get("/readyz")
    assert r.status_code == 503
    assert r.json()["key"] == "missing"


async def test_readyz_fails_when_the_database_is_unreachable(
    edge: EdgeHarness, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    # A real connection attempt to a closed port (nothing listens on port 1), not a mock.
    unreachable = Database("postgresql+asyncpg://postgres@127.0.0.1:1/nowhere")
    monkeypatch.setattr(edge.services, "readiness", Readiness(db=unreachable, key_loaded=True))
    try:
        r = await edge.client.get("/readyz")
    finally:
        await unreachable.dispose()
    assert r.status_code == 503
    assert r.json() == {
        "status": "not ready",
        "key": "ok",
        "draining": "no",
        "database": "unreachable",
        "schema": "unknown",
    }  # and nothing of the driver's error (host, port, exception) in the answer


async def test_readyz_fails_when_schema_is_behind(edge: EdgeHarness) -> None:
    from sqlalchemy import text

    async with edge.services.db.transaction() as s:
        await s.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    try:
        r = await edge.client.get("/readyz")
        assert r.status_code == 503
        assert r.json()["schema"] == "not at head"
    finally:
        from app.db.migrate import head_revision

        head = head_revision(edge.settings.database_url)
        async with edge.services.db.transaction() as s:
            await s.execute(text(f"UPDATE alembic_version SET version_num = '{head}'"))


async def test_stub_card_lists_tenants_changed_without_restart(edge: EdgeHarness) -> None:
    first = await edge.client.get("/.well-known/agent-card.json")
    await edge.add_tenant("second")
    second = await edge.client.get("/.well-known/agent-card.json")
    assert first.headers["etag"] != second.headers["etag"]
    assert "second" in second.json()["description"]


async def test_a_removed_and_re_added_tenant_serves_its_new_card(edge: EdgeHarness) -> None:
    # Found by audit: a re-added tenant starts at revision 1 again, and the signed-card cache
    # keyed on (tenant, revision) served the removed tenant's card on every running edge.
    before = await edge.result("GetExtendedAgentCard", {})
    assert before["name"] == "Demo agent"
    await edge.services.tenant_store.remove("demo")
    await edge.add_tenant("demo", manifest=demo_manifest("Renamed agent"))
    after = await edge.result("GetExtendedAgentCard", {})
    assert after["name"] == "Renamed agent"
    assert after["signatures"] != before["signatures"]


async def test_weak_if_none_match_on_our_tag_is_304(edge: EdgeHarness) -> None:
    etag = (await edge.client.get("/.well-known/agent-card.json")).headers["etag"]
    r = await edge.client.get(
        "/.well-known/agent-card.json", headers={"If-None-Match": f'"x", W/{etag}'}
    )
    assert r.status_code == 304


async def test_two_authorization_headers_are_refused(edge: EdgeHarness) -> None:
    token = edge.token()
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{"tenant":"demo"}}'
    headers = [
        ("Authorization", f"Bearer {token}"),
        ("Authorization", f"Bearer {token}"),
        ("A2A-Version", "1.0"),
        ("Content-Type", "application/json"),
    ]
    r = await edge.client.post("/a2a", content=body, headers=headers)
    assert r.status_code == 401
    assert "more than one Authorization header" in r.text
    assert token not in r.text
    single = await edge.client.post("/a2a", content=body, headers=headers[1:])
    assert single.status_code == 200 and "result" in single.json()


async def test_openapi_docs_are_served_only_when_the_setting_says_so(db_url: str) -> None:
    async with edge_harness(db_url, openapi_docs=True) as harness:
        schema = (await harness.client.get("/openapi.json")).json()
        assert {"/livez", "/readyz", "/metrics", "/.well-known/agent-card.json"} <= set(
            schema["paths"]
        )
        assert "/a2a" not in schema["paths"]  # the JSON-RPC methods are not described there
        assert (await harness.client.get("/docs")).status_code == 200


def test_the_app_is_a_fastapi_app(edge: EdgeHarness) -> None:
    assert isinstance(create_app(edge.services), FastAPI)
    assert isinstance(create_app(edge.services, raw_rpc=False), FastAPI)


async def test_the_rpc_route_variant_answers_like_the_raw_endpoint(edge: EdgeHarness) -> None:
    """``raw_rpc=False`` (the bench's comparison) gives the same answers, byte for byte."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"tenant": "demo", "id": "x"}}
    routed = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(edge.services, raw_rpc=False)),
        base_url=str(edge.client.base_url),
    )
    async with routed:
        for headers in ({}, edge.headers(), {**edge.headers(), "A2A-Version": "0.3"}):
            raw = await edge.client.post("/a2a", json=body, headers=headers)
            via_route = await routed.post("/a2a", json=body, headers=headers)
            assert (via_route.status_code, via_route.content) == (raw.status_code, raw.content)
            assert via_route.headers.get("www-authenticate") == raw.headers.get("www-authenticate")
        assert (await routed.post("/a2a/", json=body)).status_code == 404


# --- issue 47: Content-Type, early refusals, aborted uploads -----------------------------------

_CARD_BODY = b'{"jsonrpc":"2.0","id":7,"method":"GetExtendedAgentCard","params":{"tenant":"demo"}}'


async def test_only_json_bodies_are_read_anything_else_is_415(edge: EdgeHarness) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "text/json"):
        headers = {**edge.headers(), "Content-Type": content_type}
        r = await edge.client.post("/a2a", content=_CARD_BODY, headers=headers)
        assert r.status_code == 415, content_type
        assert r.headers["content-type"] == "application/json"
        assert r.headers["connection"] == "close"  # the body was not read
        doc = r.json()
        assert doc["id"] is None and doc["error"]["code"] == -32005
        assert doc["error"]["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
        assert content_type not in r.text
    # The token is checked first (CONTRACT §3 steps 1-8 before the body).
    r = await edge.client.post("/a2a", content=_CARD_BODY, headers={"Content-Type": "text/plain"})
    assert r.status_code == 401
    # JSON with parameters, in any case, and no Content-Type at all are read.
    for content_type in ("application/json; charset=utf-8", "Application/A2A+JSON", None):
        headers = edge.headers()
        del headers["Content-Type"]
        if content_type is not None:
            headers["Content-Type"] = content_type
        r = await edge.client.post("/a2a", content=_CARD_BODY, headers=headers)
        assert r.status_code == 200 and r.json()["id"] == 7 and "result" in r.json()
        assert "connection" not in r.headers


async def test_an_answer_before_the_body_was_read_closes_the_connection(
    edge: EdgeHarness,
) -> None:
    # A kept-alive connection would read and discard the whole body after an early refusal.
    unauthorized = await edge.client.post("/a2a", content=_CARD_BODY, headers={})
    assert unauthorized.status_code == 401
    assert unauthorized.headers["connection"] == "close"
    too_large = await edge.client.post(
        "/a2a", content=b"x" * (edge.settings.max_body_bytes + 1), headers=edge.headers()
    )
    assert too_large.status_code == 413
    assert too_large.headers["connection"] == "close"


async def test_a_client_that_aborts_its_upload_is_counted_not_logged(
    edge: EdgeHarness, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(edge.services)
    token = edge.token()
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/a2a",
        "root_path": "",
        "headers": [
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-length", b"1000"),
            (b"content-type", b"application/json"),
        ],
    }
    messages = [{"type": "http.request", "body": b"{", "more_body": True}]

    async def receive() -> dict[str, object]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(_: object) -> None:
        pass

    with caplog.at_level(logging.WARNING):
        await app(scope, receive, send)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    metrics = edge.services.metrics.render().decode()
    assert "edge_client_disconnects_total 1.0" in metrics
