"""The peer sends store on both backends (issue 54): an intent is written once (a second run
finds the first), it settles once (acked or refused, only from intent), tenants apart."""

from __future__ import annotations

import asyncio

from app.db import peer_sends as ps
from app.db.engine import Database
from app.db.peer_sends import NewPeerSend
from app.db.storage import open_storage


def _new(message_id: str = "m-1", tenant: str = "acme") -> NewPeerSend:
    return NewPeerSend(
        tenant=tenant,
        call_key="t-1:call-1",
        identity="alice",
        task_id="t-1",
        agent="helper",
        url="https://b.example",
        message_id=message_id,
    )


async def test_an_intent_is_written_once_and_the_first_wins(database: Database) -> None:
    store = open_storage(database).peer_sends
    assert await store.find("acme", "t-1:call-1") is None
    first = await store.record_intent(_new("m-1"))
    again = await store.record_intent(_new("m-2"))
    assert first.status == ps.INTENT and first.message_id == "m-1"
    assert again == first  # a re-run finds the first run's intent, not its own
    assert await store.find("acme", "t-1:call-1") == first


async def test_racing_intents_leave_one_row(database: Database) -> None:
    store = open_storage(database).peer_sends
    held = await asyncio.gather(*(store.record_intent(_new(f"m-{i}")) for i in range(4)))
    assert len({h.message_id for h in held}) == 1


async def test_an_intent_settles_once(database: Database) -> None:
    store = open_storage(database).peer_sends
    await store.record_intent(_new())
    assert await store.acknowledge("acme", "t-1:call-1", peer_task_id="p-9", answer=None)
    assert not await store.acknowledge("acme", "t-1:call-1", peer_task_id="p-10", answer=None)
    assert not await store.refuse("acme", "t-1:call-1", {"ok": False})
    found = await store.find("acme", "t-1:call-1")
    assert found is not None and found.status == ps.ACKED and found.peer_task_id == "p-9"


async def test_a_refusal_keeps_its_answer_and_tenants_are_apart(database: Database) -> None:
    store = open_storage(database).peer_sends
    await store.record_intent(_new())
    await store.record_intent(_new(tenant="other"))
    assert await store.refuse("acme", "t-1:call-1", {"ok": False, "error": "PEER_ERROR"})
    mine = await store.find("acme", "t-1:call-1")
    theirs = await store.find("other", "t-1:call-1")
    assert mine is not None and mine.status == ps.REFUSED
    assert mine.answer == {"ok": False, "error": "PEER_ERROR"}
    assert theirs is not None and theirs.status == ps.INTENT


async def test_a_message_answer_is_kept_with_the_ack(database: Database) -> None:
    store = open_storage(database).peer_sends
    await store.record_intent(_new())
    answer = {"ok": True, "state": "MESSAGE", "text": "hi"}
    assert await store.acknowledge("acme", "t-1:call-1", peer_task_id=None, answer=answer)
    found = await store.find("acme", "t-1:call-1")
    assert found is not None and found.answer == answer and found.peer_task_id is None


async def test_a_peer_task_is_known_as_sent_by_its_caller_only(database: Database) -> None:
    store = open_storage(database).peer_sends
    await store.record_intent(_new())
    assert not await store.sent("acme", "alice", "https://b.example", "p-1")  # not yet acked
    await store.acknowledge("acme", "t-1:call-1", peer_task_id="p-1", answer=None)
    assert await store.sent("acme", "alice", "https://b.example", "p-1")
    assert not await store.sent("acme", "bob", "https://b.example", "p-1")  # another caller
    assert not await store.sent("other", "alice", "https://b.example", "p-1")  # another tenant
    assert not await store.sent("acme", "alice", "https://c.example", "p-1")  # another peer
    assert not await store.sent("acme", "alice", "https://b.example", "p-2")
