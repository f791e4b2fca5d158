"""Push-notification configs and the transactional push outbox (CONTRACT §7)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, Integer, PrimaryKeyConstraint, String, Text, func, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, BigId, JsonDoc, Timestamp


class PushConfigRow(Base):
    __tablename__ = "push_configs"
    __table_args__ = (
        PrimaryKeyConstraint("tenant", "task_id", "id"),
        Index("ix_push_configs_scope", "tenant", "identity", "task_id"),
    )

    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    task_id: Mapped[str] = mapped_column(String(64), nullable=False)
    id: Mapped[str] = mapped_column(String(128), nullable=False)
    url: Mapped[str] = mapped_column(Text, nullable=False)
    # The notification token is echoed verbatim in X-A2A-Notification-Token; encrypted at rest.
    token_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    auth_scheme: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # A2A §13.2 credentials: encrypted at rest, never returned by the push-config methods.
    auth_credentials_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )


_ON_WIRE = "status = 'pending' AND lease_until IS NOT NULL"


class PushOutboxRow(Base):
    __tablename__ = "push_outbox"
    __table_args__ = (
        # In the claim's order, so its scan stops at the limit (migration 0004).
        Index("ix_push_outbox_due", "status", "next_attempt_at", "id"),
        Index("ix_push_outbox_task", "tenant", "task_id", "id"),
        # Only the rows being sent: the claim's "no row of this task on the wire" test.
        Index(
            "ix_push_outbox_on_wire",
            "tenant",
            "task_id",
            postgresql_where=text(_ON_WIRE),
            sqlite_where=text(_ON_WIRE),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    task_id: Mapped[str] = mapped_column(String(64), nullable=False)
    config_id: Mapped[str] = mapped_column(String(128), nullable=False)
    # "<step key>" for progress, "final" for the terminal push: message id = "<taskId>:<key>".
    message_key: Mapped[str] = mapped_column(Text, nullable=False)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)  # progress | final
    payload: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False)
    # The W3C trace context of the turn that queued the row (issue 53): its attempts join
    # that turn's trace. None: tracing was off, or queued before this column existed.
    trace_context: Mapped[dict[str, str] | None] = mapped_column(JsonDoc, nullable=True)
    # pending | delivered | dead | canceled (app.db.outbox)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="pending")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    # Consecutive 401 answers: a few short retries, then permanent (CONTRACT §7).
    unauthorized_attempts: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default=text("0")
    )
    # The retry budget runs from the first attempt (reset by a replay).
    first_attempt_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    next_attempt_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    lease_owner: Mapped[str | None] = mapped_column(Text, nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    last_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
    delivered_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
