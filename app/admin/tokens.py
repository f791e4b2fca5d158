"""Admin tokens (issue 52): made, shown once, stored as a hash, checked in constant time.

A token is 256 random bits (``secrets``), so a plain SHA-256 of it is what is stored: a slow
password hash exists to make guessing a low-entropy secret expensive, and nobody can guess
256 random bits; a fast hash lets every request be checked without a per-request key
stretch. A database leak gives hashes from which no token can be recovered.

Lookup is by the hash (an index), then the stored hash is compared with ``hmac.compare_digest``,
so the comparison takes the same time however many leading characters match. Every refusal
looks the same to the caller: unknown, revoked and expired tokens are all "not a valid token".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from app.db.admin_tokens import AdminTokenExists as AdminTokenExists
from app.db.admin_tokens import AdminTokenMissing as AdminTokenMissing
from app.db.admin_tokens import AdminTokenRecord as AdminTokenRecord
from app.db.admin_tokens import AdminTokenStore

TENANTS_READ: Final = "tenants:read"
TENANTS_WRITE: Final = "tenants:write"
PUSH_READ: Final = "push:read"
PUSH_WRITE: Final = "push:write"
SCOPES: Final = (TENANTS_READ, TENANTS_WRITE, PUSH_READ, PUSH_WRITE)

# What a token looks like: a fixed prefix (so a leaked one is recognisable in a scan) and 43
# base64url characters (32 random bytes).
PREFIX: Final = "leadm_"
MAX_TOKEN_CHARS: Final = 128  # anything longer is refused before it is hashed
MAX_EXPIRY_DAYS: Final = 3650
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
# A use is recorded at most this often per token: reads must not become one write each.
TOUCH_EVERY: Final = timedelta(minutes=1)


class AdminTokenInvalid(ValueError):
    """A bad name, scope or expiry; the message names it."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise AdminTokenInvalid(
            "token name must be 1-63 characters: lowercase letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def check_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    given = tuple(dict.fromkeys(scopes))
    if not given:
        raise AdminTokenInvalid(f"give at least one scope: {', '.join(SCOPES)}")
    for scope in given:
        if scope not in SCOPES:
            raise AdminTokenInvalid(f"unknown scope; scopes are {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in given)


@dataclass(frozen=True)
class IssuedToken:
    record: AdminTokenRecord
    token: str  # shown once, never stored


class AdminTokens:
    """Create, list, revoke and check admin tokens (the CLI and the admin listener)."""

    def __init__(
        self, store: AdminTokenStore, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self._store = store
        self._clock = clock or (lambda: datetime.now(UTC))

    async def create(
        self, name: str, scopes: Iterable[str], *, expires_in_days: float | None = None
    ) -> IssuedToken:
        """``AdminTokenInvalid``, or ``AdminTokenExists`` if the name is taken."""
        check_name(name)
        granted = check_scopes(scopes)
        now = self._clock()
        expires = None
        if expires_in_days is not None:
            if not 0 < expires_in_days <= MAX_EXPIRY_DAYS:
                raise AdminTokenInvalid(f"expiry must be 1 to {MAX_EXPIRY_DAYS} days")
            expires = now + timedelta(days=expires_in_days)
        token = new_token()
        record = AdminTokenRecord(
            name=name,
            token_hash=hash_token(token),
            scopes=granted,
            created_at=now,
            expires_at=expires,
        )
        await self._store.insert(record)
        return IssuedToken(record=record, token=token)

    async def list(self) -> list[AdminTokenRecord]:
        return await self._store.list()

    async def revoke(self, name: str) -> AdminTokenRecord:
        return await self._store.revoke(name, at=self._clock())

    async def authenticate(self, token: str) -> AdminTokenRecord | None:
        """The token's record if it is known, not revoked and not expired; else ``None``
        (the caller cannot tell which)."""
        if not token or len(token) > MAX_TOKEN_CHARS or not token.isascii():
            return None
        return await self.authenticate_hash(hash_token(token))

    async def authenticate_hash(self, digest: str) -> AdminTokenRecord | None:
        """As ``authenticate``, for a token known by its hash (a status-page session, which
        holds the hash, never the token, so a revoked token ends its sessions too)."""
        record = await self._store.find(digest)
        if record is None or not hmac.compare_digest(record.token_hash, digest):
            return None
        now = self._clock()
        if not record.usable_at(now):
            return None
        if record.last_used_at is None or now - record.last_used_at >= TOUCH_EVERY:
            await self._store.touch(record.name, at=now)
        return record
