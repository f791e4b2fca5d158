"""The sessions store in SQLAlchemy (``app.db.sessions.SessionStore``): SQLite's, and
PostgreSQL's compaction (one transaction: the displaced entries out, the summary in) and
retention purge."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select

from app.db.engine import Database
from app.db.models import TaskRow
from app.db.models.session_entries import SessionEntryRow
from app.db.sessions import ENTRY_RANK, SUMMARY_RANK, SessionEntry


class SharedSessions:
    """``insert``: the dialect's ``insert`` (it has ``on_conflict_do_nothing``)."""

    def __init__(self, db: Database, insert: Callable[[Any], Any]) -> None:
        self.db = db
        self._insert = insert

    def transcript(self, tenant: str, identity: str) -> SharedTranscript:
        return SharedTranscript(self, tenant, identity)

    async def purge(self, *, before: datetime, batch: int) -> int:
        entry = SessionEntryRow
        has_task = (
            select(TaskRow.id)
            .where(TaskRow.tenant == entry.tenant, TaskRow.identity == entry.identity)
            .exists()
        )
        callers = (
            select(entry.tenant, entry.identity)
            .where(~has_task)
            .group_by(entry.tenant, entry.identity)
            .having(func.max(entry.created_at) < before)
            .limit(batch)
        )
        async with self.db.transaction() as session:
            found = (await session.execute(callers)).all()
            by_tenant: dict[str, list[str]] = defaultdict(list)
            for tenant, identity in found:
                by_tenant[tenant].append(identity)
            for tenant, identities in by_tenant.items():
                await session.execute(
                    delete(entry).where(entry.tenant == tenant, entry.identity.in_(identities))
                )
        return len(found)


@dataclass(frozen=True)
class SharedTranscript:
    store: SharedSessions
    tenant: str
    identity: str

    async def entries(self) -> list[SessionEntry]:
        query = (
            select(SessionEntryRow.entry_id, SessionEntryRow.message, SessionEntryRow.tokens)
            .where(SessionEntryRow.tenant == self.tenant, SessionEntryRow.identity == self.identity)
            .order_by(SessionEntryRow.rank, SessionEntryRow.id)
        )
        async with self.store.db.transaction() as session:
            rows = (await session.execute(query)).all()
        return [SessionEntry(r.entry_id, dict(r.message), int(r.tokens)) for r in rows]

    async def append(self, entry: SessionEntry) -> bool:
        return await self._put(entry, ENTRY_RANK, removed=())

    async def replace(self, removed: Sequence[str], summary: SessionEntry | None) -> None:
        if summary is None:
            async with self.store.db.transaction() as session:
                await session.execute(self._delete(removed))
            return
        await self._put(summary, SUMMARY_RANK, removed=removed)

    def _delete(self, removed: Sequence[str]) -> Any:
        return delete(SessionEntryRow).where(
            SessionEntryRow.tenant == self.tenant,
            SessionEntryRow.identity == self.identity,
            SessionEntryRow.entry_id.in_(list(removed)),
        )

    async def _put(self, entry: SessionEntry, rank: int, *, removed: Sequence[str]) -> bool:
        statement = (
            self.store._insert(SessionEntryRow)
            .values(
                tenant=self.tenant,
                identity=self.identity,
                entry_id=entry.id,
                rank=rank,
                message=entry.message,
                tokens=entry.tokens,
            )
            .on_conflict_do_nothing(index_elements=["tenant", "identity", "entry_id"])
            .returning(SessionEntryRow.id)
        )
        async with self.store.db.transaction() as session:
            if removed:
                await session.execute(self._delete(removed))
            inserted = (await session.execute(statement)).first()
        return inserted is not None
