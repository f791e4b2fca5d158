"""Helpers for the worker tests: sending scripted turns, polling the database with a deadline."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import select

from app.db.engine import Database
from app.db.mailbox import Lease, QueuedTurn
from app.db.models import ActorRow, PushOutboxRow, TaskMessageRow, TaskRow, TurnRow
from app.testing.edge import EdgeHarness, edge_harness
from tests.polling import poll_until

T = TypeVar("T")

PUSH_URL = "https://gateway.test/push"
LEASE_SECONDS = 30.0


@asynccontextmanager
async def scripted_edge(url: str) -> AsyncIterator[EdgeHarness]:
    """The real app over ``url`` (already migrated) with tenant ``demo`` on the scripted agent."""
    async with edge_harness(url) as edge:
        await edge.add_tenant("demo", agent="scripted")
        yield edge


async def claim_head(
    db: Database, owner: str = "w1", *, begin: bool = False
) -> tuple[Lease, QueuedTurn]:
    """One identity claimed by ``owner`` and its head turn, that attempt begun if ``begin``."""
    (lease,) = await db.storage.mailbox.claim(owner=owner, limit=1, lease_seconds=LEASE_SECONDS)
    turn = await db.storage.mailbox.head_turn(lease)
    assert turn is not None
    if begin:
        assert await db.storage.mailbox.begin_attempt(lease, turn)
    return lease, turn


def identity(key: str) -> dict[str, Any]:
    return {"key": key, "name": key, "kind": "user"}


async def send(
    edge: EdgeHarness,
    text: str,
    *,
    message_id: str,
    who: str = "user-1",
    task_id: str | None = None,
    push_url: str | None = PUSH_URL,
    tenant: str | None = None,
) -> str:
    """SendMessage with one text part; returns the task id."""
    message: dict[str, Any] = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id is not None:
        message["taskId"] = task_id
    # Never block on the turn (A2A returnImmediately): the tests watch the database instead.
    configuration: dict[str, Any] = {"returnImmediately": True}
    if push_url is not None:
        configuration["taskPushNotificationConfig"] = {"url": push_url, "token": "push-token"}
    params: dict[str, Any] = {"message": message, "configuration": configuration}
    result = await edge.result("SendMessage", params, identity=identity(who), tenant=tenant)
    return str(result["task"]["id"])


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 20.0, interval: float = 0.05
) -> T:
    """``tests.polling.poll_until`` under the name the worker tests use."""
    return await poll_until(probe, timeout, interval=interval)


async def task_row(db: Database, task_id: str) -> TaskRow:
    async with db.transaction() as s:
        row = (await s.execute(select(TaskRow).where(TaskRow.id == task_id))).scalar_one()
        return row


async def task_state(db: Database, task_id: str) -> str:
    return (await task_row(db, task_id)).state


def status_text(row: TaskRow) -> str | None:
    message = row.status.get("message") or {}
    parts = message.get("parts") or [{}]
    text = parts[0].get("text")
    return str(text) if text is not None else None


async def reached(db: Database, task_id: str, *states: str) -> TaskRow | None:
    """The task once it is in one of ``states`` *and* its turns are settled (the worker writes
    the task's outcome first, then marks the turn, in two transactions)."""
    row = await task_row(db, task_id)
    if row.state not in states:
        return None
    open_turns = [t for t in await turns(db, task_id) if t.status in ("queued", "running")]
    return None if open_turns else row


async def history(db: Database, task_id: str) -> list[dict[str, Any]]:
    async with db.transaction() as s:
        rows = await s.execute(
            select(TaskMessageRow.message)
            .where(TaskMessageRow.task_id == task_id)
            .order_by(TaskMessageRow.seq)
        )
        return [dict(m) for m in rows.scalars().all()]


async def turns(db: Database, task_id: str | None = None) -> list[TurnRow]:
    async with db.transaction() as s:
        query = select(TurnRow).order_by(TurnRow.id)
        if task_id is not None:
            query = query.where(TurnRow.task_id == task_id)
        return list((await s.execute(query)).scalars().all())


async def outbox(db: Database, task_id: str | None = None) -> list[PushOutboxRow]:
    async with db.transaction() as s:
        query = select(PushOutboxRow).order_by(PushOutboxRow.id)
        if task_id is not None:
            query = query.where(PushOutboxRow.task_id == task_id)
        return list((await s.execute(query)).scalars().all())


async def actor(db: Database, who: str, tenant: str = "demo") -> ActorRow:
    async with db.transaction() as s:
        return (
            await s.execute(
                select(ActorRow).where(ActorRow.tenant == tenant, ActorRow.identity == who)
            )
        ).scalar_one()


async def settled_turn(db: Database, task_id: str, *statuses: str) -> TurnRow | None:
    rows = await turns(db, task_id)
    return rows[-1] if rows and all(r.status in statuses for r in rows) else None
