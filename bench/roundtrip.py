"""The PostgreSQL round trip under a verified GetTask at concurrency 1.

At c = 1 a request's latency is its server's CPU plus whatever it waits for. The bare
endpoint waits for nothing; the edge waits for one statement (CONTRACT §3 lets it start only
after the token verifies), and the a2a-sdk for several. So benchmark 2 measures, in the same
run, what one round trip costs on this machine: a prepared ``SELECT 1`` and the edge's own
GetTask statement (``app.db.postgres.batched_reads.GET_TASK_SQL``, the one a lone read
sends), one after the other on one asyncpg connection, in alternating blocks so a slow minute
of the host lands on both.

Measured from the bench process, the servers idle: this is the floor the edge's statement
adds at c = 1, not a share of its measured latency.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

import asyncpg

from app.db.postgres.batched_reads import GET_TASK_SQL
from app.settings import Settings
from bench import pg

BLOCK = 200  # statements per timed block
WARMUP = 200
# The bench's GetTask bodies carry no historyLength, so the edge sends its default.
HISTORY_LIMIT: int = Settings.model_fields["default_history_length"].default


@dataclass(frozen=True)
class RoundTrips:
    select1_us: float  # median over blocks of the mean wall time of one prepared SELECT 1
    statement_us: float  # the same for the edge's GetTask statement on a hot task
    blocks: int


def measure(
    database: str, tenant: str, identity: str, task_id: str, *, seconds: float
) -> RoundTrips:
    return asyncio.run(_measure(pg.dsn_for(database), (tenant, identity, task_id), seconds))


async def _measure(dsn: str, key: tuple[str, str, str], seconds: float) -> RoundTrips:
    conn = await asyncpg.connect(dsn)
    try:
        select1 = await conn.prepare("SELECT 1")
        get_task = await conn.prepare(GET_TASK_SQL)
        args: tuple[Any, ...] = (*key, HISTORY_LIMIT)
        if await get_task.fetchrow(*args) is None:
            raise RuntimeError(f"round trip: task {key[2]} of {key[1]} is not in {dsn}")
        for _ in range(WARMUP):
            await select1.fetchval()
            await get_task.fetchrow(*args)
        per_select1: list[float] = []
        per_statement: list[float] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline or not per_select1:
            per_select1.append(await _block(select1, ()))
            per_statement.append(await _block(get_task, args))
        return RoundTrips(
            select1_us=statistics.median(per_select1),
            statement_us=statistics.median(per_statement),
            blocks=len(per_select1),
        )
    finally:
        await conn.close()


async def _block(statement: Any, args: tuple[Any, ...]) -> float:
    """Mean µs of one statement over ``BLOCK`` statements sent one after the other."""
    started = time.perf_counter()
    for _ in range(BLOCK):
        await statement.fetchrow(*args)
    return (time.perf_counter() - started) / BLOCK * 1e6
