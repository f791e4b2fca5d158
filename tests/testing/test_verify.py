"""The gateway-side checks of callback JWTs and card signatures: every rule has a negative."""

from __future__ import annotations

import json
import time

import pytest

from app.cards.signing import sign_card
from app.security.keys import SigningKey, b64url_encode, generate_private_jwk
from app.testing.verify import Pin, VerificationError, card_pin, verify_callback, verify_card

JKU = "https://edge.test/.well-known/jwks.json"
AUD = "https://gw.test/push/abc"


def _key(kid: str = "edge-1") -> SigningKey:
    return SigningKey.from_jwk_json(json.dumps(generate_private_jwk(kid)))


KEY = _key()
PIN = Pin(jku=JKU, kid="edge-1")


def _check(token: str, **kw: object) -> dict:
    args = {"key": KEY.private_key.public_key(), "pin": PIN, "audience": AUD, **kw}
    return verify_callback(token, **args).claims  # type: ignore[arg-type]


def test_a_real_callback_token_verifies() -> None:
    claims = _check(KEY.callback_jwt(jku=JKU, audience=AUD))
    assert claims["aud"] == AUD and claims["exp"] - claims["iat"] == 300


@pytest.mark.parametrize(
    ("token_args", "check_args", "reason"),
    [
        ({"audience": AUD + "x"}, {}, "aud"),
        ({"audience": "https://gw.test/push"}, {}, "aud"),
        ({"jku": "https://evil.test/.well-known/jwks.json"}, {}, "kid/jku"),
        ({}, {"pin": Pin(jku=JKU, kid="other")}, "kid/jku"),
        ({"age": 700}, {}, "older than ten minutes"),
        ({"age": -120}, {}, "future"),
        ({"age": 400}, {}, "expired"),
    ],
)
def test_callback_refusals(token_args: dict, check_args: dict, reason: str) -> None:
    # Ages are turned into times when the test runs, not when it is collected: a long suite
    # would otherwise age every token.
    token_args = dict(token_args)
    if "age" in token_args:
        token_args["now"] = int(time.time()) - token_args.pop("age")
    token = KEY.callback_jwt(**{"jku": JKU, "audience": AUD, **token_args})  # type: ignore[arg-type]
    with pytest.raises(VerificationError) as info:
        _check(token, **check_args)
    assert reason in str(info.value)


def test_callback_signed_by_another_key_is_refused() -> None:
    token = _key("edge-1").callback_jwt(jku=JKU, audience=AUD)
    with pytest.raises(VerificationError, match="signature"):
        _check(token)


def _forge(header: dict, claims: dict, key: SigningKey = KEY) -> str:
    h = b64url_encode(json.dumps(header).encode())
    c = b64url_encode(json.dumps(claims).encode())
    sig = key.private_key.sign(f"{h}.{c}".encode())
    return f"{h}.{c}.{b64url_encode(sig)}"


@pytest.mark.parametrize(
    ("header", "claims", "reason"),
    [
        ({"alg": "none", "kid": "edge-1", "jku": JKU}, {}, "EdDSA"),
        ({"alg": "HS256", "kid": "edge-1", "jku": JKU}, {}, "EdDSA"),
        ({"alg": "EdDSA", "kid": "edge-1", "jku": JKU, "crit": ["x"]}, {}, "crit"),
        ({"alg": "EdDSA", "kid": "edge-1"}, {}, "jku and kid"),
        ({"alg": "EdDSA", "kid": "edge-1", "jku": JKU}, {"iat": "now"}, "numeric"),
        ({"alg": "EdDSA", "kid": "edge-1", "jku": JKU}, {"exp": None}, "numeric"),
        ({"alg": "EdDSA", "kid": "edge-1", "jku": JKU}, {"aud": [AUD + "/other"]}, "aud"),
    ],
)
def test_forged_callbacks_are_refused(header: dict, claims: dict, reason: str) -> None:
    now = int(time.time())
    body = {"aud": AUD, "iat": now, "exp": now + 300, **claims}
    with pytest.raises(VerificationError) as info:
        _check(_forge(header, body))
    assert reason in str(info.value)


def test_audience_list_containing_the_url_is_accepted() -> None:
    now = int(time.time())
    header = {"alg": "EdDSA", "kid": "edge-1", "jku": JKU}
    assert _check(_forge(header, {"aud": [AUD], "iat": now, "exp": now + 300}))["aud"] == [AUD]


def test_not_a_jws() -> None:
    for token in ("", "a.b", "a.b.c.d.e", "!!.!!.!!"):
        with pytest.raises(VerificationError):
            _check(token)


CARD = {
    "name": "Edge",
    "description": "d",
    "version": "1",
    "supportedInterfaces": [
        {"url": "https://edge.test/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ],
    "capabilities": {"pushNotifications": True},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "s", "name": "s", "description": "s", "tags": ["t"]}],
}


def test_card_signature_verifies_and_any_change_breaks_it() -> None:
    signed = sign_card(CARD, KEY, jku=JKU)
    assert card_pin(signed) == PIN
    verify_card(signed, key=KEY.private_key.public_key(), pin=PIN)
    tampered = {**signed, "name": "Evil"}
    with pytest.raises(VerificationError, match="does not verify"):
        verify_card(tampered, key=KEY.private_key.public_key(), pin=PIN)
    with pytest.raises(VerificationError, match="pinned"):
        verify_card(signed, key=KEY.private_key.public_key(), pin=Pin(JKU, "other"))
    with pytest.raises(VerificationError, match="does not verify"):
        verify_card(signed, key=_key().private_key.public_key(), pin=PIN)
    with pytest.raises(VerificationError, match="exactly one"):
        verify_card({**signed, "signatures": []}, key=KEY.private_key.public_key(), pin=PIN)
    with pytest.raises(VerificationError):
        card_pin({**signed, "signatures": [{"protected": "!!", "signature": "x"}]})
