"""Status-page sessions: a signed cookie set once an admin token signs in, and the CSRF token
its forms carry.

The cookie holds the token's SHA-256 hash (what the admin-token store is keyed by, never the
token), an expiry and a random nonce, signed with HMAC-SHA256 under a key drawn at random when
the admin app starts. A per-process key, not one derived from the edge's signing key: the
signing key signs agent cards and nothing else, and the admin listener is one process, so
nothing else has to verify these cookies; a restart signs every browser out, which costs a
sign-in. Every request looks the hash up again, so revoking the token or its expiry ends the
session at once. The CSRF token is an HMAC of the session's nonce under the same key
(double-submit tied to the session, OWASP CSRF cheat sheet): a form from another session or
none is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Final

COOKIE: Final = "edge_status_session"
LIFETIME_SECONDS: Final = 8 * 3600
_HASH = re.compile(r"[0-9a-f]{64}")
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,64}")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Session:
    token_hash: str
    expires_at: int  # seconds since the epoch
    nonce: str


class SessionSigner:
    """Makes and checks session cookies and CSRF tokens under one secret key."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _mac(self, purpose: str, value: str) -> str:
        message = f"{purpose}|{value}".encode("ascii")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    def issue(self, token_hash: str, *, now: float | None = None) -> tuple[str, Session]:
        """A cookie value for the token with this hash, and the session it stands for."""
        at = int(time.time() if now is None else now)
        session = Session(token_hash, at + LIFETIME_SECONDS, secrets.token_urlsafe(24))
        payload = f"{session.token_hash}.{session.expires_at}.{session.nonce}"
        return f"{payload}.{self._mac('session', payload)}", session

    def open(self, value: str | None, *, now: float | None = None) -> Session | None:
        """The session a cookie stands for, or ``None`` when it is malformed, forged or
        expired (all alike to the caller)."""
        if not value or len(value) > 512 or not value.isascii():
            return None
        payload, _, mac = value.rpartition(".")
        if not hmac.compare_digest(mac, self._mac("session", payload)):
            return None
        parts = payload.split(".")
        if len(parts) != 3 or not _HASH.fullmatch(parts[0]) or not _NONCE.fullmatch(parts[2]):
            return None
        if not parts[1].isdigit() or int(parts[1]) <= (time.time() if now is None else now):
            return None
        return Session(parts[0], int(parts[1]), parts[2])

    def csrf(self, session: Session) -> str:
        return self._mac("csrf", session.nonce)

    def csrf_ok(self, session: Session, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given, self.csrf(session))
