"""The subtasks store on both backends: a round's rows once (idempotent on task and round),
ordinals across rounds, the guarded transitions, cancel of the open ones, callers apart."""

from __future__ import annotations

import asyncio

from app.db import subtasks as st
from app.db.engine import Database
from app.db.storage import open_storage
from app.db.subtasks import NewSubtask, SubtaskScope

SCOPE = SubtaskScope("acme", "alice", "t-1")


def _three(tag: str = "") -> list[NewSubtask]:
    return [NewSubtask("research", f"q{i}{tag}", {"topic": f"t{i}"}) for i in range(1, 4)]


async def test_a_round_is_created_once_and_ordinals_go_on(database: Database) -> None:
    store = open_storage(database).subtasks
    first = await store.create_round(SCOPE, 1, _three())
    again = await store.create_round(SCOPE, 1, _three("other"))
    assert [s.ordinal for s in first] == [1, 2, 3]
    assert again == first  # the second call's subtasks are ignored
    assert {s.status for s in first} == {st.PENDING}
    assert first[0].params == {"topic": "t1"} and first[0].prompt == "q1"
    second = await store.create_round(SCOPE, 2, [NewSubtask("research", "q4")])
    assert [(s.round, s.ordinal) for s in second] == [(2, 4)]
    assert await store.last_round(SCOPE) == 2
    assert await store.round(SCOPE, 3) == []


async def test_racing_creators_end_with_one_set_of_rows(database: Database) -> None:
    store = open_storage(database).subtasks
    done = await asyncio.gather(
        store.create_round(SCOPE, 1, _three("a")),
        store.create_round(SCOPE, 1, _three("b")),
        return_exceptions=True,
    )
    rows = await store.round(SCOPE, 1)
    assert len(rows) == 3 and len({r.prompt[-1] for r in rows}) == 1
    assert any(not isinstance(d, BaseException) and d == rows for d in done)


async def test_transitions_are_guarded(database: Database) -> None:
    store = open_storage(database).subtasks
    await store.create_round(SCOPE, 1, _three())
    assert await store.complete(SCOPE, 1, "early") is False  # pending -> completed: refused
    assert await store.start(SCOPE, 1, "f" * 64) is True
    assert await store.start(SCOPE, 1, "f" * 64) is False  # running -> running: refused
    assert await store.save_steps(SCOPE, 1, [{"kind": "request"}]) is True
    assert await store.complete(SCOPE, 1, "   ") is False  # a result must carry text
    assert await store.complete(SCOPE, 1, "done") is True
    assert await store.fail(SCOPE, 1, "late") is False  # completed is final
    assert await store.save_steps(SCOPE, 1, []) is False  # only while running
    assert await store.skip(SCOPE, 2) is True
    assert await store.start(SCOPE, 2, "f" * 64) is False  # skipped is final
    assert await store.fail(SCOPE, 3, "no recipe") is True  # pending -> failed
    rows = {s.ordinal: s for s in await store.round(SCOPE, 1)}
    assert rows[1].status == st.COMPLETED and rows[1].result == "done"
    assert rows[1].fingerprint == "f" * 64 and rows[1].steps == [{"kind": "request"}]
    assert rows[2].status == st.SKIPPED and rows[3].status == st.FAILED


async def test_cancel_takes_only_the_open_ones(database: Database) -> None:
    store = open_storage(database).subtasks
    await store.create_round(SCOPE, 1, _three())
    await store.start(SCOPE, 1, "a" * 64)
    await store.start(SCOPE, 2, "b" * 64)
    await store.complete(SCOPE, 2, "done")
    assert await store.cancel_open(SCOPE) == 2  # 1 running, 3 pending
    rows = {s.ordinal: s.status for s in await store.round(SCOPE, 1)}
    assert rows == {1: st.CANCELED, 2: st.COMPLETED, 3: st.CANCELED}
    assert await store.complete(SCOPE, 1, "too late") is False


async def test_callers_are_apart(database: Database) -> None:
    store = open_storage(database).subtasks
    await store.create_round(SCOPE, 1, _three())
    other = SubtaskScope("acme", "bob", "t-1")
    assert await store.round(other, 1) == []
    assert await store.start(other, 1, "x" * 64) is False
    assert await store.cancel_open(other) == 0
    assert [s.ordinal for s in await store.create_round(other, 1, _three())] == [1, 2, 3]
