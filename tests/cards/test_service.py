"""CardService: card content (CONTRACT §4), caching and ETags."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict

import app.cards.service as service_module
from app.cards.service import CardService
from app.errors import ConfigError
from app.security.keys import SigningKey, b64url_decode
from app.settings import Settings, load_settings
from app.tenants.manifest import TenantManifest


def _header(card: dict[str, Any]) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(b64url_decode(card["signatures"][0]["protected"]))
    return header


def test_stub_card_content(settings: Settings, key: SigningKey) -> None:
    card = CardService(settings, key).stub_card(["beta", "alpha"]).card
    assert card["name"] == settings.card_name
    assert card["version"] == settings.card_version
    assert card["supportedInterfaces"] == [
        {
            "url": "https://edge.example.com/a2a",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        },
        {
            "url": "https://edge.example.com",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
    ]
    assert card["capabilities"] == {
        "streaming": True,
        "pushNotifications": True,
        "extendedAgentCard": True,
    }
    assert card["defaultInputModes"] == ["text/plain"]
    assert card["defaultOutputModes"] == ["text/plain"]
    assert card["securitySchemes"] == {
        "gatewayJwt": {"httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "JWT"}}
    }
    assert card["securityRequirements"] == [{"schemes": {"gatewayJwt": {}}}]


def test_stub_card_names_no_tenant_in_its_interfaces(settings: Settings, key: SigningKey) -> None:
    card = CardService(settings, key).stub_card(["alpha", "beta"]).card
    assert all("tenant" not in interface for interface in card["supportedInterfaces"])
    # The human-readable list is allowed (CONTRACT §4), sorted and de-duplicated.
    assert card["description"] == f"{settings.card_description} Tenants: alpha, beta."


def test_stub_card_without_tenants_keeps_the_configured_description(
    settings: Settings, key: SigningKey
) -> None:
    assert CardService(settings, key).stub_card([]).card["description"] == (
        settings.card_description
    )


def test_protocol_version_is_the_protocol_not_the_agent(key: SigningKey) -> None:
    settings = load_settings(public_url="https://edge.example.com", card_version="7.3.1")
    interfaces = CardService(settings, key).stub_card([]).card["supportedInterfaces"]
    assert [i["protocolVersion"] for i in interfaces] == ["1.0", "1.0"]
    assert [i["protocolBinding"] for i in interfaces] == ["JSONRPC", "HTTP+JSON"]


def test_tenant_card_content(settings: Settings, key: SigningKey, manifest: TenantManifest) -> None:
    service = CardService(settings, key)
    card = service.tenant_card("alpha", manifest, 3)
    assert card["name"] == "Café agent 🚀"
    assert card["description"] == "Answers questions about coffee."
    assert card["version"] == "2.1.0"
    assert card["supportedInterfaces"] == [
        {
            "url": "https://edge.example.com/a2a",
            "protocolBinding": "JSONRPC",
            "tenant": "alpha",
            "protocolVersion": "1.0",
        },
        {
            "url": "https://edge.example.com",
            "protocolBinding": "HTTP+JSON",
            "tenant": "alpha",
            "protocolVersion": "1.0",
        },
    ]
    assert card["skills"] == [
        {
            "id": "brew",
            "name": "Brew advice",
            "description": "Explains how to brew.",
            "tags": ["coffee"],
            "examples": ["How do I brew a V60?"],
        }
    ]
    assert card["capabilities"]["extendedAgentCard"] is True


def test_tenant_card_uses_the_same_key_kid_and_jku_as_the_stub(
    settings: Settings, key: SigningKey, manifest: TenantManifest
) -> None:
    service = CardService(settings, key)
    stub = service.stub_card(["alpha"]).card
    tenant = service.tenant_card("alpha", manifest, 1)
    assert _header(stub) == _header(tenant)
    assert _header(tenant) == {
        "alg": "EdDSA",
        "kid": key.kid,
        "typ": "JOSE",
        "jku": "https://edge.example.com/.well-known/jwks.json",
    }
    assert service.kid == key.kid
    assert service.jku == settings.jwks_url


def test_tenant_cards_are_distinct_per_tenant(
    settings: Settings, key: SigningKey, manifest: TenantManifest
) -> None:
    service = CardService(settings, key)
    alpha = service.tenant_card("alpha", manifest, 1)
    beta = service.tenant_card("beta", manifest, 1)
    assert alpha["supportedInterfaces"][0]["tenant"] == "alpha"
    assert beta["supportedInterfaces"][0]["tenant"] == "beta"
    assert alpha["signatures"] != beta["signatures"]


@pytest.mark.parametrize("tenant", ["", "Alpha", "-x", "a" * 64, "__proto__", "a/b"])
def test_tenant_card_refuses_invalid_tenant_ids(
    settings: Settings, key: SigningKey, manifest: TenantManifest, tenant: str
) -> None:
    with pytest.raises(ValueError):
        CardService(settings, key).tenant_card(tenant, manifest, 1)


def test_body_and_strong_etag(settings: Settings, key: SigningKey) -> None:
    document = CardService(settings, key).stub_card(["alpha"])
    assert json.loads(document.body) == document.card
    digest = base64.urlsafe_b64encode(hashlib.sha256(document.body).digest()).rstrip(b"=")
    assert document.etag == f'"{digest.decode()}"'
    assert not document.etag.startswith("W/")


def test_etag_changes_with_the_tenant_set(settings: Settings, key: SigningKey) -> None:
    service = CardService(settings, key)
    assert service.stub_card(["alpha"]).etag != service.stub_card(["alpha", "beta"]).etag


def test_body_is_utf8_not_escaped(
    settings: Settings, key: SigningKey, manifest: TenantManifest
) -> None:
    document = CardService(settings, key).tenant_document("alpha", manifest, 1)
    assert "Café agent 🚀".encode() in document.body


@pytest.fixture
def sign_counter(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = service_module.sign_card

    def counting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(service_module, "sign_card", counting)
    return calls


def test_stub_card_is_signed_once_per_tenant_set(
    settings: Settings, key: SigningKey, sign_counter: list[int]
) -> None:
    service = CardService(settings, key)
    first = service.stub_card(["beta", "alpha"])
    for _ in range(5):
        assert service.stub_card(["alpha", "beta", "alpha"]) is first
    assert len(sign_counter) == 1
    service.stub_card(["alpha"])
    assert len(sign_counter) == 2


def test_tenant_card_is_signed_once_per_revision(
    settings: Settings, key: SigningKey, manifest: TenantManifest, sign_counter: list[int]
) -> None:
    service = CardService(settings, key)
    for _ in range(5):
        service.tenant_card("alpha", manifest, 1)
    assert len(sign_counter) == 1
    renamed = TenantManifest.from_data({**manifest.as_json(), "name": "Renamed"})
    assert service.tenant_card("alpha", renamed, 2)["name"] == "Renamed"
    assert len(sign_counter) == 2


def test_tenant_card_returns_a_private_copy(
    settings: Settings, key: SigningKey, manifest: TenantManifest
) -> None:
    service = CardService(settings, key)
    card = service.tenant_card("alpha", manifest, 1)
    card["name"] = "mutated"
    card["signatures"].clear()
    again = service.tenant_card("alpha", manifest, 1)
    assert again["name"] == manifest.name
    assert len(again["signatures"]) == 1


def test_caches_are_bounded(settings: Settings, key: SigningKey, manifest: TenantManifest) -> None:
    service = CardService(settings, key, stub_cache_size=2, tenant_cache_size=3)
    for index in range(10):
        service.stub_card([f"t{index}"])
        service.tenant_card("alpha", manifest, index)
    assert len(service._stubs) == 2
    assert len(service._tenants) == 3


@pytest.mark.parametrize("public_url", ["", "not a url", "http://edge.example.com"])
def test_bad_public_url_fails_at_construction(key: SigningKey, public_url: str) -> None:
    with pytest.raises(ConfigError, match="PUBLIC_URL"):
        CardService(load_settings(public_url=public_url), key)


def test_tenant_card_accepts_the_stored_manifest_and_validates_only_on_a_miss(
    settings: Settings, key: SigningKey, manifest: TenantManifest, sign_counter: list[int]
) -> None:
    service = CardService(settings, key)
    stored = manifest.as_json()
    assert service.tenant_card("alpha", stored, 1) == service.tenant_card("alpha", manifest, 1)
    assert len(sign_counter) == 1
    # A cache hit does not look at the manifest at all (the revision is the cache key).
    assert service.tenant_card("alpha", {"not": "validated"}, 1)["name"] == manifest.name
    with pytest.raises(ValueError, match="invalid manifest"):
        service.tenant_card("alpha", {**stored, "name": ""}, 2)


def test_stub_card_has_a_tenant_neutral_skill(settings: Settings, key: SigningKey) -> None:
    # A2A §5.7: ``skills`` is required with at least one element (the TCK's CARD-STRUCT-001);
    # the stub card's one skill names the deployment, never a tenant.
    card = CardService(settings, key).stub_card(["beta", "alpha"]).card
    [skill] = card["skills"]
    assert skill["id"] and skill["name"] == settings.card_name and skill["tags"]
    assert "alpha" not in str(skill) and "beta" not in str(skill)
    ParseDict(card, AgentCard())  # still a valid AgentCard


def test_grpc_is_listed_last_with_the_public_host_when_its_port_is_set(
    key: SigningKey, manifest: TenantManifest
) -> None:
    settings = load_settings(public_url="https://edge.example.com:8443", grpc_port=50051)
    service = CardService(settings, key)
    for card in (service.stub_card([]).card, service.tenant_card("alpha", manifest, 1)):
        interfaces = card["supportedInterfaces"]
        assert [(i["protocolBinding"], i["url"]) for i in interfaces] == [
            ("JSONRPC", "https://edge.example.com:8443/a2a"),
            ("HTTP+JSON", "https://edge.example.com:8443"),
            ("GRPC", "edge.example.com:50051"),
        ]
