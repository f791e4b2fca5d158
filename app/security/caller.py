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


@dataclass(frozen=True)
class CallerScope:
    """The scope every tenant-data query takes: ``(tenant, identity key)`` (ARCHITECTURE)."""

    tenant: str
    identity: str
