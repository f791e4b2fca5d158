"""The app factory: settings in, a wired FastAPI app out.

Settings are built once by the caller (CLI or tests) and passed in; the lifespan starts the
background loops (turn workers, push delivery) and closes every resource on shutdown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.grpc.binding import build_grpc_server
from app.http.rest import RestEndpoint
from app.http.rest_routes import is_rest_path
from app.http.routes import RpcEndpoint, add_rpc_route, build_router
from app.interfaces import HTTP_JSON
from app.method_table import call_dispatcher, tenant_body_limit
from app.rpc.dispatch import RpcDispatcher
from app.services import EdgeServices
from app.tracing.asgi import TracedEndpoint
from app.tracing.spans import enabled as tracing_enabled


async def _not_found(_: Request, exc: Exception) -> Response:
    # CONTRACT §2: anything that is not a route is a 404 (wrong method included).
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    if status in (404, 405):
        return PlainTextResponse("not found", status_code=404)
    return PlainTextResponse("bad request", status_code=status)


async def _bad_request(_: Request, __: Exception) -> Response:
    # A request FastAPI cannot bind to a route's typed parameters: no 422 with a schema dump.
    return PlainTextResponse("bad request", status_code=400)


class EdgeApp(FastAPI):
    """FastAPI, with ``POST <rpc_path>`` (unless ``rpc`` is ``None``) and the HTTP+JSON
    binding's paths answered before the middleware stack and router."""

    def __init__(self, *, rpc_path: str, rpc: ASGIApp | None, rest: ASGIApp, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rpc_path = rpc_path
        self._rpc = rpc
        self._rest = rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            path = scope["path"]
            if self._rpc is not None and path == self._rpc_path and scope["method"] == "POST":
                await self._rpc(scope, receive, send)
                return
            if is_rest_path(path):
                await self._rest(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(
    services: EdgeServices, *, raw_rpc: bool = True, grpc_host: str = "127.0.0.1"
) -> FastAPI:
    """The edge's ASGI app. ``raw_rpc=False`` serves the RPC path as a plain FastAPI route
    (the bench's comparison, ``bench/asgi_path.py``). With ``EDGE_GRPC_PORT`` set, the gRPC
    server (on ``grpc_host``) joins the background services: it starts and stops with them,
    stopping first."""
    settings = services.settings
    calls = call_dispatcher(services)
    body_limit = tenant_body_limit(services)
    dispatcher = RpcDispatcher(
        verifier=services.verifier,
        calls=calls,
        max_body_bytes=settings.max_body_bytes,
        observer=services.metrics,
        body_limit=body_limit,
        large_bodies=services.large_bodies,
    )
    if settings.grpc_port is not None:
        services.background.append(build_grpc_server(services, host=grpc_host))
    rest = RestEndpoint(
        verifier=services.verifier.for_binding(HTTP_JSON),
        calls=calls,
        max_body_bytes=settings.max_body_bytes,
        heartbeat_seconds=settings.stream_heartbeat_seconds,
        observer=services.metrics,
        body_limit=body_limit,
        large_bodies=services.large_bodies,
    )
    router = build_router(services)
    # Raw ASGI RPC path, it outran the FastAPI route: measured: see bench/results/asgi-path.md
    rpc = RpcEndpoint(dispatcher, settings.stream_heartbeat_seconds) if raw_rpc else None
    if not raw_rpc:
        add_rpc_route(router, settings.rpc_path, dispatcher, settings.stream_heartbeat_seconds)
    app = EdgeApp(
        rpc_path=settings.rpc_path,
        **_traced(rpc, rest, settings.rpc_path),
        **_app_options(services),
    )
    app.include_router(router)
    app.state.services = services
    return app


def _app_options(services: EdgeServices) -> dict[str, Any]:
    """FastAPI's own options: the card's title and version, the docs only when
    ``EDGE_OPENAPI_DOCS`` is on, the not-found answers, and the lifespan that runs the
    background services."""
    settings = services.settings
    docs = settings.openapi_docs
    return {
        "title": settings.card_name,
        "version": settings.card_version,
        "openapi_url": "/openapi.json" if docs else None,
        "docs_url": "/docs" if docs else None,
        "redoc_url": None,
        "lifespan": _lifespan(services),
        "exception_handlers": {HTTPException: _not_found, RequestValidationError: _bad_request},
        # POST /a2a/ is a 404, never a redirect to /a2a (REFERENCE-CASES 105).
        "redirect_slashes": False,
    }


def _lifespan(services: EdgeServices) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Starts the background services in order; on shutdown marks the process draining,
    stops them in reverse and closes every resource."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for service in services.background:
            await service.start()
        try:
            yield
        finally:
            services.readiness.draining = True
            for service in reversed(services.background):
                await service.stop()
            await services.aclose()

    return lifespan


def _traced(rpc: RpcEndpoint | None, rest: RestEndpoint, rpc_path: str) -> dict[str, Any]:
    """The bindings' endpoints, each in a server span when tracing is on (checked here, once:
    with it off they are served as they are)."""
    if not tracing_enabled():
        return {"rpc": rpc, "rest": rest}
    return {
        "rpc": None if rpc is None else TracedEndpoint(rpc, rpc_path),
        "rest": TracedEndpoint(rest, "/{tenant}/..."),
    }
