"""Benchmark 4: end-to-end turns — accepted by the edge, run by the echo agent in
``looping-edge worker`` processes (1, then 2), the terminal push delivered to the bench's
loopback receiver. 100 identities each loop "send a turn, wait for its push".

Reports turns/s and accept-to-push latency (from the accept answer to the push's arrival,
one clock) under that closed loop, where latency is mostly queueing, and first the latency
of one identity looping alone (the unloaded pipeline: wake-ups, agent, push). No baseline:
the a2a-sdk has no durable turn pipeline to compare with; the 2-worker row is compared with
the 1-worker row.
"""

from __future__ import annotations

import asyncio
import time

from bench import pg, procs
from bench.config import AUDIENCE
from bench.context import Ctx
from bench.procs import Proc
from bench.receiver import PushReceiver
from bench.report import rate_row
from bench.turns import TurnDriver, TurnStats, percentile

NAME = "4 end-to-end turns"


def _cpu(edge: Proc, workers: list[Proc]) -> dict[str, float]:
    return {
        "worker": sum(w.cpu_seconds() for w in workers),
        "edge": edge.cpu_seconds(),
        "PostgreSQL": procs.postgres_cpu_seconds(),
    }


async def _drive(
    ctx: Ctx, edge: Proc, workers: list[Proc], db: str, identities: list[str]
) -> tuple[TurnStats, TurnStats, dict[str, float]]:
    """The identity alone, then every identity; and the CPU each side spent in the second,
    with the database's transaction count (``"transactions"``)."""
    receiver = PushReceiver()
    receiver.port = ctx.receiver_port
    await receiver.start()
    driver = TurnDriver(edge.url(), ctx.gateway, receiver, AUDIENCE)
    try:
        # Warm-up (not measured): every identity's first turn, so leases and connections exist.
        await driver.warm_up(identities)
        alone = await driver.loop_for(identities[:1], min(5.0, ctx.profile.turn_seconds))
        before = {**_cpu(edge, workers), "transactions": await pg.transactions(db)}
        loaded = await driver.loop_for(identities, ctx.profile.turn_seconds)
        after = _cpu(edge, workers)
        await asyncio.sleep(1.2)  # PostgreSQL publishes busy backends' counts once a second
        after["transactions"] = await pg.transactions(db)
        return alone, loaded, {k: after[k] - before[k] for k in before}
    finally:
        await driver.aclose()
        await receiver.stop()


def run(ctx: Ctx) -> None:
    identities = [f"turner-{i}" for i in range(ctx.profile.turn_identities)]
    rates: dict[int, float] = {}
    for n in ctx.profile.turn_worker_processes:
        db = ctx.fresh_edge_database(f"turns{n}")
        with ctx.running(
            ctx.edge.serve(f"edge-turns-{n}", db, ctx.run_dir, background=False)
        ) as edge:
            workers = [ctx.edge.worker(f"worker-{n}-{i}", db, ctx.run_dir) for i in range(n)]
            ctx.procs.extend(workers)
            try:
                time.sleep(1.0)  # let the workers connect and LISTEN
                alone, stats, cpu = asyncio.run(_drive(ctx, edge, workers, db, identities))
            finally:
                for w in workers:
                    w.stop()
                    ctx.procs.remove(w)
        if stats.failed:
            ctx.report.note(
                f"{NAME}: {stats.failed} turns without a terminal push in time ({n} workers)"
            )
        rate = stats.completed / stats.seconds
        rates[n] = rate
        label = f"{n} worker process{'es' if n > 1 else ''}"
        base = rates.get(1) if n > 1 else None
        ctx.report.add(
            rate_row(
                NAME, f"turns/s, {label}", rate, "/s", "1 worker" if base else None, base, None
            )
        )
        for q in (50, 99):
            ms = percentile(stats.latencies, q) * 1000
            ctx.report.add(
                rate_row(NAME, f"accept-to-push p{q}, {label}", ms, "ms", None, None, None)
            )
        for q in (50, 99):
            ms = percentile(alone.latencies, q) * 1000
            metric = f"accept-to-push p{q}, 1 identity alone, {label}"
            ctx.report.add(rate_row(NAME, metric, ms, "ms", None, None, None))
        # Per completed turn: PostgreSQL transactions (each autocommit statement is one; a
        # count, so it does not move with the host's load) and CPU (scheduler time,
        # bench.procs), which says which side a change saved.
        xacts = cpu.pop("transactions") / max(stats.completed, 1)
        metric = f"PostgreSQL transactions per turn, {label}"
        ctx.report.add(rate_row(NAME, metric, xacts, "", None, None, None))
        for side, seconds in cpu.items():
            us = seconds / max(stats.completed, 1) * 1e6
            metric = f"{side} CPU per turn, {label}"
            ctx.report.add(rate_row(NAME, metric, us, "µs", None, None, None))
