"""The public gateway test kit (REFERENCE-CASES 71-76 as they apply to a Python kit)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from app.errors import Unauthorized
from app.security.jose_strict import b64url_decode
from app.security.jwks import JwksFetcher
from app.security.token import GatewayTokenVerifier
from app.settings import load_settings
from app.testing.gateway import (
    DEFAULT_IDENTITY_CLAIM,
    DEFAULT_TENANT_CLAIM,
    GatewayKit,
    transport_for,
)
from app.testing.jwks_server import serve_jwks, status

ENDPOINT = "http://localhost/a2a"


def decode(token: str) -> tuple[dict[str, object], dict[str, object]]:
    header, payload, _ = token.split(".")
    return json.loads(b64url_decode(header)), json.loads(b64url_decode(payload))


def test_minted_token_looks_like_the_gateways() -> None:  # ref 71, 72
    kit = GatewayKit()
    before = int(time.time())
    header, claims = decode(kit.mint(audience=ENDPOINT, tenant="acme"))
    assert header == {
        "alg": "EdDSA",
        "kid": "gw-key-1",
        "typ": "JWT",
        "jku": "https://gateway.test/.well-known/jwks.json",
    }
    assert claims["aud"] == ENDPOINT  # the endpoint, not the origin
    assert claims["iss"] == "https://gateway.test"
    assert claims[DEFAULT_TENANT_CLAIM] == "acme"
    identity = claims[DEFAULT_IDENTITY_CLAIM]
    assert isinstance(identity, dict) and identity["key"] == "user-1"
    assert claims["sub"] == "user-1"
    assert isinstance(claims["iat"], int) and claims["iat"] >= before
    assert claims["exp"] == claims["iat"] + 120
    assert isinstance(claims["jti"], str) and len(claims["jti"]) == 36


def test_mint_overrides_and_drops() -> None:
    kit = GatewayKit()
    header, claims = decode(
        kit.mint(
            audience=ENDPOINT,
            tenant=None,
            now=1000,
            ttl=5,
            headers={"typ": "foo"},
            claims={"extra": 1},
            drop_headers=["kid"],
            drop_claims=["jti"],
            identity={"key": "k2"},
            identity_claim="who",
            tenant_claim="t",
        )
    )
    assert header["typ"] == "foo" and "kid" not in header
    assert (claims["iat"], claims["exp"], claims["extra"]) == (1000, 1005, 1)
    assert "jti" not in claims and "t" not in claims and DEFAULT_TENANT_CLAIM not in claims
    assert claims["who"] == {"key": "k2"}


def test_signature_verifies_with_the_published_key() -> None:
    kit = GatewayKit()
    token = kit.mint(audience=ENDPOINT)
    (jwk,) = kit.jwks()["keys"]
    assert jwk == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": jwk["x"],
        "kid": "gw-key-1",
        "use": "sig",
        "alg": "EdDSA",
    }
    assert "d" not in jwk
    head, _, signature = token.rpartition(".")
    key = Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
    key.verify(b64url_decode(signature), head.encode())


def test_sign_raw_signs_the_bytes_as_given() -> None:
    kit = GatewayKit()
    token = kit.sign_raw(b'{"alg":"EdDSA","alg":"EdDSA"}', b'{"a":1,"a":2}')
    header, payload, _ = token.split(".")
    assert b64url_decode(header) == b'{"alg":"EdDSA","alg":"EdDSA"}'
    assert b64url_decode(payload) == b'{"a":1,"a":2}'


def test_bearer_headers() -> None:
    headers = GatewayKit().bearer(audience=ENDPOINT)
    assert headers["A2A-Version"] == "1.0"
    scheme, token = headers["Authorization"].split(" ")
    assert scheme == "Bearer" and token.count(".") == 2


def test_rotate_replaces_the_key() -> None:
    kit = GatewayKit()
    old = kit.jwks()["keys"][0]
    kit.rotate("gw-key-2")
    assert [k["kid"] for k in kit.jwks()["keys"]] == ["gw-key-2"]
    assert kit.jwks()["keys"][0]["x"] != old["x"]
    assert decode(kit.mint(audience=ENDPOINT))[0]["kid"] == "gw-key-2"
    kit.rotate("gw-key-3", keep_previous=True)
    assert [k["kid"] for k in kit.jwks()["keys"]] == ["gw-key-3", "gw-key-2"]


async def test_transport_serves_the_jwks_and_404s_everything_else() -> None:  # ref 74
    kit = GatewayKit()
    async with httpx.AsyncClient(transport=kit.transport()) as client:
        ok = await client.get(kit.jwks_url)
        assert ok.status_code == 200 and ok.json() == kit.jwks()
        assert (await client.get("https://gateway.test/other")).status_code == 404
        assert (await client.get("https://evil.test/.well-known/jwks.json")).status_code == 404
        assert (await client.post(kit.jwks_url)).status_code == 404
    assert kit.fetch_log == [
        kit.jwks_url,
        "https://gateway.test/other",
        "https://evil.test/.well-known/jwks.json",
        kit.jwks_url,
    ]


async def test_transport_for_several_gateways() -> None:
    a, b = GatewayKit(), GatewayKit(origin="https://other.test", kid="other")
    async with httpx.AsyncClient(transport=transport_for(a, b)) as client:
        assert (await client.get(b.jwks_url)).json()["keys"][0]["kid"] == "other"
        assert (await client.get("https://third.test/.well-known/jwks.json")).status_code == 404
    assert a.fetch_log == [] and b.fetch_log == [b.jwks_url]


async def test_kit_tokens_pass_the_real_verifier() -> None:
    kit = GatewayKit()
    settings = load_settings(gateway_origins=[kit.origin], public_url="http://localhost")
    async with httpx.AsyncClient(transport=kit.transport()) as client:
        verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
        caller = await verifier.verify(kit.bearer(audience=settings.endpoint_url)["Authorization"])
        assert (caller.tenant, caller.identity_key) == ("demo", "user-1")
        # ref 73 at this level: a token for another audience is refused.
        with pytest.raises(Unauthorized):
            await verifier.verify(
                kit.bearer(audience="https://elsewhere.test/a2a")["Authorization"]
            )


async def test_jwks_server_serves_over_tcp_and_shuts_down_cleanly() -> None:
    kit = GatewayKit()
    async with serve_jwks(kit) as server:
        assert kit.origin == server.base_url
        assert server.base_url.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(kit.jwks_url)).json() == kit.jwks()
            assert (await client.get(server.base_url + "/nope")).status_code == 404
            server.set_behaviour(status(502))
            assert (await client.get(kit.jwks_url)).status_code == 502
            server.set_behaviour("redirect")
            redirect = await client.get(kit.jwks_url)
            assert redirect.status_code == 302 and redirect.headers["location"] == kit.jwks_url
    assert server.request_count == 4
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(trust_env=False) as client:
            await client.get(kit.jwks_url)


async def test_jwks_server_shuts_down_while_a_client_is_being_dripped() -> None:
    kit = GatewayKit()
    async with serve_jwks(kit, behaviour="slow_drip", drip_interval=0.01) as server:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(b"GET /.well-known/jwks.json HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        assert await reader.readexactly(3) == b"   "
    # The server closed the connection on exit instead of dripping forever: read() reaches EOF.
    rest = await asyncio.wait_for(reader.read(), timeout=5)
    assert set(rest) <= {ord(" ")}
    assert reader.at_eof()
    writer.close()


async def test_unknown_behaviour_is_refused() -> None:
    with pytest.raises(ValueError):
        async with serve_jwks(GatewayKit(), behaviour="explode"):
            pass
