"""Profile the edge under load: ``python -m bench.profile [gettask|accept|card] [--seconds N]``.

Starts one edge process (``looping-edge serve``, fresh database), drives it with the load
generator at concurrency 16 while ``py-spy record`` samples it, then prints the functions
with the largest inclusive and self share of samples (from py-spy's collapsed stacks, which
are kept next to the printed path for flame graphs).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import procs, wire
from bench.config import QUICK, TENANT
from bench.context import Ctx, hot_identities
from bench.gateway import BenchGateway
from bench.loadgen import ensure_wrk
from bench.procs import Proc
from bench.report import Report
from bench.seed import hot_task
from bench.servers import EdgeConfig


def summarize(collapsed: Path, top: int = 40) -> str:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        # A frame name may itself end in a space-separated word (e.g. "... bind)"): a line
        # whose last field is not a sample count is not a stack line; skip it.
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] += count
        own[frames[-1]] += count
    out = [f"{total} samples", "", "inclusive:"]
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in inclusive.most_common(top)]
    out += ["", "self:"]
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    return "\n".join(out)


def main() -> int:
    args = _parse_args()
    tool = ensure_wrk("auto")
    run_dir = Path(tempfile.mkdtemp(prefix="looping-profile-"))
    gateway = BenchGateway()
    gateway.start()
    edge = EdgeConfig(gateway_origins=[gateway.origin])
    ctx = Ctx(QUICK, Report("profile"), tool, run_dir, gateway, edge, procs.free_port())
    extra = dict(item.split("=", 1) for item in args.env)
    try:
        db = ctx.edge_database()
        tokens = ctx.edge_tokens(hot_identities())
        pool = ctx.pool_file("profile", tokens, _bodies(args.target, tokens, gateway))
        background = args.target != "accept"
        if not background:  # no worker runs the turns: no bound on the queues (bench/b3_accept)
            extra.setdefault("EDGE_MAX_QUEUED_TURNS_PER_IDENTITY", "0")
        with ctx.running(
            ctx.edge.serve("edge-profile", db, run_dir, background=background, **extra)
        ) as proc:
            _profile(ctx, proc, pool, args)
    finally:
        ctx.stop_all()
        gateway.stop()
        ctx.dbs.drop_all()
    return 0


def _parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("target", choices=("gettask", "accept", "card"), default="gettask", nargs="?")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument(
        "--idle", action="store_true", help="sample idle threads too (latency at low concurrency)"
    )
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--env", action="append", default=[], help="extra edge env NAME=VALUE")
    return p.parse_args()


def _bodies(target: str, tokens: list[str], gateway: BenchGateway) -> list[str]:
    """The request bodies of ``target``'s pool."""
    if target == "gettask":
        return [
            wire.get_task(TENANT, hot_task(TENANT, k % 10, k // 10)) for k in range(len(tokens))
        ]
    if target == "card":
        return [wire.get_card(TENANT)]
    return [wire.send_message(TENANT, gateway.origin + "/push")]


def _profile(ctx: Ctx, proc: Proc, pool: Path, args: argparse.Namespace) -> None:
    """Warm ``proc``, sample it with py-spy under load, and print the load and the summary."""
    ctx.warm(proc, pool)
    out = args.out or ctx.run_dir / "profile.collapsed"
    spy = _start_py_spy(proc, out, seconds=args.seconds, idle=args.idle)
    # py-spy samples in its own process while the load runs here.
    r = ctx.load(proc, pool, args.connections, args.seconds)
    _finish_py_spy(spy, out)
    print(f"load: {r.rps:.0f} req/s, p50 {r.p50_ms:.2f} ms, p99 {r.p99_ms:.2f} ms")
    print(summarize(out))
    print(f"\ncollapsed stacks: {out}")


def _start_py_spy(proc: Proc, out: Path, *, seconds: float, idle: bool) -> subprocess.Popen[str]:
    """``py-spy record`` of ``proc`` for ``seconds``, raw collapsed stacks to ``out``."""
    return subprocess.Popen(
        [
            shutil.which("py-spy") or str(procs.VENV_BIN / "py-spy"),
            "record",
            "--pid",
            str(proc.pid),
            "--format",
            "raw",
            "--rate",
            "250",
            "--duration",
            str(int(seconds)),
            "--output",
            str(out),
            "--nonblocking",
            *(["--idle"] if idle else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish_py_spy(spy: subprocess.Popen[str], out: Path) -> None:
    """Wait for py-spy's file; a py-spy that failed (no ptrace permission, say) says why."""
    try:
        _, err = spy.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.communicate()
        raise RuntimeError("py-spy did not finish within 60 s of the load") from None
    if spy.returncode != 0 or not out.exists():
        raise RuntimeError(f"py-spy failed (exit {spy.returncode}): {err.strip()[-500:]}")


if __name__ == "__main__":
    sys.exit(main())
