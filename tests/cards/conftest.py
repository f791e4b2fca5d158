from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jwt import PyJWK

from app.security.keys import SigningKey, generate_private_jwk
from app.settings import Settings, load_settings
from app.tenants.manifest import TenantManifest

VECTOR_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "card-signature.json"


def load_vector() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VECTOR_PATH.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="session")
def vector() -> dict[str, Any]:
    return load_vector()


@pytest.fixture(scope="session")
def vector_key(vector: dict[str, Any]) -> SigningKey:
    return SigningKey.from_jwk_json(json.dumps(vector["private_jwk"]))


@pytest.fixture(scope="session")
def key() -> SigningKey:
    return SigningKey.from_jwk_json(json.dumps(generate_private_jwk("card-test-key")))


@pytest.fixture
def settings() -> Settings:
    return load_settings(public_url="https://edge.example.com")


@pytest.fixture
def manifest() -> TenantManifest:
    return TenantManifest.from_data(
        {
            "name": "Café agent 🚀",
            "description": "Answers questions about coffee.",
            "version": "2.1.0",
            "skills": [
                {
                    "id": "brew",
                    "name": "Brew advice",
                    "description": "Explains how to brew.",
                    "tags": ["coffee"],
                    "examples": ["How do I brew a V60?"],
                }
            ],
        }
    )


def key_provider_for(key: SigningKey, jku: str) -> Any:
    """A key provider for a2a.utils.signing that only knows our kid at our jku."""

    def provide(kid: str | None, header_jku: str | None) -> PyJWK:
        if kid != key.kid or header_jku != jku:
            raise LookupError("unknown key")
        return PyJWK(key.public_jwk)

    return provide
