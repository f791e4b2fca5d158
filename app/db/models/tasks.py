"""Tasks, their message history, turns (the idempotency key and each identity's mailbox),
actors (one lease per identity) and conversation sessions.

Every key leads with ``tenant`` so the schema can be distributed by tenant (ARCHITECTURE,
Scale-out); every query filters on the caller scope ``(tenant, identity)``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, BigId, JsonDoc, Timestamp
from app.db.states import UNFINISHED_TURNS_SQL


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        PrimaryKeyConstraint("tenant", "id"),
        Index("ix_tasks_scope_created", "tenant", "identity", "created_at", "id"),
        Index("ix_tasks_scope_context", "tenant", "identity", "context_id"),
        Index("ix_tasks_terminal_updated", "state", "updated_at"),
    )

    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    id: Mapped[str] = mapped_column(String(64), nullable=False)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    # Clients may send long context ids (the gateway sends ~60 chars): never a 36-char column.
    context_id: Mapped[str] = mapped_column(Text, nullable=False)
    state: Mapped[str] = mapped_column(String(40), nullable=False)
    status: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False)
    artifacts: Mapped[list[Any]] = mapped_column(JsonDoc, nullable=False, default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JsonDoc, nullable=False, default=dict
    )
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)


class TaskMessageRow(Base):
    __tablename__ = "task_messages"
    __table_args__ = (PrimaryKeyConstraint("tenant", "task_id", "seq"),)

    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    task_id: Mapped[str] = mapped_column(String(64), nullable=False)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    role: Mapped[str] = mapped_column(String(32), nullable=False)
    message: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )


class TurnRow(Base):
    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("tenant", "identity", "message_id"),
        Index("ix_turns_mailbox", "tenant", "identity", "status", "id"),
        # The worker's claim looks for identities with unfinished turns: a partial index keeps
        # that lookup proportional to the work queued, not to every turn ever accepted.
        Index(
            "ix_turns_unfinished",
            "tenant",
            "identity",
            "id",
            postgresql_where=text(f"status IN {UNFINISHED_TURNS_SQL}"),
            sqlite_where=text(f"status IN {UNFINISHED_TURNS_SQL}"),
        ),
    )

    # Global sequence: drained in this order per identity.
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    message_id: Mapped[str] = mapped_column(Text, nullable=False)
    task_id: Mapped[str] = mapped_column(String(64), nullable=False)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    not_before: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )


class ActorRow(Base):
    __tablename__ = "actors"
    __table_args__ = (
        PrimaryKeyConstraint("tenant", "identity"),
        Index("ix_actors_lease_until", "lease_until"),
    )

    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    lease_owner: Mapped[str | None] = mapped_column(Text, nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    fence: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    updated_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    # When the identity last gave its worker slot back (after a turn); NULL: never served.
    # The claim serves the longest-waiting identity first (``app.db.mailbox``).
    last_served_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)


class SessionRow(Base):
    """Per-identity, per-context conversation memory of an agent."""

    __tablename__ = "sessions"
    __table_args__ = (PrimaryKeyConstraint("tenant", "identity", "context_id"),)

    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    context_id: Mapped[str] = mapped_column(Text, nullable=False)
    data: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False, default=dict)
    updated_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
