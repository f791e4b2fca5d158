"""What a gateway checks on an edge: the card signature and the push callback JWT.

This is the *gateway* side of CONTRACT §4 and §7, used by ``looping-edge gateway-dev`` and by
the test push receiver. It is written against the contract, not against our signer: the card
payload is recomputed from the served document (``app.cards.canonical``), the JWKS is parsed
with the strict rules of ``app.security.jwks``, and every header field is compared with the
pin taken at registration (trust on first use).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature

from app.cards.canonical import CardFormatError, canonical_payload
from app.security.jose_strict import JoseError, b64url_decode, b64url_encode, is_number
from app.security.jose_strict import loads_object as strict_loads_object
from app.security.verify_key import SignatureKey

# The Looping gateway refuses callback tokens older than ten minutes.
MAX_CALLBACK_AGE_SECONDS = 600
CLOCK_SKEW_SECONDS = 30


class VerificationError(Exception):
    """A check failed; the message names the rule and never echoes a token or key."""


@dataclass(frozen=True)
class Pin:
    """The edge's signing identity as pinned at registration (CONTRACT §4 last bullet)."""

    jku: str
    kid: str

    def as_json(self) -> dict[str, str]:
        return {"jku": self.jku, "kid": self.kid}


def _protected_header(encoded: object) -> dict[str, Any]:
    if not isinstance(encoded, str):
        raise VerificationError("signature header is missing")
    try:
        return strict_loads_object(b64url_decode(encoded))
    except JoseError:
        raise VerificationError("signature header is not valid base64url JSON") from None


def _check_header(header: Mapping[str, Any], *, typ: str | None) -> Pin:
    if header.get("alg") != "EdDSA":
        raise VerificationError("signature alg must be EdDSA")
    if "crit" in header or "b64" in header:
        raise VerificationError("signature header carries crit/b64")
    if typ is not None and header.get("typ") != typ:
        raise VerificationError(f"signature typ must be {typ}")
    jku, kid = header.get("jku"), header.get("kid")
    if not isinstance(jku, str) or not jku or not isinstance(kid, str) or not kid:
        raise VerificationError("signature header needs jku and kid")
    return Pin(jku=jku, kid=kid)


def _verify(key: SignatureKey, signature: str, signing_input: bytes) -> None:
    try:
        key.verify(b64url_decode(signature), signing_input)
    except (InvalidSignature, JoseError):
        raise VerificationError("signature does not verify") from None


def card_pin(card: Mapping[str, Any]) -> Pin:
    """The ``jku``/``kid`` a card's (first) signature names, before verifying anything."""
    signatures = card.get("signatures")
    if not isinstance(signatures, list) or not signatures or not isinstance(signatures[0], dict):
        raise VerificationError("card carries no signature")
    return _check_header(_protected_header(signatures[0].get("protected")), typ=None)


def verify_card(card: Mapping[str, Any], *, key: SignatureKey, pin: Pin) -> None:
    """A2A §8.4.3: the detached JWS over the canonical card, by the pinned key."""
    signatures = card.get("signatures")
    if not isinstance(signatures, list) or len(signatures) != 1:
        raise VerificationError("card must carry exactly one signature")
    signature = signatures[0]
    if not isinstance(signature, dict) or not isinstance(signature.get("signature"), str):
        raise VerificationError("card signature is malformed")
    protected = signature.get("protected")
    header = _check_header(_protected_header(protected), typ=None)
    if header != pin:
        raise VerificationError("card signature jku/kid differ from the pinned ones")
    try:
        payload = canonical_payload(card)
    except CardFormatError as exc:
        raise VerificationError(f"card cannot be canonicalised: {exc}") from None
    _verify(key, signature["signature"], f"{protected}.{b64url_encode(payload)}".encode("ascii"))


@dataclass(frozen=True)
class CallbackClaims:
    header: dict[str, Any]
    claims: dict[str, Any]


def verify_callback(
    token: str,
    *,
    key: SignatureKey,
    pin: Pin,
    audience: str,
    now: float | None = None,
) -> CallbackClaims:
    """CONTRACT §7: header ``kid``/``jku`` equal the pin, EdDSA, ``aud`` = this push URL,
    ``iat`` not in the future and not older than ten minutes, ``exp`` not passed."""
    parts = token.split(".")
    if len(parts) != 3:
        raise VerificationError("callback token is not a compact JWS")
    header = _protected_header(parts[0])
    if _check_header(header, typ=None) != pin:
        raise VerificationError("callback token kid/jku differ from the pinned ones")
    _verify(key, parts[2], f"{parts[0]}.{parts[1]}".encode("ascii"))
    try:
        claims = strict_loads_object(b64url_decode(parts[1]))
    except JoseError:
        raise VerificationError("callback claims are not valid JSON") from None
    aud = claims.get("aud")
    if not (aud == audience or (isinstance(aud, list) and audience in aud)):
        raise VerificationError("callback aud is not this push url")
    iat_value, exp_value = claims.get("iat"), claims.get("exp")
    if not is_number(iat_value) or not is_number(exp_value):
        raise VerificationError("callback token needs numeric iat and exp")
    iat, exp = float(iat_value), float(exp_value)  # type: ignore[arg-type]
    current = time.time() if now is None else now
    if iat > current + CLOCK_SKEW_SECONDS:
        raise VerificationError("callback token iat is in the future")
    if current - iat > MAX_CALLBACK_AGE_SECONDS:
        raise VerificationError("callback token is older than ten minutes")
    if exp <= current - CLOCK_SKEW_SECONDS:
        raise VerificationError("callback token has expired")
    return CallbackClaims(header=header, claims=claims)
