"""The edge's statement pool (``app.db.statement_pool``) against asyncpg's own pool with its
reset on release turned off (``reset=``), on the statement shape the hot path runs: one short
indexed read in autocommit.

Each pair runs both pools back to back at concurrency 1, 16 and 64 with the same pool size,
alternating which goes first; the figures are statements per second and the client process's
CPU per statement. Run: ``.venv/bin/python -m bench.pool_compare [--pairs 3] [--seconds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from app.db.statement_pool import StatementPool

DSN = "postgresql://postgres@127.0.0.1:5432/test"
SIZE = 8
QUERY = "SELECT id, tenant, state, body FROM pool_compare WHERE tenant = $1 AND id = $2"

Fetch = Callable[[str, Any, Any], Awaitable[Any]]


async def _seed() -> None:
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS pool_compare ("
            " tenant text, id text, state text, body jsonb, PRIMARY KEY (tenant, id))"
        )
        await conn.execute(
            "INSERT INTO pool_compare SELECT 't', 'task-' || g, 'completed',"
            " jsonb_build_object('n', g) FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING"
        )
    finally:
        await conn.close()


async def _noop_reset(_conn: asyncpg.Connection) -> None:
    return None


async def _load(fetch: Fetch, concurrency: int, seconds: float) -> tuple[float, float]:
    """Statements per second and client CPU µs per statement over ``seconds``."""
    done = 0
    stop = time.perf_counter() + seconds

    async def one(k: int) -> None:
        nonlocal done
        i = k
        while time.perf_counter() < stop:
            await fetch(QUERY, "t", f"task-{i % 1000 + 1}")
            i += concurrency
            done += 1

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return done / wall, cpu / max(done, 1) * 1e6


async def _side(name: str, concurrency: int, seconds: float) -> tuple[float, float]:
    if name == "statement pool":
        pool = StatementPool({"dsn": DSN}, size=SIZE)
        try:
            await _load(pool.fetchrow, concurrency, 0.5)
            return await _load(pool.fetchrow, concurrency, seconds)
        finally:
            await pool.close()
    apool = await asyncpg.create_pool(DSN, min_size=SIZE, max_size=SIZE, reset=_noop_reset)
    try:
        await _load(apool.fetchrow, concurrency, 0.5)
        return await _load(apool.fetchrow, concurrency, seconds)
    finally:
        await apool.close()


async def _main(pairs: int, seconds: float) -> None:
    await _seed()
    sides = ("statement pool", "asyncpg pool")
    for c in (1, 16, 64):
        rates: dict[str, list[float]] = {s: [] for s in sides}
        cpus: dict[str, list[float]] = {s: [] for s in sides}
        for p in range(pairs):
            order = sides if p % 2 == 0 else tuple(reversed(sides))
            for side in order:
                rate, cpu = await _side(side, c, seconds)
                rates[side].append(rate)
                cpus[side].append(cpu)
        ratios = [a / b for a, b in zip(rates[sides[0]], rates[sides[1]], strict=True)]
        for side in sides:
            print(
                f"c={c:<3} {side:<15} stmts/s median {statistics.median(rates[side]):8.0f}"
                f" range {min(rates[side]):.0f}-{max(rates[side]):.0f};"
                f" client CPU/stmt median {statistics.median(cpus[side]):6.1f} µs"
            )
        print(
            f"c={c:<3} statement pool / asyncpg pool: median {statistics.median(ratios):.3f}"
            f" range {min(ratios):.3f}-{max(ratios):.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    asyncio.run(_main(args.pairs, args.seconds))


if __name__ == "__main__":
    main()
