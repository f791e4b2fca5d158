"""Who is looking at the status page: a bearer admin token (as on the API) or a signed-in
browser's session cookie (``app.admin.status.session``). Forms posted with the cookie must
carry the session's CSRF token; a bearer request needs none (a browser never sends a bearer
header on its own, so another site cannot forge one)."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from app.admin.auth import bearer
from app.admin.context import admin_context
from app.admin.problems import Problem
from app.admin.status.session import COOKIE, Session, SessionSigner
from app.admin.tokens import TENANTS_READ, AdminTokenRecord


@dataclass(frozen=True)
class Viewer:
    record: AdminTokenRecord
    session: Session | None  # None: a bearer request
    csrf: str | None  # the token the page's forms carry (sessions only)

    def may(self, scope: str) -> bool:
        return scope in self.record.scopes


def signer(request: Request) -> SessionSigner:
    value: SessionSigner = request.app.state.status_sessions
    return value


async def viewer(request: Request) -> Viewer | None:
    """The caller, or ``None`` when no bearer header and no valid session cookie is sent
    (the page then offers the sign-in form). A bad bearer token is a 401; a token without
    ``tenants:read`` a 403."""
    tokens = admin_context(request).tokens
    sessions = signer(request)
    session = None
    if request.headers.get("authorization") is not None:
        token = bearer(request)
        record = None if token is None else await tokens.authenticate(token)
    elif COOKIE in request.cookies:
        # An expired, forged or revoked session is the same as none: sign in again.
        session = sessions.open(request.cookies.get(COOKIE))
        record = None if session is None else await tokens.authenticate_hash(session.token_hash)
        if record is None:
            return None
    else:
        return None
    if record is None:
        raise Problem(401, "sign in again with a valid admin token", reason="unauthorized")
    if TENANTS_READ not in record.scopes:
        raise Problem(403, f"this needs the scope {TENANTS_READ}", reason="forbidden")
    csrf = None if session is None else sessions.csrf(session)
    return Viewer(record, session, csrf)


def check_form(request: Request, caller: Viewer, form: dict[str, str]) -> None:
    """Refuse a cookie-authenticated form without its session's CSRF token (403)."""
    if caller.session is None:
        return
    if not signer(request).csrf_ok(caller.session, form.get("csrf")):
        raise Problem(403, "the form's CSRF token does not match", reason="csrf")
