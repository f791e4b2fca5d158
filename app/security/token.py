"""Verifying the gateway token: CONTRACT §3 steps 1-8, in that order.

Why not a JOSE library here (docs/jose.md): PyJWT, which mints our tokens and verifies them
on the gateway side, keeps the *last* of duplicate JSON member names, accepts padding, NaN and
NumericDates of other types (``int()`` coercion), makes ``exp`` optional, ignores ``jwk``/``x5u``/
``x5c`` and does not pin the curve under ``alg: EdDSA``; its claim checks would all have to be
turned off and redone, leaving only the signature, which would then be parsed a second time.
The verification itself is one call (``Ed25519VerificationKey.verify``, libsodium, over
``b64(header).b64(payload)``, RFC 7515 §5.2); everything around it is the strict parsing in
``jose_strict`` and the ordered checks below, which is exactly the part the contract pins.

Order (load-bearing): the unverified header and the ``iss`` origin are inspected only to
decide *whether and where* to look for a key; nothing in the payload is trusted before the
signature verifies (step 5), and no network I/O happens before the ``jku`` origin is known to
be allowlisted (step 3).

Hot path: a cached JWKS makes ``verify`` one Ed25519 verification plus two small JSON
parses. The accepted protected headers and ``iss`` values are memoised (bounded), because the
gateway sends the same header on every token; nothing is logged here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature

from app.errors import BadRequest, EdgeError, Unauthorized
from app.interfaces import interface_url
from app.origins import OriginError, ParsedUrl
from app.security.caller import VerifiedCaller
from app.security.jose_strict import JoseError, b64url_decode, is_number, loads_object
from app.security.jwks import JwksFetcher
from app.settings import Settings
from app.text import first_bad_text, may_hold_bad_text

# RFC 7515 §4.1.11 (crit), §4.1.3 (jwk), §4.1.5/§4.1.6 (x5u/x5c: key material from the token
# itself), RFC 7797 §3 (b64: unencoded payload). ``enc``/``zip`` only exist on JWE
# (RFC 7516 §4.1.2/§4.1.3): a JWS carrying them is something we do not understand. ``cty``
# signals a nested JWT (RFC 7519 §5.2), which the contract does not use.
_FORBIDDEN_HEADERS = frozenset({"crit", "jwk", "x5u", "x5c", "b64", "enc", "zip", "cty"})
# The identity key is part of every tenant-data key (tasks, turns, actors): bounded in UTF-8
# bytes so that, with the tenant and the longest id beside it, an index entry stays under
# PostgreSQL's B-tree entry limit.
MAX_IDENTITY_KEY_BYTES = 1024
_MEMO_LIMIT = 256  # bounded memo of accepted headers (attacker-influenced keys)


# CONTRACT §10: a peer's identity on this edge. No gateway identity key may start with it.
PEER_PREFIX = "peer:"


@dataclass(frozen=True)
class _Header:
    kid: str
    jku: ParsedUrl
    peer: bool  # the jku origin is in PEER_ORIGINS (never also in GATEWAY_ORIGINS)


def _fail(reason: str, message: str) -> Unauthorized:
    return Unauthorized(message, reason=reason)


def _remember(memo: dict[str, Any], key: str, value: Any) -> None:
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    memo[key] = value


class GatewayTokenVerifier:
    """Turns an ``Authorization`` header into a ``VerifiedCaller`` or an ``EdgeError``.

    Raises ``Unauthorized`` (401, stable ``reason``) for steps 1-6, and
    ``BadRequest(reason="identity_missing_key")`` (400) for step 7. Any other exception
    raised while parsing or verifying becomes a 401, never a 500.
    """

    def __init__(
        self,
        settings: Settings,
        jwks: JwksFetcher,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._allowlist = settings.allowlist
        self._peers = settings.peer_allowlist
        # CONTRACT §3 step 6, per interface (issue 49): a token's aud is the url of the
        # interface it calls, exactly as the cards list it (``app.interfaces``).
        self._audience = settings.endpoint_url
        self._settings = settings
        self._identity_claim = settings.identity_claim
        self._tenant_claim = settings.tenant_claim
        self._max_token = settings.max_token_bytes
        self._skew = settings.clock_skew_seconds
        self._max_lifetime = settings.max_token_lifetime_seconds
        self._jwks = jwks
        self._clock = clock
        self._headers: dict[str, _Header] = {}

    async def verify(
        self, authorization: str | None, *, audience: str | None = None
    ) -> VerifiedCaller:
        """``audience``: the url of the interface called; the JSON-RPC url when omitted."""
        try:
            return await self._verify(authorization, audience or self._audience)
        except EdgeError:
            raise
        except Exception:
            # Defence in depth: a bug or an unexpected library error is a refusal, not a 500.
            raise _fail("malformed_token", "token could not be verified") from None

    def for_binding(self, binding: str) -> InterfaceVerifier:
        """A verifier for one binding's interface (``app.interfaces``: ``HTTP_JSON``,
        ``GRPC``...): its tokens must carry that interface's url as ``aud``. Shares this
        verifier's key cache. ``LookupError`` if the binding is not served."""
        return InterfaceVerifier(self, interface_url(self._settings, binding))

    async def _verify(self, authorization: str | None, audience: str) -> VerifiedCaller:
        token = self._bearer(authorization)  # step 1
        parts = token.split(".")
        if len(parts) != 3:  # JWE compact has 5 parts (RFC 7516 §7.1); we accept JWS only
            raise _fail("malformed_token", "token is not a compact JWS")
        header_b64, payload_b64, signature_b64 = parts
        header = self._headers.get(header_b64)
        if header is None:
            header = self._header(header_b64)  # steps 2 and 3
            _remember(self._headers, header_b64, header)
        payload = self._decode_payload(payload_b64)
        claims = self._claims(payload)
        self._check_issuer(claims.get("iss"), header)  # step 4
        # Step 5; a cached key needs no await (one coroutine less per request).
        key = self._jwks.cached_key(header.jku, header.kid) or await self._jwks.get_key(
            header.jku, header.kid
        )
        try:
            signature = b64url_decode(signature_b64)
            key.verify(signature, f"{header_b64}.{payload_b64}".encode("ascii"))
        except (JoseError, InvalidSignature, ValueError):
            raise _fail("bad_signature", "token signature is invalid") from None
        self._jwks.confirm(header.jku, key)
        self._check_time_and_audience(claims, audience)  # step 6
        return self._caller(claims, header, may_hold_bad_text(payload))  # steps 7 and 8

    # --- step 1 ------------------------------------------------------------------------------

    def _bearer(self, authorization: str | None) -> str:
        if not authorization:
            raise _fail("missing_bearer", "missing bearer token")
        if len(authorization) > self._max_token + 64:
            raise _fail("token_too_large", "bearer token is too large")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer":  # RFC 6750 §2.1; auth-scheme is case-insensitive
            raise _fail("missing_bearer", "missing bearer token")
        token = token.strip(" ")
        if not token:
            raise _fail("missing_bearer", "missing bearer token")
        if len(token) > self._max_token:
            raise _fail("token_too_large", "bearer token is too large")
        if not token.isascii():
            raise _fail("malformed_token", "token is not a compact JWS")
        return token

    # --- steps 2 and 3 -----------------------------------------------------------------------

    def _header(self, header_b64: str) -> _Header:
        try:
            header = loads_object(b64url_decode(header_b64))
        except JoseError:
            raise _fail("malformed_token", "token header is not valid base64url JSON") from None
        if header.get("alg") != "EdDSA":  # RFC 8037 §3.1; "none", HS*, RS*, ES*, Ed25519...
            raise _fail("bad_alg", "token alg must be EdDSA")
        if not _FORBIDDEN_HEADERS.isdisjoint(header):
            raise _fail("forbidden_header", "token header carries a forbidden parameter")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise _fail("malformed_token", "token header has no kid")
        if "jku" not in header:  # RFC 7515 §4.1.2; no fallback to a configured JWKS
            raise _fail("missing_jku", "missing jku")
        try:
            # Real parser + exact origin match, before any network I/O (CONTRACT §3 step 3).
            jku = self._allowlist.check_url(header["jku"], what="jku")
        except OriginError as exc:
            # CONTRACT §10: a peer's jku is checked against PEER_ORIGINS by the same rule,
            # and the token stays a peer's from here on (the two lists never share an origin).
            try:
                peer_jku = self._peers.check_url(header["jku"], what="jku")
            except OriginError:
                raise _fail("jku_not_allowed", str(exc)) from None
            return _Header(kid=kid, jku=peer_jku, peer=True)
        return _Header(kid=kid, jku=jku, peer=False)

    # --- step 4 ------------------------------------------------------------------------------

    def _decode_payload(self, payload_b64: str) -> bytes:
        try:
            return b64url_decode(payload_b64)
        except JoseError:
            raise _fail("malformed_token", "token payload is not valid base64url JSON") from None

    def _claims(self, payload: bytes) -> dict[str, Any]:
        try:
            return loads_object(payload)
        except JoseError:
            raise _fail("malformed_token", "token payload is not valid base64url JSON") from None

    def _check_issuer(self, iss: object, header: _Header) -> None:
        # iss is read unverified here only to compare origins (CONTRACT §3 step 4); it is
        # trusted only once the signature of the same payload verifies in step 5.
        if not isinstance(iss, str) or not iss:
            raise _fail("iss_mismatch", "missing iss: jku origin does not match iss origin")
        # CONTRACT §3 step 4: ``iss`` is *exactly* the allowlisted origin, in its serialised
        # form (RFC 6454 §6.2: lower-case scheme and host, no default port, no path): a variant
        # spelling (a trailing "/", upper case, ":443") is refused, not normalised.
        jku = header.jku
        allowed = self._peers if header.peer else self._allowlist
        if iss != jku.origin or jku.origin not in allowed.origins:
            raise _fail("iss_mismatch", "jku origin does not match iss origin")

    # --- step 6 ------------------------------------------------------------------------------

    def _check_time_and_audience(self, claims: Mapping[str, Any], audience: str) -> None:
        _check_audience(claims.get("aud"), audience)
        now = self._clock()
        exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
        if exp is None:  # stricter than core: a token without exp is refused
            raise _fail("missing_exp", "token has no exp")
        if not is_number(exp):
            raise _fail("bad_claim_type", "token exp is not a number")
        if now > exp + self._skew:  # RFC 7519 §4.1.4 with the configured leeway
            raise _fail("expired", "token is expired")
        if iat is None:
            raise _fail("missing_iat", "token has no iat")
        if not is_number(iat):
            raise _fail("bad_claim_type", "token iat is not a number")
        if iat > now + self._skew:
            raise _fail("iat_in_future", "token iat is in the future")
        if exp < iat:
            raise _fail("bad_claim_type", "token exp is before its iat")
        if exp - iat > self._max_lifetime:
            raise _fail("lifetime_too_long", "token lifetime is too long")
        if nbf is not None:
            if not is_number(nbf):
                raise _fail("bad_claim_type", "token nbf is not a number")
            if nbf > now + self._skew:  # RFC 7519 §4.1.5
                raise _fail("not_yet_valid", "token is not yet valid")

    # --- steps 7 and 8 -----------------------------------------------------------------------

    def _caller(
        self, claims: Mapping[str, Any], header: _Header, suspect_text: bool
    ) -> VerifiedCaller:
        """``suspect_text``: the payload holds a ``\\u`` escape of U+0000 or a surrogate, the
        only way bad text reaches a decoded claim (``app.text.may_hold_bad_text``)."""
        sub, jti = claims.get("sub"), claims.get("jti")
        if (sub is not None and not isinstance(sub, str)) or (
            jti is not None and not isinstance(jti, str)
        ):
            raise _fail("bad_claim_type", "token sub and jti must be strings")
        identity = claims.get(self._identity_claim)
        key = identity.get("key") if isinstance(identity, dict) else None
        if not isinstance(identity, dict) or not isinstance(key, str) or not key:
            raise BadRequest("gateway identity missing key", reason="identity_missing_key")
        # The identity is stored and echoed like request text: the same rules (app.text),
        # walked only when the payload's bytes could hold such text, as for the body.
        if suspect_text and first_bad_text(identity, "identity") is not None:
            raise BadRequest("gateway identity holds invalid text", reason="identity_bad_text")
        if len(key.encode()) > MAX_IDENTITY_KEY_BYTES:
            raise BadRequest("gateway identity key is too long", reason="identity_key_too_long")
        if header.peer:
            # CONTRACT §10: namespaced by the issuer, so a peer can never reach a gateway
            # caller's tasks or session, nor another peer's.
            key = f"{PEER_PREFIX}{header.jku.origin}:{key}"
        elif key.startswith(PEER_PREFIX):
            raise BadRequest(
                "gateway identity key uses the reserved peer: prefix", reason="identity_reserved"
            )
        tenant = claims.get(self._tenant_claim)
        return VerifiedCaller(
            issuer=header.jku.origin,
            identity_key=key,
            peer=header.peer,
            # A list, a number or an empty string is never a tenant (CONTRACT §3 step 8).
            tenant=tenant if isinstance(tenant, str) and tenant else None,
            identity=identity,
            subject=sub,
            token_id=jti,
        )


def _check_audience(aud: object, audience: str) -> None:
    # RFC 7519 §4.1.3: a string or an array of strings; exact match on the configured
    # url of the interface called, from configuration (never from Host or X-Forwarded-*).
    if isinstance(aud, str):
        if aud != audience:
            raise _fail("bad_audience", "token audience is not this endpoint")
        return
    if isinstance(aud, list):
        if not aud or not all(isinstance(item, str) for item in aud):
            raise _fail("bad_claim_type", "token aud must be a string or strings")
        if audience not in aud:
            raise _fail("bad_audience", "token audience is not this endpoint")
        return
    if aud is None:
        raise _fail("bad_audience", "token has no aud")
    raise _fail("bad_claim_type", "token aud must be a string or strings")


class InterfaceVerifier:
    """``GatewayTokenVerifier.verify`` with the audience of one interface."""

    def __init__(self, verifier: GatewayTokenVerifier, audience: str) -> None:
        self._verifier = verifier
        self.audience = audience

    async def verify(self, authorization: str | None) -> VerifiedCaller:
        return await self._verifier.verify(authorization, audience=self.audience)
