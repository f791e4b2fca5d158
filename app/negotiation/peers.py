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
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from app.cards.verify import CardRejected, CardVerifier
from app.db.peer_pins import PeerPinStore
from app.errors import EdgeError
from app.origins import OriginError
from app.security.jwks import JwksFetcher
from app.security.keys import SigningKey
from app.security.peer_tokens import peer_token
from app.settings import Settings

AGENT_CARD_PATH = "/.well-known/agent-card.json"
CARD_SECONDS = 30.0  # research §1.1: card fetch deadline
SEND_DEADLINE_SECONDS = 180.0  # issue 51: a turn's answer, blocking send and polls together
POLL_SECONDS = 0.2
MAX_DOCUMENT_BYTES = 256 * 1024
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
        self._cards = CardVerifier(jwks, pins, lambda jku: self._peers.check_url(jku, what="jku"))

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
        """A2A §8.4.3 through ``app.cards.verify``: a counterparty's cards must be signed; the
        ``jku`` on its origin and in ``PEER_ORIGINS``; the key pinned on first use."""
        try:
            await self._cards.verify(peer.origin, card, required=True)
        except CardRejected as exc:
            raise PeerError(f"the counterparty's {exc}") from None

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
        identity = {"key": our_tenant, "name": our_name}
        return peer_token(
            self._settings, self._key, audience=endpoint, tenant=peer.tenant, identity=identity
        )

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
