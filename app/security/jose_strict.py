"""Strict JOSE building blocks: base64url, JSON objects and Ed25519 public keys.

General-purpose JOSE libraries are lenient where a verifier must not be: PyJWT 2.15.1 keeps the
*last* of duplicate JSON member names (RFC 7515 §5.2 step 4 and RFC 7519 §7.2 step 10 let a
verifier reject them, and two parsers disagreeing on a header is how ``alg``/``kid`` confusion
happens), accepts padded base64url, reads ``NaN``/``Infinity`` number literals, and loads
small-order public keys (docs/jose.md; each item has a test in
tests/security/test_jose_library_gaps.py). These helpers do each of those things one way,
strictly, and raise ``JoseError`` (a ``ValueError``) with a message that never carries the input.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any


class JoseError(ValueError):
    """Malformed JOSE input; the message is safe to show (it never echoes the input)."""


# --- base64url (RFC 7515 §2: no padding, URL-safe alphabet, RFC 4648 §5) -----------------------

_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")
_B64URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_B64URL_INDEX = {c: i for i, c in enumerate(_B64URL_ALPHABET)}


def b64url_decode(segment: str) -> bytes:
    """Decode unpadded base64url strictly.

    Refuses padding, characters outside the URL-safe alphabet, impossible lengths and
    non-canonical encodings (unused trailing bits set, RFC 4648 §3.5), so one byte string has
    exactly one accepted encoding.
    """
    if not isinstance(segment, str) or not _B64URL_RE.fullmatch(segment):
        raise JoseError("invalid base64url")
    rest = len(segment) % 4
    if rest == 1:
        raise JoseError("invalid base64url length")
    if rest:
        unused_bits_mask = 0x0F if rest == 2 else 0x03
        if _B64URL_INDEX[segment[-1]] & unused_bits_mask:
            raise JoseError("non-canonical base64url")
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError):
        raise JoseError("invalid base64url") from None


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# --- JSON objects (RFC 8259; duplicate names refused per RFC 7515 §5.2 / RFC 7519 §7.2) -------


class _DuplicateMemberError(Exception):
    pass


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _DuplicateMemberError
    return obj


def _reject_constant(_name: str) -> Any:
    # NaN, Infinity and -Infinity are not JSON (RFC 8259 §6).
    raise JoseError("non-finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # "1e999" overflows to inf
        raise JoseError("non-finite number")
    return value


# Built once: ``json.loads`` with any keyword builds a new decoder (and its C scanner) on
# every call, which was measurable on the per-request claims parse.
_DECODER = json.JSONDecoder(
    object_pairs_hook=_reject_duplicates,
    parse_constant=_reject_constant,
    parse_float=_finite_float,
)


def loads_object(data: bytes) -> dict[str, Any]:
    """Parse UTF-8 JSON whose top level is an object; duplicate member names are refused."""
    try:
        value = _DECODER.decode(data.decode("utf-8"))
    except _DuplicateMemberError:
        raise JoseError("duplicate JSON member name") from None
    except JoseError:
        raise
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        raise JoseError("invalid JSON") from None
    if not isinstance(value, dict):
        raise JoseError("JSON value is not an object")
    return value


def is_number(value: object) -> bool:
    """A JSON number (RFC 7519 §2 NumericDate). ``bool`` is an ``int`` in Python: not here."""
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- Ed25519 public keys (RFC 8032 §5.1.3) ------------------------------------------------------

_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _sqrt_mod_p(a: int) -> int | None:
    """Square root modulo p = 2^255-19 (p ≡ 5 mod 8; RFC 8032 §5.1.3 step 3)."""
    a %= _P
    root = pow(a, (_P + 3) // 8, _P)
    if root * root % _P == a:
        return root
    root = root * _SQRT_M1 % _P
    if root * root % _P == a:
        return root
    return None


def _small_order_y_values() -> frozenset[int]:
    """The y coordinates of the 8 points of order dividing 8 on edwards25519.

    Order 1: (0, 1). Order 2: (0, -1). Order 4: (±sqrt(-1), 0). Order 8: the four points P
    with 2P of order 4, i.e. y(2P) = (x² + y²)/(1 - d·x²y²) = 0, so x² = -y²; substituted in
    -x² + y² = 1 + d·x²y² this gives d·y⁴ + 2y² - 1 = 0. These are the "weak" public keys
    a signature can be forged for without the private key (every valid signature by a
    small-order key is universal); libsodium and others refuse the same list.
    Derived here rather than pasted, and pinned against the published encodings in tests.
    """
    values = {1, _P - 1, 0}
    inv_d = pow(_D, _P - 2, _P)
    root = _sqrt_mod_p(1 + _D)
    assert root is not None
    for candidate in ((-1 + root) * inv_d, (-1 - root) * inv_d):
        y = _sqrt_mod_p(candidate)
        if y is not None:
            values.update({y, _P - y})
    assert len(values) == 5  # 0, 1, -1 and the two order-8 y values
    return frozenset(values)


_SMALL_ORDER_Y = _small_order_y_values()


def check_ed25519_public_bytes(raw: bytes) -> None:
    """Refuse an Ed25519 public key that is malformed, non-canonical or of small order.

    * length 32 (RFC 8032 §5.1.5);
    * canonical: y < p (RFC 8032 §5.1.3 step 1 says decoding fails otherwise), which also
      refuses the non-canonical encodings of the small-order points (y = p, p + 1, ...);
    * on the curve: x² = (y² - 1)/(d·y² + 1) has a root, and not "-0" (step 4);
    * not one of the 8 small-order points, whatever the sign bit.
    """
    if len(raw) != 32:
        raise JoseError("Ed25519 public key must be 32 bytes")
    encoded = int.from_bytes(raw, "little")
    x_sign = encoded >> 255
    y = encoded & ((1 << 255) - 1)
    if y >= _P:
        raise JoseError("non-canonical Ed25519 public key")
    if y in _SMALL_ORDER_Y:
        raise JoseError("small-order Ed25519 public key")
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x = _sqrt_mod_p(u * pow(v, _P - 2, _P))
    if x is None:
        raise JoseError("Ed25519 public key is not a curve point")
    if x == 0 and x_sign:
        raise JoseError("non-canonical Ed25519 public key")
