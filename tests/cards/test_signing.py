"""Signed cards: header, fixed point, independent verification, tamper detection.

REFERENCE-CASES 16, 17, 40-42, 50-55.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from a2a.types import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from google.protobuf.json_format import MessageToDict, ParseDict

from app.cards.builder import CardOptions
from app.cards.canonical import canonical_payload
from app.cards.service import CardService
from app.cards.signing import protected_header, sign_card
from app.security.keys import SigningKey, b64url_decode, generate_private_jwk
from app.settings import Settings
from app.tenants.manifest import TenantManifest

from .conftest import key_provider_for

BOTH = [CardOptions(advertise_security_schemes=True), CardOptions(advertise_security_schemes=False)]


def _cards(
    settings: Settings, key: SigningKey, manifest: TenantManifest, options: CardOptions
) -> list[dict[str, Any]]:
    service = CardService(settings, key, options=options)
    return [
        service.stub_card(["alpha", "beta"]).card,
        service.tenant_card("alpha", manifest, 1),
    ]


def _reencode(card: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = MessageToDict(ParseDict(card, AgentCard()))
    return result


def _verify(card: dict[str, Any], key: SigningKey, settings: Settings) -> None:
    verify = create_signature_verifier(key_provider_for(key, settings.jwks_url), ["EdDSA"])
    verify(ParseDict(card, AgentCard()))


@pytest.mark.parametrize("options", BOTH, ids=["schemes", "no-schemes"])
def test_served_cards_are_fixed_points_of_protobuf_json(
    settings: Settings, key: SigningKey, manifest: TenantManifest, options: CardOptions
) -> None:
    for card in _cards(settings, key, manifest, options):
        once = _reencode(card)
        assert once == card
        assert list(once) == list(card)  # same member order too: the body bytes are stable
        assert _reencode(_reencode(once)) == card
        assert canonical_payload(once) == canonical_payload(card)  # case 55


@pytest.mark.parametrize("options", BOTH, ids=["schemes", "no-schemes"])
def test_cards_verify_with_the_a2a_sdk_after_double_decode(
    settings: Settings, key: SigningKey, manifest: TenantManifest, options: CardOptions
) -> None:
    for card in _cards(settings, key, manifest, options):
        _verify(card, key, settings)
        _verify(_reencode(_reencode(card)), key, settings)
        _verify(json.loads(json.dumps(card, ensure_ascii=True)), key, settings)


def test_advertised_scheme_survives_reencoding(
    settings: Settings, key: SigningKey, manifest: TenantManifest
) -> None:
    for card in _cards(settings, key, manifest, CardOptions()):
        wire = _reencode(card)
        assert wire["securitySchemes"]["gatewayJwt"]["httpAuthSecurityScheme"] == {
            "scheme": "bearer",
            "bearerFormat": "JWT",
        }
        assert wire["securityRequirements"] == [{"schemes": {"gatewayJwt": {}}}]
        assert b"securitySchemes" in canonical_payload(wire)  # covered by the signature


def test_without_schemes_requirements_stay_and_schemes_are_absent(
    settings: Settings, key: SigningKey, manifest: TenantManifest
) -> None:
    options = CardOptions(advertise_security_schemes=False)
    for card in _cards(settings, key, manifest, options):
        assert "securitySchemes" not in card
        assert card["securityRequirements"] == [{"schemes": {"gatewayJwt": {}}}]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda c: c.__setitem__("name", c["name"] + "!"),
        lambda c: c.__setitem__("version", "9.9.9"),
        lambda c: c["supportedInterfaces"][0].__setitem__("url", "https://evil.test/a2a"),
        lambda c: c["capabilities"].__setitem__("streaming", False),
        lambda c: c["securitySchemes"]["gatewayJwt"]["httpAuthSecurityScheme"].__setitem__(
            "scheme", "basic"
        ),
        lambda c: c.__setitem__("defaultInputModes", ["application/json"]),
    ],
    ids=["name", "version", "url", "streaming", "scheme", "modes"],
)
def test_tampered_cards_fail_verification(
    settings: Settings, key: SigningKey, manifest: TenantManifest, tamper: Any
) -> None:
    for card in _cards(settings, key, manifest, CardOptions()):
        changed = copy.deepcopy(card)
        tamper(changed)
        with pytest.raises(InvalidSignaturesError):
            _verify(changed, key, settings)


def test_tampered_tenant_on_interface_fails(
    settings: Settings, key: SigningKey, manifest: TenantManifest
) -> None:
    card = CardService(settings, key).tenant_card("alpha", manifest, 1)
    card["supportedInterfaces"][0]["tenant"] = "beta"
    with pytest.raises(InvalidSignaturesError):
        _verify(card, key, settings)


def test_card_signed_by_another_key_fails(
    settings: Settings, key: SigningKey, manifest: TenantManifest
) -> None:
    other = SigningKey.from_jwk_json(json.dumps(generate_private_jwk(key.kid)))
    card = CardService(settings, other).stub_card([]).card
    with pytest.raises(InvalidSignaturesError):
        _verify(card, key, settings)


def test_protected_header_is_exact(settings: Settings, key: SigningKey) -> None:
    card = CardService(settings, key).stub_card([]).card
    [signature] = card["signatures"]
    assert set(signature) == {"protected", "signature"}  # detached: no payload member
    header = b64url_decode(signature["protected"])
    expected = (
        '{"alg":"EdDSA","kid":"card-test-key","typ":"JOSE",'
        '"jku":"https://edge.example.com/.well-known/jwks.json"}'
    )
    assert header == expected.encode()
    assert protected_header(key.kid, settings.jwks_url) == json.loads(expected)


def test_jku_follows_the_configured_jwks_path(key: SigningKey) -> None:
    from app.settings import load_settings

    settings = load_settings(public_url="https://edge.example.com:8443/", jwks_path="/keys.json")
    card = CardService(settings, key).stub_card([]).card
    header = json.loads(b64url_decode(card["signatures"][0]["protected"]))
    assert header["jku"] == "https://edge.example.com:8443/keys.json"
    assert card["supportedInterfaces"][0]["url"] == "https://edge.example.com:8443/a2a"


def test_sign_card_replaces_existing_signatures(settings: Settings, key: SigningKey) -> None:
    card = CardService(settings, key).stub_card([]).card
    resigned = sign_card(card, key, jku=settings.jwks_url)
    assert len(resigned["signatures"]) == 1
    assert resigned == card  # Ed25519 is deterministic (RFC 8032 §5.1.6)


def test_sign_card_refuses_fields_the_proto_does_not_know(
    settings: Settings, key: SigningKey
) -> None:
    card = CardService(settings, key).stub_card([]).card
    with pytest.raises(ValueError):
        sign_card({**card, "unsignedExtra": "x"}, key, jku=settings.jwks_url)
