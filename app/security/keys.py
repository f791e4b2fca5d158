"""Our Ed25519 signing key: the public JWKS, compact JWS, callback and caller JWTs.

One key signs everything the edge asserts: the Agent Cards (A2A §8.4), the callback JWTs on
pushes (CONTRACT §7) and the caller JWTs the edge mints when its agents call other agents.
Verifiers find the public half at our JWKS URL (the ``jku`` in every header), so the ``kid``
must be stable and the public JWK must never carry ``d`` (CONTRACT §2, §4).

Minting is PyJWT's (``PyJWS.encode`` with the ``cryptography`` Ed25519 key); this module only
pins what PyJWT would otherwise choose: no default ``typ`` and the protected header's members
in the caller's order (the card vector pins those bytes, A2A §8.4.2).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt.api_jws import PyJWS

from app.errors import ConfigError
from app.origins import OriginError, parse_url

# A kid travels in JWS headers, cards and shell lines: keep it to a safe, printable alphabet.
KID_RE = re.compile(r"[A-Za-z0-9._:+@/=-]{1,128}")
KID_RULE = "1-128 characters from A-Z a-z 0-9 . _ : + @ / = -"

_ENV = "A2A_SIGNING_KEY"
_KEY_BYTES = 32
_MAX_TTL_SECONDS = 600  # the gateway refuses callback tokens older than 10 minutes
_REGISTERED_CLAIMS = frozenset({"iss", "aud", "iat", "exp", "nbf", "sub", "jti"})


def b64url_encode(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url: padding, whitespace or foreign characters are refused."""
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not unpadded base64url") from None


def compact_json(value: Any) -> bytes:
    """Compact JSON in the caller's key order (JWS headers are signed as serialised)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class _JWS(PyJWS):
    # PyJWT adds ``"typ": "JWT"`` unless told otherwise; the callback header has no ``typ``
    # (CONTRACT §7) and the card's is ``JOSE`` (CONTRACT §4): the caller's header decides.
    header_typ = ""  # falsy: PyJWT then drops the member


_PYJWS = _JWS()


@lru_cache(maxsize=16)
def _header_encoder(order: tuple[str, ...]) -> type[json.JSONEncoder]:
    """A JSON encoder for PyJWT that writes the header's members in ``order``, compactly.

    PyJWT builds its header dict with ``typ`` first and either sorts it or keeps that order;
    the protected header is signed as serialised, so we put the members back in the order
    the caller gave (RFC 7515 §5.1 step 1 signs the octets, not the object).
    """
    rank = {name: index for index, name in enumerate(order)}

    class _Ordered(json.JSONEncoder):
        def __init__(self, **kwargs: Any) -> None:
            kwargs["ensure_ascii"] = False  # the same octets as ``compact_json``
            super().__init__(**kwargs)

        def encode(self, o: Any) -> str:
            if isinstance(o, dict):
                o = dict(sorted(o.items(), key=lambda item: rank.get(item[0], len(rank))))
            return super().encode(o)

    return _Ordered


def validate_kid(kid: object) -> str:
    if not isinstance(kid, str) or not KID_RE.fullmatch(kid):
        raise ValueError(f"kid must be {KID_RULE}")
    return kid


def default_kid(today: date | None = None) -> str:
    """``a2a-YYYY-MM-DD`` for today in UTC (CONTRACT §4)."""
    day = today if today is not None else datetime.now(UTC).date()
    return f"a2a-{day.isoformat()}"


def _public_x(private_key: Ed25519PrivateKey) -> str:
    raw = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return b64url_encode(raw)


def generate_private_jwk(kid: str) -> dict[str, str]:
    """A fresh Ed25519 private JWK (RFC 8037 §2) with the given ``kid``."""
    validate_kid(kid)
    private_key = Ed25519PrivateKey.generate()
    d = b64url_encode(private_key.private_bytes_raw())
    return {"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": _public_x(private_key), "d": d}


def _origin(value: object, what: str) -> str:
    """The bare origin of an absolute URL; ``http`` only for loopback hosts."""
    try:
        return parse_url(value, allow_loopback_http=True, allow_fragment=False).origin
    except OriginError as exc:
        raise ValueError(f"{what} must be an absolute URL: {exc}") from None


class _DuplicateMember(ValueError):
    pass


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Two "d" or "kid" members would let different JSON parsers load different keys.
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _DuplicateMember
    return result


def _key_error(detail: str) -> ConfigError:
    # Never echo the offending value: it may be the private key itself.
    return ConfigError(f"{_ENV}: {detail}", reason="config")


def _member(jwk: dict[str, Any], name: str) -> str:
    value = jwk.get(name)
    if not isinstance(value, str) or not value:
        raise _key_error(f"the JWK needs a non-empty string '{name}'")
    return value


def _parse_private_key(jwk: dict[str, Any]) -> tuple[str, Ed25519PrivateKey]:
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise _key_error("must be an Ed25519 private JWK (kty OKP, crv Ed25519)")
    kid = _member(jwk, "kid")
    try:
        validate_kid(kid)
    except ValueError as exc:
        raise _key_error(str(exc)) from None
    if jwk.get("use", "sig") != "sig" or jwk.get("alg", "EdDSA") != "EdDSA":
        raise _key_error("the JWK must allow signing (use 'sig', alg 'EdDSA')")
    d_text, x_text = _member(jwk, "d"), _member(jwk, "x")
    try:
        d, x = b64url_decode(d_text), b64url_decode(x_text)
    except ValueError:
        raise _key_error("'d' and 'x' must be unpadded base64url") from None
    if len(d) != _KEY_BYTES or len(x) != _KEY_BYTES:
        raise _key_error("'d' and 'x' must each encode 32 bytes")
    private_key = Ed25519PrivateKey.from_private_bytes(d)
    # RFC 8037 §2: x is derived from d. A mismatch means a pasted or edited key; verifiers
    # would see signatures that do not match the published key, so refuse at start.
    if not hmac.compare_digest(_public_x(private_key), x_text):
        raise _key_error("'x' does not match 'd' (the public half belongs to another key)")
    return kid, private_key


@dataclass(frozen=True)
class SigningKey:
    """The edge's one Ed25519 signing key (CONTRACT §4)."""

    kid: str
    private_key: Ed25519PrivateKey = field(repr=False)
    public_jwk: dict[str, str]
    # The JWKS route serves these bytes as they are: serialised once, never per request.
    jwks_json: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "jwks_json", compact_json(self.jwks()))

    @classmethod
    def from_private_key(cls, kid: str, private_key: Ed25519PrivateKey) -> SigningKey:
        validate_kid(kid)
        public_jwk = {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": _public_x(private_key),
            "kid": kid,
            "use": "sig",
            "alg": "EdDSA",
        }
        return cls(kid=kid, private_key=private_key, public_jwk=public_jwk)

    @classmethod
    def from_jwk_json(cls, text: str) -> SigningKey:
        """Load ``A2A_SIGNING_KEY``; raise ``ConfigError`` naming it on any defect."""
        try:
            jwk = json.loads(text, object_pairs_hook=_unique_members)
        except _DuplicateMember:
            raise _key_error("the JWK repeats a member") from None
        except (json.JSONDecodeError, TypeError):
            raise _key_error("must be a JSON object (an Ed25519 private JWK)") from None
        if not isinstance(jwk, dict):
            raise _key_error("must be a JSON object (an Ed25519 private JWK)")
        kid, private_key = _parse_private_key(jwk)
        return cls.from_private_key(kid, private_key)

    def jwks(self) -> dict[str, list[dict[str, str]]]:
        """The public JWKS: ``kty, crv, x, kid, use, alg`` and never ``d`` (CONTRACT §2)."""
        return {"keys": [dict(self.public_jwk)]}

    def sign_compact(self, header: dict[str, Any], payload: bytes) -> str:
        """Compact JWS (RFC 7515 §7.1) with EdDSA (RFC 8037 §3.1).

        The header is serialised compactly in the given key order: the card signature's
        protected header must be byte-identical to the reference (A2A §8.4.2).
        """
        if header.get("alg") != "EdDSA":
            raise ValueError("only alg EdDSA is signed with this key")
        token = _PYJWS.encode(
            payload,
            self.private_key,
            algorithm="EdDSA",
            headers=header,
            json_encoder=_header_encoder(tuple(header)),
            sort_headers=False,
        )
        # PyJWT may add members (``typ``, ``b64``/``crit`` for an unencoded payload): the
        # header we sign must be exactly the one asked for, or verifiers pinning it fail.
        if not token.startswith(b64url_encode(compact_json(header)) + "."):
            raise ValueError("the JWS header differs from the one requested")
        return token

    def _jwt(self, header: dict[str, Any], claims: dict[str, Any]) -> str:
        return self.sign_compact(header, compact_json(claims))

    def callback_jwt(
        self, *, jku: str, audience: str, now: int | None = None, ttl: int = 300
    ) -> str:
        """The push token (CONTRACT §7): ``kid``/``jku`` as on the card, ``aud`` = push URL."""
        _check_ttl(ttl)
        issued = int(time.time()) if now is None else now
        header = {"alg": "EdDSA", "kid": self.kid, "jku": jku}
        claims = {"aud": audience, "iat": issued, "exp": issued + ttl}
        return self._jwt(header, claims)

    def caller_jwt(
        self,
        *,
        issuer: str,
        audience: str,
        identity: dict[str, Any],
        tenant: str,
        identity_claim: str,
        tenant_claim: str,
        ttl: int = 120,
        now: int | None = None,
        jwks_path: str = "/.well-known/jwks.json",
    ) -> str:
        """A token our agents present to another A2A agent (REFERENCE-CASES 58-64).

        ``iss`` and ``aud`` are bare origins; ``jku`` is the issuer's own JWKS so ``iss`` and
        ``jku`` always share one origin (the rule we enforce on gateways, CONTRACT §3 step 4).
        """
        _check_ttl(ttl)
        iss = _origin(issuer, "issuer")
        aud = _origin(audience, "audience")
        if not isinstance(identity, dict):
            raise ValueError("identity must be an object")
        if not isinstance(tenant, str) or not tenant:
            raise ValueError("tenant must be a non-empty string")
        names = {identity_claim, tenant_claim}
        if len(names) != 2 or names & _REGISTERED_CLAIMS or "" in names:
            raise ValueError("identity and tenant claim names must be distinct custom names")
        if not jwks_path.startswith("/"):
            raise ValueError("jwks_path must be an absolute path")
        issued = int(time.time()) if now is None else now
        header = {"alg": "EdDSA", "kid": self.kid, "jku": iss + jwks_path}
        claims = {
            "iss": iss,
            "aud": aud,
            "iat": issued,
            "exp": issued + ttl,
            identity_claim: identity,
            tenant_claim: tenant,
        }
        return self._jwt(header, claims)


def _check_ttl(ttl: int) -> None:
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 < ttl <= _MAX_TTL_SECONDS:
        raise ValueError(f"ttl must be an integer number of seconds in 1..{_MAX_TTL_SECONDS}")
