"""``Ed25519VerificationKey``: libsodium's verify agrees with RFC 8032 and with OpenSSL, and
is no looser (non-canonical S, wrong lengths, tampering all refused)."""

from __future__ import annotations

import os

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from app.security.verify_key import Ed25519VerificationKey

# RFC 8032 §7.1, TEST 2: a one-byte message.
RFC_PUBLIC = bytes.fromhex("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")
RFC_MESSAGE = bytes.fromhex("72")
RFC_SIGNATURE = bytes.fromhex(
    "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
    "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
)
L = 2**252 + 27742317777372353535851937790883648493  # RFC 8032 §5.1: the group order


def _pair() -> tuple[Ed25519PrivateKey, Ed25519VerificationKey]:
    private = Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private, Ed25519VerificationKey(raw)


def test_rfc8032_test_vector_verifies() -> None:
    Ed25519VerificationKey(RFC_PUBLIC).verify(RFC_SIGNATURE, RFC_MESSAGE)


def test_agrees_with_openssl_on_random_messages() -> None:
    private, key = _pair()
    for _ in range(50):
        message = os.urandom(int.from_bytes(os.urandom(1), "big") + 1)
        signature = private.sign(message)
        private.public_key().verify(signature, message)
        key.verify(signature, message)


@pytest.mark.parametrize("flip", [0, 31, 32, 63])
def test_a_flipped_signature_bit_is_refused(flip: int) -> None:
    private, key = _pair()
    signature = bytearray(private.sign(b"payload"))
    signature[flip] ^= 0x01
    with pytest.raises(InvalidSignature):
        key.verify(bytes(signature), b"payload")


def test_another_message_or_key_is_refused() -> None:
    private, key = _pair()
    signature = private.sign(b"payload")
    with pytest.raises(InvalidSignature):
        key.verify(signature, b"payloae")
    _, other = _pair()
    with pytest.raises(InvalidSignature):
        other.verify(signature, b"payload")


@pytest.mark.parametrize("length", [0, 63, 65, 128])
def test_a_signature_of_the_wrong_length_is_refused(length: int) -> None:
    private, key = _pair()
    signature = (private.sign(b"payload") * 2)[:length]
    with pytest.raises(InvalidSignature):
        key.verify(signature, b"payload")


def test_non_canonical_s_is_refused() -> None:
    # S + L verifies the same equation; RFC 8032 §5.1.7 step 1 requires S < L (malleability).
    s = int.from_bytes(RFC_SIGNATURE[32:], "little") + L
    assert s < 2**256
    malleated = RFC_SIGNATURE[:32] + s.to_bytes(32, "little")
    with pytest.raises(InvalidSignature):
        Ed25519VerificationKey(RFC_PUBLIC).verify(malleated, RFC_MESSAGE)


def test_a_key_of_the_wrong_length_cannot_be_built() -> None:
    with pytest.raises(ValueError):
        Ed25519VerificationKey(RFC_PUBLIC[:31])


def test_keys_compare_by_their_bytes() -> None:
    assert Ed25519VerificationKey(RFC_PUBLIC) == Ed25519VerificationKey(RFC_PUBLIC)
    assert Ed25519VerificationKey(RFC_PUBLIC) != Ed25519VerificationKey(_pair()[1].raw)
