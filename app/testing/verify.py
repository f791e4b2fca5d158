"""What a gateway checks on an edge: the card signature and the push callback JWT.

This is the *gateway* side of CONTRACT §4 and §7, used by ``looping-edge gateway-dev`` and by
the test push receiver. It is written against the contract, not against our signer, and it
parses and verifies with PyJWT (not ``app.security.jose_strict``, the edge's own parser), so
it is an independent check of what the edge emits: the card payload is recomputed from the
served document (``app.cards.canonical``), and every header field is compared with the pin
taken at registration (trust on first use).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from app.cards.canonical import CardFormatError, canonical_payload

# The Looping gateway refuses callback tokens older than ten minutes.
MAX_CALLBACK_AGE_SECONDS = 600
CLOCK_SKEW_SECONDS = 30
_ALGORITHMS = ["EdDSA"]  # pinned here, never taken from the token (RFC 8725 §3.1)


class VerificationError(Exception):
    """A check failed; the message names the rule and never echoes a token or key."""


@dataclass(frozen=True)
class Pin:
    """The edge's signing identity as pinned at registration (CONTRACT §4 last bullet)."""

    jku: str
    kid: str

    def as_json(self) -> dict[str, str]:
        return {"jku": self.jku, "kid": self.kid}


def _unverified_header(token: str) -> dict[str, Any]:
    try:
        return jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        # PyJWT's messages name the rule (bad padding, unsupported critical extension...)
        # and never carry the token.
        raise VerificationError(f"signature header is refused: {exc}") from None


def _check_header(header: Mapping[str, Any]) -> Pin:
    if header.get("alg") != "EdDSA":
        raise VerificationError("signature alg must be EdDSA")
    if "crit" in header or "b64" in header:
        raise VerificationError("signature header carries crit/b64")
    jku, kid = header.get("jku"), header.get("kid")
    if not isinstance(jku, str) or not jku or not isinstance(kid, str) or not kid:
        raise VerificationError("signature header needs jku and kid")
    return Pin(jku=jku, kid=kid)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def card_pin(card: Mapping[str, Any]) -> Pin:
    """The ``jku``/``kid`` a card's (first) signature names, before verifying anything."""
    signatures = card.get("signatures")
    if not isinstance(signatures, list) or not signatures or not isinstance(signatures[0], dict):
        raise VerificationError("card carries no signature")
    protected = signatures[0].get("protected")
    if not isinstance(protected, str):
        raise VerificationError("signature header is missing")
    return _check_header(_unverified_header(f"{protected}.."))


def verify_card(card: Mapping[str, Any], *, key: Ed25519PublicKey, pin: Pin) -> None:
    """A2A §8.4.3: the detached JWS over the canonical card, by the pinned key.

    RFC 7515 Appendix F: the payload is re-attached (base64url of the canonical card) and the
    resulting compact JWS is verified by PyJWT with EdDSA only.
    """
    signatures = card.get("signatures")
    if not isinstance(signatures, list) or len(signatures) != 1:
        raise VerificationError("card must carry exactly one signature")
    signature = signatures[0]
    if not isinstance(signature, dict) or not isinstance(signature.get("signature"), str):
        raise VerificationError("card signature is malformed")
    protected = signature.get("protected")
    if not isinstance(protected, str):
        raise VerificationError("signature header is missing")
    if _check_header(_unverified_header(f"{protected}..")) != pin:
        raise VerificationError("card signature jku/kid differ from the pinned ones")
    try:
        payload = canonical_payload(card)
    except CardFormatError as exc:
        raise VerificationError(f"card cannot be canonicalised: {exc}") from None
    compact = f"{protected}.{_b64url(payload)}.{signature['signature']}"
    try:
        jwt.api_jws.decode_complete(compact, key, algorithms=_ALGORITHMS)
    except jwt.PyJWTError:
        raise VerificationError("signature does not verify") from None


@dataclass(frozen=True)
class CallbackClaims:
    header: dict[str, Any]
    claims: dict[str, Any]


def _is_number(value: object) -> bool:
    # RFC 7519 §2 NumericDate is a JSON number; PyJWT takes anything ``int()`` takes ("123",
    # true), so the type is checked here (docs/jose.md).
    return isinstance(value, int | float) and not isinstance(value, bool)


def _decode_callback(token: str, key: Ed25519PublicKey, audience: str) -> dict[str, Any]:
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=_ALGORITHMS,
            audience=audience,
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": ["aud", "iat", "exp"]},
        )
    except jwt.InvalidSignatureError:
        raise VerificationError("signature does not verify") from None
    except (jwt.InvalidAudienceError, jwt.MissingRequiredClaimError) as exc:
        if isinstance(exc, jwt.MissingRequiredClaimError) and exc.claim != "aud":
            raise VerificationError("callback token needs numeric iat and exp") from None
        raise VerificationError("callback aud is not this push url") from None
    except jwt.ExpiredSignatureError:
        # PyJWT checks claims only after the signature verified: these are signed claims,
        # re-read to tell "older than ten minutes" (the gateway's own bound) from "expired".
        signed = jwt.decode(token, options={"verify_signature": False})
        _check_age(signed.get("iat"))
        raise VerificationError("callback token has expired") from None
    except jwt.ImmatureSignatureError:
        raise VerificationError("callback token iat is in the future") from None
    except (jwt.InvalidIssuedAtError, jwt.DecodeError):
        raise VerificationError("callback token needs numeric iat and exp") from None
    except jwt.PyJWTError as exc:
        raise VerificationError(f"callback token is refused: {exc}") from None
    return claims


def _check_age(iat: object) -> None:
    if _is_number(iat) and time.time() - float(iat) > MAX_CALLBACK_AGE_SECONDS:  # type: ignore[arg-type]
        raise VerificationError("callback token is older than ten minutes")


def verify_callback(
    token: str, *, key: Ed25519PublicKey, pin: Pin, audience: str
) -> CallbackClaims:
    """CONTRACT §7: header ``kid``/``jku`` equal the pin, EdDSA, ``aud`` = this push URL,
    ``iat`` not in the future and not older than ten minutes, ``exp`` not passed."""
    if token.count(".") != 2:
        raise VerificationError("callback token is not a compact JWS")
    header = _unverified_header(token)
    if _check_header(header) != pin:
        raise VerificationError("callback token kid/jku differ from the pinned ones")
    claims = _decode_callback(token, key, audience)
    iat, exp = claims.get("iat"), claims.get("exp")
    if not _is_number(iat) or not _is_number(exp):
        raise VerificationError("callback token needs numeric iat and exp")
    _check_age(iat)
    return CallbackClaims(header=header, claims=claims)
