"""CONTRACT §3 step 5: JWKS parsing, bounded fetching, caching, cooldown and single-flight."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import respx
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PrivateKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from app.errors import Unauthorized
from app.origins import ParsedUrl, parse_url
from app.security.jose_strict import JoseError, b64url_encode
from app.security.jwks import JwksFetcher, parse_jwks
from app.security.token import GatewayTokenVerifier
from app.testing.gateway import GatewayKit, public_jwk
from app.testing.jwks_server import (
    OVERSIZED,
    OVERSIZED_STREAM,
    REDIRECT,
    SLOW_DRIP,
    serve_jwks,
    status,
)

from .conftest import ENDPOINT, JWKS_URL, FakeClock, make_settings

JKU = parse_url(JWKS_URL, allow_loopback_http=False)


def ed25519_jwk(kid: str, **extra: Any) -> dict[str, Any]:
    return {**public_jwk(Ed25519PrivateKey.generate(), kid), **extra}


def raw_x(jwk: dict[str, Any]) -> str:
    return str(jwk["x"])


class Gateway:
    """A scriptable JWKS endpoint behind an ``httpx.MockTransport``."""

    def __init__(self, kit: GatewayKit) -> None:
        self.kit = kit
        self.calls: list[str] = []
        self.respond: Callable[[httpx.Request], httpx.Response] | None = None
        self.delay = 0.0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(str(request.url))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.respond is not None:
            return self.respond(request)
        return httpx.Response(200, json=self.kit.jwks())


@pytest.fixture
async def gateway(kit: GatewayKit) -> Gateway:
    return Gateway(kit)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def fetcher(gateway: Gateway, clock: FakeClock) -> AsyncIterator[JwksFetcher]:
    settings = make_settings(jwks_deadline_seconds=0.5)
    async with httpx.AsyncClient(transport=httpx.MockTransport(gateway)) as client:
        yield JwksFetcher(settings, client, clock=clock)


async def unavailable(fetcher: JwksFetcher, kid: str = "gw-key-1", jku: ParsedUrl = JKU) -> str:
    with pytest.raises(Unauthorized) as info:
        await fetcher.get_key(jku, kid)
    return info.value.reason


# --- parsing -------------------------------------------------------------------------------------


def test_parse_keeps_a_plain_ed25519_key() -> None:
    jwk = ed25519_jwk("a")
    keys = parse_jwks(json.dumps({"keys": [jwk]}).encode())
    assert list(keys) == ["a"]


def test_parse_drops_ed448_and_other_key_types() -> None:
    ed448 = Ed448PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    doc = {
        "keys": [
            {"kty": "OKP", "crv": "Ed448", "x": b64url_encode(ed448), "kid": "ed448"},
            {"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA", "kid": "ec"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "rsa"},
            {"kty": "oct", "k": "c2VjcmV0", "kid": "oct"},
            {**ed25519_jwk("x"), "crv": "X25519", "kid": "x25519"},
            ed25519_jwk("good"),
        ]
    }
    assert list(parse_jwks(json.dumps(doc).encode())) == ["good"]


@pytest.mark.parametrize(
    "extra",
    [
        {"use": "enc"},
        {"use": ""},
        {"use": None},
        {"alg": "Ed25519"},
        {"alg": "RS256"},
        {"alg": None},
        {"key_ops": ["sign"]},
        {"key_ops": ["encrypt", "wrapKey"]},
        {"key_ops": "verify"},
        {"key_ops": []},
        {"d": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
    ],
)
def test_parse_drops_keys_not_fit_for_verification(extra: dict[str, Any]) -> None:
    doc = {"keys": [ed25519_jwk("k", **extra), ed25519_jwk("good")]}
    assert list(parse_jwks(json.dumps(doc).encode())) == ["good"]


@pytest.mark.parametrize(
    "extra",
    [{"use": "sig"}, {"alg": "EdDSA"}, {"key_ops": ["verify"]}, {"key_ops": ["sign", "verify"]}],
)
def test_parse_keeps_keys_whose_metadata_allows_verification(extra: dict[str, Any]) -> None:
    doc = {"keys": [ed25519_jwk("k", **extra)]}
    assert list(parse_jwks(json.dumps(doc).encode())) == ["k"]


def test_parse_drops_every_key_sharing_a_duplicated_kid() -> None:
    ed448 = {"kty": "OKP", "crv": "Ed448", "x": "AAAA", "kid": "dup"}
    doc = {
        "keys": [
            ed25519_jwk("dup"),
            ed25519_jwk("dup"),
            ed25519_jwk("dup2"),
            ed448,
            ed25519_jwk("ok"),
        ]
    }
    doc["keys"][2]["kid"] = "dup2"
    doc["keys"].append(ed25519_jwk("dup2"))
    assert list(parse_jwks(json.dumps(doc).encode())) == ["ok"]


@pytest.mark.parametrize(
    "x",
    [
        None,
        7,
        "",
        "AAAA",  # 3 bytes
        b64url_encode(b"\x01" * 31),
        b64url_encode(b"\x01" * 33),
        b64url_encode(b"\x09" * 32) + "=",  # padded
        b64url_encode(b"\x09" * 32).replace("C", "+"),
        "!" * 43,
    ],
)
def test_parse_drops_malformed_x(x: object) -> None:
    jwk = ed25519_jwk("bad")
    jwk["x"] = x
    assert parse_jwks(json.dumps({"keys": [jwk]}).encode()) == {}


def test_parse_drops_keys_without_a_usable_kid() -> None:
    jwk = ed25519_jwk("k")
    del jwk["kid"]
    doc = {"keys": [jwk, ed25519_jwk(""), {**ed25519_jwk("k"), "kid": 5}, "junk", 3, None]}
    assert parse_jwks(json.dumps(doc).encode()) == {}


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"{}",
        b'{"keys": {}}',
        b'{"keys": null}',
        b"not json",
        b'{"keys": [], "keys": []}',
        b"\xff\xfe",
        b'{"keys": [NaN]}',
    ],
)
def test_parse_refuses_documents_that_are_not_a_jwks(body: bytes) -> None:
    with pytest.raises(JoseError):
        parse_jwks(body)


def test_parse_drops_a_key_with_a_duplicate_member_by_refusing_the_document() -> None:
    jwk = ed25519_jwk("k")
    text = json.dumps({"keys": [jwk]}).replace('"kid": "k"', '"kid": "k", "kid": "other"')
    with pytest.raises(JoseError):
        parse_jwks(text.encode())


# --- fetching ------------------------------------------------------------------------------------


async def test_cached_set_serves_without_network(fetcher: JwksFetcher, gateway: Gateway) -> None:
    for _ in range(100):
        await fetcher.get_key(JKU, "gw-key-1")
    assert fetcher.fetch_count == 1
    assert gateway.calls == [JWKS_URL]
    assert fetcher.last_result == "ok"


async def test_cache_expires_after_the_configured_time(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    await fetcher.get_key(JKU, "gw-key-1")
    clock.advance(599)
    await fetcher.get_key(JKU, "gw-key-1")
    assert fetcher.fetch_count == 1
    clock.advance(2)
    await fetcher.get_key(JKU, "gw-key-1")
    assert fetcher.fetch_count == 2


async def test_cache_is_per_origin_whatever_the_jku_path_or_query(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    fetcher.confirm(JKU, await fetcher.get_key(JKU, "gw-key-1"))  # a token verified: pinned
    for variant in [
        "https://gateway.test/other/jwks.json",
        "https://gateway.test/.well-known/jwks.json?x=1",
        "https://gateway.test/.well-known/jwks.json?cache-buster=2",
        "https://gateway.test/",
    ]:
        await fetcher.get_key(parse_url(variant, allow_loopback_http=False), "gw-key-1")
    assert fetcher.fetch_count == 1
    # A later refresh uses the pinned URL, not the token's variant.
    clock.advance(601)
    await fetcher.get_key(
        parse_url("https://gateway.test/x?y", allow_loopback_http=False), "gw-key-1"
    )
    assert gateway.calls == [JWKS_URL, JWKS_URL]


OTHER_URL = "https://gateway.test/other/jwks.json"
OTHER = parse_url(OTHER_URL, allow_loopback_http=False)


def other_document_too(gateway: Gateway) -> None:
    """The gateway's origin also serves a JWKS-shaped document that is not its signing set."""

    def respond(request: httpx.Request) -> httpx.Response:
        if str(request.url) == OTHER_URL:
            return httpx.Response(200, json={"keys": [ed25519_jwk("someone-else")]})
        return httpx.Response(200, json=gateway.kit.jwks())

    gateway.respond = respond


async def test_an_unverified_first_request_does_not_pin_its_url(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    # Found by audit: an unsigned token naming another JWKS-shaped URL of the gateway's
    # origin, sent first, chose the URL of every later refresh for the life of the process.
    other_document_too(gateway)
    assert await unavailable(fetcher, jku=OTHER) == "unknown_kid"
    assert gateway.calls == [OTHER_URL]
    clock.advance(1)  # the backoff between URLs of one origin before any token verified
    key = await fetcher.get_key(JKU, "gw-key-1")
    fetcher.confirm(JKU, key)
    assert gateway.calls == [OTHER_URL, JWKS_URL]
    # Pinned now: the other URL neither fetches nor displaces the gateway's keys.
    clock.advance(601)
    assert await unavailable(fetcher, "someone-else", jku=OTHER) == "unknown_kid"
    assert gateway.calls == [OTHER_URL, JWKS_URL, JWKS_URL]
    assert await fetcher.get_key(JKU, "gw-key-1") is not None


async def test_before_any_token_verifies_other_urls_fetch_at_the_backoff_pace(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    other_document_too(gateway)
    await fetcher.get_key(JKU, "gw-key-1")
    await fetcher.get_key(OTHER, "gw-key-1")  # within the backoff: the held set answers
    assert fetcher.fetch_count == 1
    clock.advance(1)
    for _ in range(20):
        assert await unavailable(fetcher, jku=OTHER) == "unknown_kid"
    assert fetcher.fetch_count == 2  # the first one fetched; then the cooldown holds
    clock.advance(1)
    for _ in range(20):
        await fetcher.get_key(JKU, "gw-key-1")
    assert fetcher.fetch_count == 3


async def test_confirm_ignores_a_key_the_cached_set_does_not_hold(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    other_document_too(gateway)
    key = await fetcher.get_key(JKU, "gw-key-1")
    clock.advance(1)
    await unavailable(fetcher, jku=OTHER)  # the provisional set is now the other URL's
    fetcher.confirm(OTHER, key)  # a key from the replaced set pins nothing
    clock.advance(1)
    assert await fetcher.get_key(JKU, "gw-key-1") is not None
    assert gateway.calls == [JWKS_URL, OTHER_URL, JWKS_URL]


async def test_a_verified_token_pins_through_the_verifier(
    kit: GatewayKit, respx_mock: respx.MockRouter
) -> None:
    clock = FakeClock()
    settings = make_settings()
    respx_mock.get(OTHER_URL).respond(200, json={"keys": [ed25519_jwk("gw-key-1")]})
    respx_mock.get(JWKS_URL).respond(200, json=kit.jwks())

    async with httpx.AsyncClient() as client:
        fetcher = JwksFetcher(settings, client, clock=clock)
        verifier = GatewayTokenVerifier(settings, fetcher)
        await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
        # Signed by another key under the gateway's kid, naming the other document.
        signed = kit.mint(audience=ENDPOINT, headers={"jku": OTHER_URL}).rsplit(".", 1)[0]
        forged = f"{signed}.{b64url_encode(Ed25519PrivateKey.generate().sign(signed.encode()))}"
        clock.advance(601)
        with pytest.raises(Unauthorized) as info:
            await verifier.verify(f"Bearer {forged}")
        await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
    assert info.value.reason == "bad_signature"  # the gateway's own key, not the other one
    assert [str(call.request.url) for call in respx_mock.calls] == [JWKS_URL, JWKS_URL]


def slow_answer(gateway: Gateway, clock: FakeClock, seconds: float, status: int) -> None:
    """Each fetch takes ``seconds`` of the fetcher's clock, then answers ``status``."""
    gateway.delay = 0.01  # long enough for the other requests to queue behind it

    def respond(request: httpx.Request) -> httpx.Response:
        clock.advance(seconds)
        if status != 200:
            return httpx.Response(status)
        return httpx.Response(200, json=gateway.kit.jwks())

    gateway.respond = respond


async def test_waiters_behind_a_slow_failing_fetch_take_its_outcome(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    # Found by audit: a fetch that failed after more than the backoff (a 3-s timeout) let
    # every request queued behind it fetch again, one after another: N requests, N deadlines.
    slow_answer(gateway, clock, 3, 503)  # the fetch took the whole deadline
    results = await asyncio.gather(
        *(fetcher.get_key(JKU, "gw-key-1") for _ in range(6)), return_exceptions=True
    )
    assert all(isinstance(r, Unauthorized) and r.reason == "jwks_unavailable" for r in results)
    assert fetcher.fetch_count == 1
    # The backoff counts from the end of the failed fetch.
    clock.advance(0.5)
    assert await unavailable(fetcher) == "jwks_unavailable"
    assert fetcher.fetch_count == 1
    clock.advance(0.5)
    assert await unavailable(fetcher) == "jwks_unavailable"
    assert fetcher.fetch_count == 2


async def test_waiters_behind_a_slow_successful_fetch_do_not_fetch_again(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    slow_answer(gateway, clock, 40, 200)  # longer than the cooldown
    results = await asyncio.gather(
        *(fetcher.get_key(JKU, kid) for kid in ["gw-key-1"] + ["nope"] * 5),
        return_exceptions=True,
    )
    assert not isinstance(results[0], BaseException)
    assert all(isinstance(r, Unauthorized) and r.reason == "unknown_kid" for r in results[1:])
    assert fetcher.fetch_count == 1


async def test_unknown_kid_refetches_at_most_once_per_cooldown(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    await fetcher.get_key(JKU, "gw-key-1")
    clock.advance(31)
    assert await unavailable(fetcher, "nope") == "unknown_kid"
    assert fetcher.fetch_count == 2
    for kid in ("nope", "nope-2", "nope-3"):
        assert await unavailable(fetcher, kid) == "unknown_kid"
    assert fetcher.fetch_count == 2
    clock.advance(29)
    assert await unavailable(fetcher, "nope") == "unknown_kid"
    assert fetcher.fetch_count == 2
    clock.advance(1)
    assert await unavailable(fetcher, "nope") == "unknown_kid"
    assert fetcher.fetch_count == 3


async def test_unknown_kid_flood_causes_at_most_one_refetch(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    await fetcher.get_key(JKU, "gw-key-1")
    clock.advance(31)
    gateway.delay = 0.01
    rng = random.Random(5)
    kids = [f"kid-{rng.getrandbits(64):x}" for _ in range(100)]
    results = await asyncio.gather(*(fetcher.get_key(JKU, k) for k in kids), return_exceptions=True)
    assert all(isinstance(r, Unauthorized) and r.reason == "unknown_kid" for r in results)
    assert fetcher.fetch_count == 2
    assert len(gateway.calls) == 2
    # The known key still answers, without a fetch.
    await fetcher.get_key(JKU, "gw-key-1")
    assert fetcher.fetch_count == 2


async def test_unknown_kid_flood_with_verifier_tokens(kit: GatewayKit) -> None:
    settings = make_settings()
    async with httpx.AsyncClient(transport=kit.transport()) as client:
        fetcher = JwksFetcher(settings, client)
        verifier = GatewayTokenVerifier(settings, fetcher)
        await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
        tokens = [kit.mint(audience=ENDPOINT, headers={"kid": f"r{i}"}) for i in range(100)]
        results = await asyncio.gather(
            *(verifier.verify(f"Bearer {t}") for t in tokens), return_exceptions=True
        )
    assert all(isinstance(r, Unauthorized) for r in results)
    assert fetcher.fetch_count == 1  # the warm-up fetch was within the cooldown
    assert len(kit.fetch_log) == 1


async def test_cold_cache_is_single_flight(fetcher: JwksFetcher, gateway: Gateway) -> None:
    gateway.delay = 0.02
    keys = await asyncio.gather(*(fetcher.get_key(JKU, "gw-key-1") for _ in range(50)))
    assert len({id(k) for k in keys}) == 1
    assert fetcher.fetch_count == 1
    assert len(gateway.calls) == 1


async def test_cold_cache_single_flight_through_the_verifier(kit: GatewayKit) -> None:
    settings = make_settings()
    async with httpx.AsyncClient(transport=kit.transport()) as client:
        fetcher = JwksFetcher(settings, client)
        verifier = GatewayTokenVerifier(settings, fetcher)
        tokens = [kit.mint(audience=ENDPOINT, tenant=f"t{i}") for i in range(50)]
        callers = await asyncio.gather(*(verifier.verify(f"Bearer {t}") for t in tokens))
    assert [c.tenant for c in callers] == [f"t{i}" for i in range(50)]
    assert fetcher.fetch_count == 1
    assert kit.fetch_log == [JWKS_URL]


async def test_failure_keeps_the_cached_set_until_it_expires(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    await fetcher.get_key(JKU, "gw-key-1")
    gateway.respond = lambda request: httpx.Response(500)
    clock.advance(31)
    assert await unavailable(fetcher, "rotated") == "unknown_kid"  # refetch failed
    assert fetcher.last_result == "error"
    await fetcher.get_key(JKU, "gw-key-1")  # the cached set still answers
    clock.advance(600)
    assert await unavailable(fetcher) == "jwks_unavailable"


async def test_cold_failure_backs_off_then_recovers(
    fetcher: JwksFetcher, gateway: Gateway, clock: FakeClock
) -> None:
    gateway.respond = lambda request: httpx.Response(500)
    assert await unavailable(fetcher) == "jwks_unavailable"
    assert await unavailable(fetcher) == "jwks_unavailable"
    assert fetcher.fetch_count == 1  # backoff: no hammering of a failing gateway
    gateway.respond = None
    clock.advance(1)
    await fetcher.get_key(JKU, "gw-key-1")
    assert fetcher.fetch_count == 2


@pytest.mark.parametrize(
    ("response", "label"),
    [
        (lambda r: httpx.Response(302, headers={"Location": JWKS_URL}), "redirect"),
        (lambda r: httpx.Response(301, headers={"Location": "https://evil.test/"}), "redirect"),
        (lambda r: httpx.Response(307, headers={"Location": JWKS_URL}), "redirect"),
        (lambda r: httpx.Response(304), "redirect"),
        (lambda r: httpx.Response(404), "error"),
        (lambda r: httpx.Response(500), "error"),
        (lambda r: httpx.Response(204), "error"),
        (lambda r: httpx.Response(200, content=b"not json"), "invalid"),
        (lambda r: httpx.Response(200, json={"keys": "no"}), "invalid"),
        (
            lambda r: httpx.Response(
                200, content=b"x" * 70000, headers={"Content-Length": "70000"}
            ),
            "too_large",
        ),
        (
            lambda r: httpx.Response(200, content=b"{}", headers={"Content-Encoding": "gzip"}),
            "error",
        ),
    ],
)
async def test_bad_responses_fail_the_fetch(
    fetcher: JwksFetcher, gateway: Gateway, response: Any, label: str
) -> None:
    gateway.respond = response
    assert await unavailable(fetcher) == "jwks_unavailable"
    assert fetcher.last_result == label
    assert gateway.calls == [JWKS_URL]  # a redirect is never followed


async def test_transport_errors_fail_the_fetch(gateway: Gateway, fetcher: JwksFetcher) -> None:
    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    gateway.respond = boom
    assert await unavailable(fetcher) == "jwks_unavailable"
    assert fetcher.last_result == "error"


async def _chunks(size: int, pause: float = 0.0) -> AsyncIterator[bytes]:
    sent = 0
    while sent < size:
        if pause:
            await asyncio.sleep(pause)
        yield b" " * 1024
        sent += 1024


async def test_body_without_length_is_capped_while_streaming(
    fetcher: JwksFetcher, gateway: Gateway
) -> None:
    gateway.respond = lambda request: httpx.Response(200, content=_chunks(10 * 1024 * 1024))
    assert await unavailable(fetcher) == "jwks_unavailable"
    assert fetcher.last_result == "too_large"


async def test_dripping_body_hits_the_overall_deadline(
    fetcher: JwksFetcher, gateway: Gateway
) -> None:
    # Each chunk arrives well within any per-read timeout; only an overall deadline stops it.
    gateway.respond = lambda request: httpx.Response(200, content=_chunks(60 * 1024, pause=0.02))
    assert await unavailable(fetcher) == "jwks_unavailable"
    assert fetcher.last_result == "timeout"


async def test_unlisted_origin_is_never_fetched(fetcher: JwksFetcher, gateway: Gateway) -> None:
    evil = parse_url("https://evil.test/.well-known/jwks.json", allow_loopback_http=False)
    assert await unavailable(fetcher, jku=evil) == "jku_not_allowed"
    assert gateway.calls == []
    assert fetcher.fetch_count == 0


async def test_on_fetch_hook_gets_the_result_labels(
    kit: GatewayKit, clock: FakeClock, respx_mock: respx.MockRouter
) -> None:
    labels: list[str] = []
    settings = make_settings()
    jwks = respx_mock.get(JWKS_URL).respond(200, json=kit.jwks())
    async with httpx.AsyncClient() as client:
        fetcher = JwksFetcher(settings, client, clock=clock, on_fetch=labels.append)
        await fetcher.get_key(JKU, "gw-key-1")
        jwks.respond(302, headers={"Location": JWKS_URL})
        clock.advance(601)
        await unavailable(fetcher)
    assert labels == ["ok", "redirect"]


async def test_a_failing_hook_does_not_break_verification(kit: GatewayKit) -> None:
    def hook(label: str) -> None:
        raise RuntimeError("metrics down")

    settings = make_settings()
    async with httpx.AsyncClient(transport=kit.transport()) as client:
        fetcher = JwksFetcher(settings, client, on_fetch=hook)
        assert await fetcher.get_key(JKU, "gw-key-1") is not None


async def test_weak_and_hostile_keys_in_the_jwks_are_not_usable(kit: GatewayKit) -> None:
    identity_point = b64url_encode(b"\x01" + b"\x00" * 31)
    kit.extra_jwks_keys.extend(
        [
            {"kty": "OKP", "crv": "Ed25519", "x": identity_point, "kid": "weak"},
            {**ed25519_jwk("enc"), "use": "enc"},
        ]
    )
    settings = make_settings()
    async with httpx.AsyncClient(transport=kit.transport()) as client:
        fetcher = JwksFetcher(settings, client)
        verifier = GatewayTokenVerifier(settings, fetcher)
        for kid in ("weak", "enc"):
            with pytest.raises(Unauthorized) as info:
                await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT, headers={'kid': kid})}")
            assert info.value.reason == "unknown_kid"
        assert (await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")).tenant == "demo"


# --- the real loopback server --------------------------------------------------------------------


def loopback_settings(kit: GatewayKit, **overrides: Any) -> Any:
    return make_settings(
        gateway_origins=[kit.origin],
        allow_loopback_http=True,
        jwks_deadline_seconds=overrides.pop("jwks_deadline_seconds", 1.0),
        **overrides,
    )


async def test_real_server_happy_path(kit: GatewayKit) -> None:
    async with serve_jwks(kit) as server:
        settings = loopback_settings(kit)
        async with httpx.AsyncClient(trust_env=False) as client:
            verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
            for _ in range(3):
                caller = await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
                assert caller.issuer == server.base_url
    assert server.request_count == 1
    assert server.paths == ["/.well-known/jwks.json"]


@pytest.mark.parametrize(
    ("behaviour", "label"),
    [
        (REDIRECT, "redirect"),
        (OVERSIZED, "too_large"),
        (OVERSIZED_STREAM, "too_large"),
        (SLOW_DRIP, "timeout"),
        (status(500), "error"),
        (status(404), "error"),
    ],
)
async def test_real_server_failures(kit: GatewayKit, behaviour: Any, label: str) -> None:
    async with serve_jwks(kit, behaviour=behaviour) as server:
        settings = loopback_settings(kit, jwks_deadline_seconds=0.3)
        async with httpx.AsyncClient(trust_env=False) as client:
            fetcher = JwksFetcher(settings, client)
            verifier = GatewayTokenVerifier(settings, fetcher)
            with pytest.raises(Unauthorized) as info:
                await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
    assert info.value.reason == "jwks_unavailable"
    assert fetcher.last_result == label
    assert server.request_count == 1  # the redirect was not followed


async def test_real_server_dripping_fetch_is_fetched_once_for_all_waiters(kit: GatewayKit) -> None:
    async with serve_jwks(kit, behaviour=SLOW_DRIP) as server:
        # A deadline past the 1-s failure backoff: the case that refetched for each waiter.
        settings = loopback_settings(kit, jwks_deadline_seconds=1.2)
        async with httpx.AsyncClient(trust_env=False) as client:
            verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
            tokens = [kit.mint(audience=ENDPOINT) for _ in range(3)]
            results = await asyncio.gather(
                *(verifier.verify(f"Bearer {t}") for t in tokens), return_exceptions=True
            )
    assert all(isinstance(r, Unauthorized) and r.reason == "jwks_unavailable" for r in results)
    assert server.request_count == 1  # one deadline for all three, not three in a row


async def test_real_server_recovers_after_a_failure(kit: GatewayKit) -> None:
    clock = FakeClock()
    async with serve_jwks(kit, behaviour=status(503)) as server:
        settings = loopback_settings(kit)
        async with httpx.AsyncClient(trust_env=False) as client:
            fetcher = JwksFetcher(settings, client, clock=clock)
            verifier = GatewayTokenVerifier(settings, fetcher)
            with pytest.raises(Unauthorized):
                await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
            server.set_behaviour("ok")
            clock.advance(1)
            caller = await verifier.verify(f"Bearer {kit.mint(audience=ENDPOINT)}")
    assert caller.identity_key == "user-1"
    assert server.request_count == 2
