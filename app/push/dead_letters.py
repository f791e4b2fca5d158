"""Dead letters: list them, and re-queue them (``looping-edge push dead|replay``).

A replayed row starts over: ``pending``, zero attempts, due now, a fresh retry budget.
It becomes the head of its task's queue again, so per-task order still holds.

One exception (documented in docs/operations.md, "Dead letters"): a dead row whose task
already had a later push delivered to the same target is skipped as superseded, whatever its
kind; sending it would show the gateway an older state after a newer one (a stale "working"
update, or a question (``INPUT_REQUIRED``, stored as a final push) after the turn that answered it).
Rows of a canceled task are never dead (``cancel_undelivered`` cancels dead letters too), so a
replay cannot push after a cancel.
"""

from __future__ import annotations

from app.db.engine import Database
from app.db.push_outbox import DeadLetter as DeadLetter
from app.db.push_outbox import DeadLetterFilter as DeadLetterFilter
from app.db.push_outbox import ReplayReport as ReplayReport


async def list_dead(
    db: Database,
    *,
    tenant: str | None = None,
    limit: int = 1000,
    filters: DeadLetterFilter | None = None,
) -> list[DeadLetter]:
    return await db.storage.push_outbox.list_dead(tenant=tenant, limit=limit, filters=filters)


async def replay(
    db: Database, *, ids: list[int] | None = None, tenant: str | None = None
) -> ReplayReport:
    """Re-queue the dead rows ``ids`` (or every dead row when ``ids`` is None)."""
    return await db.storage.push_outbox.replay(ids=ids, tenant=tenant)
