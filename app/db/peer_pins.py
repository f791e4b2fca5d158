"""Pinned signing identities of counterparty edges (issue 51): the ``jku``/``kid`` a peer's
card was first verified with, kept in the database so every process of this edge, and every
restart, holds the same pin (trust on first use, as the gateway pins an edge: CONTRACT §4).
The A2A tools of ``llm`` agents (issue 54) pin their peers' card keys here too. A pin is
removed only by an operator (``looping-edge peer-pins remove``), after a peer's legitimate key
rotation; the next verified card pins its key again.

``PeerPinStore`` is the role; ``app.db.shared.peer_pins`` plays it on both backends."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class PeerPin:
    origin: str
    jku: str
    kid: str
    pinned_at: datetime


class PeerPinStore(Protocol):
    async def pinned(self, origin: str) -> tuple[str, str] | None:
        """The ``(jku, kid)`` pinned for ``origin``, if any."""
        ...

    async def pin(self, origin: str, jku: str, kid: str) -> tuple[str, str]:
        """Pin ``(jku, kid)`` unless a pin exists; the pin that holds afterwards (a racing
        first use may have won: the caller compares)."""
        ...

    async def all(self) -> list[PeerPin]:
        """Every pin, by origin."""
        ...

    async def remove(self, origin: str) -> bool:
        """Forget ``origin``'s pin; whether there was one."""
        ...
