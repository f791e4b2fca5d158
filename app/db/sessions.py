"""The sessions store (``llm`` agents): one continuous transcript per (tenant, identity), read
and written only in that caller's scope, so a caller never sees another caller's session.

``SessionStore`` is the role, ``SessionEntry`` its value; ``app.db.shared.sessions`` plays it
on SQLite (and is PostgreSQL's fallback for compaction), ``app.db.postgres.sessions`` on
PostgreSQL, chosen once in ``app.db.storage``. Entries keep their insertion order; a
compaction summary is read first. Appending an id that exists writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

JsonDict = dict[str, Any]
SUMMARY_RANK = 0  # read first
ENTRY_RANK = 1


@dataclass(frozen=True)
class SessionEntry:
    """One saved message: a stable id, the message as JSON, its estimated token count.
    ``text``: the same message already encoded as compact JSON, when the writer has it (the
    store then writes it as is instead of encoding ``message`` again)."""

    id: str
    message: JsonDict
    tokens: int
    text: str | None = field(default=None, compare=False, repr=False)


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

    async def purge(self, *, before: datetime, batch: int) -> int:
        """Retention (CONTRACT §6): delete the sessions of up to ``batch`` callers that have no
        task left (retention purged them all) and no entry written since ``before``; returns
        how many callers' sessions went."""
        ...
