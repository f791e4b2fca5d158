"""Benchmark 5's worker-claim rows: the latency of the statement a turn worker sends on every
wake-up (``mailbox.claim_with_heads``: claim identities whose head turn is due, read each
one's head) with the sizes' finished turns stored.

Each growth database gets, beside its tasks, one finished turn per task (as an accept and a
run leave it, same identity) and an actor row for each of the seed's 5,010 identities; once
its edge has stopped (its in-process worker would run them), the work a claim finds: two
queued turns for each hot identity. The claim runs on a connection set up as the edge's
statement pool (generic plans, ``app.db.engine``) inside a transaction that is rolled back,
so every claim finds the same queue; the sizes take turns, a batch of claims each per round.
It guards against the claim walking every stored turn, as it did while its statuses were a
bind parameter, which a generic plan cannot match to the partial index ``ix_turns_unfinished``.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import asyncpg
from asyncpg.prepared_stmt import PreparedStatement

from app.db.engine import Database
from app.db.postgres.mailbox import _CLAIM_WITH_HEADS_SQL as CLAIM_WITH_HEADS_SQL
from bench import pg
from bench.config import HOT_IDENTITIES
from bench.seed import FILLERS, HOT_SET

_TURNS_SQL = """
INSERT INTO turns (tenant, identity, message_id, task_id, kind, status, attempts,
                   content_hash, payload, created_at, updated_at)
SELECT $1,
       CASE WHEN s.n < $4 THEN 'hot-' || (s.n % $5) ELSE 'fill-' || (s.n % $6) END,
       'm-' || s.id, s.id, 'start', 'done', 1, md5(s.id), '{}'::jsonb, s.at, s.at
FROM (SELECT n, md5($1 || ':' || n)::uuid::text AS id,
             now() - interval '1 hour' + n * interval '1 microsecond' AS at
      FROM generate_series($2::bigint, $3::bigint - 1) AS n) AS s
"""

# Every identity of the seed (the hot ones and the fillers) has an actor at every size, so
# that only the stored turns differ between sizes.
_ACTORS_SQL = """
INSERT INTO actors (tenant, identity, fence, updated_at)
SELECT $1, 'hot-' || i, 1, now() - interval '1 hour' FROM generate_series(0, $2::int - 1) AS i
UNION ALL
SELECT $1, 'fill-' || i, 1, now() - interval '1 hour' FROM generate_series(0, $3::int - 1) AS i
ON CONFLICT DO NOTHING
"""

# Two queued turns per hot identity: the head, and one behind it the claim must skip.
_QUEUE_SQL = """
INSERT INTO turns (tenant, identity, message_id, task_id, kind, status, attempts,
                   content_hash, payload)
SELECT $1, 'hot-' || i, 'queued-' || i || '-' || k, 'queued-' || i || '-' || k, 'start',
       'queued', 0, 'h', '{}'::jsonb
FROM generate_series(0, $2::int - 1) AS i, generate_series(1, 2) AS k
"""

CLAIM_LIMIT = 8


async def _load(database: str, tenant: str, size: int, batch: int) -> None:
    conn = await asyncpg.connect(pg.dsn_for(database))
    try:
        for lo in range(0, size, batch):
            async with conn.transaction():
                await conn.execute(
                    _TURNS_SQL, tenant, lo, min(size, lo + batch), HOT_SET, HOT_IDENTITIES, FILLERS
                )
        await conn.execute(_ACTORS_SQL, tenant, HOT_IDENTITIES, FILLERS)
        await conn.execute("VACUUM ANALYZE turns")
        await conn.execute("VACUUM ANALYZE actors")
    finally:
        await conn.close()


def load_turns(database: str, tenant: str, size: int) -> float:
    """A finished turn per stored task and an actor per identity of the seed; seconds taken."""
    began = time.monotonic()
    asyncio.run(_load(database, tenant, size, batch=250_000))
    return time.monotonic() - began


async def _connect(database: str) -> asyncpg.Connection:
    """A connection with the edge statement pool's settings (generic plans)."""
    db = Database(pg.sqlalchemy_url(database))
    try:
        return await asyncpg.connect(**db._read_connect_args())
    finally:
        await db.dispose()


async def _claim_once(conn: asyncpg.Connection, stmt: PreparedStatement) -> float:
    txn = conn.transaction()
    await txn.start()
    try:
        began = time.perf_counter()
        rows = await stmt.fetch("bench-claim", 30.0, CLAIM_LIMIT)
        elapsed = time.perf_counter() - began
    finally:
        await txn.rollback()  # the next claim finds the same queue
    if len(rows) != CLAIM_LIMIT:
        raise RuntimeError(f"the claim found {len(rows)} identities, not {CLAIM_LIMIT}")
    return elapsed


async def _measure(
    databases: dict[int, str], tenant: str, rounds: int, per_round: int
) -> dict[int, float]:
    conns = {size: await _connect(db) for size, db in databases.items()}
    try:
        for conn in conns.values():
            await conn.execute(_QUEUE_SQL, tenant, HOT_IDENTITIES)
        stmts = {size: await conn.prepare(CLAIM_WITH_HEADS_SQL) for size, conn in conns.items()}
        samples: dict[int, list[float]] = {size: [] for size in conns}
        order = list(conns)
        for r in range(rounds + 1):  # round 0 warms plans and buffers, not counted
            for size in order[r % len(order) :] + order[: r % len(order)]:
                for _ in range(per_round):
                    elapsed = await _claim_once(conns[size], stmts[size])
                    if r:
                        samples[size].append(elapsed)
        return {size: statistics.median(s) * 1000 for size, s in samples.items()}
    finally:
        for conn in conns.values():
            await conn.close()


def claim_p50_ms(
    databases: dict[int, str], tenant: str, rounds: int, per_round: int
) -> dict[int, float]:
    """Queue the hot identities' turns, then the median claim latency (ms) per size, the sizes
    taking turns. Run with no worker on these databases."""
    return asyncio.run(_measure(databases, tenant, rounds, per_round))
