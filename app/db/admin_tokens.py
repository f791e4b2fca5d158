"""The admin-token store: the ``admin_tokens`` table's records (issue 52).

``AdminTokenStore`` is the seam between the admin tokens' rules (``app.admin.tokens``: how a
token is made, hashed and checked) and the backends, which run the same SQLAlchemy statements
(``app.db.shared.admin_tokens``). Only the hash of a token is ever stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class AdminTokenRecord:
    name: str
    token_hash: str  # lowercase hex SHA-256 of the token
    scopes: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None = None
    expires_at: datetime | None = None
    revoked_at: datetime | None = None

    def usable_at(self, now: datetime) -> bool:
        """Neither revoked nor expired at ``now``."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


class AdminTokenExists(ValueError):
    pass


class AdminTokenMissing(LookupError):
    pass


class AdminTokenStore(Protocol):
    async def insert(self, record: AdminTokenRecord) -> None:
        """``AdminTokenExists`` if the name is taken (a revoked token keeps its name)."""
        ...

    async def list(self) -> list[AdminTokenRecord]:
        """Every token, revoked ones included, sorted by name."""
        ...

    async def find(self, token_hash: str) -> AdminTokenRecord | None: ...

    async def touch(self, name: str, *, at: datetime) -> None:
        """Record a use at ``at``."""
        ...

    async def revoke(self, name: str, *, at: datetime) -> AdminTokenRecord:
        """Revoke it at ``at`` (a revoked one stays as it was); ``AdminTokenMissing`` if
        there is no such token."""
        ...
