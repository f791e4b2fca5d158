"""Scoped reads and small writes on tasks and their history.

Every function takes the caller scope ``(tenant, identity)`` (ARCHITECTURE, Storage): there is
no unscoped read path, so another caller's task is simply not found.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import TaskMessageRow, TaskRow
from app.security.caller import CallerScope


def insert_for(session: AsyncSession, table: Any) -> postgresql.Insert | sqlite.Insert:
    """A dialect ``INSERT`` that supports ``on_conflict_do_*`` on both backends."""
    if session.get_bind().dialect.name == "sqlite":
        return sqlite.insert(table)
    return postgresql.insert(table)


def is_sqlite(session: AsyncSession) -> bool:
    return session.get_bind().dialect.name == "sqlite"


async def load_task(
    session: AsyncSession, scope: CallerScope, task_id: str, *, for_update: bool = False
) -> TaskRow | None:
    """``for_update``: lock the row for the transaction (PostgreSQL; SQLite's one writer
    serialises anyway), so a write racing this one is seen once it committed."""
    query = select(TaskRow).where(
        TaskRow.tenant == scope.tenant,
        TaskRow.identity == scope.identity,
        TaskRow.id == task_id,
    )
    if for_update:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()


async def load_history(
    session: AsyncSession, scope: CallerScope, task_id: str, limit: int | None
) -> list[dict[str, Any]]:
    """The last ``limit`` messages (all when ``None``), oldest first.

    Only call after the task was found in ``scope``: ``task_messages`` is keyed by the task.
    """
    if limit is not None and limit <= 0:
        return []
    query = (
        select(TaskMessageRow.message)
        .where(TaskMessageRow.tenant == scope.tenant, TaskMessageRow.task_id == task_id)
        .order_by(TaskMessageRow.seq.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    rows = (await session.execute(query)).scalars().all()
    return [dict(m) for m in reversed(rows)]


async def next_history_seq(session: AsyncSession, scope: CallerScope, task_id: str) -> int:
    last = (
        await session.execute(
            select(func.max(TaskMessageRow.seq)).where(
                TaskMessageRow.tenant == scope.tenant, TaskMessageRow.task_id == task_id
            )
        )
    ).scalar_one_or_none()
    return int(last or 0) + 1


async def append_history(
    session: AsyncSession,
    scope: CallerScope,
    task_id: str,
    *,
    role: str,
    message: dict[str, Any],
) -> int:
    """Append one message; call only inside the transaction that won the task's CAS, so no
    other writer appends to the same task concurrently (the PK backs this up)."""
    seq = await next_history_seq(session, scope, task_id)
    session.add(
        TaskMessageRow(tenant=scope.tenant, task_id=task_id, seq=seq, role=role, message=message)
    )
    await session.flush()
    return seq
