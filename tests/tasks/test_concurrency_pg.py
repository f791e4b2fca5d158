"""Concurrent identical accepts on PostgreSQL, at the database layer, on separate
connections: the UNIQUE constraint decides, never a check-then-insert."""

from __future__ import annotations

import asyncio

import pytest

from app.db.engine import Database
from app.db.models import TaskMessageRow, TaskRow, TurnRow
from app.settings import load_settings
from app.tasks.push_secrets import PushSecrets
from tests.tasks.conftest import GATEWAY, accept, count

pytestmark = pytest.mark.postgres


async def test_fifty_concurrent_accepts_one_task(pg_url: str):
    settings = load_settings(gateway_origins=[GATEWAY])
    secrets = PushSecrets(b"z" * 32)
    # Five engines of up to ten connections each: real concurrent sessions.
    dbs = [Database(pg_url, pool_size=5) for _ in range(5)]
    try:
        results = await asyncio.gather(
            *(
                accept(dbs[i % 5], settings, message_id="same", require_push=True, secrets=secrets)
                for i in range(50)
            )
        )
        assert len({r.task.id for r in results}) == 1
        assert sum(r.created for r in results) == 1
        assert await count(dbs[0], TaskRow) == 1
        assert await count(dbs[0], TurnRow) == 1
        assert await count(dbs[0], TaskMessageRow) == 1
    finally:
        for db in dbs:
            await db.dispose()
