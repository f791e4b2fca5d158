"""An Ed25519 public key that verifies signatures (RFC 8032 §5.1.7), backed by libsodium.

Why libsodium (PyNaCl, also maintained by PyCA) for the verification itself and
``cryptography`` for everything else: the check runs once per request on fresh tokens, and on
the bench machines libsodium's ``crypto_sign_open`` takes clearly less CPU than OpenSSL's
Ed25519 verify (benchmark 1 reports both). libsodium's checks are strict,
which fits a verifier that fails closed: it refuses a non-canonical ``S`` (S ≥ L, RFC 8032
§5.1.7 step 1) and small-order or non-canonical ``R`` and ``A``; the tests pin agreement with
OpenSSL on valid signatures and refusal of tampered, truncated and malleated ones.

Keys reach this class only through ``jwks.parse_jwks`` (length, canonical encoding, on the
curve, not small order: ``jose_strict.check_ed25519_public_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from nacl.exceptions import BadSignatureError
from nacl.exceptions import ValueError as NaclValueError
from nacl.signing import VerifyKey


class SignatureKey(Protocol):
    """What verifies an Ed25519 signature: this module's key or ``cryptography``'s public key
    (``verify`` raises ``cryptography.exceptions.InvalidSignature`` on a mismatch)."""

    def verify(self, signature: bytes, data: bytes) -> None: ...


@dataclass(frozen=True, slots=True)
class Ed25519VerificationKey:
    """``verify(signature, data)`` raises ``InvalidSignature`` unless it verifies."""

    raw: bytes
    _key: VerifyKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", VerifyKey(bytes(self.raw)))  # refuses non-32-byte keys

    def verify(self, signature: bytes, data: bytes) -> None:
        if len(signature) != 64:  # RFC 8032 §5.1.7 step 1: R and S, 32 bytes each
            raise InvalidSignature()
        try:
            self._key.verify(data, signature)
        except (BadSignatureError, NaclValueError):
            raise InvalidSignature() from None
