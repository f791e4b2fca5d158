"""Benchmark 3: durable accept — ``SendMessage`` with a new messageId and a push config per
request (task, turn, history, push config and actor rows committed before the answer) at
concurrency 1/16/64, vs the a2a-sdk server's ``SendMessage`` with ``returnImmediately`` on its
``DatabaseTaskStore`` + ``DatabasePushNotificationConfigStore``.

The edge runs ``--no-worker --no-push`` and the SDK's agent only publishes ``SUBMITTED``: both
measure accepting a turn, not running it (benchmark 4 runs turns).
"""

from __future__ import annotations

from bench import pg, wire
from bench.config import TENANT
from bench.context import Ctx
from bench.report import latency_row, rate_row
from bench.servers import uvicorn_server

NAME = "3 SendMessage accept"
IDENTITIES = [f"caller-{i}" for i in range(100)]


def run(ctx: Ctx) -> None:
    db = ctx.edge_database()
    sdk_db = ctx.sdk_database()
    push_url = ctx.gateway.origin + "/push"
    tokens = ctx.edge_tokens(IDENTITIES)
    sdk_tokens = [f"sdk-{IDENTITIES[k % len(IDENTITIES)]}" for k in range(1000)]
    sdk_env = {"BENCH_SDK_DB_URL": pg.sqlalchemy_url(sdk_db)}
    for workers in ctx.profile.server_workers:
        name = f"edge-accept-w{workers}"
        with ctx.running(
            ctx.edge.serve(name, db, ctx.run_dir, workers=workers, background=False)
        ) as edge:
            probe = ctx.rpc(edge, tokens[0], wire.send_message(TENANT, push_url, unique="probe"))
            if "result" not in probe:
                raise RuntimeError(f"SendMessage probe failed: {str(probe)[:300]}")
            pool = ctx.pool_file("edge-send", tokens, [wire.send_message(TENANT, push_url)])
            ctx.warm(edge, pool)
            ours = {c: ctx.load(edge, pool, c) for c in ctx.profile.concurrencies}
        with ctx.running(
            uvicorn_server(
                f"sdk-accept-w{workers}",
                "bench.sdk_server:app",
                ctx.run_dir,
                workers=workers,
                env=sdk_env,
            )
        ) as sdk:
            pool = ctx.pool_file("sdk-send", sdk_tokens, [wire.send_message("", push_url)])
            ctx.warm(sdk, pool)
            theirs = {c: ctx.load(sdk, pool, c) for c in ctx.profile.concurrencies}
        for c in ctx.profile.concurrencies:
            tag = f"{workers}p c{c}"
            e, s = ours[c], theirs[c]
            ctx.report.add(rate_row(NAME, f"accepts/s {tag}", e.rps, "/s", "a2a-sdk", s.rps, 3.0))
            ctx.report.add(
                latency_row(NAME, f"p50 {tag}", e.p50_ms, "ms", "a2a-sdk", s.p50_ms, None)
            )
            ctx.report.add(
                latency_row(NAME, f"p99 {tag}", e.p99_ms, "ms", "a2a-sdk", s.p99_ms, None)
            )
