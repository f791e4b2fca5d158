"""One caller's continuous session: the transcript every task of a (tenant, identity) shares.

Entries have stable ids (``task:<taskId>:user:<messageId>``, ``task:<taskId>:step:<n>``,
``task:<taskId>:reply:final``, ``summary:<n>``) and hold one pydantic-ai ``ModelMessage`` as
JSON. Appending an id that exists is a no-op, so a retried turn never doubles anything. The
database store lives behind the storage seam (``app.db``); ``MemorySessions`` serves tests
and ``agents try``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

JsonDict = dict[str, Any]
CHARS_PER_TOKEN = 4  # the budget's estimate: no tokenizer is assumed for an arbitrary model


@dataclass(frozen=True)
class SessionEntry:
    id: str
    message: JsonDict  # one ``ModelMessage`` in pydantic-ai's JSON form
    tokens: int

    @classmethod
    def of(cls, entry_id: str, message: ModelMessage) -> SessionEntry:
        doc = json.loads(ModelMessagesTypeAdapter.dump_json([message]))[0]
        return cls(entry_id, doc, estimate_tokens(doc))

    def model_message(self) -> ModelMessage:
        return ModelMessagesTypeAdapter.validate_python([self.message])[0]


def estimate_tokens(doc: Any) -> int:
    return max(1, len(json.dumps(doc, separators=(",", ":"))) // CHARS_PER_TOKEN)


class Transcript(Protocol):
    """One caller's session, oldest entry first."""

    async def entries(self) -> list[SessionEntry]: ...

    async def append(self, entry: SessionEntry) -> bool:
        """False when an entry with that id exists (nothing written)."""
        ...

    async def replace(self, removed: Sequence[str], summary: SessionEntry | None) -> None:
        """Compaction: drop ``removed`` and put ``summary`` (if any) first."""
        ...


class SessionStore(Protocol):
    def transcript(self, tenant: str, identity: str) -> Transcript: ...


@dataclass
class MemoryTranscript:
    items: list[SessionEntry] = field(default_factory=list)

    async def entries(self) -> list[SessionEntry]:
        return list(self.items)

    async def append(self, entry: SessionEntry) -> bool:
        if any(e.id == entry.id for e in self.items):
            return False
        self.items.append(entry)
        return True

    async def replace(self, removed: Sequence[str], summary: SessionEntry | None) -> None:
        gone = set(removed)
        kept = [e for e in self.items if e.id not in gone]
        self.items = ([summary] if summary is not None else []) + kept


@dataclass
class MemorySessions:
    """Sessions in this process's memory (lost with it)."""

    by_caller: dict[tuple[str, str], MemoryTranscript] = field(default_factory=dict)

    def transcript(self, tenant: str, identity: str) -> MemoryTranscript:
        return self.by_caller.setdefault((tenant, identity), MemoryTranscript())
