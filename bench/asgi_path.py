"""Paired measurement: the JSON-RPC path as raw ASGI ahead of FastAPI's routing (A) against
the same endpoint as a plain FastAPI route (B), verified GetTask at one concurrency.

    .venv/bin/python -m bench.asgi_path [--pairs 3] [--seconds 8] [--connections 16]

Both servers are the same code launched the same way (uvicorn, httptools + uvloop, one
process, no background loops, the same database and key); only ``create_app(raw_rpc=...)``
differs. They run side by side and take turns: pair ``i`` measures A then B when ``i`` is
even, B then A when odd, so a slow stretch of the shared host lands on both. Every request
carries a distinct pre-minted token (a full EdDSA verification), as in benchmark 2. The
result (every run, the medians of the pairs and their ranges) is written to
``bench/results/asgi-path.md``; ``app.main`` keeps whichever the figures support.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import time
from pathlib import Path

from fastapi import FastAPI

from bench import procs
from bench.b2_gettask import _bodies
from bench.config import FULL, TENANT
from bench.context import Ctx, hot_identities
from bench.loadgen import HttpResult
from bench.procs import ROOT, VENV_BIN, Proc

RESULTS = ROOT / "bench" / "results" / "asgi-path.md"
VARIANTS = {"raw": "raw ASGI ahead of routing", "route": "plain FastAPI route"}


def _app(raw_rpc: bool) -> FastAPI:
    from app.main import create_app
    from app.services import build_services
    from app.settings import load_settings

    return create_app(build_services(load_settings()), raw_rpc=raw_rpc)


def raw_app() -> FastAPI:
    """uvicorn factory: variant A (what ``app.asgi`` serves when the raw path is kept)."""
    return _app(True)


def route_app() -> FastAPI:
    """uvicorn factory: variant B."""
    return _app(False)


def _server(ctx: Ctx, variant: str, database: str) -> Proc:
    port = procs.free_port()
    argv = [
        str(VENV_BIN / "uvicorn"),
        f"bench.asgi_path:{variant}_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--http",
        "httptools",
        "--loop",
        "uvloop",
        "--no-access-log",
        "--no-proxy-headers",
        "--no-server-header",
        "--log-level",
        "warning",
    ]
    env = ctx.edge.env(database, EDGE_LOG_LEVEL="WARNING")
    return procs.start(f"asgi-{variant}", argv, env=env, log_dir=ctx.run_dir, port=port)


def _measure(ctx: Ctx, pairs: int, seconds: float, connections: int) -> dict[str, list[HttpResult]]:
    database = ctx.edge_database()
    tokens = ctx.edge_tokens(hot_identities())
    pool = ctx.pool_file("asgi-path", tokens, _bodies(TENANT, "GetTask", len(tokens)))
    runs: dict[str, list[HttpResult]] = {name: [] for name in VARIANTS}
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(ctx.running(_server(ctx, name, database)))
            for name in VARIANTS
        }
        for name, proc in servers.items():
            probe = ctx.rpc(proc, tokens[0], _bodies(TENANT, "GetTask", 1)[0])
            if "result" not in probe:
                raise RuntimeError(f"{name}: GetTask probe failed: {str(probe)[:300]}")
            ctx.warm(proc, pool)
        for pair in range(pairs):
            order = list(VARIANTS) if pair % 2 == 0 else list(reversed(VARIANTS))
            for name in order:
                result = ctx.load(servers[name], pool, connections, seconds)
                runs[name].append(result)
                print(f"pair {pair + 1} {name}: {result.rps:.3f} req/s", flush=True)
    return runs


def _report(runs: dict[str, list[HttpResult]], seconds: float, connections: int) -> str:
    raw, route = runs["raw"], runs["route"]
    ratios = [a.rps / b.rps for a, b in zip(raw, route, strict=True)]
    lines = [
        "# JSON-RPC path: raw ASGI ahead of routing vs a plain FastAPI route",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        f"`python -m bench.asgi_path` (verified GetTask, c = {connections}, one uvicorn "
        f"process each, {seconds:g} s a run, {len(raw)} pairs, order alternating A/B, B/A). "
        "The host's 2 cores were shared with other work: read the ranges.",
        "",
        "| pair | order | A raw req/s | B route req/s | A/B | A CPU µs/req | B CPU µs/req |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, (a, b) in enumerate(zip(raw, route, strict=True)):
        order = "A, B" if i % 2 == 0 else "B, A"
        lines.append(
            f"| {i + 1} | {order} | {a.rps:.3f} | {b.rps:.3f} | {a.rps / b.rps:.3f} | "
            f"{_cpu(a)} | {_cpu(b)} |"
        )
    lines += ["", "| | median | range |", "|---|---|---|"]
    for label, values in (
        ("A raw req/s", [r.rps for r in raw]),
        ("B route req/s", [r.rps for r in route]),
        ("A/B per pair", ratios),
    ):
        lines.append(
            f"| {label} | {statistics.median(values):.3f} | {min(values):.3f}-{max(values):.3f} |"
        )
    return "\n".join(lines) + "\n"


def _cpu(result: HttpResult) -> str:
    value = result.cpu_us_per_request
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    from bench.cli import _new_context, _new_report

    parser = argparse.ArgumentParser(prog="python -m bench.asgi_path")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--loadgen", default="auto")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    profile = dataclasses.replace(FULL, token_pool=20_000)
    tool, report = _new_report(profile, args.loadgen)
    ctx = _new_context(profile, report, tool)
    try:
        runs = _measure(ctx, args.pairs, args.seconds, args.connections)
    finally:
        ctx.stop_all()
        ctx.gateway.stop()
        ctx.dbs.drop_all()
    text = _report(runs, args.seconds, args.connections)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
