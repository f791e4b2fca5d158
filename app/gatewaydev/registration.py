"""Register with an edge the way the Looping gateway does (CONTRACT §4).

1. Fetch the stub card from ``<edge>/.well-known/agent-card.json`` (no redirects, bounded).
2. Its signature names ``jku`` and ``kid``; the ``jku`` must be on the edge's own origin.
   Fetch that JWKS (parsed by PyJWT, independently of the edge's own JWKS parser) and verify
   the detached JWS over the canonical card.
3. Pin ``jku`` + ``kid`` (trust on first use); a different pair later is refused.
4. Call ``GetExtendedAgentCard`` for the tenant with our own EdDSA token and verify the tenant
   card with the same pin and key; its interface must name the tenant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from app.gatewaydev.state import GatewayState
from app.origins import OriginError, parse_url
from app.testing.gateway import GatewayKit
from app.testing.verify import Pin, VerificationError, card_pin, verify_card

AGENT_CARD_PATH = "/.well-known/agent-card.json"
MAX_DOCUMENT_BYTES = 256 * 1024


class RegistrationError(Exception):
    """Registration failed; the message says which step and why."""


@dataclass(frozen=True)
class Registration:
    edge_origin: str
    endpoint: str  # the JSON-RPC URL (token audience)
    pin: Pin
    key: Ed25519PublicKey
    newly_pinned: bool
    stub_card: dict[str, Any]
    tenant_card: dict[str, Any] | None


def http_client() -> httpx.AsyncClient:
    """No redirects, no proxies from the environment, bounded time."""
    return httpx.AsyncClient(follow_redirects=False, timeout=10.0, trust_env=False)


async def _get_json(client: httpx.AsyncClient, url: str, what: str) -> dict[str, Any]:
    try:
        response = await client.get(url)
    except httpx.HTTPError as exc:
        reason = type(exc).__name__
        raise RegistrationError(f"cannot fetch the {what} at {url} ({reason})") from None
    if response.status_code != 200:
        raise RegistrationError(f"the {what} at {url} answered HTTP {response.status_code}")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise RegistrationError(f"the {what} at {url} is larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        doc = json.loads(response.content)
    except ValueError:
        raise RegistrationError(f"the {what} at {url} is not JSON") from None
    if not isinstance(doc, dict):
        raise RegistrationError(f"the {what} at {url} is not a JSON object")
    return doc


def edge_origin(edge_url: str) -> str:
    try:
        return parse_url(edge_url, allow_loopback_http=True).origin
    except OriginError as exc:
        raise RegistrationError(f"--edge: {exc}") from None


async def fetch_edge_key(client: httpx.AsyncClient, origin: str, pin: Pin) -> Ed25519PublicKey:
    try:
        jku_origin = parse_url(pin.jku, allow_loopback_http=True).origin
    except OriginError as exc:
        raise RegistrationError(f"the card's jku is not a usable URL: {exc}") from None
    if jku_origin != origin:
        raise RegistrationError(f"the card's jku {pin.jku} is not on the edge origin {origin}")
    try:
        response = await client.get(pin.jku)
    except httpx.HTTPError as exc:
        raise RegistrationError(f"cannot fetch the edge JWKS ({type(exc).__name__})") from None
    if response.status_code != 200 or len(response.content) > MAX_DOCUMENT_BYTES:
        raise RegistrationError(f"the edge JWKS at {pin.jku} answered HTTP {response.status_code}")
    try:
        keys = jwt.PyJWKSet.from_json(response.text).keys
    except (jwt.PyJWTError, ValueError) as exc:
        raise RegistrationError(f"the edge JWKS is invalid: {exc}") from None
    # One key under the pinned kid, and an Ed25519 one (RFC 8037 §2): PyJWT would also load
    # Ed448 or another key type under the same kid.
    matches = [k for k in keys if k.key_id == pin.kid]
    if len(matches) != 1 or not isinstance(matches[0].key, Ed25519PublicKey):
        raise RegistrationError(f"the edge JWKS has no usable Ed25519 key '{pin.kid}'")
    return matches[0].key


def jsonrpc_endpoint(card: dict[str, Any], origin: str) -> str:
    for interface in card.get("supportedInterfaces") or []:
        if isinstance(interface, dict) and interface.get("protocolBinding") == "JSONRPC":
            url = interface.get("url")
            try:
                parsed = parse_url(url, allow_loopback_http=True)
            except OriginError as exc:
                raise RegistrationError(f"the card's JSON-RPC url is unusable: {exc}") from None
            if parsed.origin != origin:
                raise RegistrationError("the card's JSON-RPC url is not on the edge origin")
            return str(url)
    raise RegistrationError("the card lists no JSONRPC interface")


async def rpc(
    client: httpx.AsyncClient,
    kit: GatewayKit,
    endpoint: str,
    method: str,
    params: dict[str, Any],
    *,
    tenant: str,
    identity: dict[str, Any],
) -> Any:
    """One JSON-RPC call with a fresh gateway token; returns ``result`` or raises."""
    headers = kit.bearer(audience=endpoint, tenant=tenant, identity=identity)
    headers["Content-Type"] = "application/json"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"tenant": tenant, **params}}
    try:
        response = await client.post(endpoint, json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise RegistrationError(f"{method}: cannot reach the edge ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise RegistrationError(
            f"{method}: HTTP {response.status_code} {response.text[:200].strip()}"
        )
    try:
        doc = response.json()
    except ValueError:
        raise RegistrationError(f"{method}: the answer is not JSON") from None
    if not isinstance(doc, dict):
        raise RegistrationError(f"{method}: the answer is not a JSON-RPC object")
    if "error" in doc:
        error = doc["error"] if isinstance(doc["error"], dict) else {}
        raise RegistrationError(f"{method}: error {error.get('code')} {error.get('message')}")
    return doc.get("result")


async def register(
    client: httpx.AsyncClient,
    *,
    edge_url: str,
    state: GatewayState,
    kit: GatewayKit | None = None,
    tenant: str | None = None,
    identity: dict[str, Any] | None = None,
) -> Registration:
    origin = edge_origin(edge_url)
    stub = await _get_json(client, origin + AGENT_CARD_PATH, "agent card")
    try:
        seen = card_pin(stub)
    except VerificationError as exc:
        raise RegistrationError(f"stub card: {exc}") from None
    try:
        # A changed pin is refused before anything is fetched from the (new) jku.
        if state.pinned(origin) is not None:
            state.check_or_pin(origin, seen)
        key = await fetch_edge_key(client, origin, seen)
        verify_card(stub, key=key, pin=seen)
        # Pinned only once the signature verified: a forged card never becomes the pin.
        newly_pinned = state.check_or_pin(origin, seen)
    except VerificationError as exc:
        raise RegistrationError(f"stub card: {exc}") from None
    endpoint = jsonrpc_endpoint(stub, origin)
    tenant_card = None
    if tenant is not None and kit is not None:
        tenant_card = await _tenant_card(
            client, kit, endpoint, tenant, identity or {"key": "dev-user"}, key=key, pin=seen
        )
    return Registration(
        edge_origin=origin,
        endpoint=endpoint,
        pin=seen,
        key=key,
        newly_pinned=newly_pinned,
        stub_card=stub,
        tenant_card=tenant_card,
    )


async def _tenant_card(
    client: httpx.AsyncClient,
    kit: GatewayKit,
    endpoint: str,
    tenant: str,
    identity: dict[str, Any],
    *,
    key: Ed25519PublicKey,
    pin: Pin,
) -> dict[str, Any]:
    """The tenant's signed card (``GetExtendedAgentCard``), verified with the stub card's key."""
    result = await rpc(
        client, kit, endpoint, "GetExtendedAgentCard", {}, tenant=tenant, identity=identity
    )
    if not isinstance(result, dict):
        raise RegistrationError("GetExtendedAgentCard: the result is not a card")
    try:
        verify_card(result, key=key, pin=pin)
    except VerificationError as exc:
        raise RegistrationError(f"tenant card: {exc}") from None
    interfaces = result.get("supportedInterfaces") or [{}]
    if not isinstance(interfaces[0], dict) or interfaces[0].get("tenant") != tenant:
        raise RegistrationError(f"tenant card: its interface does not name tenant '{tenant}'")
    return result
