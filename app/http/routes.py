"""HTTP routes: thin adapters from HTTP requests to the framework-free services.

The operational routes are FastAPI routes (``build_router``); the JSON-RPC endpoint is either
a bare ASGI callable served ahead of the router (``RpcEndpoint``) or a FastAPI route
(``add_rpc_route``): ``app.main`` says which, and why.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Header
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from app.errors import BadRequest, PayloadTooLarge
from app.http.sse import frames, send_stream
from app.ops.metrics import CONTENT_TYPE_LATEST
from app.rpc.dispatch import ClientDisconnected, RpcDispatcher, RpcOutcome

if TYPE_CHECKING:
    from app.services import EdgeServices

AGENT_CARD_PATH = "/.well-known/agent-card.json"


class RpcEndpoint:
    """``POST <rpc_path>`` as a bare ASGI callable, served ahead of FastAPI's routing.

    The RPC path is the hot path: FastAPI's middlewares, router and ``Request``/``Response``
    objects cost a large share of a verified GetTask (``bench/results/asgi-path.md``, against
    ``add_rpc_route``). Behaviour is the same: the dispatcher owns every answer, the body is
    bounded the same way.
    """

    def __init__(self, dispatcher: RpcDispatcher, heartbeat_seconds: float = 15.0) -> None:
        self._dispatcher = dispatcher
        self._heartbeat = heartbeat_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authorization, duplicate_authorization, version, declared, content_type = read_headers(
            scope
        )
        body = BoundedBody(declared, receive)
        outcome = await self._dispatcher.handle(
            authorization=authorization,
            version=version,
            read_body=body.read,
            duplicate_authorization=duplicate_authorization,
            content_type=content_type,
        )
        if outcome.stream is not None:
            await send_stream(send, receive, outcome, outcome.stream, self._heartbeat)
            return
        await send_outcome(send, outcome, close=not body.complete)


def read_headers(
    scope: Scope,
) -> tuple[str | None, bool, str | None, str | None, str | None]:
    """The headers the dispatcher needs: (authorization, duplicated?, A2A-Version, length,
    Content-Type)."""
    authorization: str | None = None
    duplicate_authorization = False
    version: str | None = None
    declared: str | None = None
    content_type: str | None = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            duplicate_authorization = authorization is not None
            authorization = value.decode("latin-1")
        elif name == b"a2a-version":
            version = value.decode("latin-1")
        elif name == b"content-length":
            declared = value.decode("latin-1")
        elif name == b"content-type":
            content_type = value.decode("latin-1")
    return authorization, duplicate_authorization, version, declared, content_type


class BoundedBody:
    """Reads the request body only when the dispatcher asks (after the token check), bounded.

    ``complete`` says whether the body was read to its end: an answer sent before that (an
    early 401, 413 or 415) closes the connection, so the edge stops reading a body it will not
    use (RFC 9112 §9.6; a kept-alive connection would read and discard all of it)."""

    __slots__ = ("_declared", "_receive", "complete")

    def __init__(self, declared: str | None, receive: Receive) -> None:
        self._declared = declared
        self._receive = receive
        self.complete = declared == "0"

    async def read(self, limit: int) -> bytes:
        declared = self._declared
        if declared is not None:
            # RFC 9110 §8.6: 1*DIGIT (ASCII: str.isdigit() alone would take "²").
            if not (declared.isascii() and declared.isdigit()):
                raise BadRequest("invalid Content-Length", reason="bad_content_length")
            if int(declared) > limit:
                raise PayloadTooLarge(f"request body exceeds {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] != "http.request":
                raise ClientDisconnected()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"request body exceeds {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                self.complete = True
                return b"".join(chunks)


async def send_outcome(send: Send, outcome: RpcOutcome, *, close: bool) -> None:
    headers = [
        (b"content-type", outcome.media_type.encode("latin-1")),
        (b"content-length", str(len(outcome.body)).encode("latin-1")),
    ]
    if close:
        headers.append((b"connection", b"close"))
    headers += [
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in outcome.headers.items()
    ]
    await send({"type": "http.response.start", "status": outcome.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": outcome.body})


def build_router(services: EdgeServices) -> APIRouter:
    """The operational routes (CONTRACT §2), typed FastAPI routes; ``HEAD`` answers as ``GET``.

    Each returns a ``Response`` it builds itself, so the bytes and headers are exactly the
    contract's (no response-model serialisation in between).
    """
    settings = services.settings
    jwks_body = json.dumps(services.key.jwks(), separators=(",", ":")).encode()

    async def jwks() -> Response:
        return Response(
            jwks_body,
            media_type="application/json",
            headers={"Cache-Control": "public, max-age=3600"},
        )

    agent_card = _agent_card(services)

    async def livez() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz() -> JSONResponse:
        ready, detail = await services.readiness.check()
        return JSONResponse(
            {"status": "ready" if ready else "not ready", **detail},
            status_code=200 if ready else 503,
        )

    async def metrics() -> Response:
        return Response(services.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    router = APIRouter()
    for path, endpoint in (
        (settings.jwks_path, jwks),
        (AGENT_CARD_PATH, agent_card),
        ("/livez", livez),
        ("/readyz", readyz),
        ("/metrics", metrics),
    ):
        router.add_api_route(path, endpoint, methods=["GET"], response_class=Response)
        # Starlette answers HEAD on a GET route (REFERENCE-CASES 57); FastAPI routes only
        # what is listed. Not described twice in the schema.
        router.add_api_route(
            path, endpoint, methods=["HEAD"], response_class=Response, include_in_schema=False
        )
    return router


def _agent_card(services: EdgeServices) -> Callable[..., Awaitable[Response]]:
    """``GET /.well-known/agent-card.json``: the stub card of the enabled tenants, ``304``
    when the client's copy is current."""
    card_cache_control = f"public, max-age={services.settings.card_max_age_seconds}"

    async def agent_card(if_none_match: Annotated[str, Header()] = "") -> Response:
        doc = services.cards.stub_card(await services.tenants.enabled_ids())
        headers = {"Cache-Control": card_cache_control, "ETag": doc.etag}
        # RFC 9110 §13.1.2: a list of entity tags, or "*", compared weakly (a W/ prefix on
        # the client's copy of our strong tag still matches).
        tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
        if doc.etag in tags or "*" in tags:
            return Response(status_code=304, headers=headers)
        return Response(doc.body, media_type="application/json", headers=headers)

    return agent_card


def add_rpc_route(
    router: APIRouter, rpc_path: str, dispatcher: RpcDispatcher, heartbeat_seconds: float = 15.0
) -> None:
    """``POST <rpc_path>`` as a plain FastAPI route (the alternative to ``RpcEndpoint``)."""

    @router.post(rpc_path, response_class=Response, include_in_schema=False)
    async def rpc(request: Request) -> Response:
        authorization, duplicate_authorization, version, declared, content_type = read_headers(
            request.scope
        )
        body = BoundedBody(declared, request.receive)
        outcome = await dispatcher.handle(
            authorization=authorization,
            version=version,
            read_body=body.read,
            duplicate_authorization=duplicate_authorization,
            content_type=content_type,
        )
        if outcome.stream is not None:
            return StreamingResponse(
                frames(outcome.stream, heartbeat_seconds),
                headers={**outcome.headers, "X-Accel-Buffering": "no"},
                media_type=outcome.media_type,
            )
        headers = outcome.headers if body.complete else {**outcome.headers, "Connection": "close"}
        return Response(
            outcome.body,
            status_code=outcome.status_code,
            headers=headers,
            media_type=outcome.media_type,
        )
