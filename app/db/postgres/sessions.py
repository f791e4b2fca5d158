"""The sessions store on PostgreSQL (``app.db.sessions.SessionStore``): the reads and appends
of every step on the statement pool (one statement each, no ORM round trips: a durable step
saves after each model response and each tool result); compaction and the retention purge
through the SQLAlchemy store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.db.sessions import ENTRY_RANK, SessionEntry
from app.db.shared.sessions import SharedSessions
from app.db.statement_pool import StatementPool

_ENTRIES_SQL = """
SELECT entry_id, message::text AS message, tokens FROM session_entries
 WHERE tenant = $1 AND identity = $2
 ORDER BY rank, id
"""

_APPEND_SQL = """
INSERT INTO session_entries (tenant, identity, entry_id, rank, message, tokens)
VALUES ($1, $2, $3, $4, $5::jsonb, $6)
ON CONFLICT (tenant, identity, entry_id) DO NOTHING
RETURNING id
"""


class PostgresSessions:
    def __init__(self, pool: StatementPool, shared: SharedSessions) -> None:
        self._pool = pool
        self._shared = shared

    def transcript(self, tenant: str, identity: str) -> PostgresTranscript:
        return PostgresTranscript(self._pool, self._shared, tenant, identity)

    async def purge(self, *, before: datetime, batch: int) -> int:
        return await self._shared.purge(before=before, batch=batch)


@dataclass(frozen=True)
class PostgresTranscript:
    pool: StatementPool
    shared: SharedSessions
    tenant: str
    identity: str

    async def entries(self) -> list[SessionEntry]:
        rows = await self.pool.fetch(_ENTRIES_SQL, self.tenant, self.identity)
        return [SessionEntry(r["entry_id"], json.loads(r["message"]), r["tokens"]) for r in rows]

    async def append(self, entry: SessionEntry) -> bool:
        doc = entry.text
        if doc is None:
            doc = json.dumps(entry.message, separators=(",", ":"))
        args = (self.tenant, self.identity, entry.id, ENTRY_RANK, doc, entry.tokens)
        return await self.pool.fetchval(_APPEND_SQL, *args) is not None

    async def replace(self, removed: Sequence[str], summary: SessionEntry | None) -> None:
        await self.shared.transcript(self.tenant, self.identity).replace(removed, summary)
