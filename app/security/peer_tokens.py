"""The caller token this edge presents to another agent's edge (CONTRACT §10): minted with our
key per request, header ``{alg: EdDSA, kid, jku: our JWKS}``, ``iss`` our origin, ``aud`` the
peer's exact endpoint (the interface called), the tenant claim the peer tenant addressed, the
identity claim the agent we speak for, ``iat``/``exp``/``jti``. Negotiation (issue 51) and the
A2A tools of ``llm`` agents (issue 54) both present it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from app.security.keys import SigningKey, compact_json
from app.settings import Settings

PEER_TOKEN_SECONDS = 120  # well under CONTRACT §10's limit; one token per request


def peer_token(
    settings: Settings,
    key: SigningKey,
    *,
    audience: str,
    tenant: str,
    identity: Mapping[str, Any],
    now: float | None = None,
) -> str:
    issued = int(time.time() if now is None else now)
    header = {"alg": "EdDSA", "kid": key.kid, "jku": settings.jwks_url}
    claims = {
        "iss": settings.public_origin,
        "aud": audience,
        "iat": issued,
        "exp": issued + PEER_TOKEN_SECONDS,
        "jti": str(uuid.uuid4()),
        settings.identity_claim: dict(identity),
        settings.tenant_claim: tenant,
    }
    return key.sign_compact(header, compact_json(claims))
