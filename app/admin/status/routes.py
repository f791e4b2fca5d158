"""``/status`` (the page), ``/status/login``, ``/status/logout`` and the page's replay form.

Responses carry a Content-Security-Policy that allows nothing but the page's own inline style
and forms posting to itself, and are never cached: the page shows operational data.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qs

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from app.admin.context import admin_context
from app.admin.problems import Problem
from app.admin.status.access import Viewer, check_form, signer, viewer
from app.admin.status.data import gather
from app.admin.status.render import login_page, status_page
from app.admin.status.session import COOKIE, LIFETIME_SECONDS
from app.admin.tokens import MAX_TOKEN_CHARS, PUSH_READ, PUSH_WRITE, TENANTS_READ, hash_token
from app.push.dead_letters import replay

log = logging.getLogger("looping.edge.admin")

MAX_FORM_BYTES = 4096
_MAX_ID = 2**63 - 1
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(prefix="/status", include_in_schema=False)


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=_HEADERS)


def _to(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303, headers=_HEADERS)


async def _form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body, bounded; each field's first value."""
    if request.headers.get("content-type", "").split(";")[0].strip() not in (
        "application/x-www-form-urlencoded",
        "",
    ):
        raise Problem(415, "send the form as application/x-www-form-urlencoded", reason="form")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_FORM_BYTES:
            raise Problem(413, "the form is too large", reason="form")
    try:
        fields = parse_qs(raw.decode("ascii"), max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        raise Problem(400, "the form could not be read", reason="form") from None
    return {k: v[0] for k, v in fields.items()}


@router.get("")
async def page(request: Request) -> Response:
    caller = await viewer(request)
    if caller is None:
        return _to("/status/login")
    data = await gather(admin_context(request), with_dead_letters=caller.may(PUSH_READ))
    replayed = request.query_params.get("replayed", "")
    notice = f"Dead letter {int(replayed)} re-queued." if replayed.isdigit() else None
    html = status_page(
        data,
        viewer=caller.record.name,
        scopes=caller.record.scopes,
        csrf=caller.csrf,
        notice=notice,
    )
    return _html(html)


@router.get("/login")
async def login_form() -> Response:
    return _html(login_page())


@router.post("/login")
async def login(request: Request) -> Response:
    token = (await _form(request)).get("token", "").strip()
    tokens = admin_context(request).tokens
    record = await tokens.authenticate(token) if 0 < len(token) <= MAX_TOKEN_CHARS else None
    if record is None:
        return _html(login_page("That is not a valid admin token."), 401)
    if TENANTS_READ not in record.scopes:
        return _html(login_page(f"That token lacks the scope {TENANTS_READ}."), 403)
    cookie, _ = signer(request).issue(hash_token(token))
    response = _to("/status")
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=LIFETIME_SECONDS,
        path="/status",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    log.info("admin sign-in", extra={"admin_token": record.name, "action": "status.login"})
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    caller = await _caller(request)
    check_form(request, caller, await _form(request))
    response = _to("/status/login")
    response.delete_cookie(COOKIE, path="/status", httponly=True, samesite="strict")
    return response


@router.post("/dead-letters/{letter_id}/replay")
async def replay_one(letter_id: int, request: Request) -> Response:
    caller = await _caller(request)
    check_form(request, caller, await _form(request))
    if not caller.may(PUSH_WRITE):
        raise Problem(403, f"this needs the scope {PUSH_WRITE}", reason="forbidden")
    if not 1 <= letter_id <= _MAX_ID:
        raise Problem(404, "no such dead letter", reason="no_dead_letter")
    report = await replay(admin_context(request).db, ids=[letter_id])
    if report.not_dead:
        raise Problem(404, "no such dead letter", reason="no_dead_letter")
    log.info("admin write", extra={"admin_token": caller.record.name, "action": "push.replay"})
    return _to(f"/status?replayed={letter_id}")


async def _caller(request: Request) -> Viewer:
    caller = await viewer(request)
    if caller is None:
        raise Problem(401, "sign in first", reason="unauthorized")
    return caller
