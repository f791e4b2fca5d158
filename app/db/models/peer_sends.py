"""Sends of the ``a2a_send`` tool, one row per tool call (``app.db.peer_sends``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, JsonDoc, Timestamp


class PeerSendRow(Base):
    __tablename__ = "peer_sends"
    __table_args__ = (Index("ix_peer_sends_task", "tenant", "task_id"),)

    tenant: Mapped[str] = mapped_column(String(63), primary_key=True)
    call_key: Mapped[str] = mapped_column(Text, primary_key=True)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    task_id: Mapped[str] = mapped_column(String(64), nullable=False)
    agent: Mapped[str] = mapped_column(String(64), nullable=False)
    url: Mapped[str] = mapped_column(Text, nullable=False)
    message_id: Mapped[str] = mapped_column(String(64), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    peer_task_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    answer: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
