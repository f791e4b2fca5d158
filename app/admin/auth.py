"""Bearer tokens on the admin listener (issue 52): a missing, unknown, revoked or expired token
is 401 and a token without the route's scope is 403, and neither answer says which tokens
exist (RFC 6750 §3: ``WWW-Authenticate: Bearer``)."""

from __future__ import annotations

from typing import Any

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import Request

from app.admin.context import admin_context
from app.admin.problems import Problem
from app.admin.tokens import AdminTokenRecord

# Declares the bearer scheme in the OpenAPI document (the docs page's "Authorize"); the header
# is read and checked below, not by it.
_SCHEME = Depends(HTTPBearer(auto_error=False, description="an admin token"))
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="looping-edge-admin"'}


def _unauthorized() -> Problem:
    return Problem(
        401,
        "send Authorization: Bearer <admin token> with a valid token",
        reason="unauthorized",
        headers=_CHALLENGE,
    )


def bearer(request: Request) -> str | None:
    values = request.headers.getlist("authorization")
    if len(values) != 1:
        return None
    scheme, _, token = values[0].partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def require(scope: str | None) -> Any:
    """A dependency giving the caller's token record (``caller: AdminTokenRecord =
    require(...)``); ``scope``: the one the route needs (``None``: any valid token)."""

    async def caller(
        request: Request, _: HTTPAuthorizationCredentials | None = _SCHEME
    ) -> AdminTokenRecord:
        token = bearer(request)
        tokens = admin_context(request).tokens
        record = None if token is None else await tokens.authenticate(token)
        if record is None:
            raise _unauthorized()
        if scope is not None and scope not in record.scopes:
            raise Problem(403, f"this needs the scope {scope}", reason="forbidden")
        return record

    return Depends(caller)
