"""What PyJWT accepts that the contract refuses (docs/jose.md), each shown both ways.

Every test first shows PyJWT (the runtime dependency that mints our tokens and verifies them on
the gateway side) accepting a token, then shows the edge's verifier (``jose_strict`` +
``token.py``, CONTRACT §3) refusing the same token with a stable reason. If a PyJWT upgrade
closes a gap, the first half fails and docs/jose.md should lose that item.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import jwt
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PrivateKey

from app.errors import Unauthorized
from app.security.verify_key import Ed25519VerificationKey
from app.testing.gateway import GatewayKit

from .conftest import ENDPOINT, Env


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _pyjwt(token: str, kit: GatewayKit, **options: Any) -> dict[str, Any]:
    """PyJWT's verification as its documentation recommends: the key, EdDSA pinned, aud."""
    claims: dict[str, Any] = jwt.decode(
        token, kit.key.public_key(), algorithms=["EdDSA"], audience=ENDPOINT, **options
    )
    return claims


async def _edge_refuses(env: Env, token: str, reason: str) -> None:
    with pytest.raises(Unauthorized) as info:
        await env.verify(token)
    assert info.value.reason == reason, info.value.message


def _header_text(env: Env) -> str:
    return json.dumps(env.kit.header(), separators=(",", ":"))[1:-1]


async def test_duplicate_header_members_pyjwt_keeps_the_last(env: Env) -> None:
    # RFC 7515 §5.2 step 4 lets a verifier refuse duplicates; two parsers picking different
    # members of one header is how alg/kid confusion starts.
    header = ('{"alg":"none",' + _header_text(env) + "}").encode()
    token = env.kit.sign_raw(header, _json(env.kit.claims(audience=ENDPOINT)))
    assert jwt.get_unverified_header(token)["alg"] == "EdDSA"
    assert _pyjwt(token, env.kit)["iss"] == env.kit.origin
    await _edge_refuses(env, token, "malformed_token")


async def test_duplicate_claim_members_pyjwt_keeps_the_last(env: Env) -> None:
    # RFC 7519 §4: claim names MUST be unique; PyJWT reads the second "aud" only.
    claims = _json(env.kit.claims(audience="https://other.test/a2a"))
    payload = claims[:-1] + b',"aud":' + _json(ENDPOINT) + b"}"
    token = env.kit.sign_raw(_json(env.kit.header()), payload)
    assert _pyjwt(token, env.kit)["aud"] == ENDPOINT
    await _edge_refuses(env, token, "malformed_token")


async def test_padded_base64url_is_accepted_by_pyjwt(env: Env) -> None:
    # RFC 7515 §2: base64url without padding. PyJWT strips trailing "=" (for issuers that pad).
    segment = next(
        _b64(_json({**env.kit.header(), "x": "y" * n}))
        for n in range(4)
        if len(_b64(_json({**env.kit.header(), "x": "y" * n}))) % 4
    )
    padded = segment + "=" * (-len(segment) % 4)
    signing_input = f"{padded}.{_b64(_json(env.kit.claims(audience=ENDPOINT)))}"
    token = f"{signing_input}.{_b64(env.kit.key.sign(signing_input.encode()))}"
    assert padded.endswith("=")
    assert _pyjwt(token, env.kit)["aud"] == ENDPOINT
    await _edge_refuses(env, token, "malformed_token")


async def test_nan_and_infinity_literals_are_accepted_by_pyjwt(env: Env) -> None:
    # RFC 8259 §6: NaN and Infinity are not JSON numbers; Python's json module reads them.
    claims = _json(env.kit.claims(audience=ENDPOINT))
    payload = claims[:-1] + b',"score":NaN,"limit":-Infinity}'
    token = env.kit.sign_raw(_json(env.kit.header()), payload)
    assert _pyjwt(token, env.kit)["limit"] == float("-inf")
    await _edge_refuses(env, token, "malformed_token")


@pytest.mark.parametrize(
    "claim",
    [
        pytest.param(lambda c: {"exp": str(c["exp"])}, id="exp-string"),
        pytest.param(lambda c: {"iat": True}, id="iat-bool"),
        pytest.param(lambda c: {"iat": str(c["iat"])}, id="iat-string"),
        pytest.param(lambda c: {"nbf": "0"}, id="nbf-string"),
    ],
)
async def test_numeric_dates_of_another_type_are_accepted_by_pyjwt(env: Env, claim: Any) -> None:
    # RFC 7519 §2: a NumericDate is a JSON number. PyJWT converts with int(), so "1796617654"
    # and true pass; the contract (§3 step 6) says wrong claim types are rejections.
    token = env.mint(claims=claim(env.kit.claims(audience=ENDPOINT)))
    _pyjwt(token, env.kit)
    await _edge_refuses(env, token, "bad_claim_type")


async def test_exp_is_optional_and_the_lifetime_unbounded_in_pyjwt(env: Env) -> None:
    # CONTRACT §3 step 6: exp and iat required, exp - iat at most 300 s (configurable).
    without_exp = env.mint(drop_claims=["exp"])
    assert "exp" not in _pyjwt(without_exp, env.kit)
    await _edge_refuses(env, without_exp, "missing_exp")
    long_lived = env.mint(ttl=30 * 24 * 3600)
    _pyjwt(long_lived, env.kit)
    await _edge_refuses(env, long_lived, "lifetime_too_long")


@pytest.mark.parametrize(
    "member",
    [
        {"jwk": {"kty": "OKP", "crv": "Ed25519", "x": _b64(bytes(32))}},
        {"x5u": "https://evil.test/cert.pem"},
        {"x5c": ["MIIB"]},
    ],
    ids=["jwk", "x5u", "x5c"],
)
async def test_key_material_in_the_header_is_ignored_not_refused_by_pyjwt(
    env: Env, member: dict[str, Any]
) -> None:
    # RFC 7515 §4.1.3-§4.1.6: key material named by the token itself; CONTRACT §3 step 2
    # refuses the token rather than trusting that nobody reads it.
    token = env.mint(headers=member)
    _pyjwt(token, env.kit)
    await _edge_refuses(env, token, "forbidden_header")


async def test_alg_eddsa_does_not_pin_the_curve_in_pyjwt(env: Env) -> None:
    # RFC 8037 §3.1: "EdDSA" covers Ed25519 and Ed448. Given an Ed448 key (loaded by any
    # means other than PyJWK, which refuses crv Ed448), PyJWT verifies under alg EdDSA. The
    # edge drops Ed448 keys from a gateway's JWKS (CONTRACT §3 step 5).
    ed448 = Ed448PrivateKey.generate()
    env.kit.extra_jwks_keys.append(
        {"kty": "OKP", "crv": "Ed448", "x": _b64(ed448.public_key().public_bytes_raw()), "kid": "x"}
    )
    header = _json({**env.kit.header(), "kid": "x"})
    signing_input = f"{_b64(header)}.{_b64(_json(env.kit.claims(audience=ENDPOINT)))}"
    token = f"{signing_input}.{_b64(ed448.sign(signing_input.encode()))}"
    jwt.decode(token, ed448.public_key(), algorithms=["EdDSA"], audience=ENDPOINT)
    await _edge_refuses(env, token, "unknown_kid")


async def test_a_small_order_key_verifies_a_forged_token_in_pyjwt(env: Env) -> None:
    # The identity point as a public key: R = identity, S = 0 satisfies [S]B = R + [k]A for
    # every message (RFC 8032 §5.1.7 does not exclude it; libsodium and the edge refuse such
    # keys). A JWKS publishing it would let anyone mint tokens PyJWT accepts.
    weak = {"kty": "OKP", "crv": "Ed25519", "x": _b64(b"\x01" + bytes(31)), "kid": "weak"}
    env.kit.extra_jwks_keys.append(weak)
    header = _json({**env.kit.header(), "kid": "weak"})
    signing_input = f"{_b64(header)}.{_b64(_json(env.kit.claims(audience=ENDPOINT)))}"
    forged = signing_input + "." + _b64(b"\x01" + bytes(63))
    claims = jwt.decode(forged, jwt.PyJWK(weak), algorithms=["EdDSA"], audience=ENDPOINT)
    assert claims["iss"] == env.kit.origin
    await _edge_refuses(env, forged, "unknown_kid")


def test_libsodium_refuses_the_forgery_by_a_small_order_key() -> None:
    # Defence in depth behind the JWKS parser (app/security/verify_key.py).
    key = Ed25519VerificationKey(b"\x01" + bytes(31))
    with pytest.raises(InvalidSignature):
        key.verify(b"\x01" + bytes(63), b"any payload")


def _tweak_last_char(segment: str) -> str:
    """The same bytes with unused trailing bits set (a non-canonical encoding)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    assert len(segment) % 4
    return segment[:-1] + alphabet[alphabet.index(segment[-1]) + 1]


@pytest.mark.parametrize(
    "case",
    ["non-canonical", "alphabet", "alg-none", "alg-hs256", "crit", "aud-non-string"],
)
async def test_what_pyjwt_does_refuse(env: Env, case: str) -> None:
    """The refusals docs/jose.md credits PyJWT with (and the edge refuses them too)."""
    if case in ("non-canonical", "alphabet"):
        token = next(
            t for n in range(4) if len((t := env.mint(claims={"x": "y" * n})).split(".")[1]) % 4
        )
        h, p, s = token.split(".")
        p = _tweak_last_char(p) if case == "non-canonical" else p[:-1] + "!"
        token = f"{h}.{p}.{s}"
    elif case.startswith("alg-"):
        token = env.mint(headers={"alg": "none" if case == "alg-none" else "HS256"})
    elif case == "crit":
        token = env.mint(headers={"crit": ["exp"], "exp": 1})
    else:
        token = env.mint(claims={"aud": [ENDPOINT, 1]})
    with pytest.raises(jwt.PyJWTError):
        _pyjwt(token, env.kit)
    with pytest.raises(Unauthorized):
        await env.verify(token)
