"""Benchmark 1: token verification — the edge's ``GatewayTokenVerifier`` on valid gateway
tokens (JWKS fetched once from the loopback JWKS server, then cached) vs raw Ed25519
verification of the same signatures over the same signing inputs, twice: with ``cryptography``
(OpenSSL; the baseline the issue names) and with PyNaCl (libsodium; the primitive the edge's
verifier calls, ``app/security/verify_key.py``), so the row against libsodium is the overhead
of everything around the signature check.

Every token is distinct (own ``jti``), so each edge verification is a full one. Rates are the
median over rounds; each round is one pass over the pool by each of the three, in turn.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from nacl.signing import VerifyKey

from app.security.jose_strict import b64url_decode
from app.security.jwks import JwksFetcher
from app.security.token import GatewayTokenVerifier
from app.services import gateway_http_client
from app.settings import load_settings
from bench.config import AUDIENCE, PUBLIC_URL
from bench.context import Ctx
from bench.report import rate_row

NAME = "1 token verification"


def _raw_inputs(tokens: list[str]) -> list[tuple[bytes, bytes]]:
    out = []
    for token in tokens:
        head, payload, sig = token.split(".")
        out.append((b64url_decode(sig), f"{head}.{payload}".encode("ascii")))
    return out


def _rate(verify: Callable[[bytes, bytes], object], inputs: list[tuple[bytes, bytes]]) -> float:
    began = time.perf_counter()
    for signature, message in inputs:
        verify(signature, message)
    return len(inputs) / (time.perf_counter() - began)


async def _rates(
    ctx: Ctx, headers: list[str], raw: dict[str, Callable[[bytes, bytes], object]], rounds: int
) -> dict[str, list[float]]:
    """Per round: one pass of the edge's verifier, then one of each raw primitive, so a slow
    minute on the shared host lands on all three instead of on one (same tokens each pass)."""
    settings = load_settings(
        signing_key=ctx.edge.key_json,
        gateway_origins=[ctx.gateway.origin],
        public_url=PUBLIC_URL,
        allow_loopback_http=True,
        database_url="sqlite+aiosqlite:///:memory:",
    )
    assert settings.endpoint_url == AUDIENCE
    inputs = _raw_inputs([h.removeprefix("Bearer ") for h in headers])
    client = gateway_http_client(settings)
    rates: dict[str, list[float]] = {"edge": [], **{name: [] for name in raw}}
    try:
        verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
        await verifier.verify(headers[0])  # fetch and cache the JWKS (not measured)
        for _ in range(rounds):
            began = time.perf_counter()
            for header in headers:
                await verifier.verify(header)
            rates["edge"].append(len(headers) / (time.perf_counter() - began))
            for name, verify in raw.items():
                rates[name].append(_rate(verify, inputs))
        return rates
    finally:
        await client.aclose()


def run(ctx: Ctx) -> None:
    n = ctx.profile.verify_tokens
    tokens = ctx.edge_tokens([f"user-{i}" for i in range(100)])[:n]
    headers = [f"Bearer {t}" for t in tokens]
    public: Ed25519PublicKey = ctx.gateway.kit.key.public_key()
    nacl_key = VerifyKey(public.public_bytes(Encoding.Raw, PublicFormat.Raw))
    raw: dict[str, Callable[[bytes, bytes], object]] = {
        "openssl": public.verify,
        "sodium": lambda sig, msg: nacl_key.verify(msg, sig),
    }
    rates = asyncio.run(_rates(ctx, headers, raw, ctx.profile.verify_rounds))
    edge, openssl, sodium = (statistics.median(rates[k]) for k in ("edge", "openssl", "sodium"))
    ctx.report.add(
        rate_row(NAME, "verifications/s", edge, "/s", "raw Ed25519 (OpenSSL)", openssl, 0.6)
    )
    ctx.report.add(
        rate_row(NAME, "verifications/s", edge, "/s", "raw Ed25519 (libsodium)", sodium, 0.6)
    )
    ctx.report.add(rate_row(NAME, "µs per verification", 1e6 / edge, "µs", None, None, None))
