"""Benchmark 7: verified GetTask latency while hostile clients hold connections (issue 47).

One ``looping-edge serve`` process with the shipped connection limits (docs/http-limits.md)
serves the GetTask load of benchmark 2 at c = 1 and c = 16, three ways taking turns round by
round: with no attack; while 300 slow connections are held open (``bench.attack slow``: idle,
a head dripped one byte every 5 s, a valid token's body dripped one byte every 5 s, each
reopened when the edge closes it); and during a header flood (``bench.attack flood``: 10
connections each sending one unterminated header line as fast as the edge takes it). The
attackers run in their own process on loopback, for the measured window only.

Rows: p50 and p99 under each attack against the same without one (ratio no-attack / attack,
higher is better; the issue sets no goal), and the process's RSS after the flood against
before it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.b2_gettask import _bodies
from bench.config import AUDIENCE, TENANT
from bench.context import Ctx, hot_identities
from bench.loadgen import HttpResult
from bench.procs import ROOT, Proc
from bench.report import latency_row

NAME = "7 HTTP limits"
ATTACKS = ("none", "slow", "flood")
SLOW_CONNECTIONS = 300
FLOOD_CONNECTIONS = 10
SETTLE_SECONDS = 1.5  # the attack's connections are open before the load starts
CONCURRENCIES = (1, 16)


@dataclass
class Attacked:
    result: HttpResult
    tally: dict[str, float]


def _attack(ctx: Ctx, kind: str, port: int, seconds: float) -> subprocess.Popen[str] | None:
    if kind == "none":
        return None
    token = ctx.gateway.mint(audience=AUDIENCE, tenant=TENANT, identity="attacker")
    count = SLOW_CONNECTIONS if kind == "slow" else FLOOD_CONNECTIONS
    argv = [sys.executable, "-m", "bench.attack", kind, "--port", str(port)]
    argv += ["--connections", str(count), "--seconds", f"{seconds:.3f}", "--token", token]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)


def _tally(attacker: subprocess.Popen[str] | None) -> dict[str, float]:
    if attacker is None:
        return {}
    out, _ = attacker.communicate(timeout=60)
    line = next((x for x in out.splitlines() if x.startswith("BENCH_JSON ")), None)
    return {} if line is None else dict(json.loads(line.split(" ", 1)[1]))


def _measure_once(ctx: Ctx, proc: Proc, pool: Path, kind: str, c: int, seconds: float) -> Attacked:
    assert proc.port is not None
    attacker = _attack(ctx, kind, proc.port, SETTLE_SECONDS + seconds + 0.5)
    if attacker is not None:
        time.sleep(SETTLE_SECONDS)
    result = ctx.load(proc, pool, c, seconds)
    return Attacked(result, _tally(attacker))


def run(ctx: Ctx) -> None:
    db = ctx.edge_database()
    tokens = ctx.edge_tokens(hot_identities())
    pool = ctx.pool_file("edge-limits", tokens, _bodies(TENANT, "GetTask", len(tokens)))
    rounds = max(ctx.profile.http_rounds, 1)
    per_round = ctx.profile.http_seconds / rounds
    with ctx.running(ctx.edge.serve("edge-limits", db, ctx.run_dir, background=False)) as proc:
        ctx.warm(proc, pool)
        rss_before = proc.rss_bytes()
        measured: dict[tuple[str, int], list[Attacked]] = {}
        for c in CONCURRENCIES:
            for r in range(rounds):
                for kind in ATTACKS[r % 3 :] + ATTACKS[: r % 3]:
                    once = _measure_once(ctx, proc, pool, kind, c, per_round)
                    measured.setdefault((kind, c), []).append(once)
        rss_after = proc.rss_bytes()
    _add_rows(ctx, measured, rss_before, rss_after)


def _add_rows(
    ctx: Ctx, measured: dict[tuple[str, int], list[Attacked]], rss_before: int, rss_after: int
) -> None:
    for c in CONCURRENCIES:
        base = HttpResult.combine([a.result for a in measured["none", c]])
        for kind, label in (("slow", "300 slow connections"), ("flood", "header flood")):
            runs = measured[kind, c]
            under = HttpResult.combine([a.result for a in runs])
            for metric, value, baseline in (
                ("p50", under.p50_ms, base.p50_ms),
                ("p99", under.p99_ms, base.p99_ms),
            ):
                ctx.report.add(
                    latency_row(
                        NAME,
                        f"GetTask {metric} c{c} during {label}",
                        value,
                        "ms",
                        "no attack",
                        baseline,
                        None,
                    )
                )
            opened = sum(a.tally.get("opened", 0) for a in runs)
            closed = sum(a.tally.get("closed_by_server", 0) for a in runs)
            sent = sum(a.tally.get("bytes_sent", 0) for a in runs)
            ctx.report.note(
                f"{NAME} c{c} {label}: {under.requests} GetTasks answered ({under.bad} not a "
                f"result) against {base.requests} without it; the attacker opened {opened:.0f} "
                f"connections, the edge closed {closed:.0f}, {sent:.0f} bytes sent"
            )
    mib = 1024 * 1024
    ctx.report.add(
        latency_row(
            NAME,
            "server RSS after the attacks",
            rss_after / mib,
            "MiB",
            "before them",
            rss_before / mib,
            None,
        )
    )
