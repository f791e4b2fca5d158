"""Strict base64url, JSON and Ed25519 public-key checks (RFC 7515 §2, RFC 8032 §5.1.3)."""

from __future__ import annotations

import base64
import os

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from app.security.jose_strict import (
    JoseError,
    b64url_decode,
    b64url_encode,
    check_ed25519_public_bytes,
    is_number,
    loads_object,
)

P = 2**255 - 19
D = (-121665 * pow(121666, P - 2, P)) % P

# The published small-order ("weak") Ed25519 public keys, as listed by libsodium's
# blocklist and in "Taming the many EdDSAs" (Chalkias et al., 2020), incl. non-canonical ones.
PUBLISHED_SMALL_ORDER = [
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    # non-canonical encodings (y >= p, or "-0")
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "0100000000000000000000000000000000000000000000000000000000000080",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
]


def _decode_point(raw: bytes) -> tuple[int, int]:
    value = int.from_bytes(raw, "little")
    y, sign = value & ((1 << 255) - 1), value >> 255
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if x * x % P != x2:
        x = x * pow(2, (P - 1) // 4, P) % P
    assert x * x % P == x2
    if x % 2 != sign:
        x = P - x
    return x % P, y


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    x3 = (x1 * y2 + x2 * y1) * pow(1 + t, P - 2, P) % P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P
    return x3, y3


@pytest.mark.parametrize("encoding", PUBLISHED_SMALL_ORDER)
def test_small_order_keys_are_refused(encoding: str) -> None:
    with pytest.raises(JoseError):
        check_ed25519_public_bytes(bytes.fromhex(encoding))


@pytest.mark.parametrize("encoding", PUBLISHED_SMALL_ORDER[:8])
def test_the_published_list_really_is_small_order(encoding: str) -> None:
    point = _decode_point(bytes.fromhex(encoding))
    acc = point
    for _ in range(7):
        acc = _add(acc, point)
    assert acc == (0, 1)  # [8]P is the identity


def test_real_keys_pass() -> None:
    for _ in range(200):
        raw = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        check_ed25519_public_bytes(raw)


def test_off_curve_and_wrong_length_keys_are_refused() -> None:
    with pytest.raises(JoseError):
        check_ed25519_public_bytes(b"\x02" + b"\x00" * 31)  # y = 2 is not on the curve
    for size in (0, 31, 33, 57):
        with pytest.raises(JoseError):
            check_ed25519_public_bytes(os.urandom(size))


@pytest.mark.parametrize("data", [b"", b"f", b"fo", b"foo", b"foob", os.urandom(64)])
def test_b64url_round_trip(data: bytes) -> None:
    encoded = b64url_encode(data)
    assert "=" not in encoded
    assert b64url_decode(encoded) == data
    assert encoded == base64.urlsafe_b64encode(data).decode().rstrip("=")


@pytest.mark.parametrize(
    "text", ["Zg==", "Zg=", "Zh", "Zm9", "A", "ab+c", "ab/c", "ab c", "é", "ab\n"]
)
def test_b64url_refuses_non_canonical_or_foreign_input(text: str) -> None:
    with pytest.raises(JoseError):
        b64url_decode(text)


def test_loads_object() -> None:
    assert loads_object(b'{"a":1,"b":{"c":[1.5]}}') == {"a": 1, "b": {"c": [1.5]}}
    for bad in [
        b'{"a":1,"a":1}',
        b'{"a":{"b":1,"b":2}}',
        b'[{"a":1}]',
        b'"x"',
        b'{"a":NaN}',
        b'{"a":-Infinity}',
        b'{"a":1e400}',
        b"\xef\xbb\xbf{}",
        b'{"a":1} x',
        b"{" * 100 + b"}" * 100,
        b"[" * 100000,
    ]:
        with pytest.raises(JoseError):
            loads_object(bad)


def test_is_number_excludes_bool() -> None:
    assert is_number(1) and is_number(1.5)
    assert not is_number(True) and not is_number("1") and not is_number(None)
