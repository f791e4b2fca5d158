"""The sessions store on both backends: insertion order, append of an existing id a no-op,
compaction's summary first, and a caller never sees another caller's session."""

from __future__ import annotations

from app.db.engine import Database
from app.db.sessions import SessionEntry
from app.db.storage import open_storage


def _entry(entry_id: str, text: str = "x") -> SessionEntry:
    return SessionEntry(entry_id, {"kind": "request", "parts": [{"content": text}]}, 3)


async def test_entries_keep_their_order_and_an_existing_id_is_a_no_op(database: Database) -> None:
    transcript = open_storage(database).sessions.transcript("acme", "alice")
    assert await transcript.append(_entry("task:t1:user:m1", "hi")) is True
    assert await transcript.append(_entry("task:t1:step:1")) is True
    assert await transcript.append(_entry("task:t1:user:m1", "again")) is False
    entries = await transcript.entries()
    assert [e.id for e in entries] == ["task:t1:user:m1", "task:t1:step:1"]
    assert entries[0].message["parts"][0]["content"] == "hi" and entries[0].tokens == 3


async def test_callers_are_apart(database: Database) -> None:
    store = open_storage(database).sessions
    await store.transcript("acme", "alice").append(_entry("task:t1:user:m1"))
    assert await store.transcript("acme", "bob").entries() == []
    assert await store.transcript("other", "alice").entries() == []
    # The same entry id in another caller's session is that caller's own.
    assert await store.transcript("acme", "bob").append(_entry("task:t1:user:m1")) is True


async def test_compaction_puts_the_summary_first(database: Database) -> None:
    transcript = open_storage(database).sessions.transcript("acme", "alice")
    for entry_id in ("task:a:user:1", "task:a:reply:final", "task:b:user:2"):
        await transcript.append(_entry(entry_id))
    await transcript.replace(["task:a:user:1", "task:a:reply:final"], _entry("summary:1"))
    assert [e.id for e in await transcript.entries()] == ["summary:1", "task:b:user:2"]
    await transcript.replace(["summary:1"], None)
    assert [e.id for e in await transcript.entries()] == ["task:b:user:2"]
