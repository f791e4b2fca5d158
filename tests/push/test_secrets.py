"""Push-config secrets at rest: sealed, authenticated, key from settings or derived."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet

from app.errors import ConfigError
from app.push.secrets import SecretBox, SecretUnreadable, secret_box_for
from app.security.keys import SigningKey, generate_private_jwk
from app.settings import load_settings


def _key(kid: str = "k1") -> SigningKey:
    return SigningKey.from_jwk_json(json.dumps(generate_private_jwk(kid)))


def test_seal_open_round_trip_and_ciphertext_hides_the_text() -> None:
    box = SecretBox(Fernet.generate_key())
    sealed = box.seal("notification-token-ü")
    assert "notification" not in sealed
    assert box.open(sealed) == "notification-token-ü"
    assert box.seal("x") != box.seal("x")  # random IV per seal


def test_tampered_or_foreign_ciphertext_is_refused_without_echo() -> None:
    box = SecretBox(Fernet.generate_key())
    sealed = box.seal("hunter2")
    with pytest.raises(SecretUnreadable) as info:
        box.open(sealed[:-4] + "AAAA")
    assert "hunter2" not in str(info.value) and sealed not in str(info.value)
    with pytest.raises(SecretUnreadable):
        SecretBox(Fernet.generate_key()).open(sealed)
    with pytest.raises(SecretUnreadable):
        box.open("not a token at all ✗")


def test_derived_key_is_stable_per_signing_key() -> None:
    settings = load_settings()
    key = _key()
    sealed = secret_box_for(settings, key).seal("t")
    assert secret_box_for(settings, key).open(sealed) == "t"
    with pytest.raises(SecretUnreadable):
        secret_box_for(settings, _key()).open(sealed)


def test_configured_key_wins_and_bad_key_is_a_config_error() -> None:
    configured = Fernet.generate_key().decode()
    settings = load_settings(push_secret_key=configured)
    sealed = secret_box_for(settings, _key()).seal("t")
    assert SecretBox(configured.encode()).open(sealed) == "t"
    with pytest.raises(ConfigError) as info:
        secret_box_for(load_settings(push_secret_key="short"), _key())
    assert "EDGE_PUSH_SECRET_KEY" in info.value.message and "short" not in info.value.message
