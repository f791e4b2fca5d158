"""The admin API's bearer tokens (issue 52): only a hash of each token is stored."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, JsonDoc, Timestamp


class AdminTokenRow(Base):
    __tablename__ = "admin_tokens"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    # Lowercase hex SHA-256 of the token (app.admin.tokens says why a plain hash suffices).
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    scopes: Mapped[list[str]] = mapped_column(JsonDoc, nullable=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
    last_used_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
