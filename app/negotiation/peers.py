"""Dialling a counterparty's edge (issue 51, outbound): only origins in ``PEER_ORIGINS``;
its signed card fetched and verified, its signing identity pinned on first use the way the
gateway pins an edge (CONTRACT §4: a different ``jku``/``kid`` later is refused; the pin is
in the database, ``app.db.peer_pins``, shared by the edge's processes); a caller
token minted with our key per request (``iss`` our origin, ``jku`` our JWKS, ``aud`` its
endpoint, the tenant claim its tenant, the identity claim ``{"key": our tenant, "name": our
card's name}``); a blocking A2A 1.0 ``SendMessage``, then ``GetTask`` while the task is still
``WORKING``, within a deadline.

Errors are ``PeerError`` with a message fit for the model: no token, key or exception text.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from cryptography.exceptions import InvalidSignature

from app.cards.canonical import CardFormatError, canonical_payload
from app.db.peer_pins import PeerPinStore
from app.errors import EdgeError
from app.origins import OriginError
from app.security.jwks import JwksFetcher
from app.security.keys import SigningKey, compact_json
from app.settings import Settings

AGENT_CARD_PATH = "/.well-known/agent-card.json"
CARD_SECONDS = 30.0  # research §1.1: card fetch deadline
SEND_DEADLINE_SECONDS = 180.0  # issue 51: a turn's answer, blocking send and polls together
POLL_SECONDS = 0.2
MAX_DOCUMENT_BYTES = 256 * 1024
TOKEN_SECONDS = 120
A2A_VERSION = "1.0"
WORKING_STATES = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"})


class PeerError(Exception):
    """The counterparty cannot be reached or answered wrongly; the message says which."""


@dataclass(frozen=True)
class Counterparty:
    origin: str
    tenant: str

    @property
    def key(self) -> str:
        """How the negotiations table names it: ``<origin>/<tenant>``."""
        return f"{self.origin}/{self.tenant}"


@dataclass(frozen=True)
class PeerCard:
    endpoint: str  # the JSON-RPC URL: the token's audience
    name: str
    skills: tuple[str, ...]


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class PeerClient:
    def __init__(
        self,
        settings: Settings,
        key: SigningKey,
        jwks: JwksFetcher,
        http: httpx.AsyncClient,
        pins: PeerPinStore,
        *,
        sleep: Callable[[float], Any] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._peers = settings.peer_allowlist
        self._key = key
        self._jwks = jwks
        self._http = http
        self._sleep = sleep
        self._clock = clock
        self._pins = pins

    def counterparty(self, url: str, tenant: str) -> Counterparty:
        """Only an origin in ``PEER_ORIGINS`` may be dialled (nothing else is reachable)."""
        try:
            parsed = self._peers.check_url(url, what="counterparty url")
        except (OriginError, EdgeError):
            raise PeerError(f"{url[:200]!r} is not a counterparty this edge may dial") from None
        if not tenant or len(tenant) > 63:
            raise PeerError("counterparty tenant must be a tenant id")
        return Counterparty(parsed.origin, tenant)

    # --- cards ------------------------------------------------------------------------------

    async def card(self, peer: Counterparty, *, our_tenant: str, our_name: str) -> PeerCard:
        stub = await self._get_json(peer.origin + AGENT_CARD_PATH, "agent card")
        await self._verify(peer, stub)
        endpoint = self._endpoint(peer, stub)
        result = await self._rpc(
            peer, endpoint, "GetExtendedAgentCard", {}, our_tenant=our_tenant, our_name=our_name
        )
        if not isinstance(result, dict):
            raise PeerError("the counterparty's tenant card is not a card")
        await self._verify(peer, result)
        skills = tuple(
            str(s.get("id")) for s in result.get("skills") or () if isinstance(s, Mapping)
        )
        return PeerCard(endpoint, str(result.get("name") or peer.tenant), skills)

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        try:
            response = await self._http.get(url, timeout=CARD_SECONDS)
        except httpx.HTTPError as exc:
            raise PeerError(f"cannot fetch the {what} ({type(exc).__name__})") from None
        if response.status_code != 200 or len(response.content) > MAX_DOCUMENT_BYTES:
            raise PeerError(f"the {what} answered HTTP {response.status_code}")
        try:
            doc = json.loads(response.content)
        except ValueError:
            raise PeerError(f"the {what} is not JSON") from None
        if not isinstance(doc, dict):
            raise PeerError(f"the {what} is not a JSON object")
        return doc

    async def _verify(self, peer: Counterparty, card: Mapping[str, Any]) -> None:
        """A2A §8.4.3: one detached EdDSA JWS over the canonical card, by the key the
        counterparty's JWKS holds under the signature's ``kid``, ``jku`` on its own origin;
        the pair is pinned on first use and a different one later is refused."""
        signatures = card.get("signatures")
        if not isinstance(signatures, list) or len(signatures) != 1:
            raise PeerError("the counterparty's card must carry exactly one signature")
        signature = signatures[0]
        if not isinstance(signature, Mapping):
            raise PeerError("the counterparty's card signature is malformed")
        protected, value = signature.get("protected"), signature.get("signature")
        if not isinstance(protected, str) or not isinstance(value, str):
            raise PeerError("the counterparty's card signature is malformed")
        try:
            header = json.loads(_b64decode(protected))
            raw_signature = _b64decode(value)
        except ValueError:
            raise PeerError("the counterparty's card signature is malformed") from None
        if not isinstance(header, dict) or header.get("alg") != "EdDSA" or "crit" in header:
            raise PeerError("the counterparty's card signature must be plain EdDSA")
        jku, kid = header.get("jku"), header.get("kid")
        if not isinstance(jku, str) or not isinstance(kid, str) or not kid:
            raise PeerError("the counterparty's card signature names no jku and kid")
        try:
            parsed = self._peers.check_url(jku, what="jku")
        except (OriginError, EdgeError):
            raise PeerError("the counterparty's card names a jku off its origin") from None
        if parsed.origin != peer.origin:
            raise PeerError("the counterparty's card names a jku off its origin")
        # A changed pin is refused before anything is fetched from the (new) jku.
        pinned = await self._pins.pinned(peer.origin)
        if pinned is not None and pinned != (jku, kid):
            raise PeerError("the counterparty's signing key differs from the one pinned")
        try:
            key = await self._jwks.get_key(parsed, kid)
        except EdgeError:
            raise PeerError("the counterparty's signing key cannot be fetched") from None
        try:
            payload = canonical_payload(card)
        except CardFormatError:
            raise PeerError("the counterparty's card cannot be canonicalised") from None
        signing_input = f"{protected}.{_b64encode(payload)}".encode("ascii")
        try:
            key.verify(raw_signature, signing_input)
        except InvalidSignature:
            raise PeerError("the counterparty's card signature does not verify") from None
        # Pinned once verified, never before; a racing first use that pinned another pair wins.
        if await self._pins.pin(peer.origin, jku, kid) != (jku, kid):
            raise PeerError("the counterparty's signing key differs from the one pinned")

    def _endpoint(self, peer: Counterparty, card: Mapping[str, Any]) -> str:
        for interface in card.get("supportedInterfaces") or ():
            if isinstance(interface, Mapping) and interface.get("protocolBinding") == "JSONRPC":
                url = interface.get("url")
                try:
                    parsed = self._peers.check_url(url, what="interface url")
                except (OriginError, EdgeError):
                    break
                if parsed.origin == peer.origin:
                    return str(url)
        raise PeerError("the counterparty's card lists no JSON-RPC endpoint on its origin")

    # --- calls ------------------------------------------------------------------------------

    def token(self, peer: Counterparty, endpoint: str, *, our_tenant: str, our_name: str) -> str:
        now = int(time.time())
        settings = self._settings
        header = {"alg": "EdDSA", "kid": self._key.kid, "jku": settings.jwks_url}
        claims = {
            "iss": settings.public_origin,
            "aud": endpoint,
            "iat": now,
            "exp": now + TOKEN_SECONDS,
            "jti": str(uuid.uuid4()),
            settings.identity_claim: {"key": our_tenant, "name": our_name},
            settings.tenant_claim: peer.tenant,
        }
        return self._key.sign_compact(header, compact_json(claims))

    async def _rpc(
        self,
        peer: Counterparty,
        endpoint: str,
        method: str,
        params: dict[str, Any],
        *,
        our_tenant: str,
        our_name: str,
        seconds: float = CARD_SECONDS,
    ) -> Any:
        token = self.token(peer, endpoint, our_tenant=our_tenant, our_name=our_name)
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "A2A-Version": A2A_VERSION,
        }
        body = {
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": method,
            "params": {"tenant": peer.tenant, **params},
        }
        try:
            response = await self._http.post(endpoint, json=body, headers=headers, timeout=seconds)
        except httpx.HTTPError as exc:
            raise PeerError(
                f"{method}: cannot reach the counterparty ({type(exc).__name__})"
            ) from None
        if response.status_code != 200:
            raise PeerError(f"{method}: the counterparty answered HTTP {response.status_code}")
        try:
            doc = response.json()
        except ValueError:
            raise PeerError(f"{method}: the answer is not JSON") from None
        if not isinstance(doc, dict):
            raise PeerError(f"{method}: the answer is not a JSON-RPC object")
        error = doc.get("error")
        if error is not None:
            error = error if isinstance(error, dict) else {}
            message = str(error.get("message") or "")[:300]
            raise PeerError(f"{method}: error {error.get('code')} {message}".rstrip())
        return doc.get("result")

    async def send(
        self,
        peer: Counterparty,
        card: PeerCard,
        message: Mapping[str, Any],
        *,
        our_tenant: str,
        our_name: str,
        history_length: int,
    ) -> dict[str, Any]:
        """The task after our move: a blocking ``SendMessage``, then ``GetTask`` until the task
        leaves ``WORKING``, all within ``SEND_DEADLINE_SECONDS``."""
        deadline = self._clock() + SEND_DEADLINE_SECONDS
        params = {
            "message": dict(message),
            "configuration": {"historyLength": history_length},
        }
        result = await self._rpc(
            peer,
            card.endpoint,
            "SendMessage",
            params,
            our_tenant=our_tenant,
            our_name=our_name,
            seconds=SEND_DEADLINE_SECONDS,
        )
        task = result.get("task") if isinstance(result, dict) else None
        if not isinstance(task, dict) or not isinstance(task.get("id"), str):
            raise PeerError("SendMessage: the counterparty did not answer with a task")
        while _state(task) in WORKING_STATES:
            if self._clock() >= deadline:
                raise PeerError("the counterparty did not answer in time")
            await self._sleep(POLL_SECONDS)
            found = await self._rpc(
                peer,
                card.endpoint,
                "GetTask",
                {"id": task["id"], "historyLength": history_length},
                our_tenant=our_tenant,
                our_name=our_name,
            )
            if not isinstance(found, dict):
                raise PeerError("GetTask: the counterparty did not answer with a task")
            task = found
        return task


def _state(task: Mapping[str, Any]) -> str:
    status = task.get("status")
    return str(status.get("state")) if isinstance(status, Mapping) else ""
