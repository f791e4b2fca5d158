"""The tenant registry table (CONTRACT §8)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Integer, String, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, JsonDoc, Timestamp


class TenantRow(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(63), primary_key=True)
    manifest: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False)
    agent_kind: Mapped[str] = mapped_column(String(64), nullable=False, default="echo")
    agent_config: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False, default=dict)
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    require_push_config: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    dedupe_message_ids: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    # "gateway" or "open" (app.tenants.profile); rows from before the column are gateway.
    profile: Mapped[str] = mapped_column(
        String(16), nullable=False, default="gateway", server_default="gateway"
    )
    # Bumped on every change: the card cache and the running edges key on it.
    revision: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
