"""The per-task event log that streams are read from (A2A 1.0 §3.1.2, §3.1.6).

One row per change of a task's status or artifacts, written by database triggers on ``tasks``
in the very transaction (and under the same fence) as the change itself
(``migrations/versions/0008_task_events.py``), so no writer can forget one and a rolled-back
write leaves none. ``id`` is one sequence for all tasks; per task it grows in commit order,
because every write of a task holds that task's row lock while its trigger takes the next id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, BigId, JsonDoc, Timestamp


class TaskEventRow(Base):
    __tablename__ = "task_events"
    __table_args__ = (Index("ix_task_events_task", "tenant", "task_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    task_id: Mapped[str] = mapped_column(String(64), nullable=False)
    # The task's status after the change (protobuf JSON TaskStatus).
    status: Mapped[dict[str, Any]] = mapped_column(JsonDoc, nullable=False)
    # The task's artifacts after the change, only when they changed (else NULL).
    artifacts: Mapped[list[Any] | None] = mapped_column(JsonDoc, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
