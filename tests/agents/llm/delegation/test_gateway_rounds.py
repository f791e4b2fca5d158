"""A delegating ``llm`` tenant through the real edge and worker on both backends: round 1
delegates three subtasks, round 2 replies; the gateway gets the round's acknowledgement, each
subtask's start and end, and the final reply once. CancelTask while subagents run cancels the
open subtasks and nothing is pushed after it."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from app.db import subtasks as st
from app.db.engine import Database
from app.db.models.subtasks import SubtaskRow
from app.testing.fake_model import FakeModelServer, text
from app.testing.gateway import GatewayKit
from app.testing.push_receiver import CallbackExpectation, push_receiver
from tests.agents.llm.delegation.kit import config, delegate, final, gateway_edge
from tests.polling import poll_until


def _send(text_: str, url: str, token: str) -> dict[str, Any]:
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text_}]}
    push = {"taskPushNotificationConfig": {"url": url, "token": token}}
    return {"message": message, "configuration": push}


async def test_three_subtasks_then_the_reply_reach_the_gateway_once(db_url: str) -> None:
    kit = GatewayKit()
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(
            delegate("a", "b", "c"),
            *[text("result", delay=1.0)] * 3,
            final("The answer."),
        )
        async with push_receiver() as rx, gateway_edge(db_url, kit, rx.base_url, db) as edge:
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant("demo", agent="llm", agent_config=config(fake))
            url, token = rx.endpoint("cfg")
            task_id = (await edge.result("SendMessage", _send("go", url, token)))["task"]["id"]
            done = await rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=20)
            assert done.state == "TASK_STATE_COMPLETED"
            assert done.task["status"]["message"]["parts"][0]["text"] == "The answer."
            await asyncio.sleep(0.3)  # anything pushed twice would arrive by now
            delivered = [p.message_id for p in rx.deliveries]
            assert all(p.error is None and p.claims is not None for p in rx.requests)
    await db.dispose()
    assert delivered.count(f"{task_id}:final") == 1
    assert delivered.count(f"{task_id}:round-1:ack") == 1
    for n in (1, 2, 3):
        for end in ("start", "end"):
            assert delivered.count(f"{task_id}:subtask-{n}:{end}") == 1
    subagents = fake.requests[1:4]
    # Concurrent: each arrived before the first was answered (a second later).
    assert max(r.at for r in subagents) - min(r.at for r in subagents) < 0.9


async def test_cancel_while_subagents_run(db_url: str) -> None:
    kit = GatewayKit()
    db = Database(db_url)
    with FakeModelServer() as fake:
        fake.script(delegate("a", "b"), *[text("late", delay=2.0)] * 2, final("never"))
        async with push_receiver() as rx, gateway_edge(db_url, kit, rx.base_url, db) as edge:
            rx.expect = CallbackExpectation.for_key(edge.services.key, edge.services.cards.jku)
            await edge.add_tenant("demo", agent="llm", agent_config=config(fake))
            url, token = rx.endpoint("cfg")
            task_id = (await edge.result("SendMessage", _send("go", url, token)))["task"]["id"]
            await poll_until(lambda: len(fake.requests) >= 3 or None, timeout=10)
            canceled = await edge.result("CancelTask", {"id": task_id})
            assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
            rows = await _statuses(db, task_id)
            await asyncio.sleep(2.5)  # the subagents' answers arrive and are dropped
            rows_after = await _statuses(db, task_id)
            pushed = [p.message_id or "" for p in rx.requests]
    await db.dispose()
    assert rows == rows_after == [st.CANCELED, st.CANCELED]
    # Nothing written after the cancel was pushed (a push queued before it may still land).
    assert [m for m in pushed if m.endswith((":end", ":final")) or "round-2" in m] == []
    assert len(fake.requests) == 3  # no round 2


async def _statuses(db: Database, task_id: str) -> list[str]:
    query = select(SubtaskRow.status).where(SubtaskRow.task_id == task_id)
    async with db.transaction() as session:
        return list((await session.execute(query.order_by(SubtaskRow.ordinal))).scalars())
