"""Pinned signing identities of counterparty edges (issue 51): the ``jku``/``kid`` a peer's
card was first verified with, kept in the database so every process of this edge, and every
restart, holds the same pin (trust on first use, as the gateway pins an edge: CONTRACT §4).

``PeerPinStore`` is the role; ``app.db.shared.peer_pins`` plays it on both backends."""

from __future__ import annotations

from typing import Protocol


class PeerPinStore(Protocol):
    async def pinned(self, origin: str) -> tuple[str, str] | None:
        """The ``(jku, kid)`` pinned for ``origin``, if any."""
        ...

    async def pin(self, origin: str, jku: str, kid: str) -> tuple[str, str]:
        """Pin ``(jku, kid)`` unless a pin exists; the pin that holds afterwards (a racing
        first use may have won: the caller compares)."""
        ...
