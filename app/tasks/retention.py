"""Retention (CONTRACT §6): terminal tasks older than ``task_retention_days`` are purged with
their history, turns, push configs and outbox rows.

"Older" is by ``updated_at`` (the time the task reached its terminal state). Deletion runs in
small batches, each its own short transaction, so a large purge never holds locks for long.
Once a task's turns are gone a very late retry of its message would start a new task; the
retention period is far beyond the gateway's retry window.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from sqlalchemy import delete, select

from app.db.engine import Database
from app.db.models import PushConfigRow, PushOutboxRow, TaskMessageRow, TaskRow, TurnRow
from app.settings import Settings
from app.tasks import states
from app.tasks.wire import utcnow

BATCH = 500


async def purge_expired(db: Database, settings: Settings, *, batch: int = BATCH) -> int:
    """Delete expired terminal tasks; returns how many tasks were purged."""
    cutoff = utcnow() - timedelta(days=settings.task_retention_days)
    purged = 0
    while True:
        async with db.transaction() as session:
            rows = (
                await session.execute(
                    select(TaskRow.tenant, TaskRow.identity, TaskRow.id)
                    .where(TaskRow.state.in_(states.TERMINAL), TaskRow.updated_at < cutoff)
                    .limit(batch)
                )
            ).all()
            by_tenant: dict[str, list[str]] = defaultdict(list)
            identities: dict[str, set[str]] = defaultdict(set)
            for tenant, identity, task_id in rows:
                by_tenant[tenant].append(task_id)
                identities[tenant].add(identity)
            for tenant, ids in by_tenant.items():
                for table in (TaskMessageRow, PushOutboxRow, PushConfigRow):
                    await session.execute(
                        delete(table).where(table.tenant == tenant, table.task_id.in_(ids))
                    )
                # No index of turns leads with the task (each would cost every turn pipeline
                # write; bench/ROUNDS.md, round thirty-six): the tasks' identities bound the
                # delete to their turns through the mailbox index, not the tenant's table.
                await session.execute(
                    delete(TurnRow).where(
                        TurnRow.tenant == tenant,
                        TurnRow.identity.in_(identities[tenant]),
                        TurnRow.task_id.in_(ids),
                    )
                )
                await session.execute(
                    delete(TaskRow).where(
                        TaskRow.tenant == tenant,
                        TaskRow.id.in_(ids),
                        TaskRow.state.in_(states.TERMINAL),
                    )
                )
        purged += len(rows)
        if len(rows) < batch:
            return purged
