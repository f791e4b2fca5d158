"""``python -m bench.summary RUN...``: the goal rows of several runs, side by side.

One run's ratio at c = 1 sits at its line on many hosts and moves with the neighbours' load
between runs minutes apart (docs/performance.md), so a verdict from one run says little
there. This reads the ``latest.json`` of several runs (``bench/run --out DIR``, or one
``bench/run --repeat N`` result holding N runs) and prints, for every row with a goal, the
median ratio, the range, how many runs met the goal and the verdict on the median (what
``bench/run --repeat N`` judges each goal on); and, for each GetTask
cell, the a2a-sdk's share of the bare endpoint's rate, which says which of the two GetTask
goals binds (4 x the share is the fraction of the bare rate the a2a-sdk goal asks for).
``--out FILE.md`` writes the table there and the figures as JSON next to it.

The rows come from ``bench.report``; nothing here measures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.b2_gettask import BARE_GOAL, SDK_GOAL
from bench.report import Row, cut_ratio
from bench.runs import from_json as runs_from_json

A2A, BARE = "a2a-sdk", "bare"


@dataclass(frozen=True)
class Spread:
    """One goal row (``benchmark``, ``metric``, ``baseline``) over the runs that carry it."""

    benchmark: str
    metric: str
    baseline: str
    goal: float
    ratios: tuple[float, ...]

    @property
    def median(self) -> float:
        # cut like the rows themselves: a median just under its goal must not read as met
        return cut_ratio(statistics.median(self.ratios))

    @property
    def met(self) -> int:
        return sum(1 for r in self.ratios if r >= self.goal)

    @property
    def median_meets(self) -> bool:
        return self.median >= self.goal


@dataclass(frozen=True)
class Share:
    """The a2a-sdk's rate over the bare endpoint's in one GetTask cell, over the runs."""

    benchmark: str
    metric: str
    shares: tuple[float, ...]

    @property
    def median(self) -> float:
        return round(statistics.median(self.shares), 3)


def load_runs(path: Path) -> list[list[Row]]:
    """The rows of each run in a result: ``path`` is a ``latest.json`` (or ``partial.json``) or
    a directory holding one; one run's list of rows, or ``bench/run --repeat N``'s N runs."""
    file = path
    if path.is_dir():
        file = next(
            (path / n for n in ("latest.json", "partial.json") if (path / n).is_file()), path
        )
    try:
        data = json.loads(file.read_text())
        if isinstance(data, dict):
            return runs_from_json(data["rows"], int(data["repeat"]))
        return [[Row(**r) for r in data]]
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{path}: not a bench result ({type(exc).__name__})") from exc


def load_run(path: Path) -> list[Row]:
    """The rows of a result of one run (``ValueError`` for a result of several)."""
    found = load_runs(path)
    if len(found) != 1:
        raise ValueError(f"{path}: holds {len(found)} runs, not one")
    return found[0]


def spreads(runs: Sequence[Sequence[Row]]) -> list[Spread]:
    """Every row with a goal, in the order of its first appearance, over the runs that have it."""
    found: dict[tuple[str, str, str, float], list[float]] = {}
    for rows in runs:
        for r in rows:
            if r.goal is not None and r.ratio is not None and r.baseline is not None:
                found.setdefault((r.benchmark, r.metric, r.baseline, r.goal), []).append(r.ratio)
    return [Spread(*key, tuple(ratios)) for key, ratios in found.items()]


def shares(runs: Sequence[Sequence[Row]]) -> list[Share]:
    """The a2a-sdk's share of the bare rate for every metric measured against both, per run."""
    found: dict[tuple[str, str], list[float]] = {}
    for rows in runs:
        a2a = {(r.benchmark, r.metric): r.baseline_value for r in rows if r.baseline == A2A}
        for r in rows:
            key = (r.benchmark, r.metric)
            sdk = a2a.get(key)
            if r.baseline == BARE and r.goal is not None and sdk and r.baseline_value:
                found.setdefault(key, []).append(sdk / r.baseline_value)
    return [Share(*key, tuple(values)) for key, values in found.items()]


def markdown(names: Sequence[str], runs: Sequence[Sequence[Row]]) -> str:
    rows = spreads(runs)
    out = [
        f"{len(runs)} runs: {', '.join(names)}.",
        "",
        "| benchmark | metric | baseline | runs | median | range | goal | met |",
        "|---|---|---|---:|---:|---|---|---:|",
    ]
    for s in rows:
        verdict = "✓" if s.median_meets else "✗"
        out.append(
            f"| {s.benchmark} | {s.metric} | {s.baseline} | {len(s.ratios)} | {s.median:.3f}x "
            f"| {min(s.ratios):.3f}-{max(s.ratios):.3f}x | ≥ {s.goal:g}x {verdict} (median) "
            f"| {s.met} of {len(s.ratios)} |"
        )
    share_rows = shares(runs)
    if share_rows:
        out += [
            "",
            # the threshold of bench.b2_gettask.binding_goal_note, from the same goals
            f"The a2a-sdk's share of the bare rate (where it exceeds {BARE_GOAL / SDK_GOAL:g}, "
            f"{SDK_GOAL:g}x the a2a-sdk asks for more than the {BARE_GOAL:g}x bare goal):",
            "",
            "| benchmark | metric | median | range |",
            "|---|---|---:|---|",
        ]
        out += [
            f"| {s.benchmark} | {s.metric} | {s.median:.3f} "
            f"| {min(s.shares):.3f}-{max(s.shares):.3f} |"
            for s in share_rows
        ]
    return "\n".join(out) + "\n"


def as_json(runs: Sequence[Sequence[Row]]) -> dict[str, list[dict[str, object]]]:
    return {
        "goals": [
            {
                **asdict(s),
                "median": s.median,
                "met": s.met,
                "runs": len(s.ratios),
                "median_meets_goal": s.median_meets,
            }
            for s in spreads(runs)
        ],
        "a2a_sdk_share_of_bare": [{**asdict(s), "median": s.median} for s in shares(runs)],
    }


def write(out: Path, names: Sequence[str], runs: Sequence[Sequence[Row]]) -> str:
    """Write ``out`` (markdown) and ``out`` with ``.json`` (the figures); the markdown."""
    text = markdown(names, runs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(as_json(runs), indent=1) + "\n")
    return text


def main(argv: Iterable[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.summary", description=__doc__)
    p.add_argument("runs", nargs="+", type=Path, help="result directories or latest.json files")
    p.add_argument("--out", type=Path, default=None, help="write the table here (and .json)")
    args = p.parse_args(list(argv) if argv is not None else None)
    names: list[str] = []
    found: list[list[Row]] = []
    try:
        for path in args.runs:
            rows = load_runs(path)
            found += rows
            names += (
                [str(path)]
                if len(rows) == 1
                else [f"{path} run {k}" for k in range(1, len(rows) + 1)]
            )
    except ValueError as exc:
        print(f"bench.summary: {exc}", file=sys.stderr)
        return 2
    text = write(args.out, names, found) if args.out else markdown(names, found)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
