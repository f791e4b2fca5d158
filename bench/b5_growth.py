"""Benchmark 5: cost growth — GetTask and first-page ListTasks latency (one connection,
median) with 1k, 100k and 1M tasks stored, each size bulk loaded with ``INSERT … SELECT
generate_series`` into a database of its own and served by its own edge; the three edges take
turns under load. Then, with as many finished turns stored, the latency of the turn worker's
claim (``bench.claim_cost``; no goal in the issue).

The measured callers are the 10 hot identities (100 tasks each, so the first page is always
a full page of 50 and ``totalSize`` is 100); every added task belongs to other identities of
the same tenant. Reported as ``latency(1k) / latency(N)``, goal ≥ 0.67 at 1M (1M/1k ≤ 1.5).
"""

from __future__ import annotations

import asyncio
import contextlib

from bench import claim_cost, pg, procs, wire
from bench.config import GROWTH_TENANT, HOT_IDENTITIES
from bench.context import Ctx
from bench.loadgen import HttpResult
from bench.report import latency_row
from bench.seed import hot_task, load_edge_tasks

NAME = "5 cost growth"


def _size(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def _bodies(method: str, n: int) -> list[str]:
    if method == "ListTasks":
        return [wire.list_tasks(GROWTH_TENANT)]
    return [
        wire.get_task(
            GROWTH_TENANT, hot_task(GROWTH_TENANT, k % HOT_IDENTITIES, k // HOT_IDENTITIES)
        )
        for k in range(n)
    ]


def _load_databases(ctx: Ctx) -> dict[int, str]:
    """One database per size, each loaded from empty (the same hot tasks in each)."""
    dbs: dict[int, str] = {}
    for size in ctx.profile.growth_sizes:
        db = ctx.fresh_edge_database(f"growth{size}")
        seconds = load_edge_tasks(db, GROWTH_TENANT, 0, size)
        ctx.report.note(f"{NAME}: loaded {size:,} tasks in {seconds:.1f}s")
        seconds = claim_cost.load_turns(db, GROWTH_TENANT, size)
        ctx.report.note(f"{NAME}: loaded {size:,} finished turns in {seconds:.1f}s")
        dbs[size] = db
    # The bulk loads' WAL would otherwise be checkpointed while we measure.
    asyncio.run(pg.execute(dbs[ctx.profile.growth_sizes[0]], "CHECKPOINT"))
    return dbs


def run(ctx: Ctx) -> None:
    dbs = _load_databases(ctx)
    results: dict[int, dict[str, HttpResult]] = {size: {} for size in dbs}
    # One edge per size, side by side, taking turns under load (Ctx.load_interleaved): each
    # size is measured in the same minutes as the others, so host noise cannot pose as growth.
    with contextlib.ExitStack() as stack:
        edges = {
            size: stack.enter_context(
                ctx.running(ctx.edge.serve(f"edge-growth-{size}", db, ctx.run_dir, wait=False))
            )
            for size, db in dbs.items()
        }
        for edge in edges.values():  # started side by side, then each awaited
            procs.wait_ready(edge)
        tokens = ctx.edge_tokens([f"hot-{i}" for i in range(HOT_IDENTITIES)], tenant=GROWTH_TENANT)
        for method in ("GetTask", "ListTasks"):
            pool = ctx.pool_file(f"growth-{method}", tokens, _bodies(method, len(tokens)))
            targets = {str(size): (edge, pool) for size, edge in edges.items()}
            if ctx.profile.warmup_seconds > 0:  # plan cache and buffers (not measured)
                for edge, _ in targets.values():
                    ctx.load(edge, pool, 1, seconds=min(0.5, ctx.profile.growth_seconds / 2))
            measured = ctx.load_interleaved(
                targets, concurrencies=(1,), seconds=ctx.profile.growth_seconds
            )
            for size in dbs:
                results[size][method] = measured[str(size)][1]
    _report_http(ctx, results)
    _report_claims(ctx, dbs)


def _report_http(ctx: Ctx, results: dict[int, dict[str, HttpResult]]) -> None:
    first = ctx.profile.growth_sizes[0]
    largest = ctx.profile.growth_sizes[-1]
    for method in ("GetTask", "ListTasks"):
        base = results[first][method].p50_ms
        ctx.report.add(
            latency_row(NAME, f"{method} p50 at {_size(first)}", base, "ms", None, None, None)
        )
        for size in ctx.profile.growth_sizes[1:]:
            goal = 0.67 if size == largest else None
            ctx.report.add(
                latency_row(
                    NAME,
                    f"{method} p50 at {_size(size)}",
                    results[size][method].p50_ms,
                    "ms",
                    _size(first),
                    base,
                    goal,
                )
            )


def _report_claims(ctx: Ctx, dbs: dict[int, str]) -> None:
    """The worker's claim with each size's finished turns stored (after the edges stopped)."""
    per_round = 200 if ctx.profile.growth_seconds >= 1 else 20
    p50 = claim_cost.claim_p50_ms(dbs, GROWTH_TENANT, rounds=4, per_round=per_round)
    first = ctx.profile.growth_sizes[0]
    metric = "worker claim p50 at {}, finished turns stored"
    first_row = latency_row(NAME, metric.format(_size(first)), p50[first], "ms", None, None, None)
    ctx.report.add(first_row)
    for size in ctx.profile.growth_sizes[1:]:
        ctx.report.add(
            latency_row(
                NAME, metric.format(_size(size)), p50[size], "ms", _size(first), p50[first], None
            )
        )
