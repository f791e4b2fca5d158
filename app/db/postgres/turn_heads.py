"""The head of an identity's mailbox in SQL: its lowest unfinished turn, and whether it is due.

One fragment for every PostgreSQL statement that reads it: the drain's own head read, the
claim (``mailbox.claim_with_heads``), settling a turn (``mailbox.settle_and_head``) and the
outcome write that settles one (``app.db.postgres.turn_writes``). The rows it yields have the
columns of ``HEAD_COLUMNS_SQL``; ``queued_turn`` reads them (a NULL ``id``:
no head).
"""

from __future__ import annotations

import json
from typing import Any

from app.db.states import UNFINISHED_TURNS_SQL
from app.db.turns import QueuedTurn

HEAD_COLUMNS_SQL = "h.id, h.task_id, h.message_id, h.kind, h.status, h.attempts, h.payload, h.due"


def head_join_sql(*, tenant: str, identity: str, extra: str = "") -> str:
    """``LEFT JOIN LATERAL (…) AS h ON true`` over the head turn of ``(tenant, identity)``.

    The arguments are SQL text the caller writes as constants (bind parameters such as
    ``$1`` or columns such as ``c.tenant``), never values; ``extra`` adds a condition (a
    settled turn left out by id: a statement's snapshot predates its own updates). The
    unfinished statuses are written as text, not bound, so that even a generic plan reads the
    first entry of ``ix_turns_unfinished`` (``states.UNFINISHED_TURNS_SQL``).
    """
    condition = f" AND {extra}" if extra else ""
    return f"""
  LEFT JOIN LATERAL (
    SELECT id, task_id, message_id, kind, status, attempts, payload::text AS payload,
           (not_before IS NULL OR not_before <= now()) AS due
      FROM turns
     WHERE tenant = {tenant} AND identity = {identity}
       AND status IN {UNFINISHED_TURNS_SQL}{condition}
     ORDER BY id
     LIMIT 1) AS h ON true
"""  # noqa: S608 (constant fragments only)


def queued_turn(row: Any) -> QueuedTurn | None:
    """A head row (``turn_heads.HEAD_COLUMNS_SQL``) as a turn, or None when there is no
    head or it is not yet due."""
    if row is None or row["id"] is None or not row["due"]:
        return None
    return QueuedTurn(
        id=row["id"],
        task_id=row["task_id"],
        message_id=row["message_id"],
        kind=row["kind"],
        status=row["status"],
        attempts=row["attempts"],
        payload=json.loads(row["payload"]) if row["payload"] else {},
    )
