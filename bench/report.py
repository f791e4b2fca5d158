"""Result rows, the printed table, ``latest.json`` and ``latest.md``.

Every row is one ratio oriented so that higher is better (``baseline / edge`` for latencies,
``edge / baseline`` for rates, ``1k-latency / 1M-latency`` for growth) with its goal, or no
goal where the issue sets none (informational rows).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, overload

from bench.host import IdleState, cpu_name


@dataclass(frozen=True)
class Row:
    benchmark: str
    metric: str
    value: float
    unit: str
    baseline: str | None = None
    baseline_value: float | None = None
    ratio: float | None = None
    goal: float | None = None

    @property
    def verdict(self) -> str:
        if self.goal is None or self.ratio is None:
            return ""
        return "ok" if self.ratio >= self.goal else "MISS"


def rate_row(
    benchmark: str,
    metric: str,
    value: float,
    unit: str,
    baseline: str | None,
    baseline_value: float | None,
    goal: float | None,
) -> Row:
    """A rate (higher is better): ratio = value / baseline."""
    ratio = value / baseline_value if baseline_value else None
    return Row(benchmark, metric, value, unit, baseline, baseline_value, cut_ratio(ratio), goal)


def latency_row(
    benchmark: str,
    metric: str,
    value: float,
    unit: str,
    baseline: str | None,
    baseline_value: float | None,
    goal: float | None,
) -> Row:
    """A latency (lower is better): ratio = baseline / value, so higher is better."""
    ratio = baseline_value / value if baseline_value and value else None
    return Row(benchmark, metric, value, unit, baseline, baseline_value, cut_ratio(ratio), goal)


@overload
def cut_ratio(value: float) -> float: ...
@overload
def cut_ratio(value: None) -> None: ...
def cut_ratio(value: float | None) -> float | None:
    """``value`` cut (not rounded) to three decimals, so a ratio never reads above what was
    measured: rounded, 0.3495 of the bare rate would become 0.350 and meet the 0.35x goal it
    missed. Every goal has at most three decimals, so the
    cut ratio meets a goal exactly when the measured one does; the 1e-9 only absorbs binary
    noise (1.001 * 1000 is 1000.9999999999999 in floating point)."""
    return None if value is None else math.floor(value * 1000 + 1e-9) / 1000


def ratio_text(row: Row) -> str:
    """Two decimals, or three where two would round a missed goal up to it (0.349x of a
    0.35x goal prints as 0.349x, not 0.35x)."""
    if row.ratio is None:
        return ""
    text = f"{row.ratio:.2f}"
    if row.verdict == "MISS" and float(text) >= (row.goal or 0):
        text = f"{row.ratio:.3f}"
    return f"{text}x"


@dataclass
class Report:
    profile: str
    loadgen: str = "?"
    machine: dict[str, Any] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(f"  {format_row(row)}", flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)

    # --- output ----------------------------------------------------------------------------

    def table(self) -> str:
        header = ("benchmark", "metric", "value", "baseline", "ratio", "goal", "")
        lines = [header]
        for r in self.rows:
            lines.append(
                (
                    r.benchmark,
                    r.metric,
                    f"{num(r.value)} {r.unit}",
                    f"{r.baseline} {num(r.baseline_value)}" if r.baseline else "",
                    ratio_text(r),
                    f">= {r.goal:g}x" if r.goal is not None else "",
                    r.verdict,
                )
            )
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(s.rstrip() for s in out)

    def header(self, when: str | None = None) -> str:
        """The profile, load generator and machine; ``when`` replaces ``run DATE``."""
        m = self.machine
        return (
            f"Profile `{self.profile}`, load generator: {self.loadgen}. "
            f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
            f"{m.get('memory_gib', '?')} GiB, {m.get('os', '?')}, Python {m.get('python', '?')}, "
            f"PostgreSQL {m.get('postgres', '?')}"
            + (f", {m['idle']}" if m.get("idle") else "")
            + f"; {when or 'run ' + str(m.get('date', '?'))}"
            + (f"; {m['rerun']}." if m.get("rerun") else ".")
        )

    def markdown(self) -> str:
        out = [
            self.header(),
            "",
            "| benchmark | metric | value | baseline | ratio | goal |",
            "|---|---|---:|---|---:|---:|",
        ]
        for r in self.rows:
            base = f"{r.baseline} {num(r.baseline_value)}" if r.baseline else ""
            ratio = ratio_text(r)
            goal = f"≥ {r.goal:g}x {'✓' if r.verdict == 'ok' else '✗'}" if r.goal else ""
            out.append(
                f"| {r.benchmark} | {r.metric} | {num(r.value)} {r.unit} | {base} | {ratio} "
                f"| {goal} |"
            )
        if self.notes:
            out.append("")
            out.extend(f"- {n}" for n in self.notes)
        return "\n".join(out) + "\n"

    def write(self, out_dir: Path, stem: str = "latest") -> None:
        """``<stem>.json`` (the rows), ``<stem>.md`` and ``<stem>-meta.json`` in ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        rows = [asdict(r) for r in self.rows]
        (out_dir / f"{stem}.json").write_text(json.dumps(rows, indent=1) + "\n")
        (out_dir / f"{stem}.md").write_text(self.markdown())
        meta = {"profile": self.profile, "loadgen": self.loadgen, "machine": self.machine}
        meta["notes"] = self.notes
        (out_dir / f"{stem}-meta.json").write_text(json.dumps(meta, indent=1) + "\n")

    def merged_into(self, out_dir: Path, rerun: list[str], stem: str = "latest") -> Report:
        """The committed full run in ``out_dir`` with the rows and notes of the benchmarks in
        ``rerun`` replaced by this run's (same profile and load generator required: a quick
        row must never land in the full table). Rows stay in benchmark order."""
        meta = json.loads((out_dir / f"{stem}-meta.json").read_text())
        if meta.get("repeat", 1) != 1:
            raise ValueError(
                f"{out_dir / stem}.json holds {meta['repeat']} runs (bench/run --repeat): a "
                "merge replaces the rows of one run"
            )
        if meta.get("profile") != self.profile or meta.get("loadgen") != self.loadgen:
            raise ValueError(
                f"cannot merge a {self.profile!r} run into the committed {meta.get('profile')!r} "
                "run (or the load generators differ)"
            )
        old_rows = [Row(**r) for r in json.loads((out_dir / f"{stem}.json").read_text())]

        def number(text: str) -> str:
            return text.split(" ", 1)[0]

        kept = [r for r in old_rows if number(r.benchmark) not in rerun]
        rows = sorted(kept + self.rows, key=lambda r: int(number(r.benchmark) or 0))
        kept_notes = [n for n in meta.get("notes", []) if number(n) not in rerun]
        notes = sorted(kept_notes + self.notes, key=lambda n: number(n))
        machine = dict(meta.get("machine", {}))
        machine["rerun"] = (
            f"benchmark {', '.join(rerun)} re-run {self.machine.get('date', '?')} "
            "(same machine, same profile)"
        )
        return Report(self.profile, self.loadgen, machine, rows, notes)


def format_row(r: Row) -> str:
    text = f"[{r.benchmark}] {r.metric}: {num(r.value)} {r.unit}"
    if r.baseline:
        text += f" vs {r.baseline} {num(r.baseline_value)}"
    if r.ratio is not None:
        text += f" -> {r.ratio:.2f}x"
    if r.goal is not None:
        text += f" (goal >= {r.goal:g}x: {r.verdict})"
    return text


def num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def machine_info(pg_version: str, loadgen: str, idle: IdleState) -> dict[str, Any]:
    fallback = platform.processor() or "?"
    try:
        cpu = cpu_name(Path("/proc/cpuinfo").read_text(), fallback)
    except OSError:
        cpu = fallback
    mem_gib: float | str = "?"
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
        mem_gib = round(kb / 1024 / 1024, 1)
    except (OSError, AttributeError):
        pass
    os_name = platform.platform(terse=True)
    try:
        found = re.search(r'PRETTY_NAME="([^"]+)"', Path("/etc/os-release").read_text())
        os_name = found.group(1) if found else os_name
    except OSError:
        pass
    wrk = ""
    if shutil.which("wrk"):
        run = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
        wrk = (run.stdout or run.stderr).split("\n", 1)[0].strip()
    import datetime

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": os_name,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgres": pg_version,
        "idle": idle.describe(),
        "loadgen": loadgen,
        "wrk": wrk,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
