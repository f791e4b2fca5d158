"""Resolving a name of an ``llm`` agent's directory (its config's ``agents``) to a peer.
Nothing is discovered by scanning: a name not in the directory fails closed, and the
directory is the config of the turn (re-read with the tenant), so a changed entry applies
to the next call."""

from __future__ import annotations

from dataclasses import dataclass

from app.agents.llm.config import LlmConfig
from app.agents.llm.peer_directory import PeerEntry
from app.errors import PeerCallFailed
from app.origins import ParsedUrl, parse_url

AGENT_CARD_PATH = "/.well-known/agent-card.json"


@dataclass(frozen=True)
class Peer:
    name: str
    entry: PeerEntry
    base: ParsedUrl  # the entry's url, parsed: its origin bounds every URL we call
    allow_http_loopback: bool

    @property
    def origin(self) -> str:
        return self.base.origin

    @property
    def card_url(self) -> str:
        return self.base.url.rstrip("/") + AGENT_CARD_PATH

    def parse(self, url: object) -> ParsedUrl | None:
        """``url`` parsed when it is on this peer's origin, else ``None``."""
        try:
            parsed = parse_url(url, allow_loopback_http=self.allow_http_loopback)
        except ValueError:
            return None
        return parsed if parsed.origin == self.origin else None


def resolve(config: LlmConfig, name: str) -> Peer:
    """The peer named ``name`` (``PeerCallFailed`` ``unknown_agent`` when there is none)."""
    entry = config.agents.get(name)
    if entry is None:
        known = ", ".join(sorted(config.agents)) or "none"
        raise PeerCallFailed(
            f"no agent named {name[:64]!r} in the directory (known: {known})",
            reason="unknown_agent",
            delivered=False,
        )
    base = parse_url(entry.url, allow_loopback_http=config.allow_http_loopback)
    return Peer(name, entry, base, config.allow_http_loopback)
