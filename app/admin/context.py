"""What the admin routes work with, built once per admin app and kept on ``app.state``; the
routes reach it through FastAPI dependencies (``admin_context``)."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from app.admin.tokens import AdminTokens
from app.cards.service import CardService
from app.db.engine import Database
from app.tenants.service import TenantService


@dataclass(frozen=True)
class AdminContext:
    tenants: TenantService
    tokens: AdminTokens
    cards: CardService
    db: Database


def admin_context(request: Request) -> AdminContext:
    context: AdminContext = request.app.state.admin
    return context
