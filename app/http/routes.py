"""HTTP routes: thin adapters from Starlette requests to the framework-free services.

Plain Starlette endpoints (no FastAPI dependency injection) keep the hot path short.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.errors import PayloadTooLarge
from app.ops.metrics import CONTENT_TYPE_LATEST
from app.rpc.dispatch import RpcDispatcher

if TYPE_CHECKING:
    from app.services import EdgeServices

AGENT_CARD_PATH = "/.well-known/agent-card.json"


def _body_reader(request: Request):  # type: ignore[no-untyped-def]
    async def read(limit: int) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise PayloadTooLarge(f"request body exceeds {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"request body exceeds {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    return read


def build_routes(services: EdgeServices, dispatcher: RpcDispatcher) -> list[Route]:
    settings = services.settings
    jwks_body = json.dumps(services.key.jwks(), separators=(",", ":")).encode()
    card_cache_control = f"public, max-age={settings.card_max_age_seconds}"

    async def rpc(request: Request) -> Response:
        outcome = await dispatcher.handle(
            authorization=request.headers.get("authorization"),
            version=request.headers.get("a2a-version"),
            read_body=_body_reader(request),
        )
        return Response(
            outcome.body,
            status_code=outcome.status_code,
            media_type=outcome.media_type,
            headers=outcome.headers,
        )

    async def jwks(_: Request) -> Response:
        return Response(
            jwks_body,
            media_type="application/json",
            headers={"Cache-Control": "public, max-age=3600"},
        )

    async def agent_card(request: Request) -> Response:
        doc = services.cards.stub_card(await services.tenants.enabled_ids())
        headers = {"Cache-Control": card_cache_control, "ETag": doc.etag}
        if_none_match = request.headers.get("if-none-match", "")
        # RFC 9110 §13.1.2: a list of entity tags, or "*".
        tags = {t.strip() for t in if_none_match.split(",")}
        if doc.etag in tags or "*" in tags:
            return Response(status_code=304, headers=headers)
        return Response(doc.body, media_type="application/json", headers=headers)

    async def livez(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        ready, detail = await services.readiness.check()
        return JSONResponse(
            {"status": "ready" if ready else "not ready", **detail},
            status_code=200 if ready else 503,
        )

    async def metrics(_: Request) -> Response:
        return Response(services.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return [
        Route(settings.rpc_path, rpc, methods=["POST"]),
        Route(settings.jwks_path, jwks, methods=["GET"]),
        Route(AGENT_CARD_PATH, agent_card, methods=["GET"]),
        Route("/livez", livez, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
