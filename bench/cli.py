"""``bench/run``: run the benchmarks, print the table, write ``results/latest.{json,md}``.

Only a full run of every benchmark writes ``bench/results/latest*`` (the committed figures);
``--quick`` and ``--only`` runs write ``bench/results/partial*`` (ignored by git) unless
``--out`` names a directory (then ``latest*`` there) or ``--merge`` folds a full-length
``--only`` run into the committed ``latest*`` (the other benchmarks' rows stay as they were).
``--repeat N`` makes N runs one after the other, each measuring every selected benchmark with
its baselines, and writes them as one result in the same place (``bench.repeated``): every
run's figures, and each goal judged on the median of the runs (``bench.summary``).
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

from bench import pg, procs
from bench.config import FULL, QUICK, Profile
from bench.context import Ctx
from bench.gateway import BenchGateway
from bench.host import CpuTimes, IdleState
from bench.loadgen import ensure_wrk
from bench.repeated import Repeated
from bench.report import Report, machine_info
from bench.servers import EdgeConfig

BENCHMARKS = {
    "1": "bench.b1_verify",
    "2": "bench.b2_gettask",
    "3": "bench.b3_accept",
    "4": "bench.b4_turns",
    "5": "bench.b5_growth",
    "6": "bench.b6_memory",
    "7": "bench.b7_limits",
    "8": "bench.b8_fairness",
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
        help="N runs one after the other, written as one result: every run's figures and each "
        "goal judged on the median of the runs",
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
        return _run_once(args, selected, profile, partial=partial)
    return _run_repeated(args, selected, profile, partial=partial)


def _run_once(
    args: argparse.Namespace, selected: list[str], profile: Profile, *, partial: bool
) -> int:
    """One run of the selected benchmarks: the table printed, the results written."""
    began = time.monotonic()
    report, failed = _measure(args, selected, profile)
    return _write_results(args, report, selected, partial=partial, failed=failed, began=began)


def _run_repeated(
    args: argparse.Namespace, selected: list[str], profile: Profile, *, partial: bool
) -> int:
    """``--repeat N``: N runs one after the other, written as one result after each run (an
    interrupted series keeps the runs it finished), every goal judged on the median."""
    out_dir, stem = _destination(args.out, partial)
    began = time.monotonic()
    reports: list[Report] = []
    failures = 0
    for k in range(1, args.repeat + 1):
        print(f"\nbench: run {k} of {args.repeat}", flush=True)
        report, failed = _measure(args, selected, profile)
        reports.append(report)
        failures += bool(failed)
        Repeated(reports).write(out_dir, stem)
    print(f"\n{Repeated(reports).goals()}")
    print(
        f"bench: {args.repeat} runs in {time.monotonic() - began:.0f}s, goals judged on the "
        f"median -> {out_dir}/{stem}.md"
    )
    return 1 if failures else 0


def _measure(
    args: argparse.Namespace, selected: list[str], profile: Profile
) -> tuple[Report, list[str]]:
    """Run the selected benchmarks and print the table: the report and the failed benchmarks."""
    tool, report = _new_report(profile, args.loadgen)
    ctx = _new_context(profile, report, tool)
    failed = _run_benchmarks(ctx, selected, keep=args.keep)
    print(f"\n{report.table()}\n")
    for note in report.notes:
        print(f"note: {note}")
    return report, failed


def _arguments_ok(args: argparse.Namespace, selected: list[str], partial: bool) -> bool:
    """Whether the selection can run; says why on stderr when it cannot."""
    unknown = [b for b in selected if b not in BENCHMARKS]
    if unknown:
        print(f"bench/run: unknown benchmark(s) {', '.join(unknown)}", file=sys.stderr)
        return False
    if args.merge and (args.quick or not partial):
        print("bench/run: --merge needs --only and the full length", file=sys.stderr)
        return False
    if args.repeat < 1 or (args.repeat > 1 and args.merge):
        # a merge replaces one run's rows; a result of several runs is not one run
        print("bench/run: --repeat N needs N >= 1, and no --merge", file=sys.stderr)
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


def _destination(out: Path | None, partial: bool) -> tuple[Path, str]:
    """The directory and file stem of a run's results: ``--out DIR`` gets ``latest*``; without
    it only a full run of every benchmark writes the committed ``bench/results/latest*``."""
    return out or RESULTS, "partial" if partial and out is None else "latest"


def _write_results(
    args: argparse.Namespace,
    report: Report,
    selected: list[str],
    *,
    partial: bool,
    failed: list[str],
    began: float,
) -> int:
    """Write the report (and merge it into ``latest*`` with ``--merge``); the exit code."""
    out_dir, stem = _destination(args.out, partial)
    report.write(out_dir, stem)
    print(
        f"bench: {len(report.rows)} rows in {time.monotonic() - began:.0f}s "
        f"-> {out_dir}/{stem}.json"
    )
    if args.merge:
        if failed:
            print("bench: not merged (a benchmark failed)", file=sys.stderr)
            return 1
        try:
            merged = report.merged_into(out_dir, selected)
        except ValueError as exc:
            print(f"bench: not merged: {exc}", file=sys.stderr)
            return 1
        merged.write(out_dir)
        print(f"bench: merged benchmark {', '.join(selected)} into {out_dir}/latest.json")
    return 1 if failed else 0
