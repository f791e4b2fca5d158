"""Verifying the signed card another agent serves, and pinning its key on first use: the
counterparty edges negotiation dials (issue 51) and the A2A agents of an ``llm`` agent's
directory (issue 54) are trusted the way the gateway trusts an edge (CONTRACT §4).

A2A §8.4.3: one detached EdDSA JWS over the canonical card (``app.cards.canonical``), by the
key the agent's JWKS holds under the signature's ``kid``, the ``jku`` on the agent's own
origin. The ``(jku, kid)`` pair is pinned per origin once a signature verified
(``app.db.peer_pins``); a different pair later is refused before anything is fetched from the
new ``jku``, and so is an unsigned card from an origin that signed before.

``CardRejected`` messages are safe to show: no key, token or exception text.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from cryptography.exceptions import InvalidSignature

from app.cards.canonical import CardFormatError, canonical_payload
from app.db.peer_pins import PeerPinStore
from app.errors import EdgeError
from app.origins import OriginError, ParsedUrl
from app.security.verify_key import Ed25519VerificationKey

KEY_CHANGED = "card's signing key differs from the one pinned"


class CardRejected(Exception):
    """The card does not verify; ``key_changed``: it is signed, but not by the pinned key."""

    def __init__(self, message: str, *, key_changed: bool = False) -> None:
        super().__init__(message)
        self.key_changed = key_changed


class KeySource(Protocol):
    async def get_key(self, jku: ParsedUrl, kid: str) -> Ed25519VerificationKey:
        """The key ``kid`` of the JWKS at ``jku`` (``EdgeError`` when it cannot be had)."""
        ...


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class CardVerifier:
    """``check_jku``: parse a ``jku`` the way the caller trusts URLs (``OriginError`` or
    ``EdgeError`` when it may not be fetched at all)."""

    def __init__(
        self, keys: KeySource, pins: PeerPinStore, check_jku: Callable[[str], ParsedUrl]
    ) -> None:
        self._keys = keys
        self._pins = pins
        self._check_jku = check_jku

    async def verify(self, origin: str, card: Mapping[str, Any], *, required: bool) -> bool:
        """Whether ``card`` carried a signature that verified (then its key is pinned).
        Unsigned: ``CardRejected`` when ``required`` or when ``origin`` has a pin, else
        ``False``."""
        signatures = card.get("signatures")
        if not signatures:
            if required or await self._pins.pinned(origin) is not None:
                raise CardRejected("card must carry exactly one signature")
            return False
        if not isinstance(signatures, list) or len(signatures) != 1:
            raise CardRejected("card must carry exactly one signature")
        protected, raw_signature, header = _parts(signatures[0])
        jku, kid = header.get("jku"), header.get("kid")
        if not isinstance(jku, str) or not isinstance(kid, str) or not kid:
            raise CardRejected("card signature names no jku and kid")
        try:
            parsed = self._check_jku(jku)
        except (OriginError, EdgeError):
            raise CardRejected("card names a jku off its origin") from None
        if parsed.origin != origin:
            raise CardRejected("card names a jku off its origin")
        pinned = await self._pins.pinned(origin)
        if pinned is not None and pinned != (jku, kid):
            raise CardRejected(KEY_CHANGED, key_changed=True)
        try:
            key = await self._keys.get_key(parsed, kid)
        except EdgeError:
            raise CardRejected("card's signing key cannot be fetched") from None
        try:
            payload = canonical_payload(card)
        except CardFormatError:
            raise CardRejected("card cannot be canonicalised") from None
        signing_input = f"{protected}.{_b64encode(payload)}".encode("ascii")
        try:
            key.verify(raw_signature, signing_input)
        except InvalidSignature:
            raise CardRejected("card signature does not verify") from None
        # Pinned once verified, never before; a racing first use that pinned another pair wins.
        if await self._pins.pin(origin, jku, kid) != (jku, kid):
            raise CardRejected(KEY_CHANGED, key_changed=True)
        return True


def _parts(signature: object) -> tuple[str, bytes, dict[str, Any]]:
    """The protected header as sent, the raw signature and the decoded header."""
    if not isinstance(signature, Mapping):
        raise CardRejected("card signature is malformed")
    protected, value = signature.get("protected"), signature.get("signature")
    if not isinstance(protected, str) or not isinstance(value, str):
        raise CardRejected("card signature is malformed")
    try:
        header = json.loads(_b64decode(protected))
        raw_signature = _b64decode(value)
    except ValueError:
        raise CardRejected("card signature is malformed") from None
    if not isinstance(header, dict) or header.get("alg") != "EdDSA" or "crit" in header:
        raise CardRejected("card signature must be plain EdDSA")
    return protected, raw_signature, header
