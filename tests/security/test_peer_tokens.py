"""Peer tokens (CONTRACT §10, issue 51): ``PEER_ORIGINS`` is verified by exactly the gateway
rules, kept apart from ``GATEWAY_ORIGINS``; a peer's identity is namespaced by its issuer and
no gateway identity can take that form."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import pytest

from app.errors import BadRequest, ConfigError, Unauthorized
from app.security.jwks import JwksFetcher
from app.security.token import GatewayTokenVerifier
from app.testing.gateway import GatewayKit, transport_for

from .conftest import ENDPOINT, GATEWAY, make_settings

PEER = "https://peer.test"


@pytest.fixture
def gateway() -> GatewayKit:
    return GatewayKit(origin=GATEWAY)


@pytest.fixture
def peer() -> GatewayKit:
    return GatewayKit(origin=PEER, kid="peer-key-1")


@pytest.fixture
async def verifier(gateway: GatewayKit, peer: GatewayKit) -> AsyncIterator[GatewayTokenVerifier]:
    settings = make_settings(peer_origins=[PEER])
    async with httpx.AsyncClient(transport=transport_for(gateway, peer)) as client:
        yield GatewayTokenVerifier(settings, JwksFetcher(settings, client), clock=time.time)


async def test_a_peer_token_verifies_as_a_namespaced_peer(
    verifier: GatewayTokenVerifier, peer: GatewayKit
) -> None:
    token = peer.mint(audience=ENDPOINT, identity={"key": "alice", "name": "Alice"})
    caller = await verifier.verify(f"Bearer {token}")
    assert caller.peer is True
    assert caller.identity_key == f"peer:{PEER}:alice"
    assert caller.issuer == PEER
    assert caller.identity["name"] == "Alice"


async def test_a_gateway_token_stays_a_gateway_token(
    verifier: GatewayTokenVerifier, gateway: GatewayKit
) -> None:
    caller = await verifier.verify(f"Bearer {gateway.mint(audience=ENDPOINT)}")
    assert caller.peer is False
    assert caller.identity_key == "user-1"


async def test_a_gateway_identity_cannot_take_the_peer_form(
    verifier: GatewayTokenVerifier, gateway: GatewayKit
) -> None:
    token = gateway.mint(audience=ENDPOINT, identity={"key": f"peer:{PEER}:alice"})
    with pytest.raises(BadRequest) as info:
        await verifier.verify(f"Bearer {token}")
    assert info.value.reason == "identity_reserved"


async def test_a_peer_cannot_claim_the_gateway_as_issuer(
    verifier: GatewayTokenVerifier, peer: GatewayKit
) -> None:
    # The jku names the peer's JWKS (allowlisted as a peer), iss names the gateway.
    token = peer.mint(audience=ENDPOINT, claims={"iss": GATEWAY})
    with pytest.raises(Unauthorized) as info:
        await verifier.verify(f"Bearer {token}")
    assert info.value.reason == "iss_mismatch"


async def test_a_gateway_key_under_a_peer_jku_is_refused(
    verifier: GatewayTokenVerifier, gateway: GatewayKit, peer: GatewayKit
) -> None:
    # Signed by the gateway's key but naming the peer's JWKS: the peer's keys do not verify it.
    token = gateway.mint(
        audience=ENDPOINT, headers={"jku": peer.jwks_url, "kid": peer.kid}, claims={"iss": PEER}
    )
    with pytest.raises(Unauthorized) as info:
        await verifier.verify(f"Bearer {token}")
    assert info.value.reason == "bad_signature"


async def test_without_peer_origins_a_peer_token_is_refused_before_any_fetch(
    gateway: GatewayKit, peer: GatewayKit
) -> None:
    settings = make_settings()
    async with httpx.AsyncClient(transport=transport_for(gateway, peer)) as client:
        verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
        with pytest.raises(Unauthorized) as info:
            await verifier.verify(f"Bearer {peer.mint(audience=ENDPOINT)}")
    assert info.value.reason == "jku_not_allowed"
    assert peer.fetch_log == []


async def test_the_fetcher_never_contacts_a_peer_origin_it_was_not_given(
    gateway: GatewayKit, peer: GatewayKit
) -> None:
    other = GatewayKit(origin="https://other.test")
    settings = make_settings(peer_origins=[PEER])
    async with httpx.AsyncClient(transport=transport_for(gateway, peer, other)) as client:
        verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
        with pytest.raises(Unauthorized):
            await verifier.verify(f"Bearer {other.mint(audience=ENDPOINT)}")
    assert other.fetch_log == []


# --- settings ----------------------------------------------------------------------------------


def test_peer_origins_take_the_gateway_origins_format() -> None:
    settings = make_settings(peer_origins='["https://a.test","b.test","http://localhost:9000"]')
    settings = make_settings(peer_origins=settings.peer_origins, allow_loopback_http=True)
    assert settings.peer_allowlist.origins == frozenset(
        {"https://a.test", "https://b.test", "http://localhost:9000"}
    )
    settings.validate_for_serving()


def test_peer_origins_default_to_none() -> None:
    assert make_settings().peer_allowlist.origins == frozenset()


def test_plain_http_peers_are_upgraded_unless_loopback_development() -> None:
    settings = make_settings(peer_origins=["http://peer.example"], allow_loopback_http=True)
    assert settings.peer_allowlist.origins == frozenset({"https://peer.example"})
    settings = make_settings(peer_origins=["http://localhost:9000"])
    assert settings.peer_allowlist.origins == frozenset({"https://localhost:9000"})


@pytest.mark.parametrize("entry", ["https://peer.test/a2a", "https://peer.test?x=1", "user@x"])
def test_a_peer_entry_naming_more_than_an_origin_stops_the_edge(entry: str) -> None:
    settings = make_settings(peer_origins=[entry])
    with pytest.raises(ConfigError) as info:
        settings.validate_for_serving()
    assert str(info.value).startswith("PEER_ORIGINS:")


def test_an_origin_in_both_lists_stops_the_edge() -> None:
    settings = make_settings(peer_origins=[GATEWAY])
    with pytest.raises(ConfigError) as info:
        settings.validate_for_serving()
    assert "PEER_ORIGINS" in str(info.value) and "never a gateway" in str(info.value)


def test_several_peers_in_one_string_must_be_a_json_array() -> None:
    with pytest.raises(ConfigError):
        make_settings(peer_origins="https://a.test,https://b.test")
