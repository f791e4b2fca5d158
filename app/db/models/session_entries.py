"""The ``llm`` agents' sessions: one transcript per (tenant, identity), an entry per saved
message (``app.db.sessions``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, Integer, SmallInteger, String, Text, UniqueConstraint, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, BigId, JsonDoc, Timestamp


class SessionEntryRow(Base):
    __tablename__ = "session_entries"
    __table_args__ = (
        UniqueConstraint("tenant", "identity", "entry_id"),
        Index("ix_session_entries_order", "tenant", "identity", "rank", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    entry_id: Mapped[str] = mapped_column(String(256), nullable=False)
    # 0: a compaction summary (read first), 1: every other entry (in insertion order).
    rank: Mapped[int] = mapped_column(SmallInteger, nullable=False)
    message: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False)
    tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
