"""One caller's continuous session: the transcript every task of a (tenant, identity) shares.

Entries have stable ids (``task:<taskId>:user:<messageId>``, ``task:<taskId>:step:<n>``,
``task:<taskId>:reply:final``, ``summary:<n>``) and hold one pydantic-ai ``ModelMessage`` as
JSON (``entry_of``/``message_of``); a user message's images are kept as their descriptions,
never their bytes (``app.agents.llm.attachments.UserTurn``). Appending an id that exists is a
no-op, so a retried turn never doubles anything. The store's role and value type live behind
the storage seam (``app.db.sessions``); ``MemorySessions`` serves tests and ``agents try``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from app.db.sessions import SessionEntry, SessionStore, Transcript

__all__ = [
    "MemorySessions",
    "MemoryTranscript",
    "SessionEntry",
    "SessionStore",
    "Transcript",
    "entry_of",
    "estimate_tokens",
    "message_of",
]

CHARS_PER_TOKEN = 4  # the budget's estimate: no tokenizer is assumed for an arbitrary model
_ONE_MESSAGE: TypeAdapter[ModelMessage] = TypeAdapter(ModelMessage)


def entry_of(entry_id: str, message: ModelMessage) -> SessionEntry:
    """The message encoded once: its JSON text is stored as is and sized for the budget."""
    text = _ONE_MESSAGE.dump_json(message).decode()
    return SessionEntry(entry_id, json.loads(text), _tokens_of(text), text=text)


def message_of(entry: SessionEntry) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_python([entry.message])[0]


def estimate_tokens(doc: Any) -> int:
    return _tokens_of(json.dumps(doc, separators=(",", ":"), ensure_ascii=False))


def _tokens_of(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


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

    async def purge(self, *, before: datetime, batch: int) -> int:
        return 0  # no tasks here to outlive: these sessions end with the process
