"""A fake Looping gateway for tests: keys, JWKS, token minting and an httpx mock transport.

Tenant authors use it too::

    kit = GatewayKit()
    settings = load_settings(gateway_origins=[kit.origin], public_url="http://localhost")
    async with httpx.AsyncClient(transport=kit.transport()) as client:
        verifier = GatewayTokenVerifier(settings, JwksFetcher(settings, client))
        caller = await verifier.verify(kit.bearer(audience=settings.endpoint_url)["Authorization"])

Tokens are minted by PyJWT (``PyJWS.encode``, EdDSA), independently of the edge's own JOSE
code, the way the Looping gateway mints them: protected header
``{"alg":"EdDSA","kid":…,"typ":"JWT","jku":<origin>/.well-known/jwks.json}`` and claims
``iss`` (the origin), ``aud`` (the edge's endpoint URL, not its origin), ``sub`` (the identity
key), ``iat``, ``exp``, ``jti`` and the identity and tenant claims. Every part can be overridden
or dropped for negative tests; ``sign_raw`` signs arbitrary header and payload bytes (what no
JOSE library will produce: duplicate members, odd JSON).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt.api_jws import PyJWS

DEFAULT_IDENTITY_CLAIM = "https://loopingai.org/identity"
DEFAULT_TENANT_CLAIM = "https://loopingai.org/tenant"
JWKS_PATH = "/.well-known/jwks.json"


class _GatewayJWS(PyJWS):
    header_typ = ""  # the header carries exactly the members given (``drop_headers``)


_JWS = _GatewayJWS()


def b64url_encode(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _pyjwt_mints_as_given(header: dict[str, Any]) -> bool:
    """Whether PyJWT signs this header unchanged: it signs with the header's ``alg``, detaches
    an unencoded payload (``b64``), drops a falsy ``typ`` and refuses a non-string ``kid``;
    negative tests want our EdDSA signature under exactly the header they wrote."""
    return (
        header.get("alg") == "EdDSA"
        and "b64" not in header
        and bool(header.get("typ", "JWT"))
        and isinstance(header.get("kid", ""), str)
    )


def default_identity() -> dict[str, Any]:
    return {"key": "user-1", "name": "Test User", "kind": "user", "workspaceId": "T0001"}


def _compact_json(value: object) -> bytes:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a hostile-input test) has no UTF-8 form: escape it as a gateway's
        # JSON serialiser does (``\ud800``).
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def public_jwk(key: Ed25519PrivateKey, kid: str) -> dict[str, str]:
    """The public JWK of ``key`` (RFC 8037 §2), as a gateway publishes it."""
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": b64url_encode(raw),
        "kid": kid,
        "use": "sig",
        "alg": "EdDSA",
    }


@dataclass
class GatewayKit:
    """One fake gateway: an origin, a signing key and its JWKS.

    ``origin`` is mutable on purpose: the loopback JWKS server binds a free port first and
    then points the kit at it (``app.testing.jwks_server.serve_jwks``).
    """

    origin: str = "https://gateway.test"
    kid: str = "gw-key-1"
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate, repr=False)
    fetch_log: list[str] = field(default_factory=list)
    extra_jwks_keys: list[dict[str, Any]] = field(default_factory=list)
    """Extra JWK entries published after our own (previous keys, hostile keys for tests)."""

    @property
    def jwks_url(self) -> str:
        return self.origin.rstrip("/") + JWKS_PATH

    def public_jwk(self) -> dict[str, str]:
        return public_jwk(self.key, self.kid)

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.public_jwk(), *self.extra_jwks_keys]}

    def rotate(self, kid: str, *, keep_previous: bool = False) -> None:
        """Switch to a new key ``kid``; the old one leaves the JWKS unless ``keep_previous``."""
        if keep_previous:
            self.extra_jwks_keys.append(self.public_jwk())
        self.key = Ed25519PrivateKey.generate()
        self.kid = kid

    # --- minting -----------------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        return {"alg": "EdDSA", "kid": self.kid, "typ": "JWT", "jku": self.jwks_url}

    def claims(
        self,
        *,
        audience: str,
        tenant: str | None = "demo",
        identity: dict[str, Any] | None = None,
        ttl: int = 120,
        now: float | None = None,
        tenant_claim: str = DEFAULT_TENANT_CLAIM,
        identity_claim: str = DEFAULT_IDENTITY_CLAIM,
    ) -> dict[str, Any]:
        ident = default_identity() if identity is None else identity
        iat = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "iss": self.origin.rstrip("/"),
            "aud": audience,
            "iat": iat,
            "exp": iat + ttl,
            "jti": str(uuid.uuid4()),
            identity_claim: ident,
        }
        if isinstance(ident, dict) and isinstance(ident.get("key"), str):
            claims["sub"] = ident["key"]
        if tenant is not None:
            claims[tenant_claim] = tenant
        return claims

    def mint(
        self,
        *,
        audience: str,
        tenant: str | None = "demo",
        identity: dict[str, Any] | None = None,
        ttl: int = 120,
        now: float | None = None,
        headers: dict[str, Any] | None = None,
        claims: dict[str, Any] | None = None,
        drop_headers: Iterable[str] = (),
        drop_claims: Iterable[str] = (),
        tenant_claim: str = DEFAULT_TENANT_CLAIM,
        identity_claim: str = DEFAULT_IDENTITY_CLAIM,
    ) -> str:
        """A signed compact JWS. ``headers``/``claims`` are merged last; ``drop_*`` remove."""
        header = {**self.header(), **(headers or {})}
        body = {
            **self.claims(
                audience=audience,
                tenant=tenant,
                identity=identity,
                ttl=ttl,
                now=now,
                tenant_claim=tenant_claim,
                identity_claim=identity_claim,
            ),
            **(claims or {}),
        }
        for name in drop_headers:
            header.pop(name, None)
        for name in drop_claims:
            body.pop(name, None)
        if not _pyjwt_mints_as_given(header):
            return self.sign_raw(_compact_json(header), _compact_json(body))
        return _JWS.encode(
            _compact_json(body), self.key, algorithm="EdDSA", headers=header, sort_headers=False
        )

    def sign_raw(self, header_json: bytes, payload_json: bytes) -> str:
        """Sign arbitrary header and payload bytes (duplicate members, odd JSON...)."""
        signing_input = f"{b64url_encode(header_json)}.{b64url_encode(payload_json)}"
        signature = self.key.sign(signing_input.encode("ascii"))
        return f"{signing_input}.{b64url_encode(signature)}"

    def bearer(self, **mint_kwargs: Any) -> dict[str, str]:
        """Request headers for one A2A call: the bearer token and ``A2A-Version: 1.0``."""
        return {"Authorization": f"Bearer {self.mint(**mint_kwargs)}", "A2A-Version": "1.0"}

    # --- serving the JWKS --------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        """Answer one outbound request: this kit's JWKS at ``jwks_url``, 404 for anything else."""
        self.fetch_log.append(str(request.url))
        if request.method == "GET" and str(request.url) == self.jwks_url:
            return httpx.Response(
                200,
                content=_compact_json(self.jwks()),
                headers={"Content-Type": "application/json", "Cache-Control": "max-age=300"},
            )
        return httpx.Response(404, text="not found")

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


def transport_for(*kits: GatewayKit) -> httpx.MockTransport:
    """One mock transport serving several gateways' JWKS (by origin); 404 elsewhere.

    The request is logged in the ``fetch_log`` of the kit whose origin it addresses.
    """

    def handle(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        for kit in kits:
            if url.startswith(kit.origin.rstrip("/") + "/"):
                return kit.handle(request)
        return httpx.Response(404, text="not found")

    return httpx.MockTransport(handle)
