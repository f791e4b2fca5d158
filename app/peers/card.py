"""A peer's card: fetched from ``<url>/.well-known/agent-card.json`` for every operation (the
live card), its signature verified when present and its key pinned on first use
(``app.cards.verify``: an origin that signed once must keep signing with the pinned key),
and the interface to call chosen from its ``supportedInterfaces``: the first, in the peer's
order, that is JSON-RPC or HTTP+JSON and on the directory entry's own origin (a card cannot
send our credential elsewhere). The entry's tenant, when set, is the interface's tenant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.types import AgentCard
from google.protobuf.json_format import MessageToDict, ParseDict

from app.cards.verify import CardRejected, CardVerifier
from app.db.peer_pins import PeerPinStore
from app.errors import PeerCallFailed
from app.origins import OriginError, ParsedUrl
from app.peers.directory import Peer
from app.peers.failures import translate
from app.security.jwks import JwksFetcher
from app.settings import Settings

JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
BINDINGS = (JSONRPC, HTTP_JSON)
MAX_CARD_BYTES = 256 * 1024


@dataclass(frozen=True)
class PeerCard:
    card: AgentCard  # as served, with ``supportedInterfaces`` narrowed to the one chosen
    binding: str
    url: str  # the chosen interface's url: where calls go, and an edge token's audience
    signed: bool

    @property
    def streaming(self) -> bool:
        return bool(self.card.capabilities.streaming)


class CardReader:
    """``jwks_client``: the client the peers' JWKS are fetched with (bounded by the fetcher)."""

    def __init__(
        self, settings: Settings, pins: PeerPinStore, jwks_client: httpx.AsyncClient
    ) -> None:
        self._settings = settings
        self._pins = pins
        self._jwks_client = jwks_client
        self._fetchers: dict[str, JwksFetcher] = {}  # one per peer origin, cached keys

    async def read(self, peer: Peer, http: httpx.AsyncClient) -> PeerCard:
        try:
            response = await http.get(peer.card_url)
            if response.status_code != 200:
                raise httpx.HTTPStatusError("card", request=response.request, response=response)
            if len(response.content) > MAX_CARD_BYTES:
                raise PeerCallFailed("the card is too large", reason="response_too_large")
            doc = json.loads(response.content)
        except Exception as exc:
            raise translate(exc, "the card") from None
        if not isinstance(doc, dict):
            raise PeerCallFailed("the card is not a JSON object", reason="bad_response")
        signed = await self.verify(peer, doc)
        try:
            card = ParseDict(doc, AgentCard(), ignore_unknown_fields=True)
        except Exception:
            raise PeerCallFailed("the card is not an A2A card", reason="bad_response") from None
        return choose_interface(peer, card, signed=signed)

    async def verify(self, peer: Peer, doc: dict[str, Any]) -> bool:
        """Whether ``doc`` was signed (and verified); ``PeerCallFailed`` when it does not hold."""

        def check_jku(jku: str) -> ParsedUrl:
            parsed = peer.parse(jku)
            if parsed is None:
                raise OriginError("jku off the peer's origin")
            return parsed

        verifier = CardVerifier(self._fetcher(peer.origin), self._pins, check_jku)
        try:
            return await verifier.verify(peer.origin, doc, required=False)
        except CardRejected as exc:
            reason = "key_changed" if exc.key_changed else "card_rejected"
            raise PeerCallFailed(f"the peer's {exc}", reason=reason, delivered=False) from None

    async def verify_card(self, peer: Peer, card: AgentCard) -> bool:
        return await self.verify(peer, MessageToDict(card))

    def _fetcher(self, origin: str) -> JwksFetcher:
        fetcher = self._fetchers.get(origin)
        if fetcher is None:
            fetcher = JwksFetcher(self._settings, self._jwks_client, origins=frozenset({origin}))
            self._fetchers[origin] = fetcher
        return fetcher


def choose_interface(peer: Peer, card: AgentCard, *, signed: bool) -> PeerCard:
    for interface in card.supported_interfaces:
        if interface.protocol_binding not in BINDINGS or peer.parse(interface.url) is None:
            continue
        chosen = AgentCard()
        chosen.CopyFrom(card)
        del chosen.supported_interfaces[:]
        kept = chosen.supported_interfaces.add()
        kept.CopyFrom(interface)
        if peer.entry.tenant is not None:
            kept.tenant = peer.entry.tenant
        return PeerCard(chosen, interface.protocol_binding, interface.url, signed)
    raise PeerCallFailed(
        "the peer's card lists no JSON-RPC or HTTP+JSON interface on its origin",
        reason="no_interface",
        delivered=False,
    )
