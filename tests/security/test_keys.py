"""Our signing key: loading, JWKS, compact JWS, callback and caller JWTs.

REFERENCE-CASES 15, 56-65; CONTRACT §2, §4, §7.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jwt import PyJWK

from app.errors import ConfigError
from app.security.keys import (
    SigningKey,
    b64url_decode,
    b64url_encode,
    default_kid,
    generate_private_jwk,
)

VECTOR = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "card-signature.json").read_text()
)
PRIVATE = VECTOR["private_jwk"]
NOW = 1_700_000_000


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey.from_jwk_json(json.dumps(PRIVATE))


def _parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, claims, _signature = token.split(".")
    return json.loads(b64url_decode(header)), json.loads(b64url_decode(claims))


def _verify(token: str, key: SigningKey, audience: str | None = None) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(
        token,
        key=PyJWK(key.public_jwk),
        algorithms=["EdDSA"],
        audience=audience,
        options={"verify_exp": False, "verify_iat": False},
    )
    return claims


# --- loading ------------------------------------------------------------------------------


def test_loads_the_vector_key_and_derives_the_public_jwk(key: SigningKey) -> None:
    assert key.kid == "test-agent-key-1"
    assert key.public_jwk == VECTOR["public_jwks"]["keys"][0]
    assert list(key.public_jwk) == ["kty", "crv", "x", "kid", "use", "alg"]


def test_jwks_never_contains_d(key: SigningKey) -> None:
    jwks = key.jwks()
    assert jwks == VECTOR["public_jwks"]
    assert all("d" not in jwk for jwk in jwks["keys"])
    assert jwks["keys"][0]["alg"] == "EdDSA"
    assert json.loads(key.jwks_json) == jwks
    assert PRIVATE["d"].encode() not in key.jwks_json
    assert PRIVATE["d"] not in repr(key)


def test_jwks_is_a_copy(key: SigningKey) -> None:
    key.jwks()["keys"][0]["d"] = "leak"
    assert "d" not in key.jwks()["keys"][0]


def _bad(**changes: Any) -> str:
    jwk = {**PRIVATE, **changes}
    return json.dumps({k: v for k, v in jwk.items() if v is not None})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json", "JSON object"),
        ("[1, 2]", "JSON object"),
        ('"string"', "JSON object"),
        (_bad(kid=None), "kid"),
        (_bad(kid=""), "kid"),
        (_bad(kid="has space"), "kid"),
        (_bad(kid=7), "kid"),
        (_bad(kty="EC"), "Ed25519"),
        (_bad(crv="Ed448"), "Ed25519"),
        (_bad(crv="X25519"), "Ed25519"),
        (_bad(d=None), "'d'"),
        (_bad(x=None), "'x'"),
        (_bad(d=PRIVATE["d"] + "="), "base64url"),
        (_bad(d="AAAA"), "32 bytes"),
        (_bad(x=b64url_encode(bytes(32))), "does not match"),
        (_bad(use="enc"), "signing"),
        (_bad(alg="ES256"), "signing"),
        (_bad()[:-1] + ', "kid": "other"}', "repeats"),
    ],
)
def test_refuses_bad_keys_naming_the_variable(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SigningKey.from_jwk_json(text)
    message = caught.value.message
    assert message.startswith("A2A_SIGNING_KEY:")
    assert fragment in message
    assert PRIVATE["d"] not in message  # never echo key material


def test_key_without_kid_is_refused_with_a_message_about_kid() -> None:
    # REFERENCE-CASES 56
    with pytest.raises(ConfigError, match="kid"):
        SigningKey.from_jwk_json(_bad(kid=None))


def test_public_only_jwk_is_refused() -> None:
    with pytest.raises(ConfigError, match="'d'"):
        SigningKey.from_jwk_json(json.dumps(VECTOR["public_jwks"]["keys"][0]))


# --- generation ---------------------------------------------------------------------------


def test_generate_private_jwk_round_trips() -> None:
    jwk = generate_private_jwk("a2a-2030-01-02")
    assert set(jwk) == {"kty", "crv", "kid", "x", "d"}
    key = SigningKey.from_jwk_json(json.dumps(jwk))
    assert key.kid == "a2a-2030-01-02"
    assert key.public_jwk["x"] == jwk["x"]
    assert generate_private_jwk("k")["d"] != generate_private_jwk("k")["d"]


def test_generate_refuses_a_bad_kid() -> None:
    with pytest.raises(ValueError, match="kid"):
        generate_private_jwk("bad kid'")


def test_default_kid() -> None:
    assert default_kid(date(2026, 3, 4)) == "a2a-2026-03-04"
    assert default_kid().startswith("a2a-20")
    assert len(default_kid()) == len("a2a-YYYY-MM-DD")


# --- compact JWS --------------------------------------------------------------------------


def test_sign_compact_keeps_header_order_and_verifies(key: SigningKey) -> None:
    header = {"alg": "EdDSA", "kid": key.kid, "typ": "JOSE", "jku": "https://e.test/jwks"}
    token = key.sign_compact(header, b"payload")
    encoded_header, encoded_payload, signature = token.split(".")
    assert b64url_decode(encoded_header) == (
        b'{"alg":"EdDSA","kid":"test-agent-key-1","typ":"JOSE","jku":"https://e.test/jwks"}'
    )
    assert b64url_decode(encoded_payload) == b"payload"
    public = Ed25519PublicKey.from_public_bytes(b64url_decode(key.public_jwk["x"]))
    public.verify(b64url_decode(signature), f"{encoded_header}.{encoded_payload}".encode())


@pytest.mark.parametrize("alg", ["none", "HS256", "Ed25519", None])
def test_sign_compact_only_signs_eddsa(key: SigningKey, alg: str | None) -> None:
    with pytest.raises(ValueError):
        key.sign_compact({"alg": alg, "kid": key.kid}, b"x")


# --- callback JWT (CONTRACT §7) -------------------------------------------------------------


def test_callback_jwt_header_and_claims_are_exact(key: SigningKey) -> None:
    jku = "http://localhost/.well-known/jwks.json"
    push_url = "https://gateway.test/a2a/push/abc?x=1"
    token = key.callback_jwt(jku=jku, audience=push_url, now=NOW)
    header, claims = _parts(token)
    assert header == {"alg": "EdDSA", "kid": "test-agent-key-1", "jku": jku}
    assert list(header) == ["alg", "kid", "jku"]
    assert claims == {"aud": push_url, "iat": NOW, "exp": NOW + 300}
    assert _verify(token, key, audience=push_url) == claims


def test_callback_jwt_uses_the_clock_by_default(key: SigningKey) -> None:
    token = key.callback_jwt(jku="https://e.test/jwks", audience="https://g.test/push")
    claims = jwt.decode(
        token, key=PyJWK(key.public_jwk), algorithms=["EdDSA"], audience="https://g.test/push"
    )
    assert claims["exp"] - claims["iat"] == 300


def test_callback_jwt_fails_verification_with_another_key(key: SigningKey) -> None:
    other = SigningKey.from_jwk_json(json.dumps(generate_private_jwk(key.kid)))
    token = other.callback_jwt(jku="https://e.test/jwks", audience="https://g.test/p", now=NOW)
    with pytest.raises(jwt.InvalidSignatureError):
        _verify(token, key, audience="https://g.test/p")


@pytest.mark.parametrize("ttl", [0, -1, 601, True])
def test_callback_jwt_refuses_bad_ttl(key: SigningKey, ttl: int) -> None:
    with pytest.raises(ValueError, match="ttl"):
        key.callback_jwt(jku="https://e.test/jwks", audience="https://g.test/p", ttl=ttl)


# --- caller JWT (REFERENCE-CASES 58-65) ---------------------------------------------------------


def _caller(key: SigningKey, **overrides: Any) -> str:
    arguments: dict[str, Any] = {
        "issuer": "https://agent.example.com",
        "audience": "https://peer.example.org",
        "identity": {"key": "user-1", "name": "Ada"},
        "tenant": "alpha",
        "identity_claim": "https://loopingai.org/identity",
        "tenant_claim": "https://loopingai.org/tenant",
        "now": NOW,
    }
    arguments.update(overrides)
    return key.caller_jwt(**arguments)


def test_caller_jwt_carries_identity_tenant_and_origin_issuer(key: SigningKey) -> None:
    token = _caller(key)
    header, claims = _parts(token)
    assert header == {
        "alg": "EdDSA",
        "kid": "test-agent-key-1",
        "jku": "https://agent.example.com/.well-known/jwks.json",
    }
    assert claims == {
        "iss": "https://agent.example.com",
        "aud": "https://peer.example.org",
        "iat": NOW,
        "exp": NOW + 120,
        "https://loopingai.org/identity": {"key": "user-1", "name": "Ada"},
        "https://loopingai.org/tenant": "alpha",
    }
    assert _verify(token, key, audience="https://peer.example.org") == claims


@pytest.mark.parametrize(
    "audience",
    [
        "https://peer.example.org/",
        "https://peer.example.org/a2a?x=1",
        "HTTPS://Peer.Example.org:443/deep/path",
    ],
)
def test_caller_jwt_audience_is_a_bare_origin(key: SigningKey, audience: str) -> None:
    _header, claims = _parts(_caller(key, audience=audience))
    assert claims["aud"] == "https://peer.example.org"


def test_caller_jwt_issuer_is_normalised_and_stays_in_step_with_jku(key: SigningKey) -> None:
    header, claims = _parts(_caller(key, issuer="https://Agent.example.com:8443/some/path/"))
    assert claims["iss"] == "https://agent.example.com:8443"
    assert header["jku"] == "https://agent.example.com:8443/.well-known/jwks.json"


def test_caller_jwt_loopback_http_issuer_is_allowed(key: SigningKey) -> None:
    header, claims = _parts(_caller(key, issuer="http://localhost:8080/"))
    assert claims["iss"] == "http://localhost:8080"
    assert header["jku"] == "http://localhost:8080/.well-known/jwks.json"


@pytest.mark.parametrize(
    "issuer", ["", "agent.example.com", "/relative", "data:text/plain,x", "http://agent.test"]
)
def test_caller_jwt_refuses_non_absolute_issuer(key: SigningKey, issuer: str) -> None:
    with pytest.raises(ValueError, match="issuer"):
        _caller(key, issuer=issuer)


@pytest.mark.parametrize("audience", ["", "peer.example.org", "/a2a", "mailto:x@y.z"])
def test_caller_jwt_refuses_non_absolute_audience(key: SigningKey, audience: str) -> None:
    with pytest.raises(ValueError, match="audience"):
        _caller(key, audience=audience)


def test_caller_jwt_ttl(key: SigningKey) -> None:
    _header, claims = _parts(_caller(key))
    assert claims["exp"] - claims["iat"] <= 121
    _header, claims = _parts(_caller(key, ttl=30))
    assert claims["exp"] - claims["iat"] == 30
    with pytest.raises(ValueError, match="ttl"):
        _caller(key, ttl=0)


def test_caller_jwt_refuses_bad_identity_tenant_and_claim_names(key: SigningKey) -> None:
    with pytest.raises(ValueError, match="identity"):
        _caller(key, identity=["key"])
    with pytest.raises(ValueError, match="tenant"):
        _caller(key, tenant="")
    with pytest.raises(ValueError, match="claim names"):
        _caller(key, identity_claim="iss")
    with pytest.raises(ValueError, match="claim names"):
        _caller(key, tenant_claim="https://loopingai.org/identity")


def test_rotated_key_signs_with_its_own_kid(key: SigningKey) -> None:
    # REFERENCE-CASES 65: a new kid is used at once, nothing is cached across keys.
    rotated = SigningKey.from_jwk_json(json.dumps(generate_private_jwk("a2a-2031-01-01")))
    old_header, _ = _parts(_caller(key))
    new_header, _ = _parts(_caller(rotated))
    assert old_header["kid"] == "test-agent-key-1"
    assert new_header["kid"] == "a2a-2031-01-01"
    callback_header, _ = _parts(
        rotated.callback_jwt(jku="https://e.test/j", audience="https://g.test/p")
    )
    assert callback_header["kid"] == "a2a-2031-01-01"


@pytest.mark.parametrize("tz", ["Etc/GMT-14", "Etc/GMT+12"])
def test_default_kid_is_todays_date_in_utc_whatever_the_local_zone(tz: str) -> None:
    # CONTRACT §4: a2a-YYYY-MM-DD (UTC). At any hour one of these two zones (UTC+14, UTC-12)
    # is on another calendar day than UTC, so a local-date kid fails one of the two.
    before = datetime.now(UTC).date()
    done = subprocess.run(
        [sys.executable, "-c", "from app.security.keys import default_kid; print(default_kid())"],
        env={**os.environ, "TZ": tz},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    after = datetime.now(UTC).date()
    assert done.stdout.strip() in {f"a2a-{before.isoformat()}", f"a2a-{after.isoformat()}"}
