"""CONTRACT §3 steps 1-8 and REFERENCE-CASES 1-14, 88-100, 106, 107 at the verifier level."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import time
from typing import Any

import httpx
import pytest
import respx
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.errors import BadRequest, Unauthorized
from app.security.jose_strict import b64url_encode
from app.security.jwks import JwksFetcher
from app.security.token import GatewayTokenVerifier
from app.testing.gateway import DEFAULT_IDENTITY_CLAIM, DEFAULT_TENANT_CLAIM, GatewayKit

from .conftest import ENDPOINT, GATEWAY, JWKS_URL, Env, make_settings


async def refused(env: Env, token: str, reason: str) -> Unauthorized:
    with pytest.raises(Unauthorized) as info:
        await env.verify(token)
    assert info.value.reason == reason, info.value.message
    assert info.value.status_code == 401
    assert token not in info.value.message and token not in info.value.body
    return info.value


def b64json(value: Any) -> str:
    return b64url_encode(json.dumps(value, separators=(",", ":")).encode())


def claims_of(env: Env, **overrides: Any) -> dict[str, Any]:
    claims = env.kit.claims(audience=ENDPOINT)
    claims.update(overrides)
    return claims


# --- positive path ------------------------------------------------------------------------------


async def test_valid_token_yields_the_verified_caller(env: Env) -> None:
    caller = await env.verify(env.mint(tenant="acme"))
    assert caller.identity_key == "user-1"
    assert caller.tenant == "acme"
    assert caller.issuer == GATEWAY
    assert caller.subject == "user-1"
    assert caller.token_id is not None
    assert caller.identity["workspaceId"] == "T0001"
    assert env.kit.fetch_log == [JWKS_URL]
    assert env.labels == ["ok"]


async def test_steady_state_makes_no_network_calls(env: Env) -> None:
    for _ in range(50):
        await env.verify(env.mint())
    assert env.fetcher.fetch_count == 1
    assert len(env.kit.fetch_log) == 1


# --- step 1: bearer ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header", [None, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", "Token x"]
)
async def test_missing_bearer_is_refused(env: Env, header: str | None) -> None:  # ref 14
    with pytest.raises(Unauthorized) as info:
        await env.verifier.verify(header)
    assert info.value.reason == "missing_bearer"
    assert info.value.message == "missing bearer token"
    assert info.value.body == "unauthorized: missing bearer token"


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
async def test_bearer_scheme_is_case_insensitive(env: Env, scheme: str) -> None:  # ref 13
    caller = await env.verifier.verify(f"{scheme} {env.mint()}")
    assert caller.identity_key == "user-1"


async def test_token_over_8_kib_is_refused_before_anything_else(env: Env) -> None:
    token = env.mint(claims={"pad": "x" * 9000})
    assert len(token) > 8192
    await refused(env, token, "token_too_large")
    assert env.fetcher.fetch_count == 0


async def test_non_ascii_token_is_refused(env: Env) -> None:
    await refused(env, env.mint() + "é", "malformed_token")


# --- step 2: protected header ------------------------------------------------------------------


@pytest.mark.parametrize(
    "alg", ["RS256", "ES256", "Ed25519", "Ed448", "eddsa", "EDDSA", "HS256", "none", "", 1, None]
)
async def test_alg_other_than_eddsa_is_refused(env: Env, alg: object) -> None:  # ref 95
    await refused(env, env.mint(headers={"alg": alg}), "bad_alg")
    assert env.fetcher.fetch_count == 0


async def test_missing_alg_is_refused(env: Env) -> None:
    await refused(env, env.mint(drop_headers=["alg"]), "bad_alg")


async def test_alg_none_unsigned_token_is_refused(env: Env) -> None:
    header = {"alg": "none", "kid": env.kit.kid, "jku": JWKS_URL}
    token = f"{b64json(header)}.{b64json(claims_of(env))}."
    await refused(env, token, "bad_alg")


async def test_hs256_signed_with_an_hmac_key_is_refused(env: Env) -> None:  # ref 4
    header = {"alg": "HS256", "kid": env.kit.kid, "typ": "JWT", "jku": JWKS_URL}
    signing_input = f"{b64json(header)}.{b64json(claims_of(env))}"
    mac = hmac.new(b"k" * 32, signing_input.encode(), hashlib.sha256).digest()
    await refused(env, f"{signing_input}.{b64url_encode(mac)}", "bad_alg")
    assert env.fetcher.fetch_count == 0


async def test_es256_signed_with_an_ec_key_is_refused(env: Env) -> None:
    header = {"alg": "ES256", "kid": env.kit.kid, "jku": JWKS_URL}
    signing_input = f"{b64json(header)}.{b64json(claims_of(env))}"
    key = ec.generate_private_key(ec.SECP256R1())
    signature = key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
    await refused(env, f"{signing_input}.{b64url_encode(signature)}", "bad_alg")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("crit", ["exp"]),
        ("jwk", {"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}),
        ("x5u", "https://gateway.test/cert.pem"),
        ("x5c", ["MIIB"]),
        ("b64", False),
        ("b64", True),
        ("crit", []),
        ("enc", "A256GCM"),
        ("cty", "JWT"),
    ],
)
async def test_forbidden_header_parameters_are_refused(env: Env, name: str, value: object) -> None:
    await refused(env, env.mint(headers={name: value}), "forbidden_header")
    assert env.fetcher.fetch_count == 0


async def test_jwe_five_part_token_is_refused(env: Env) -> None:
    header = b64json({"alg": "RSA-OAEP", "enc": "A256GCM", "kid": "k", "jku": JWKS_URL})
    await refused(env, f"{header}.AAAA.AAAA.AAAA.AAAA", "malformed_token")


@pytest.mark.parametrize("cut", [1, 2, 4])
async def test_wrong_number_of_parts_is_refused(env: Env, cut: int) -> None:
    parts = env.mint().split(".")
    token = ".".join((parts * 2)[:cut])
    await refused(env, token, "malformed_token")


async def test_missing_or_non_string_kid_is_refused(env: Env) -> None:
    await refused(env, env.mint(drop_headers=["kid"]), "malformed_token")
    await refused(env, env.mint(headers={"kid": 7}), "malformed_token")
    await refused(env, env.mint(headers={"kid": ""}), "malformed_token")


async def test_typ_is_not_checked(env: Env) -> None:  # ref 106
    assert (await env.verify(env.mint(headers={"typ": "foo"}))).identity_key == "user-1"
    assert (await env.verify(env.mint(drop_headers=["typ"]))).identity_key == "user-1"


async def test_duplicate_member_in_header_is_refused(env: Env) -> None:
    # A lenient parser keeps the last "alg"; we refuse the document outright.
    header = (
        b'{"alg":"none","alg":"EdDSA","kid":"gw-key-1","jku":"https://gateway.test/.well-known/'
        b'jwks.json"}'
    )
    payload = json.dumps(claims_of(env)).encode()
    await refused(env, env.kit.sign_raw(header, payload), "malformed_token")
    dup_jku = (
        b'{"alg":"EdDSA","kid":"gw-key-1","jku":"https://evil.test/.well-known/jwks.json",'
        b'"jku":"https://gateway.test/.well-known/jwks.json"}'
    )
    await refused(env, env.kit.sign_raw(dup_jku, payload), "malformed_token")
    assert env.fetcher.fetch_count == 0


async def test_duplicate_member_in_claims_is_refused(env: Env) -> None:
    header = json.dumps(env.kit.header()).encode()
    good = claims_of(env)
    body = json.dumps(good)[:-1] + ', "aud": "https://elsewhere.test"}'
    await refused(env, env.kit.sign_raw(header, body.encode()), "malformed_token")
    nested = dict(good)
    nested[DEFAULT_IDENTITY_CLAIM] = {"key": "a"}
    text = json.dumps(nested).replace('{"key": "a"}', '{"key": "a", "key": "b"}')
    await refused(env, env.kit.sign_raw(header, text.encode()), "malformed_token")


DEEP = b64url_encode(b'{"a":' + b"[" * 5000)
NAN = b64url_encode(b'{"exp":NaN}')
HUGE_FLOAT = b64url_encode(b'{"exp":1e999}')
HUGE_INT = b64url_encode(b'{"exp":' + b"9" * 5000 + b"}")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda h, p, s: f"{h}=.{p}.{s}",  # padding
        lambda h, p, s: f"{h}.{p}==.{s}",
        lambda h, p, s: f"{h[:-1]}+.{p}.{s}",  # standard alphabet
        lambda h, p, s: f"{h}/.{p}.{s}",
        lambda h, p, s: f"{h}A.{p}.{s}",  # impossible length (4n+1) or garbage
        lambda h, p, s: f"..{s}",
        lambda h, p, s: f"{h}..{s}",
        lambda h, p, s: f"{h}.{p}.",
        lambda h, p, s: f"{h}.{p}.{s}=",
        lambda h, p, s: f"{h}.{p}.{s[:-1]}",
        lambda h, p, s: f"{h}.{p}.{s}AA",
        lambda h, p, s: f"{h}.{p}.{s[:-1]}B",  # non-canonical trailing bits
        lambda h, p, s: f"{h}.{p}.{s} {s}",
        lambda h, p, s: f"{h}.{p}%2e.{s}",
        lambda h, p, s: f"{b64url_encode(b'not json')}.{p}.{s}",
        lambda h, p, s: f"{b64url_encode(b'[1,2]')}.{p}.{s}",
        lambda h, p, s: f"{b64url_encode(chr(0xFEFF).encode() + b'{}')}.{p}.{s}",
        lambda h, p, s: f"{b64url_encode(b'{}'.decode().encode('utf-16'))}.{p}.{s}",
        lambda h, p, s: f"{b64url_encode(bytes([0xFF, 0xFE]))}.{p}.{s}",
        lambda h, p, s: f"{h}.{b64url_encode(b'null')}.{s}",
        lambda h, p, s: f"{h}.{b64url_encode(b'{' * 3)}.{s}",
        lambda h, p, s: f"{h}.{DEEP}.{s}",
        lambda h, p, s: f"{h}.{NAN}.{s}",
        lambda h, p, s: f"{h}.{HUGE_FLOAT}.{s}",
        lambda h, p, s: f"{h}.{HUGE_INT}.{s}",
    ],
)
async def test_weird_encodings_are_401_never_an_exception(env: Env, mangle: Any) -> None:
    h, p, s = env.mint().split(".")
    with pytest.raises(Unauthorized) as info:
        await env.verify(mangle(h, p, s))
    assert info.value.reason in {
        "malformed_token",
        "bad_signature",
        "missing_bearer",
        "token_too_large",
    }


async def test_random_garbage_is_always_a_401(env: Env) -> None:
    rng = random.Random(8032)
    alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ {}"\\é\x00'
    good = env.mint().split(".")
    for _ in range(300):
        if rng.random() < 0.5:
            token = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 200)))
        else:
            parts = list(good)
            i = rng.randrange(3)
            chars = list(parts[i])
            for _ in range(rng.randint(1, 4)):
                if chars:
                    chars[rng.randrange(len(chars))] = rng.choice(alphabet)
            parts[i] = "".join(chars)
            token = ".".join(parts)
        try:
            await env.verify(token)
        except (Unauthorized, BadRequest):
            continue
        # A random mutation that still verifies must be the original token.
        assert token == ".".join(good)


# --- step 3: jku -------------------------------------------------------------------------------


async def test_missing_jku_is_refused_without_fallback(env: Env) -> None:  # ref 1
    error = await refused(env, env.mint(drop_headers=["jku"]), "missing_jku")
    assert "missing jku" in error.message.lower()
    assert env.kit.fetch_log == []


async def test_jku_outside_allowlist_is_refused_before_any_fetch(env: Env) -> None:  # ref 2, 22
    token = env.mint(headers={"jku": "https://evil.test/.well-known/jwks.json"})
    error = await refused(env, token, "jku_not_allowed")
    assert "not in the allowed gateway origins" in error.message
    assert env.kit.fetch_log == []
    assert env.fetcher.fetch_count == 0


@pytest.mark.parametrize(
    "jku",
    [
        "http://gateway.test/.well-known/jwks.json",  # ref 91: https only
        "https://gateway.test@evil.test/.well-known/jwks.json",
        "https://evil.test\\@gateway.test/.well-known/jwks.json",
        "https://evil.test\\.well-known/jwks.json",
        "https://gateway.test:444/.well-known/jwks.json",  # ref 92
        "https://gateway.test:8443/.well-known/jwks.json",
        "https://gateway.test./.well-known/jwks.json",
        "https://evil-gateway.test/.well-known/jwks.json",  # ref 11
        "https://gateway.test.evil.test/.well-known/jwks.json",
        "https://gateway.testevil/.well-known/jwks.json",
        "https://user:pw@gateway.test/.well-known/jwks.json",
        "https://gateway.test/.well-known/jwks.json#x",
        "https://gateway%2etest/.well-known/jwks.json",
        "https://gateway.test /.well-known/jwks.json",
        "https://gateway.test\t/.well-known/jwks.json",
        "//gateway.test/.well-known/jwks.json",
        "/.well-known/jwks.json",
        "gateway.test/.well-known/jwks.json",
        "file:///etc/passwd",
        "ftp://gateway.test/.well-known/jwks.json",
        "https://127.0.0.1/.well-known/jwks.json",
        "http://127.0.0.1:8080/.well-known/jwks.json",
        "https://[::1]/.well-known/jwks.json",
        "https://gateway.test:99999/.well-known/jwks.json",
        "https://gatewaý.test/.well-known/jwks.json",
        "",
        123,
        None,
        ["https://gateway.test/.well-known/jwks.json"],
    ],
)
async def test_jku_tricks_are_refused_without_network(env: Env, jku: object) -> None:
    error = await refused(env, env.mint(headers={"jku": jku}), "jku_not_allowed")
    assert "jku" in error.message
    assert env.kit.fetch_log == []
    assert env.fetcher.fetch_count == 0


@pytest.mark.parametrize(
    "jku",
    [
        "https://GATEWAY.test/.well-known/jwks.json",
        "HTTPS://Gateway.Test/.well-known/jwks.json",
        "https://gateway.test:443/.well-known/jwks.json",
    ],
)
async def test_jku_case_and_default_port_are_the_same_origin(env: Env, jku: str) -> None:
    caller = await env.verify(env.mint(headers={"jku": jku}))
    assert caller.issuer == GATEWAY
    assert env.kit.fetch_log == [JWKS_URL]


@pytest.mark.parametrize("settings_overrides", [{"allow_loopback_http": True}])
async def test_loopback_http_setting_does_not_allow_plain_http_elsewhere(env: Env) -> None:
    token = env.mint(headers={"jku": "http://gateway.test/.well-known/jwks.json"})
    await refused(env, token, "jku_not_allowed")


async def test_header_checks_come_before_jku(env: Env) -> None:
    token = env.mint(headers={"alg": "HS256", "jku": "https://evil.test/jwks"})
    await refused(env, token, "bad_alg")
    token = env.mint(headers={"x5u": "https://evil.test/x", "jku": "https://evil.test/jwks"})
    await refused(env, token, "forbidden_header")


# --- step 4: iss ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings_overrides", [{"gateway_origins": [GATEWAY, "https://evil.test"]}]
)
async def test_iss_on_another_allowlisted_origin_is_refused(env: Env) -> None:  # ref 3
    error = await refused(env, env.mint(claims={"iss": "https://evil.test"}), "iss_mismatch")
    assert "does not match iss origin" in error.message
    assert env.fetcher.fetch_count == 0
    # And the other way round: jku on evil.test, iss on gateway.test.
    token = env.mint(headers={"jku": "https://evil.test/.well-known/jwks.json"})
    await refused(env, token, "iss_mismatch")
    assert env.fetcher.fetch_count == 0


@pytest.mark.parametrize(
    "iss",
    [
        "https://gateway.test/tenant",  # ref 96
        "https://gateway.test/.well-known/jwks.json",
        "https://gateway.test/?x=1",
        "https://gateway.test#frag",
        "http://gateway.test",  # ref 91
        "https://gateway.test:444",
        "https://gateway.test.",
        "https://evil.test",
        "gateway.test",
        "",
        7,
        ["https://gateway.test"],
        None,
    ],
)
async def test_iss_that_is_not_the_jku_origin_is_refused(env: Env, iss: object) -> None:
    await refused(env, env.mint(claims={"iss": iss}), "iss_mismatch")
    assert env.fetcher.fetch_count == 0


async def test_missing_iss_is_refused(env: Env) -> None:
    await refused(env, env.mint(drop_claims=["iss"]), "iss_mismatch")


@pytest.mark.parametrize(
    "iss",
    [
        "https://GATEWAY.test",
        "https://gateway.test/",
        "https://gateway.test:443",
        "https://gateway.test.",
        "HTTPS://gateway.test",
        " https://gateway.test",
    ],
)
async def test_iss_must_be_exactly_the_serialised_origin(env: Env, iss: str) -> None:
    # CONTRACT §3 step 4: "iss is exactly that allowlisted origin"; a spelling that names the
    # same origin is still not that origin's serialisation.
    await refused(env, env.mint(claims={"iss": iss}), "iss_mismatch")
    assert env.fetcher.fetch_count == 0


async def test_iss_equal_to_the_jku_origin_is_accepted(env: Env) -> None:
    assert (await env.verify(env.mint(claims={"iss": GATEWAY}))).issuer == GATEWAY


async def test_iss_check_comes_before_any_fetch_even_with_a_bad_signature(env: Env) -> None:
    token = env.mint(claims={"iss": "https://evil.test"})
    await refused(env, token[:-2] + "AA", "iss_mismatch")
    assert env.kit.fetch_log == []


# --- step 5: signature ---------------------------------------------------------------------------


def flip_first_signature_char(token: str) -> str:
    head, _, signature = token.rpartition(".")
    first = "B" if signature[0] != "B" else "C"
    return f"{head}.{first}{signature[1:]}"


async def test_tampered_signature_is_refused(env: Env) -> None:  # ref 6
    await refused(env, flip_first_signature_char(env.mint()), "bad_signature")


async def test_tampered_payload_is_refused(env: Env) -> None:
    h, _, s = env.mint(tenant="a").split(".")
    forged = b64json(claims_of(env, **{DEFAULT_TENANT_CLAIM: "b"}))
    await refused(env, f"{h}.{forged}.{s}", "bad_signature")


async def test_signature_by_another_key_with_the_right_kid_is_refused(env: Env) -> None:
    impostor = GatewayKit(key=Ed25519PrivateKey.generate())
    await refused(env, impostor.mint(audience=ENDPOINT), "bad_signature")


async def test_short_and_long_signatures_are_refused(env: Env) -> None:
    h, p, s = env.mint().split(".")
    await refused(env, f"{h}.{p}.{s[:43]}", "bad_signature")
    await refused(env, f"{h}.{p}.{s}{s[:43]}", "bad_signature")


async def test_unknown_kid_refetches_once_then_waits_for_the_cooldown(env: Env) -> None:  # ref 93
    await env.verify(env.mint())
    assert env.fetcher.fetch_count == 1
    await refused(env, env.mint(headers={"kid": "nope-1"}), "unknown_kid")
    assert env.fetcher.fetch_count == 1  # the first fetch was < cooldown ago
    env.clock.advance(env.settings.jwks_cooldown_seconds)
    await refused(env, env.mint(headers={"kid": "nope-2"}), "unknown_kid")
    assert env.fetcher.fetch_count == 2
    await refused(env, env.mint(headers={"kid": "nope-3"}), "unknown_kid")
    assert env.fetcher.fetch_count == 2


async def test_rotated_key_is_picked_up_after_the_cooldown(env: Env) -> None:
    await env.verify(env.mint())
    env.kit.rotate("gw-key-2")
    env.clock.advance(env.settings.jwks_cooldown_seconds + 1)
    caller = await env.verify(env.mint())
    assert caller.identity_key == "user-1"
    assert env.fetcher.fetch_count == 2


async def test_unreachable_jwks_is_401(kit: GatewayKit, respx_mock: respx.MockRouter) -> None:
    settings = make_settings()
    jwks = respx_mock.get(JWKS_URL).respond(503)
    async with httpx.AsyncClient() as client:
        verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
        with pytest.raises(Unauthorized) as info:
            await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
    assert info.value.reason == "jwks_unavailable"
    assert jwks.called


async def test_unexpected_errors_become_401(kit: GatewayKit) -> None:
    class Exploding:
        async def get_key(self, jku: object, kid: str) -> object:
            raise RuntimeError("secret internal detail")

    verifier = GatewayTokenVerifier(make_settings(), Exploding())  # type: ignore[arg-type]
    with pytest.raises(Unauthorized) as info:
        await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
    assert "secret" not in info.value.message
    assert info.value.reason == "malformed_token"


# --- step 6: claims ------------------------------------------------------------------------------


async def test_wrong_audience_is_refused(env: Env) -> None:  # ref 7
    await refused(env, env.mint(audience="https://elsewhere.test"), "bad_audience")


@pytest.mark.parametrize(
    "aud",
    [
        "http://localhost",
        "http://localhost/a2a/",
        "HTTP://localhost/a2a",
        "http://localhost:80/a2a",
    ],
)
async def test_audience_is_matched_exactly(env: Env, aud: str) -> None:
    await refused(env, env.mint(audience=aud), "bad_audience")


async def test_audience_list_containing_the_endpoint_is_accepted(env: Env) -> None:  # ref 90
    caller = await env.verify(env.mint(claims={"aud": ["https://other.test", ENDPOINT]}))
    assert caller.identity_key == "user-1"


async def test_audience_list_without_the_endpoint_is_refused(env: Env) -> None:
    await refused(env, env.mint(claims={"aud": ["https://other.test"]}), "bad_audience")


@pytest.mark.parametrize(
    "aud", [[ENDPOINT, 1], [ENDPOINT, None], [[ENDPOINT]], [], {"a": ENDPOINT}, 1, True]
)
async def test_audience_of_the_wrong_type_is_refused(env: Env, aud: object) -> None:
    await refused(env, env.mint(claims={"aud": aud}), "bad_claim_type")


async def test_missing_audience_is_refused(env: Env) -> None:
    await refused(env, env.mint(drop_claims=["aud"]), "bad_audience")


async def test_audience_follows_the_configured_public_url(kit: GatewayKit) -> None:
    settings = make_settings(public_url="https://edge.example.com", rpc_path="/rpc")
    assert settings.endpoint_url == "https://edge.example.com/rpc"


async def test_expired_token_is_refused(env: Env) -> None:  # ref 5
    await refused(env, env.mint(now=time.time() - 180, ttl=120), "expired")  # exp = now - 60


async def test_expiry_within_the_clock_skew_is_accepted(env: Env) -> None:
    caller = await env.verify(env.mint(now=time.time() - 130, ttl=120))  # exp = now - 10
    assert caller.identity_key == "user-1"


async def test_missing_exp_is_refused(env: Env) -> None:  # ref 88: we refuse
    await refused(env, env.mint(drop_claims=["exp"]), "missing_exp")


async def test_missing_iat_is_refused(env: Env) -> None:
    await refused(env, env.mint(drop_claims=["iat"]), "missing_iat")


async def test_iat_in_the_future_beyond_skew_is_refused(env: Env) -> None:  # ref 107: we refuse
    now = time.time()
    await refused(env, env.mint(now=now + 120, ttl=60), "iat_in_future")
    caller = await env.verify(env.mint(now=now + 10, ttl=60))  # within the 30 s skew
    assert caller.identity_key == "user-1"


async def test_lifetime_over_the_bound_is_refused(env: Env) -> None:
    await refused(env, env.mint(ttl=301), "lifetime_too_long")
    assert (await env.verify(env.mint(ttl=300))).identity_key == "user-1"


@pytest.mark.parametrize("settings_overrides", [{"max_token_lifetime_seconds": 60}])
async def test_lifetime_bound_is_configurable(env: Env) -> None:
    await refused(env, env.mint(ttl=61), "lifetime_too_long")


async def test_exp_before_iat_is_refused(env: Env) -> None:
    now = int(time.time())
    await refused(env, env.mint(claims={"iat": now, "exp": now - 1}), "bad_claim_type")


async def test_nbf_in_the_future_is_refused(env: Env) -> None:  # ref 89
    await refused(env, env.mint(claims={"nbf": int(time.time()) + 120}), "not_yet_valid")
    caller = await env.verify(env.mint(claims={"nbf": int(time.time()) - 5}))
    assert caller.identity_key == "user-1"


@pytest.mark.parametrize("claim", ["exp", "iat", "nbf"])
@pytest.mark.parametrize("value", [True, False, "1700000000", [1], {"t": 1}])
async def test_time_claims_of_the_wrong_type_are_refused(
    env: Env, claim: str, value: object
) -> None:
    await refused(env, env.mint(claims={claim: value}), "bad_claim_type")


async def test_float_times_are_accepted(env: Env) -> None:
    now = time.time()
    caller = await env.verify(env.mint(claims={"iat": now, "exp": now + 60.5}))
    assert caller.identity_key == "user-1"


@pytest.mark.parametrize("claims", [{"sub": 5}, {"jti": ["x"]}])
async def test_sub_and_jti_must_be_strings(env: Env, claims: dict[str, Any]) -> None:
    await refused(env, env.mint(claims=claims), "bad_claim_type")


async def test_signature_is_checked_before_the_claims(env: Env) -> None:
    expired = env.mint(now=time.time() - 600)
    await refused(env, flip_first_signature_char(expired), "bad_signature")
    wrong_aud = env.mint(audience="https://elsewhere.test", drop_claims=[DEFAULT_IDENTITY_CLAIM])
    await refused(env, flip_first_signature_char(wrong_aud), "bad_signature")


# --- step 7: identity ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "identity",
    [["user-1"], {"name": "no key"}, {"key": ""}, {"key": 5}, {"key": None}, "user-1", 1, None],
)
async def test_identity_without_a_key_is_400(env: Env, identity: object) -> None:  # ref 9, 23, 98
    token = env.mint(claims={DEFAULT_IDENTITY_CLAIM: identity})
    with pytest.raises(BadRequest) as info:
        await env.verify(token)
    assert info.value.reason == "identity_missing_key"
    assert info.value.status_code == 400
    assert info.value.body == "bad request: gateway identity missing key"


@pytest.mark.parametrize("name", ["nul\x00inside", "lone \ud800 surrogate", "\udfff"])
async def test_identity_holding_bad_text_is_400(env: Env, name: str) -> None:
    # Such text reaches a decoded claim only through a \\u escape (app.text); PyJWT writes
    # both as escapes, and the verifier walks the identity only when the payload has one.
    token = env.mint(claims={DEFAULT_IDENTITY_CLAIM: {"key": "user-1", "name": name}})
    with pytest.raises(BadRequest) as info:
        await env.verify(token)
    assert info.value.reason == "identity_bad_text"
    assert info.value.status_code == 400


async def test_identity_with_an_escaped_surrogate_pair_is_accepted(env: Env) -> None:
    token = env.mint(claims={DEFAULT_IDENTITY_CLAIM: {"key": "user-1", "name": "smile \U0001f600"}})
    caller = await env.verify(token)
    assert caller.identity["name"] == "smile \U0001f600"


async def test_absent_identity_claim_is_400(env: Env) -> None:
    with pytest.raises(BadRequest) as info:
        await env.verify(env.mint(drop_claims=[DEFAULT_IDENTITY_CLAIM]))
    assert "identity missing key" in info.value.message


async def test_claims_are_checked_before_the_identity(env: Env) -> None:
    token = env.mint(now=time.time() - 600, drop_claims=[DEFAULT_IDENTITY_CLAIM])
    await refused(env, token, "expired")


CUSTOM = {
    "identity_claim": "https://example.test/who",
    "tenant_claim": "https://example.test/tenant",
}


@pytest.mark.parametrize("settings_overrides", [CUSTOM])
async def test_custom_claim_names_are_read(env: Env) -> None:  # ref 8, 38
    token = env.mint(
        tenant="acme",
        identity={"key": "custom-user"},
        identity_claim=CUSTOM["identity_claim"],
        tenant_claim=CUSTOM["tenant_claim"],
    )
    caller = await env.verify(token)
    assert (caller.identity_key, caller.tenant) == ("custom-user", "acme")


@pytest.mark.parametrize("settings_overrides", [CUSTOM])
async def test_tenant_under_the_default_name_only_is_no_tenant(env: Env) -> None:  # ref 39
    token = env.mint(tenant="acme", identity_claim=CUSTOM["identity_claim"])
    caller = await env.verify(token)
    assert caller.tenant is None


@pytest.mark.parametrize("settings_overrides", [CUSTOM])
async def test_identity_under_the_default_name_only_is_400(env: Env) -> None:
    with pytest.raises(BadRequest):
        await env.verify(env.mint(tenant_claim=CUSTOM["tenant_claim"]))


# --- step 8: tenant ------------------------------------------------------------------------------


@pytest.mark.parametrize("tenant", [["acme"], 5, "", None, {"id": "acme"}, True])
async def test_non_string_tenant_is_no_tenant(env: Env, tenant: object) -> None:  # ref 36, 97
    caller = await env.verify(env.mint(claims={DEFAULT_TENANT_CLAIM: tenant}))
    assert caller.tenant is None


async def test_absent_tenant_is_no_tenant(env: Env) -> None:
    assert (await env.verify(env.mint(tenant=None))).tenant is None


# --- messages ----------------------------------------------------------------------------------


async def test_refusals_never_echo_the_token_or_its_parts(env: Env) -> None:
    tokens = [
        env.mint(headers={"jku": "https://evil.test/k"}),
        env.mint(claims={"iss": "https://evil.test"}),
        flip_first_signature_char(env.mint()),
        env.mint(audience="https://elsewhere.test"),
    ]
    for token in tokens:
        with pytest.raises(Unauthorized) as info:
            await env.verify(token)
        for part in token.split("."):
            assert part not in info.value.body
        assert "evil.test" not in info.value.body


# --- limits at their edges (a limit moved by a few units must fail a test) -------------------


@pytest.mark.parametrize(
    ("offset", "accepted"), [(-27, True), (-33, False)], ids=["inside", "outside"]
)
async def test_exp_is_honoured_to_the_30_second_skew(env: Env, offset: int, accepted: bool) -> None:
    now = time.time()
    token = env.mint(now=now + offset - 60, ttl=60)  # exp = now + offset
    if accepted:
        await env.verify(token)
    else:
        await refused(env, token, "expired")


@pytest.mark.parametrize(
    ("offset", "accepted"), [(27, True), (33, False)], ids=["inside", "outside"]
)
async def test_nbf_and_iat_are_honoured_to_the_30_second_skew(
    env: Env, offset: int, accepted: bool
) -> None:
    now = time.time()
    nbf = env.mint(claims={"nbf": int(now) + offset})
    iat = env.mint(now=now + offset, ttl=60)
    if accepted:
        await env.verify(nbf)
        await env.verify(iat)
    else:
        await refused(env, nbf, "not_yet_valid")
        await refused(env, iat, "iat_in_future")


@pytest.mark.parametrize("settings_overrides", [{"clock_skew_seconds": 5}])
async def test_the_clock_skew_is_configurable(env: Env) -> None:
    now = time.time()
    await refused(env, env.mint(now=now - 70, ttl=60), "expired")  # exp = now - 10
    await refused(env, env.mint(claims={"nbf": int(now) + 15}), "not_yet_valid")


def _token_of_length(env: Env, length: int) -> str:
    """A valid token of exactly ``length`` characters (a padding claim and header member)."""
    base = len(env.mint(claims={"pad": ""}, headers={"typ": ""}))
    for typ in range(4):  # base64url lengths skip one residue mod 4: vary both segments
        for pad in range(max(0, (length - base) * 3 // 4 - 8), (length - base) * 3 // 4 + 8):
            token = env.mint(claims={"pad": "x" * pad}, headers={"typ": "t" * typ})
            if len(token) == length:
                return token
    raise AssertionError(f"no token of {length} characters")


async def test_a_token_of_exactly_8_kib_is_read_and_one_byte_more_is_not(env: Env) -> None:
    await env.verify(_token_of_length(env, 8192))
    await refused(env, _token_of_length(env, 8193), "token_too_large")


def test_the_jwks_fetch_deadline_defaults_to_3_seconds() -> None:
    # CONTRACT §3 step 5: one overall deadline per fetch (3 s), so a server dripping bytes
    # cannot hold a request; the size cap (64 KiB) and the token cap (8 KiB) likewise.
    settings = make_settings()
    assert settings.jwks_deadline_seconds == 3.0
    assert settings.jwks_max_bytes == 64 * 1024
    assert settings.max_token_bytes == 8 * 1024
    assert settings.clock_skew_seconds == 30
    assert settings.max_token_lifetime_seconds == 300


async def test_refusals_never_echo_a_decoded_header_or_claim_value(env: Env) -> None:
    # The reason names the failed rule; the values in the token are the caller's (and an
    # attacker's): none of them comes back, decoded or not (CONTRACT §3).
    marker = "zq-marker"
    cases = [
        (env.mint(headers={"jku": f"https://{marker}.test/k"}), "jku_not_allowed"),
        (env.mint(headers={"alg": f"{marker}"}), "bad_alg"),
        (env.mint(headers={"kid": f"{marker}-kid"}), "unknown_kid"),
        (env.mint(claims={"iss": f"https://{marker}.test"}), "iss_mismatch"),
        (env.mint(audience=f"https://{marker}.test/a2a"), "bad_audience"),
        (env.mint(claims={"aud": [f"https://{marker}.test/a2a"]}), "bad_audience"),
        (env.mint(claims={"sub": marker, "exp": int(time.time()) - 600}), "expired"),
    ]
    for token, reason in cases:
        refusal = await refused(env, token, reason)
        assert marker not in refusal.body and marker not in refusal.message, reason
