"""``bench/run``: run the benchmarks, print the table, write ``results/latest.{json,md}``.

Only a full run of every benchmark writes ``bench/results/latest*`` (the committed figures);
``--quick`` and ``--only`` runs write ``bench/results/partial*`` (ignored by git) unless
``--out`` names a directory (then ``latest*`` there) or ``--merge`` folds a full-length
``--only`` run into the committed ``latest*`` (the other benchmarks' rows stay as they were).
``--repeat N --out DIR`` makes N runs one after the other, each into ``DIR/run-K``, and then
``DIR/summary.{md,json}`` (``bench.summary``: median, range and runs that met each goal).
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench import pg, procs, summary
from bench.config import FULL, QUICK, Profile
from bench.context import Ctx
from bench.gateway import BenchGateway
from bench.host import CpuTimes, IdleState
from bench.loadgen import ensure_wrk
from bench.report import Report, machine_info
from bench.servers import EdgeConfig

BENCHMARKS = {
    "1": "bench.b1_verify",
    "2": "bench.b2_gettask",
    "3": "bench.b3_accept",
    "4": "bench.b4_turns",
    "5": "bench.b5_growth",
    "6": "bench.b6_memory",
}
RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/run", description=__doc__)
    p.add_argument("--quick", action="store_true", help="every benchmark briefly (< 1 minute)")
    p.add_argument("--only", default="", help="comma-separated benchmark numbers, e.g. 1,2")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for latest.json/.md (default: bench/results; partial runs write "
        "partial.json/.md there instead)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="with --only (full length): replace those benchmarks' rows in the committed latest*",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="N runs one after the other into --out DIR/run-1..N, then DIR/summary.md",
    )
    p.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    p.add_argument("--keep", action="store_true", help="keep the databases and the scratch dir")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    selected = [b.strip() for b in args.only.split(",") if b.strip()] or list(BENCHMARKS)
    profile = QUICK if args.quick else FULL
    partial = args.quick or len(selected) < len(BENCHMARKS)
    if not _arguments_ok(args, selected, partial):
        return 2
    if args.repeat == 1:
        return _run_once(args, selected, profile, partial=partial, out_dir=args.out)
    out_dirs = [args.out / f"run-{k}" for k in range(1, args.repeat + 1)]
    codes = []
    for k, out_dir in enumerate(out_dirs, start=1):
        print(f"\nbench: run {k} of {args.repeat} -> {out_dir}", flush=True)
        codes.append(_run_once(args, selected, profile, partial=partial, out_dir=out_dir))
    written = [d for d in out_dirs if (d / "latest.json").is_file()]
    runs = [summary.load_run(d) for d in written]
    print()
    print(summary.write(args.out / "summary.md", [d.name for d in written], runs), end="")
    print(f"bench: {len(written)} runs summed up -> {args.out}/summary.md")
    return max(codes)


def _run_once(
    args: argparse.Namespace,
    selected: list[str],
    profile: Profile,
    *,
    partial: bool,
    out_dir: Path | None,
) -> int:
    """One run of the selected benchmarks: the table printed, the results written."""
    tool, report = _new_report(profile, args.loadgen)
    ctx = _new_context(profile, report, tool)
    began = time.monotonic()
    failed = _run_benchmarks(ctx, selected, keep=args.keep)
    print(f"\n{report.table()}\n")
    for note in report.notes:
        print(f"note: {note}")
    return _write_results(
        args, report, selected, out=out_dir, partial=partial, failed=failed, began=began
    )


def _arguments_ok(args: argparse.Namespace, selected: list[str], partial: bool) -> bool:
    """Whether the selection can run; says why on stderr when it cannot."""
    unknown = [b for b in selected if b not in BENCHMARKS]
    if unknown:
        print(f"bench/run: unknown benchmark(s) {', '.join(unknown)}", file=sys.stderr)
        return False
    if args.merge and (args.quick or not partial):
        print("bench/run: --merge needs --only and the full length", file=sys.stderr)
        return False
    if args.repeat < 1 or (args.repeat > 1 and (args.out is None or args.merge)):
        # the committed table is one full run as measured; repeats go to a directory of
        # their own, never over bench/results/latest*
        print("bench/run: --repeat N needs N >= 1, and --out DIR (not --merge)", file=sys.stderr)
        return False
    return True


def _new_report(profile: Profile, loadgen: str) -> tuple[str, Report]:
    """The load generator to use and an empty report that describes the machine."""
    tool = ensure_wrk(loadgen)
    tool_label = (
        "wrk (Debian package), Lua script bench/lua/pool.lua"
        if tool == "wrk"
        else ("bench.pyload (multi-process Python client)")
    )
    report = Report(profile=profile.name, loadgen=tool_label)
    idle = IdleState.read()
    report.machine = machine_info(pg.server_version(), tool_label, idle)
    idle_note = idle.note()
    if idle_note is not None:
        report.note(idle_note)
    print(f"bench: profile {profile.name}, load generator {tool_label}")
    print(
        f"bench: {report.machine['cpu']}, {report.machine['cores']} cores; the load generator, "
        "the servers and PostgreSQL share these cores"
    )
    return tool, report


def _new_context(profile: Profile, report: Report, tool: str) -> Ctx:
    """A scratch directory, the gateway (started) and the edge configuration, as one ``Ctx``."""
    run_dir = Path(tempfile.mkdtemp(prefix="looping-bench-"))
    gateway = BenchGateway()
    gateway.start()
    receiver_port = procs.free_port()
    edge = EdgeConfig(gateway_origins=[gateway.origin, f"http://127.0.0.1:{receiver_port}"])
    return Ctx(profile, report, tool, run_dir, gateway, edge, receiver_port)


def _run_benchmarks(ctx: Ctx, selected: list[str], *, keep: bool) -> list[str]:
    """Run each selected benchmark in turn, then stop and clean up everything; the numbers of
    the benchmarks that failed."""
    failed: list[str] = []
    try:
        for number in selected:
            module = importlib.import_module(BENCHMARKS[number])
            print(f"\n== {module.NAME}", flush=True)
            started, host_before = time.monotonic(), CpuTimes.read()
            try:
                module.run(ctx)
            except Exception as exc:
                failed.append(number)
                ctx.stop_all()
                traceback.print_exc()
                ctx.report.note(f"{module.NAME}: failed: {type(exc).__name__}: {exc}"[:400])
            host_after = CpuTimes.read()
            if host_before is not None and host_after is not None:
                ctx.report.note(f"{module.NAME}: {host_after.steal_note(host_before)}")
            print(f"   ({time.monotonic() - started:.1f}s)", flush=True)
    finally:
        ctx.stop_all()
        ctx.gateway.stop()
        if not keep:
            ctx.dbs.drop_all()
            shutil.rmtree(ctx.run_dir, ignore_errors=True)
        else:
            print(f"bench: kept databases {ctx.dbs.created} and {ctx.run_dir}")
    return failed


def _write_results(
    args: argparse.Namespace,
    report: Report,
    selected: list[str],
    *,
    out: Path | None,
    partial: bool,
    failed: list[str],
    began: float,
) -> int:
    """Write the report (and merge it into ``latest*`` with ``--merge``); the exit code."""
    out_dir = out or RESULTS
    stem = "partial" if partial and out is None else "latest"
    report.write(out_dir, stem)
    print(
        f"bench: {len(report.rows)} rows in {time.monotonic() - began:.0f}s "
        f"-> {out_dir}/{stem}.json"
    )
    if args.merge:
        if failed:
            print("bench: not merged (a benchmark failed)", file=sys.stderr)
            return 1
        merged = report.merged_into(out_dir, selected)
        merged.write(out_dir)
        print(f"bench: merged benchmark {', '.join(selected)} into {out_dir}/latest.json")
    return 1 if failed else 0
