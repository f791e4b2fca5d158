"""Benchmark 5: cost growth — GetTask and first-page ListTasks latency (one connection,
median) with 1k, 100k and 1M tasks stored, bulk loaded with ``INSERT … SELECT
generate_series`` into a database of its own.

The measured callers are the 10 hot identities (100 tasks each, so the first page is always
a full page of 50 and ``totalSize`` is 100); every added task belongs to other identities of
the same tenant. Reported as ``latency(1k) / latency(N)``, goal ≥ 0.67 at 1M (1M/1k ≤ 1.5).
"""

from __future__ import annotations

from bench import wire
from bench.config import GROWTH_TENANT, HOT_IDENTITIES
from bench.context import Ctx
from bench.loadgen import HttpResult
from bench.procs import Proc
from bench.report import latency_row
from bench.seed import hot_task, load_edge_tasks

NAME = "5 cost growth"


def _size(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def _measure(ctx: Ctx, edge: Proc, tokens: list[str]) -> dict[str, HttpResult]:
    n = len(tokens)
    gets = [
        wire.get_task(
            GROWTH_TENANT, hot_task(GROWTH_TENANT, k % HOT_IDENTITIES, k // HOT_IDENTITIES)
        )
        for k in range(n)
    ]
    lists = [wire.list_tasks(GROWTH_TENANT)]
    out = {}
    for method, bodies in (("GetTask", gets), ("ListTasks", lists)):
        pool = ctx.pool_file(f"growth-{method}", tokens, bodies)
        # Warm the plan cache and buffers (not measured).
        ctx.load(edge, pool, 1, seconds=min(0.5, ctx.profile.growth_seconds / 2))
        out[method] = ctx.load(edge, pool, 1, seconds=ctx.profile.growth_seconds)
    return out


def run(ctx: Ctx) -> None:
    db = ctx.dbs.create("growth")
    ctx.edge.migrate(db)
    ctx.edge.add_tenant(db, GROWTH_TENANT)
    tokens = ctx.edge_tokens([f"hot-{i}" for i in range(HOT_IDENTITIES)], tenant=GROWTH_TENANT)
    results: dict[int, dict[str, HttpResult]] = {}
    loaded = 0
    with ctx.running(ctx.edge.serve("edge-growth", db, ctx.run_dir)) as edge:
        for size in ctx.profile.growth_sizes:
            seconds = load_edge_tasks(db, GROWTH_TENANT, loaded, size)
            ctx.report.note(f"{NAME}: loaded tasks {loaded:,} -> {size:,} in {seconds:.1f}s")
            loaded = size
            tokens = ctx.edge_tokens(
                [f"hot-{i}" for i in range(HOT_IDENTITIES)], tenant=GROWTH_TENANT
            )
            results[size] = _measure(ctx, edge, tokens)
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
