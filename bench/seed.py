"""Bulk loading: edge tasks with ``INSERT … SELECT generate_series`` (1M rows in well under
a minute), and the SDK baseline's tasks through its own ``DatabaseTaskStore``.

Edge task ``n`` of a tenant has id ``md5(tenant:n)`` (``bench.wire.task_id``), one user message
in its history and a completed status with the agent's reply. Tasks ``0 … 999`` belong to the
10 hot identities ``hot-0 … hot-9`` (100 each, so a first ListTasks page is always full);
every later task belongs to one of 5,000 filler identities: growing the table grows other
callers' data, which is what indexes and keyset pagination must make irrelevant.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg

from bench import pg
from bench.config import HOT_IDENTITIES, HOT_TASKS_PER_IDENTITY
from bench.wire import sample_task, task_id

HOT_SET = HOT_IDENTITIES * HOT_TASKS_PER_IDENTITY
FILLERS = 5000
SDK_TASKS_PER_IDENTITY = 20

_TASKS_SQL = """
INSERT INTO tasks (tenant, id, identity, context_id, state, status, artifacts, metadata,
                   created_at, updated_at, version)
SELECT $1, s.id,
       CASE WHEN s.n < $4 THEN 'hot-' || (s.n % $5) ELSE 'fill-' || (s.n % $6) END,
       'ctx-' || s.id, 'TASK_STATE_COMPLETED',
       jsonb_build_object(
         'state', 'TASK_STATE_COMPLETED',
         'timestamp', to_char(s.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
         'message', jsonb_build_object(
           'messageId', s.id || ':final', 'contextId', 'ctx-' || s.id, 'taskId', s.id,
           'role', 'ROLE_AGENT',
           'parts', jsonb_build_array(jsonb_build_object('text', 'echo: hello from the bench')))),
       '[]'::jsonb, '{}'::jsonb, s.at, s.at, 3
FROM (SELECT n, md5($1 || ':' || n)::uuid::text AS id,
             $7::timestamptz + n * interval '1 microsecond' AS at
      FROM generate_series($2::bigint, $3::bigint - 1) AS n) AS s
"""

_MESSAGES_SQL = """
INSERT INTO task_messages (tenant, task_id, seq, role, message, created_at)
SELECT $1, s.id, 1, 'ROLE_USER',
       jsonb_build_object('messageId', 'm-' || s.id, 'contextId', 'ctx-' || s.id,
                          'taskId', s.id, 'role', 'ROLE_USER',
                          'parts', jsonb_build_array(
                            jsonb_build_object('text', 'hello from the bench'))),
       $4::timestamptz + s.n * interval '1 microsecond'
FROM (SELECT n, md5($1 || ':' || n)::uuid::text AS id
      FROM generate_series($2::bigint, $3::bigint - 1) AS n) AS s
"""


def hot_identity(i: int) -> str:
    return f"hot-{i}"


def hot_task(tenant: str, identity_index: int, j: int) -> str:
    """The ``j``-th task (0 … 99) of hot identity ``identity_index``."""
    return task_id(tenant, identity_index + HOT_IDENTITIES * (j % HOT_TASKS_PER_IDENTITY))


async def _load(database: str, tenant: str, start: int, stop: int, batch: int) -> None:
    conn = await asyncpg.connect(pg.dsn_for(database))
    try:
        t0 = await conn.fetchval("SELECT now() - interval '1 hour'")
        for lo in range(start, stop, batch):
            hi = min(stop, lo + batch)
            async with conn.transaction():
                await conn.execute(_TASKS_SQL, tenant, lo, hi, HOT_SET, HOT_IDENTITIES, FILLERS, t0)
                await conn.execute(_MESSAGES_SQL, tenant, lo, hi, t0)
        # Fresh statistics and visibility map, as autovacuum would eventually give.
        await conn.execute("VACUUM ANALYZE tasks")
        await conn.execute("VACUUM ANALYZE task_messages")
    finally:
        await conn.close()


def load_edge_tasks(database: str, tenant: str, start: int, stop: int) -> float:
    """Insert tasks ``start … stop-1`` of ``tenant``; returns the seconds it took."""
    began = time.monotonic()
    asyncio.run(_load(database, tenant, start, stop, batch=250_000))
    return time.monotonic() - began


async def _seed_sdk(db_url: str, identities: int, per_identity: int) -> None:
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks.database_push_notification_config_store import (
        DatabasePushNotificationConfigStore,
    )
    from a2a.server.tasks.database_task_store import DatabaseTaskStore
    from a2a.types import Task
    from google.protobuf.json_format import ParseDict
    from sqlalchemy.ext.asyncio import create_async_engine

    from bench.sdk_server import BenchUser

    engine = create_async_engine(db_url)
    try:
        store = DatabaseTaskStore(engine, create_table=True)
        await store.initialize()
        await DatabasePushNotificationConfigStore(engine, create_table=True).initialize()
        for i in range(identities):
            context = ServerCallContext(user=BenchUser(hot_identity(i)))
            for j in range(per_identity):
                tid = hot_task("sdk", i, j)
                await store.save(ParseDict(sample_task(tid), Task()), context)
    finally:
        await engine.dispose()


def seed_sdk(
    database: str, identities: int = HOT_IDENTITIES, per_identity: int = SDK_TASKS_PER_IDENTITY
) -> None:
    asyncio.run(_seed_sdk(pg.sqlalchemy_url(database), identities, per_identity))
