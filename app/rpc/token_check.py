"""The gateway token check every binding runs first (CONTRACT §3 steps 1-8): one
``Authorization`` credential, verified for the binding's interface, counted either way.

JSON-RPC (``app.rpc.dispatch``), HTTP+JSON (``app.http.rest``) and gRPC (``app.grpc.service``)
call ``verified_caller`` before reading anything else of the request.
"""

from __future__ import annotations

from typing import Protocol

from app.errors import HttpRefusal, Unauthorized
from app.security.caller import VerifiedCaller

__all__ = ["TokenObserver", "TokenVerifier", "verified_caller"]


class TokenVerifier(Protocol):
    async def verify(self, authorization: str | None) -> VerifiedCaller: ...


class TokenObserver(Protocol):
    def token_verified(self) -> None: ...
    def token_refused(self, reason: str) -> None: ...


async def verified_caller(
    verifier: TokenVerifier,
    authorization: str | None,
    *,
    duplicated: bool,
    observer: TokenObserver | None,
    duplicate_text: str = "more than one Authorization header",
) -> VerifiedCaller:
    """The caller of a verified token, or the verifier's refusal (``Unauthorized``, or the
    400 for an identity without key), counted as a refused token. A refusal after this
    check (a tenant mismatch, a body too large) is the call's outcome, not the token's."""
    try:
        if duplicated:
            # Two credentials are ambiguous (which one did a proxy add?): refuse both.
            raise Unauthorized(duplicate_text, reason="duplicate_authorization")
        caller = await verifier.verify(authorization)
    except HttpRefusal as refusal:
        if observer is not None:
            observer.token_refused(refusal.reason)
        raise
    if observer is not None:
        observer.token_verified()
    return caller
