"""The sessions store: one continuous transcript per (tenant, identity), read and written only
in that caller's scope, so a caller never sees another caller's session.

``SessionStore`` is the role; ``SqlSessions`` plays it on PostgreSQL and SQLite (they differ
only in the dialect of the "insert unless the id exists" statement, chosen once from the
database). Entries keep their insertion order; a compaction summary is read first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.db.engine import Database
from app.db.models.session_entries import SessionEntryRow

JsonDict = dict[str, Any]
SUMMARY_RANK = 0
ENTRY_RANK = 1


@dataclass(frozen=True)
class SessionEntry:
    """One saved message: a stable id, the message as JSON, its estimated token count."""

    id: str
    message: JsonDict
    tokens: int


class Transcript(Protocol):
    """One caller's session, oldest entry first."""

    async def entries(self) -> list[SessionEntry]: ...

    async def append(self, entry: SessionEntry) -> bool:
        """False when an entry with that id exists (nothing written)."""
        ...

    async def replace(self, removed: Sequence[str], summary: SessionEntry | None) -> None:
        """Compaction: drop ``removed`` and put ``summary`` (if any) first, in one write."""
        ...


class SessionStore(Protocol):
    def transcript(self, tenant: str, identity: str) -> Transcript: ...


class SqlSessions:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._insert = pg_insert if db.dialect == "postgresql" else sqlite_insert

    def transcript(self, tenant: str, identity: str) -> SqlTranscript:
        return SqlTranscript(self, tenant, identity)


@dataclass(frozen=True)
class SqlTranscript:
    store: SqlSessions
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
