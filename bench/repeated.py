"""``bench/run --repeat N``: N runs of the selected benchmarks as one result, every goal judged
on the median of the runs.

Each run measures every selected benchmark with its baselines side by side, as a single run
does (``bench.report``). One run's ratio at c = 1 moves with the neighbours' load between runs
minutes apart, so a goal is met when the median of the runs' ratios meets it, whatever one
run did (``bench.summary``: median, range and the runs that met it).

``latest.json`` holds ``repeat``, the goal verdicts (``goals``, ``a2a_sdk_share_of_bare``) and
every row once with its medians and each run's figures (``bench.runs``); ``latest.md`` the
goals on the median, then every row's median with each run's value and ratio, then each run's
notes; ``latest-meta.json`` the machine and each run's date and notes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import runs, summary
from bench.report import Report, Row, num, ratio_text

JUDGED_ON = "the median of the runs' ratios"


@dataclass(frozen=True)
class Repeated:
    """The reports of the runs made so far, in order (at least one)."""

    reports: Sequence[Report]

    @property
    def rows(self) -> list[list[Row]]:
        return [report.rows for report in self.reports]

    @property
    def names(self) -> list[str]:
        return [f"run {k}" for k in range(1, len(self.reports) + 1)]

    def goals(self) -> str:
        """The goal verdicts on the median (``bench.summary``'s table)."""
        return summary.markdown(self.names, self.rows)

    def as_json(self) -> dict[str, Any]:
        return {
            "repeat": len(self.reports),
            "judged_on": JUDGED_ON,
            **summary.as_json(self.rows),
            "rows": runs.to_json(self.rows),
        }

    def meta(self) -> dict[str, Any]:
        first = self.reports[0]
        return {
            "profile": first.profile,
            "loadgen": first.loadgen,
            "repeat": len(self.reports),
            "machine": first.machine,
            "runs": [{"date": r.machine.get("date", "?"), "notes": r.notes} for r in self.reports],
        }

    def markdown(self) -> str:
        dates = [str(r.machine.get("date", "?")) for r in self.reports]
        when = f"{len(dates)} runs, {dates[0]} to {dates[-1]}"
        out = [
            self.reports[0].header(when),
            "",
            f"Each goal is judged on {JUDGED_ON} (range: the lowest and the highest run).",
            "",
            self.goals().rstrip("\n"),
            "",
            "Every row: its median over the runs, then each run's figure in run order.",
            "",
            "| benchmark | metric | value | baseline | ratio | goal |",
            "|---|---|---:|---|---:|---:|",
            *(_markdown_row(row) for row in runs.row_runs(self.rows)),
        ]
        for name, report in zip(self.names, self.reports, strict=True):
            if report.notes:
                out += ["", f"Notes of {name}:", "", *(f"- {n}" for n in report.notes)]
        return "\n".join(out) + "\n"

    def write(self, out_dir: Path, stem: str) -> None:
        """``<stem>.json``, ``<stem>.md`` and ``<stem>-meta.json`` in ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{stem}.json").write_text(_json_lines(self.as_json()))
        (out_dir / f"{stem}.md").write_text(self.markdown())
        (out_dir / f"{stem}-meta.json").write_text(json.dumps(self.meta(), indent=1) + "\n")


def _figures(values: Sequence[str]) -> str:
    return " / ".join(values)


def _markdown_row(row: runs.RowRuns) -> str:
    m = row.median
    values = _figures([num(r.value) if r else "-" for r in row.runs])
    base = f"{m.baseline} {num(m.baseline_value)}" if m.baseline else ""
    ratio = ratio_text(m)
    if m.ratio is not None:
        ratio += f" ({_figures([ratio_text(r) if r else '-' for r in row.runs])})"
    goal = f"≥ {m.goal:g}x {'✓' if m.verdict == 'ok' else '✗'}" if m.goal else ""
    return (
        f"| {m.benchmark} | {m.metric} | {num(m.value)} {m.unit} ({values}) | {base} | {ratio} "
        f"| {goal} |"
    )


def _json_lines(doc: dict[str, Any]) -> str:
    """``doc`` with each list's items on a line of their own: a reader (and a diff) sees one
    row per line, and several full runs stay a file of a readable size."""
    parts = []
    for key, value in doc.items():
        if isinstance(value, list):
            items = ",\n  ".join(json.dumps(v, ensure_ascii=False) for v in value)
            parts.append(f" {json.dumps(key)}: [\n  {items}\n ]")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
