"""Detached JWS signatures on Agent Cards (A2A §8.4.2, CONTRACT §4).

The signature is a flattened JWS with a detached payload: ``{protected, signature}`` only; the
payload is the card's canonical form (``app.cards.canonical``), recomputed by the verifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.cards.canonical import CardFormatError, canonical_payload, wire_form
from app.security.keys import SigningKey


def protected_header(kid: str, jku: str) -> dict[str, str]:
    """``{"alg","kid","typ","jku"}`` in exactly this order (CONTRACT §4).

    The order matters: the protected header is signed as serialised, and the reference vector
    pins these bytes.
    """
    return {"alg": "EdDSA", "kid": kid, "typ": "JOSE", "jku": jku}


def detached_signature(key: SigningKey, header: dict[str, Any], payload: bytes) -> dict[str, str]:
    """A2A ``AgentCardSignature``: the compact JWS minus its payload segment (RFC 7515 App. F)."""
    encoded_header, _payload, signature = key.sign_compact(header, payload).split(".")
    return {"protected": encoded_header, "signature": signature}


def sign_card(card: Mapping[str, Any], key: SigningKey, *, jku: str) -> dict[str, Any]:
    """Return the served document: ``card`` in wire form with one signature over it.

    The card is normalised to its protobuf-JSON form *before* signing, so the document we
    serve is exactly what a re-encoding verifier sees (a fixed point), and the payload covers
    the served fields rather than whatever the builder happened to produce.
    """
    unsigned = wire_form({k: v for k, v in card.items() if k != "signatures"})
    payload = canonical_payload(unsigned)
    signature = detached_signature(key, protected_header(key.kid, jku), payload)
    signed = wire_form({**unsigned, "signatures": [signature]})
    # Defence in depth: if the proto ever reshaped the signed document, we would serve a card
    # that no verifier accepts. Fail loudly at signing time instead.
    if canonical_payload(signed) != payload or wire_form(signed) != signed:
        raise CardFormatError("signed card is not a protobuf-JSON fixed point")
    return signed
