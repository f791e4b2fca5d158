"""Benchmark 3: durable accept — ``SendMessage`` with a new messageId and a push config per
request (task, turn, history, push config and actor rows committed before the answer) at
concurrency 1/16/64, vs the a2a-sdk server's ``SendMessage`` with ``returnImmediately`` on its
``DatabaseTaskStore`` + ``DatabasePushNotificationConfigStore``.

The edge runs ``--no-worker --no-push`` and the SDK's agent only publishes ``SUBMITTED``: both
measure accepting a turn, not running it (benchmark 4 runs turns).
"""

from __future__ import annotations

import contextlib

from bench import procs, wire
from bench.config import TENANT
from bench.context import Ctx
from bench.loadgen import HttpResult
from bench.procs import Proc
from bench.report import latency_row, rate_row
from bench.servers import sdk_server

NAME = "3 SendMessage accept"
IDENTITIES = [f"caller-{i}" for i in range(100)]


def run(ctx: Ctx) -> None:
    db = ctx.edge_database()
    sdk_db = ctx.sdk_database()
    push_url = ctx.gateway.origin + "/push"
    tokens = ctx.edge_tokens(IDENTITIES)
    sdk_tokens = [f"sdk-{IDENTITIES[k % len(IDENTITIES)]}" for k in range(1000)]
    for workers in ctx.profile.server_workers:
        measured = _measure(
            ctx,
            workers,
            db=db,
            sdk_db=sdk_db,
            push_url=push_url,
            tokens=tokens,
            sdk_tokens=sdk_tokens,
        )
        _add_rows(ctx, workers, measured["edge"], measured["sdk"])


def _start_servers(
    ctx: Ctx, stack: contextlib.ExitStack[bool | None], workers: int, db: str, sdk_db: str
) -> tuple[Proc, Proc]:
    """The edge and the a2a-sdk server at ``workers`` processes each, ready; each is stopped
    when ``stack`` closes."""
    edge = stack.enter_context(
        ctx.running(
            ctx.edge.serve(
                f"edge-accept-w{workers}",
                db,
                ctx.run_dir,
                workers=workers,
                background=False,
                wait=False,
                # No worker runs the accepted turns: with the default bound every identity's
                # queue would be full within a second and the rest would be 429s.
                EDGE_MAX_QUEUED_TURNS_PER_IDENTITY="0",
            )
        )
    )
    sdk = stack.enter_context(
        ctx.running(
            sdk_server(f"sdk-accept-w{workers}", ctx.run_dir, sdk_db, workers=workers, wait=False)
        )
    )
    for proc in (edge, sdk):  # started side by side, then each awaited
        procs.wait_ready(proc)
    return edge, sdk


def _measure(
    ctx: Ctx,
    workers: int,
    *,
    db: str,
    sdk_db: str,
    push_url: str,
    tokens: list[str],
    sdk_tokens: list[str],
) -> dict[str, dict[int, HttpResult]]:
    """Both servers' results at every concurrency, ``workers`` processes each."""
    # Both servers run side by side and take turns under load (Ctx.load_interleaved).
    with contextlib.ExitStack() as stack:
        edge, sdk = _start_servers(ctx, stack, workers, db, sdk_db)
        probe = ctx.rpc(edge, tokens[0], wire.send_message(TENANT, push_url, unique="probe"))
        if "result" not in probe:
            raise RuntimeError(f"SendMessage probe failed: {str(probe)[:300]}")
        targets = {
            "edge": (
                edge,
                ctx.pool_file("edge-send", tokens, [wire.send_message(TENANT, push_url)]),
            ),
            "sdk": (
                sdk,
                ctx.pool_file("sdk-send", sdk_tokens, [wire.send_message("", push_url)]),
            ),
        }
        for proc, pool in targets.values():
            ctx.warm(proc, pool)
        measured = ctx.load_interleaved(targets)
    return measured


def _add_rows(
    ctx: Ctx, workers: int, ours: dict[int, HttpResult], theirs: dict[int, HttpResult]
) -> None:
    """Rate and latency rows of every concurrency at ``workers`` processes."""
    for c in ctx.profile.concurrencies:
        tag = f"{workers}p c{c}"
        e, s = ours[c], theirs[c]
        ctx.report.add(rate_row(NAME, f"accepts/s {tag}", e.rps, "/s", "a2a-sdk", s.rps, 3.0))
        ctx.report.add(latency_row(NAME, f"p50 {tag}", e.p50_ms, "ms", "a2a-sdk", s.p50_ms, None))
        ctx.report.add(latency_row(NAME, f"p99 {tag}", e.p99_ms, "ms", "a2a-sdk", s.p99_ms, None))
