"""Negotiations between agents and their turns (``app.db.negotiations``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Index, Integer, String, Text, UniqueConstraint, func, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, BigId, JsonDoc, Timestamp


class NegotiationRow(Base):
    __tablename__ = "negotiations"
    __table_args__ = (
        UniqueConstraint("tenant", "origin_key"),
        # The rival rule (research §3.4): one binding negotiation per key.
        Index(
            "uq_negotiations_binding",
            "tenant",
            "identity",
            "counterparty",
            "intent",
            unique=True,
            postgresql_where=text("binding"),
            sqlite_where=text("binding"),
        ),
        Index("ix_negotiations_task", "tenant", "task_id"),
        Index("ix_negotiations_updated", "tenant", "updated_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    direction: Mapped[str] = mapped_column(String(8), nullable=False)
    counterparty: Mapped[str] = mapped_column(Text, nullable=False)
    intent: Mapped[str] = mapped_column(Text, nullable=False)
    origin_key: Mapped[str] = mapped_column(Text, nullable=False)
    task_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    context_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    task_state: Mapped[str | None] = mapped_column(String(40), nullable=True)
    turns: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    last_offer: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc, nullable=True)
    binding: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    basis: Mapped[str | None] = mapped_column(String(16), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    terms: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc, nullable=True)
    pending: Mapped[str | None] = mapped_column(Text, nullable=True)
    guidance: Mapped[list[Any]] = mapped_column(JsonDoc, nullable=False, default=list)
    objective: Mapped[str | None] = mapped_column(Text, nullable=True)
    detail: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False, default=dict)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )


class NegotiationTurnRow(Base):
    __tablename__ = "negotiation_turns"
    __table_args__ = (
        UniqueConstraint("negotiation_id", "seq"),
        UniqueConstraint("negotiation_id", "message_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    negotiation_id: Mapped[str] = mapped_column(String(64), nullable=False)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    way: Mapped[str] = mapped_column(String(8), nullable=False)
    message_id: Mapped[str] = mapped_column(Text, nullable=False)
    reply_to: Mapped[str | None] = mapped_column(Text, nullable=True)
    message: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )


class PeerPinRow(Base):
    """The signing identity a counterparty edge's card was first verified with."""

    __tablename__ = "peer_pins"

    origin: Mapped[str] = mapped_column(Text, primary_key=True)
    jku: Mapped[str] = mapped_column(Text, nullable=False)
    kid: Mapped[str] = mapped_column(Text, nullable=False)
    pinned_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
