"""The reference vector (CONTRACT §4): reproduce the reference edge's stub card byte for byte."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from a2a.types import AgentCard
from a2a.utils.signing import create_signature_verifier
from google.protobuf.json_format import ParseDict

from app.cards.builder import CardOptions
from app.cards.canonical import canonical_payload
from app.cards.service import CardService
from app.security.keys import SigningKey, b64url_decode
from app.settings import load_settings

from .conftest import key_provider_for


@pytest.fixture
def vector_service(vector_key: SigningKey) -> CardService:
    settings = load_settings(
        public_url="http://localhost",
        card_name="host",
        card_description="an agent behind the A2A edge",
        card_version="0.1.0",
    )
    # The vector was produced without advertised security schemes, without skills, and when
    # the edge did not stream and served JSON-RPC alone.
    options = CardOptions(
        advertise_security_schemes=False,
        deployment_skill=False,
        advertise_streaming=False,
        other_bindings=False,
    )
    return CardService(settings, vector_key, options=options)


def test_fixture_is_the_shared_vector(vector: dict[str, Any]) -> None:
    assert vector["private_jwk"]["kid"] == "test-agent-key-1"
    assert set(vector) >= {"served_card", "canonical_payload", "signature", "gateway_vector"}


def test_public_jwks_matches_the_vector(vector: dict[str, Any], vector_key: SigningKey) -> None:
    assert vector_key.jwks() == vector["public_jwks"]
    assert vector_key.jwks_json == json.dumps(vector["public_jwks"], separators=(",", ":")).encode()


def test_stub_card_reproduces_the_vector_byte_for_byte(
    vector: dict[str, Any], vector_service: CardService
) -> None:
    document = vector_service.stub_card([])
    served = vector["served_card"]

    assert canonical_payload(document.card) == vector["canonical_payload"].encode("utf-8")
    [signature] = document.card["signatures"]
    assert b64url_decode(signature["protected"]) == vector["protected_header_json"].encode()
    assert signature["signature"] == vector["signature"]
    assert document.card == served
    # Same members in the same order: the served bytes are the compact form of the vector.
    assert document.body == json.dumps(served, separators=(",", ":")).encode("utf-8")


def test_vector_signature_verifies_over_the_canonical_payload(
    vector: dict[str, Any], vector_key: SigningKey
) -> None:
    header = base64.urlsafe_b64encode(vector["protected_header_json"].encode()).rstrip(b"=")
    payload = base64.urlsafe_b64encode(vector["canonical_payload"].encode()).rstrip(b"=")
    vector_key.private_key.public_key().verify(
        b64url_decode(vector["signature"]), header + b"." + payload
    )


def test_served_vector_card_verifies_with_the_sdk(
    vector: dict[str, Any], vector_key: SigningKey
) -> None:
    verify = create_signature_verifier(
        key_provider_for(vector_key, "http://localhost/.well-known/jwks.json"), ["EdDSA"]
    )
    verify(ParseDict(vector["served_card"], AgentCard()))


def test_security_requirements_are_not_covered_by_the_signature(vector: dict[str, Any]) -> None:
    # {"schemes": {"gatewayJwt": {}}} prunes to nothing: the served member is outside the
    # signed bytes, exactly as in the vector's canonical payload.
    served = vector["served_card"]
    assert "securityRequirements" in served
    assert b"securityRequirements" not in canonical_payload(served)
    without = {k: v for k, v in served.items() if k != "securityRequirements"}
    assert canonical_payload(without) == canonical_payload(served)
