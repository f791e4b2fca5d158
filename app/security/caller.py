"""The verified caller: what a gateway token proves, handed to everything behind the edge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class VerifiedCaller:
    """A gateway (or peer, CONTRACT §10) token that passed CONTRACT §3 steps 1-7.

    ``tenant`` is the tenant claim when it is a non-empty string, else ``None`` (a list, a
    number or an absent claim is never a match: CONTRACT §3 step 8). The comparison with
    ``params.tenant`` happens in the RPC layer once the body is read (step 10).
    """

    issuer: str
    identity_key: str
    tenant: str | None
    identity: Mapping[str, Any] = field(default_factory=dict)
    subject: str | None = None
    token_id: str | None = None
    # A peer edge's token (CONTRACT §10): ``identity_key`` is ``peer:<issuer origin>:<key>``
    # and only open tenants accept it.
    peer: bool = False

    @property
    def scope_label(self) -> str:
        return f"{self.tenant or '<none>'}/{self.identity_key}"

    @property
    def sender(self) -> PeerSender | None:
        """Who sent a peer's turn (issue 54, provenance), from this verified token only;
        ``None`` for a gateway's caller."""
        if not self.peer:
            return None
        name = self.identity.get("name")
        if not isinstance(name, str) or not name.strip():
            name = self.identity.get("key")
        return PeerSender(name=str(name)[:MAX_PEER_NAME_CHARS], origin=self.issuer)


# A peer names itself in its token; the name reaches the model and the task's metadata, so
# it is kept short (the origin is what identifies the peer).
MAX_PEER_NAME_CHARS = 200
PEER_METADATA_KEY = "looping.peer"


@dataclass(frozen=True)
class PeerSender:
    """A peer agent's turn: its name (the token's identity claim) and its verified origin."""

    name: str
    origin: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "origin": self.origin}

    @classmethod
    def from_json(cls, doc: object) -> PeerSender | None:
        """The sender a turn's payload recorded at accept (``None``: none, or malformed)."""
        if not isinstance(doc, Mapping):
            return None
        name, origin = doc.get("name"), doc.get("origin")
        if not isinstance(name, str) or not isinstance(origin, str):
            return None
        return cls(name=name, origin=origin)


@dataclass(frozen=True)
class CallerScope:
    """The scope every tenant-data query takes: ``(tenant, identity key)`` (ARCHITECTURE)."""

    tenant: str
    identity: str
