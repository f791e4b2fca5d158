"""REFERENCE-CASES that no area test pinned end to end, through the real app and the public
test kit (``app.testing.edge``). The map of every case to its tests is ``REFERENCE_CASES.md``
next to this file; each test here names its case numbers."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from google.protobuf.json_format import MessageToDict, ParseDict
from jwt import PyJWK

from app.errors import Unauthorized
from app.security.jwks import JwksFetcher
from app.security.token import GatewayTokenVerifier
from app.settings import load_settings
from app.tenants.manifest import validate_tenant_id
from app.tenants.registry import TenantExists, TenantRecord
from app.testing.edge import EdgeHarness, demo_manifest, edge_harness
from app.testing.gateway import DEFAULT_IDENTITY_CLAIM, DEFAULT_TENANT_CLAIM, GatewayKit

CARD_PATH = "/.well-known/agent-card.json"
JWKS_PATH = "/.well-known/jwks.json"
PUSH = {"url": "https://gateway.test/a2a/push", "token": "notify-token"}


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url) as harness:
        await harness.add_tenant("demo")
        await harness.add_tenant("sibling")
        yield harness


def _segment(segment: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    )
    return value


def _protected(card: dict[str, Any]) -> dict[str, Any]:
    [signature] = card["signatures"]
    return _segment(signature["protected"])


def _reencode(card: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = MessageToDict(ParseDict(card, AgentCard()))
    return result


def _send_params(push: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    }
    if push is not None:
        params["configuration"] = {"taskPushNotificationConfig": push}
    return params


async def _verify_with_served_jwks(edge: EdgeHarness, card: dict[str, Any]) -> None:
    """Verify ``card`` the way a gateway does: keys only from the JWKS we serve, at its jku."""
    jwks = (await edge.client.get(JWKS_PATH)).json()
    served_jku = edge.settings.public_url.rstrip("/") + JWKS_PATH

    def provide(kid: str | None, jku: str | None) -> PyJWK:
        if jku != served_jku:
            raise LookupError("jku is not the edge's own JWKS")
        for key in jwks["keys"]:
            if key["kid"] == kid:
                return PyJWK(key)
        raise LookupError("unknown kid")

    verify = create_signature_verifier(provide, ["EdDSA"])
    verify(ParseDict(card, AgentCard()))


# --- cards (16-18, 40-43, 50-55) ---------------------------------------------------------------


async def test_case_18_interface_url_comes_from_public_url_not_the_request_host(
    db_url: str,
) -> None:
    # Differs by design (CONTRACT §2): the reference follows the request host; we never do.
    async with edge_harness(db_url, public_url="https://edge.example.com") as edge:
        for host in ("elsewhere.test", "edge.example.com", "localhost"):
            card = (await edge.client.get(CARD_PATH, headers={"Host": host})).json()
            iface, rest = card["supportedInterfaces"]
            assert iface["url"] == "https://edge.example.com/a2a"
            assert iface["protocolVersion"] == "1.0"
            assert rest["url"] == "https://edge.example.com"
            assert _protected(card)["jku"] == "https://edge.example.com/.well-known/jwks.json"


async def test_cases_40_41_42_extended_cards_verify_against_the_served_jwks(
    edge: EdgeHarness,
) -> None:
    stub = (await edge.client.get(CARD_PATH)).json()
    jwks = (await edge.client.get(JWKS_PATH)).json()
    cards = {
        tenant: await edge.result(
            "GetExtendedAgentCard", {"tenant": tenant}, token=edge.token(tenant=tenant)
        )
        for tenant in ("demo", "sibling")
    }
    for tenant, card in cards.items():
        iface, rest = card["supportedInterfaces"]
        assert (iface["tenant"], iface["url"]) == (tenant, "http://localhost/a2a")
        assert (rest["tenant"], rest["url"]) == (tenant, "http://localhost")
        # Same key, kid and jku as the stub card (CONTRACT §4); the jku is our own JWKS.
        assert _protected(card) == _protected(stub)
        assert _protected(card)["jku"] == "http://localhost/.well-known/jwks.json"
        assert _protected(card)["kid"] == jwks["keys"][0]["kid"]
        scheme = card["securitySchemes"]["gatewayJwt"]["httpAuthSecurityScheme"]
        assert scheme["scheme"] == "bearer"
        await _verify_with_served_jwks(edge, card)
        await _verify_with_served_jwks(edge, _reencode(_reencode(card)))  # case 42, 52
        assert _reencode(card) == card  # case 50
    assert cards["demo"]["signatures"] != cards["sibling"]["signatures"]  # case 41
    await _verify_with_served_jwks(edge, stub)


async def test_case_54_a_served_card_altered_in_transit_fails_verification(
    edge: EdgeHarness,
) -> None:
    card = await edge.result("GetExtendedAgentCard", {})
    card["name"] = "Renamed"
    with pytest.raises(InvalidSignaturesError):
        await _verify_with_served_jwks(edge, card)


async def test_case_43_a_token_for_one_tenant_cannot_fetch_another_tenants_card(
    edge: EdgeHarness,
) -> None:
    for addressed, authorized in (("sibling", "demo"), ("demo", "sibling")):
        r = await edge.rpc(
            "GetExtendedAgentCard", {"tenant": addressed}, token=edge.token(tenant=authorized)
        )
        assert r.status_code == 401
        assert "signatures" not in r.text


# --- routes (19, 20, 104, 105) -----------------------------------------------------------------


async def test_case_104_head_on_the_card_is_answered_like_get(edge: EdgeHarness) -> None:
    # Differs from the reference (404): Starlette answers HEAD on a GET route, without a body.
    get = await edge.client.get(CARD_PATH)
    head = await edge.client.head(CARD_PATH)
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["etag"] == get.headers["etag"]
    assert head.headers["content-length"] == str(len(get.content))
    assert head.headers["cache-control"] == get.headers["cache-control"]
    cached = await edge.client.head(CARD_PATH, headers={"If-None-Match": get.headers["etag"]})
    assert cached.status_code == 304


@pytest.mark.parametrize("path", ["/a2a/", "/A2A", "/a2a/x", "/a2a?x=1"])
async def test_case_105_post_off_the_exact_rpc_path_is_404(edge: EdgeHarness, path: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
    r = await edge.client.post(path, json=body, headers=edge.headers())
    if "?" in path:
        # The query is not part of the path: the request reaches the endpoint.
        assert r.status_code == 200
    else:
        assert r.status_code == 404


# --- body and envelope (101-103) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [b"null", b"[]", b'[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]', b"1", b'"x"']
)
async def test_case_102_null_array_or_scalar_body_is_invalid_request_with_null_id(
    edge: EdgeHarness, body: bytes
) -> None:
    # We refuse with -32600 (CONTRACT §3 step 9); the reference answered -32602.
    r = await edge.client.post("/a2a", content=body, headers=edge.headers())
    assert r.status_code == 200
    doc = r.json()
    assert doc["jsonrpc"] == "2.0" and doc["id"] is None
    assert doc["error"]["code"] == -32600
    assert doc["error"]["data"][0]["reason"] == "INVALID_REQUEST"


async def test_case_101_invalid_json_is_parse_error_never_a_500(edge: EdgeHarness) -> None:
    for body in (b"{", b'{"jsonrpc":"2.0",', b"\xff\xfe", b"{'a': 1}"):
        r = await edge.client.post("/a2a", content=body, headers=edge.headers())
        assert r.status_code == 200
        assert r.json()["error"]["code"] == -32700


async def test_case_103_a2a_version_1_0_0_is_not_supported(edge: EdgeHarness) -> None:
    r = await edge.rpc("GetExtendedAgentCard", {}, headers={"A2A-Version": "1.0.0"}, request_id=9)
    doc = r.json()
    assert (r.status_code, doc["id"], doc["error"]["code"]) == (200, 9, -32009)


# --- tenants (24-27, 32-34) --------------------------------------------------------------------


async def test_cases_24_25_empty_registry_serves_the_stub_and_every_rpc_is_unknown_tenant(
    db_url: str,
) -> None:
    # Differs by design (CONTRACT §8): the reference refuses to start without an agent.
    async with edge_harness(db_url) as edge:
        card = await edge.client.get(CARD_PATH)
        assert card.status_code == 200
        assert card.json()["capabilities"]["extendedAgentCard"] is True
        r = await edge.rpc("GetExtendedAgentCard", {})
        assert r.status_code == 200
        error = r.json()["error"]
        assert error["code"] == -32602 and "unknown tenant 'demo'" in error["message"]


async def test_case_26_a_tenant_is_registered_once(edge: EdgeHarness) -> None:
    with pytest.raises(TenantExists):
        await edge.add_tenant("demo")
    assert [t.id for t in await edge.services.tenant_store.list()].count("demo") == 1


BAD_TENANT_IDS = ["", " ", "Demo", "-x", "a" * 64, "__proto__", "de mo", "ü"]


@pytest.mark.parametrize("tenant_id", BAD_TENANT_IDS)
def test_case_27_invalid_tenant_ids_are_refused_by_the_id_rule(tenant_id: str) -> None:
    # The rule the CLI applies before anything is stored (tests/cli: ids are refused, exit 2).
    with pytest.raises(ValueError, match="tenant id"):
        validate_tenant_id(tenant_id)


async def test_case_27_the_registry_itself_refuses_invalid_tenant_ids(db_url: str) -> None:
    async with edge_harness(db_url) as edge:
        for tenant_id in BAD_TENANT_IDS:
            with pytest.raises(ValueError):
                await edge.services.tenant_store.add(
                    TenantRecord(
                        id=tenant_id,
                        manifest=demo_manifest(),
                        agent_kind="echo",
                        agent_config={},
                        require_push_config=True,
                        dedupe_message_ids=True,
                    )
                )
        assert await edge.services.tenant_store.list() == []


@pytest.mark.parametrize("tenant", ["", 7, None, ["demo"]])
async def test_case_32_empty_or_non_string_params_tenant_is_required(
    edge: EdgeHarness, tenant: object
) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "GetExtendedAgentCard", "params": {}}
    body["params"] = {"tenant": tenant}
    r = await edge.client.post("/a2a", json=body, headers=edge.headers())
    doc = r.json()
    assert (r.status_code, doc["id"], doc["error"]["code"]) == (200, 3, -32602)
    assert "params.tenant is required" in doc["error"]["message"]
    assert "GetExtendedAgentCard" in doc["error"]["message"]


async def test_case_32_params_that_are_not_an_object_name_the_tenant(edge: EdgeHarness) -> None:
    for params in ([], "demo", None):
        body = {"jsonrpc": "2.0", "id": 4, "method": "GetExtendedAgentCard", "params": params}
        r = await edge.client.post("/a2a", json=body, headers=edge.headers())
        doc = r.json()
        assert doc["id"] == 4 and doc["error"]["code"] in (-32602, -32600), doc


# --- token, over HTTP (9, 29-31, 36-39, 73) ----------------------------------------------------


async def test_cases_29_30_the_audience_is_the_configured_endpoint_only(db_url: str) -> None:
    # Differs by design: no audience override/callback; PUBLIC_URL + EDGE_RPC_PATH (CONTRACT §3
    # step 6) is the one audience, and the rpc path moves with it.
    async with edge_harness(db_url, public_url="https://edge.example.com", rpc_path="/rpc") as edge:
        await edge.add_tenant("demo")
        assert edge.endpoint == "https://edge.example.com/rpc"
        keyless = {"name": "no key"}
        for audience in (
            "http://localhost/a2a",
            "https://edge.example.com/a2a",
            "http://localhost/rpc",
        ):
            token = edge.gateway.mint(audience=audience, tenant="demo", identity=keyless)
            r = await edge.rpc("GetExtendedAgentCard", {}, token=token)
            assert r.status_code == 401, audience
        # The configured audience passes the token checks and reaches the identity check.
        token = edge.gateway.mint(audience=edge.endpoint, tenant="demo", identity=keyless)
        r = await edge.rpc("GetExtendedAgentCard", {}, token=token)
        assert r.status_code == 400 and "identity missing key" in r.text
        assert (await edge.client.post("/a2a", json={}, headers=edge.headers())).status_code == 404
        assert (await edge.result("GetExtendedAgentCard", {}))["supportedInterfaces"][0][
            "url"
        ] == "https://edge.example.com/rpc"


async def test_case_9_absent_identity_claim_is_400_over_http(edge: EdgeHarness) -> None:
    token = edge.gateway.mint(
        audience=edge.endpoint, tenant="demo", drop_claims=[DEFAULT_IDENTITY_CLAIM, "sub"]
    )
    r = await edge.rpc("GetExtendedAgentCard", {}, token=token)
    assert r.status_code == 400
    assert r.text == "bad request: gateway identity missing key"


CUSTOM = {
    "identity_claim": "https://example.test/who",
    "tenant_claim": "https://example.test/tenant",
}


async def test_cases_38_39_claim_name_overrides_over_http(db_url: str) -> None:
    async with edge_harness(db_url, **CUSTOM) as edge:
        await edge.add_tenant("demo")
        token = edge.gateway.mint(
            audience=edge.endpoint,
            tenant="demo",
            identity={"key": "custom-user"},
            identity_claim=CUSTOM["identity_claim"],
            tenant_claim=CUSTOM["tenant_claim"],
        )
        r = await edge.rpc("SendMessage", _send_params(), token=token, request_id=7)
        doc = r.json()
        assert (r.status_code, doc["id"], doc["error"]["code"]) == (200, 7, -32602)
        assert "taskPushNotificationConfig.url" in doc["error"]["message"]
        # Case 39: the tenant only under the default claim name authorizes no tenant.
        token = edge.gateway.mint(
            audience=edge.endpoint,
            tenant="demo",
            identity={"key": "custom-user"},
            identity_claim=CUSTOM["identity_claim"],
        )
        r = await edge.rpc("SendMessage", _send_params(PUSH), token=token)
        assert r.status_code == 401 and "authorizes tenant '<none>'" in r.text
        # And the identity only under the default name has no key.
        token = edge.gateway.mint(
            audience=edge.endpoint, tenant="demo", tenant_claim=CUSTOM["tenant_claim"]
        )
        r = await edge.rpc("GetExtendedAgentCard", {}, token=token)
        assert r.status_code == 400


async def test_case_73_foreign_tenant_is_a_plain_text_401_not_a_json_rpc_error(
    edge: EdgeHarness,
) -> None:
    r = await edge.rpc("SendMessage", _send_params(PUSH), token=edge.token(tenant="sibling"))
    assert r.status_code == 401
    assert r.headers["content-type"].startswith("text/plain")
    assert r.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert (
        r.text
        == "unauthorized: token authorizes tenant 'sibling', but the request addressed 'demo'"
    )
    assert "jsonrpc" not in r.text


async def test_case_36_absent_tenant_claim_is_not_a_wildcard_on_any_method(
    edge: EdgeHarness,
) -> None:
    token = edge.gateway.mint(audience=edge.endpoint, tenant=None, identity={"key": "u"})
    for method, params in (
        ("SendMessage", _send_params(PUSH)),
        ("GetTask", {"id": "x"}),
        ("ListTasks", {}),
        ("CancelTask", {"id": "x"}),
    ):
        r = await edge.rpc(method, params, token=token)
        assert r.status_code == 401, method
        assert "authorizes tenant '<none>'" in r.text


# --- verifier (94) and harness (71, 72) --------------------------------------------------------


async def test_case_94_cold_jku_on_another_path_is_fetched_and_a_404_is_401() -> None:
    kit = GatewayKit()
    settings = load_settings(gateway_origins=[kit.origin], public_url="http://localhost")
    jku = "https://gateway.test/other/keys.json"
    async with httpx.AsyncClient(transport=kit.transport()) as client:
        verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
        token = kit.mint(audience=settings.endpoint_url, headers={"jku": jku})
        with pytest.raises(Unauthorized) as info:
            await verifier.verify(f"Bearer {token}")
    assert info.value.reason == "jwks_unavailable"
    assert info.value.status_code == 401
    assert kit.fetch_log == [jku]


async def test_cases_71_72_harness_tokens_carry_the_endpoint_audience_tenant_and_key(
    edge: EdgeHarness,
) -> None:
    header, claims, _ = edge.token().split(".")
    assert _segment(header)["jku"] == "https://gateway.test/.well-known/jwks.json"
    body = _segment(claims)
    assert body["aud"] == "http://localhost/a2a"  # the endpoint, not the origin
    assert body[DEFAULT_TENANT_CLAIM] == "demo"
    assert body[DEFAULT_IDENTITY_CLAIM]["key"] == "user-1"
    assert (await edge.result("GetExtendedAgentCard", {}))["supportedInterfaces"][0]["tenant"] == (
        "demo"
    )
