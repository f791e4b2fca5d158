"""Every refusal of the admin API as an RFC 9457 problem document
(``application/problem+json``): ``type`` ``about:blank``, the status's ``title``, a
``detail`` that names what was wrong, and ``reason``, a stable code (an extension member,
RFC 9457 §3.2). A detail never holds a token, a key or an internal exception's text.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.errors import EdgeError

PROBLEM_JSON = "application/problem+json"

log = logging.getLogger("looping.edge.admin")


class Problem(EdgeError):
    """A refusal with its HTTP status (and headers such as ``WWW-Authenticate``)."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        reason: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail, reason=reason)
        self.status = status
        self.headers = headers or {}


def problem_response(
    status: int, detail: str, *, reason: str, headers: dict[str, str] | None = None
) -> Response:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "reason": reason,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


async def on_problem(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return problem_response(exc.status, exc.message, reason=exc.reason, headers=exc.headers)


async def on_http_error(_: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404:
        return problem_response(404, "no such resource", reason="not_found")
    if status == 405:
        return problem_response(405, "method not allowed here", reason="method_not_allowed")
    return problem_response(status, HTTPStatus(status).phrase.lower(), reason="http_error")


async def on_invalid_parameters(_: Request, exc: Exception) -> Response:
    """A path, query or header parameter FastAPI cannot bind: the parameter named, never the
    value given."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    where = ".".join(str(p) for p in errors[0]["loc"]) if errors else "request"
    message = str(errors[0]["msg"]) if errors else "invalid"
    return problem_response(400, f"{where}: {message}", reason="invalid_parameter")


async def on_unexpected(_: Request, exc: Exception) -> Response:
    log.error("admin request failed", extra={"reason": type(exc).__name__})
    return problem_response(500, "the request could not be completed", reason="internal_error")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    Problem: on_problem,
    HTTPException: on_http_error,
    RequestValidationError: on_invalid_parameters,
    Exception: on_unexpected,
}
