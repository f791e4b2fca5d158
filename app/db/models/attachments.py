"""The attachments of accepted turns (issue 55): bytes and a document's text, kept with the
turn that carried them; the task history holds only their descriptions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, LargeBinary, PrimaryKeyConstraint, String, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, Timestamp


class TurnAttachmentRow(Base):
    """Keyed by task first: the agent reads a task's, retention purges a task's."""

    __tablename__ = "turn_attachments"
    __table_args__ = (PrimaryKeyConstraint("tenant", "task_id", "turn_id", "ordinal"),)

    tenant: Mapped[str] = mapped_column(String(63), nullable=False)
    task_id: Mapped[str] = mapped_column(String(64), nullable=False)
    turn_id: Mapped[int] = mapped_column(BigInteger, nullable=False)  # turns.id
    ordinal: Mapped[int] = mapped_column(Integer, nullable=False)  # the part's position
    identity: Mapped[str] = mapped_column(Text, nullable=False)
    message_id: Mapped[str] = mapped_column(Text, nullable=False)  # the client's messageId
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    media_type: Mapped[str] = mapped_column(String(64), nullable=False)
    filename: Mapped[str] = mapped_column(Text, nullable=False)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    text: Mapped[str | None] = mapped_column(Text, nullable=True)
    pages: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False, server_default=func.now()
    )
