"""Benchmark 6: memory — RSS of one edge process (``looping-edge serve``: HTTP, in-process
worker and push delivery) idle after a warm-up turn, then after N distinct identities each
ran a turn (10,000 in the full run), with a reading at N/2.

Goal: no per-identity growth beyond a bounded cache, judged as RSS(N/2) / RSS(N) ≥ 0.95
(the second half of the identities adds under 5 %).
"""

from __future__ import annotations

import asyncio
import time

from bench.config import AUDIENCE
from bench.context import Ctx
from bench.procs import Proc
from bench.receiver import PushReceiver
from bench.report import latency_row, rate_row
from bench.turns import TurnDriver

NAME = "6 memory"
MIB = 1024 * 1024


async def _drive(ctx: Ctx, edge: Proc) -> tuple[int, int, int, int]:
    receiver = PushReceiver()
    receiver.port = ctx.receiver_port
    await receiver.start()
    driver = TurnDriver(edge.url(), ctx.gateway, receiver, AUDIENCE)
    n = ctx.profile.memory_identities
    readings: dict[str, int] = {}
    try:
        await driver.warm_up([f"warm-{i}" for i in range(4)])
        await asyncio.sleep(1.0)
        readings["idle"] = edge.rss_bytes()
        half = [f"mem-{i}" for i in range(n // 2)]
        rest = [f"mem-{i}" for i in range(n // 2, n)]
        stats = await driver.each_once(half, ctx.profile.memory_concurrency)
        await asyncio.sleep(1.0)
        readings["half"] = edge.rss_bytes()
        more = await driver.each_once(rest, ctx.profile.memory_concurrency)
        await asyncio.sleep(1.0)
        readings["full"] = edge.rss_bytes()
        failed = stats.failed + more.failed
        return readings["idle"], readings["half"], readings["full"], failed
    finally:
        await driver.aclose()
        await receiver.stop()


def run(ctx: Ctx) -> None:
    db = ctx.fresh_edge_database("memory")
    n = ctx.profile.memory_identities
    began = time.monotonic()
    with ctx.running(ctx.edge.serve("edge-memory", db, ctx.run_dir, background=True)) as edge:
        idle, half, full, failed = asyncio.run(_drive(ctx, edge))
    if failed:
        ctx.report.note(f"{NAME}: {failed} turns without a terminal push in time")
    ctx.report.add(
        rate_row(NAME, "RSS idle (after a warm-up turn)", idle / MIB, "MiB", None, None, None)
    )
    ctx.report.add(
        latency_row(
            NAME, f"RSS after {n:,} identities", full / MIB, "MiB", "idle", idle / MIB, None
        )
    )
    ctx.report.add(
        latency_row(
            NAME,
            f"RSS growth {n // 2:,} -> {n:,} identities",
            full / MIB,
            "MiB",
            f"at {n // 2:,}",
            half / MIB,
            0.95,
        )
    )
    per_identity = max(full - half, 0) / max(n - n // 2, 1)
    ctx.report.add(
        rate_row(NAME, "bytes per identity (second half)", per_identity, "B", None, None, None)
    )
    ctx.report.note(f"{NAME}: {n:,} turns in {time.monotonic() - began:.0f}s")
