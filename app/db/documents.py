"""The stored task documents: protobuf-JSON task statuses and tasks built from their rows.

Both backends store and serve these shapes (the PostgreSQL reads assemble the same document
in SQL), and the state machine writes them, so they live below both: the times, the status
document and the task document of one row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from app.db.models import TaskRow


@dataclass(frozen=True, slots=True)
class RawJson:
    """A result that is already JSON text (built by the database): spliced into the response
    as is, so a stored document is not decoded and re-encoded on every read."""

    text: str


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def timestamp_json(value: datetime) -> str:
    """RFC 3339 in UTC with ``Z``, as protobuf-JSON encodes ``google.protobuf.Timestamp``."""
    stamp = Timestamp()
    stamp.FromDatetime(as_utc(value))
    text: str = stamp.ToJsonString()
    return text


def status_doc(
    state: str, at: datetime, message: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {"state": state, "timestamp": timestamp_json(at)}
    if message is not None:
        doc["message"] = dict(message)
    return doc


def task_doc(
    row: TaskRow,
    *,
    history: list[dict[str, Any]] | None = None,
    include_artifacts: bool = True,
    include_metadata: bool = True,
) -> dict[str, Any]:
    """One task row (plus the history slice the caller asked for) as a protobuf-JSON Task.

    Validated on write, not re-encoded on read: every stored piece is protobuf-JSON the edge
    produced itself (the user message through ``parse_send_message``, agent parts and
    artifacts through ``normalise``, statuses through ``status_doc``), so a read needs no
    ``a2a.types.Task`` round trip. Empty repeated/map fields are left out, as
    protobuf-JSON leaves them out.
    """
    doc: dict[str, Any] = {"id": row.id, "contextId": row.context_id, "status": dict(row.status)}
    if include_artifacts and row.artifacts:
        doc["artifacts"] = list(row.artifacts)
    if history:
        doc["history"] = history
    if include_metadata and row.metadata_:
        doc["metadata"] = dict(row.metadata_)
    return doc
