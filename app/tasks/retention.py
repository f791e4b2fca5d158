"""Retention (CONTRACT §6): terminal tasks older than ``task_retention_days`` are purged with
their history, turns, push configs and outbox rows; then the ``llm`` sessions of callers left
with no task and no session entry written within the window (issue 48: a session is the
caller's conversation, kept while any of its tasks is).

"Older" is by ``updated_at`` (the time the task reached its terminal state). Deletion runs in
small batches, each its own short transaction, so a large purge never holds locks for long.
Once a task's turns are gone a very late retry of its message would start a new task; the
retention period is far beyond the gateway's retry window.
"""

from __future__ import annotations

from datetime import timedelta

from app.db.engine import Database
from app.settings import Settings
from app.tasks import states
from app.tasks.wire import utcnow

BATCH = 500


async def purge_expired(db: Database, settings: Settings, *, batch: int = BATCH) -> int:
    """Delete expired terminal tasks, then orphaned sessions; returns how many tasks were
    purged."""
    cutoff = utcnow() - timedelta(days=settings.task_retention_days)
    store = db.storage.task_lifecycle
    purged = 0
    while True:
        deleted = await store.purge(final=states.TERMINAL, before=cutoff, batch=batch)
        purged += deleted
        if deleted < batch:
            break
    while await db.storage.sessions.purge(before=cutoff, batch=batch) == batch:
        pass
    return purged
