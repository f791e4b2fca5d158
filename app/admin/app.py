"""The admin API (issue 52): a FastAPI app of its own, served only on ``EDGE_ADMIN_LISTEN``.

Nothing of it is mounted on the public app (``app.main``), so no admin path answers on the
public port. Its OpenAPI document (``/openapi.json``) and docs (``/docs``) are readable without
a token; every ``/v1`` route needs a bearer admin token (``app.admin.auth``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.admin import ops_routes, tenant_routes
from app.admin.context import AdminContext
from app.admin.problems import EXCEPTION_HANDLERS
from app.admin.status import routes as status_routes
from app.admin.status.session import SessionSigner
from app.admin.tokens import AdminTokens
from app.services import EdgeServices
from app.tenants.service import TenantService

DESCRIPTION = (
    "Register and change tenants, read signed-card previews, list and replay push dead "
    "letters, and read a health summary. Every /v1 route needs `Authorization: Bearer "
    "<admin token>` (create one with `looping-edge admin-tokens create`); errors are RFC 9457 "
    "problem documents."
)


def create_admin_app(services: EdgeServices, *, owns_services: bool = False) -> FastAPI:
    """The admin app over ``services``. ``owns_services``: close them on shutdown (the
    ``looping-edge admin`` process; under ``serve`` the public app owns them)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if owns_services:
                await services.aclose()

    app = FastAPI(
        title="looping-edge admin API",
        version=services.settings.card_version,
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        lifespan=lifespan,
        exception_handlers=EXCEPTION_HANDLERS,
        redirect_slashes=False,
    )
    app.state.admin = AdminContext(
        tenants=TenantService(services.tenant_store),
        tokens=AdminTokens(services.db.storage.admin_tokens),
        cards=services.cards,
        db=services.db,
    )
    app.include_router(tenant_routes.router)
    app.include_router(ops_routes.router)
    # The status page (issue 53): its sessions are signed with a key of this process.
    app.state.status_sessions = SessionSigner()
    app.include_router(status_routes.router)
    return app
