"""An in-process edge with its admin app beside it, and admin tokens to call it with."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from app.admin.app import create_admin_app
from app.admin.tokens import SCOPES, AdminTokens
from app.testing.edge import EdgeHarness, edge_harness

ADMIN_URL = "http://admin.test"


@dataclass
class AdminRig:
    edge: EdgeHarness
    app: FastAPI
    client: httpx.AsyncClient
    tokens: AdminTokens

    async def token(self, *scopes: str, name: str | None = None) -> str:
        granted = scopes or SCOPES
        issued = await self.tokens.create(name or f"t{len(await self.tokens.list())}", granted)
        return issued.token

    async def headers(self, *scopes: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {await self.token(*scopes)}"}


@pytest.fixture
async def admin(db_url: str) -> AsyncIterator[AdminRig]:
    async with edge_harness(db_url, tenant_refresh_seconds=0.2) as edge:
        app = create_admin_app(edge.services)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=ADMIN_URL) as client:
            yield AdminRig(edge, app, client, AdminTokens(edge.services.db.storage.admin_tokens))
