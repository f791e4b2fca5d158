"""The rows of several runs as one result: each row once, with its medians and every run's figures.

``bench/run --repeat N`` writes its ``latest.json`` in this shape, and ``bench.summary`` reads
it back into the runs' rows. A row is one (benchmark, metric, baseline) of ``bench.report``;
its median value, baseline value and ratio are each the median over the runs that have the row
(the ratio cut like the rows, so a median just under its goal is a miss), and ``runs`` holds
each run's ``[value, baseline_value, ratio]``, or ``null`` where that run has no such row (a
benchmark that failed in it). The rows are kept once with the runs' figures beside them, not as
N copies of the table, so a result of several full runs stays a file one can read.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.report import Row, cut_ratio

Key = tuple[str, str, str | None]


@dataclass(frozen=True)
class RowRuns:
    """One row over the runs: ``runs[k]`` is run ``k``'s row, ``None`` where it has none."""

    runs: tuple[Row | None, ...]

    @property
    def present(self) -> list[Row]:
        return [r for r in self.runs if r is not None]

    @property
    def median(self) -> Row:
        """The row with the median of each figure over the runs that have it."""
        rows = self.present
        first = rows[0]
        ratios = [r.ratio for r in rows if r.ratio is not None]
        return Row(
            first.benchmark,
            first.metric,
            statistics.median(r.value for r in rows),
            first.unit,
            first.baseline,
            _median([r.baseline_value for r in rows]),
            cut_ratio(statistics.median(ratios)) if ratios else None,
            first.goal,
        )


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def row_runs(runs: Sequence[Sequence[Row]]) -> list[RowRuns]:
    """Every row of any run, in the order of its first appearance, over all the runs."""
    found: dict[Key, list[Row | None]] = {}
    for k, rows in enumerate(runs):
        for r in rows:
            found.setdefault((r.benchmark, r.metric, r.baseline), [None] * len(runs))[k] = r
    return [RowRuns(tuple(figures)) for figures in found.values()]


def _figure(value: float | None) -> float | None:
    """A measured value to six significant digits, more than any measurement here holds (the
    ratios are cut to three decimals already): several full runs stay a file of a readable
    size."""
    return None if value is None else float(f"{value:.6g}")


def to_json(runs: Sequence[Sequence[Row]]) -> list[dict[str, Any]]:
    """The rows of ``runs``, each once: its median figures and ``runs``, every run's figures."""
    out = []
    for row in row_runs(runs):
        m = row.median
        out.append(
            {
                "benchmark": m.benchmark,
                "metric": m.metric,
                "value": _figure(m.value),
                "unit": m.unit,
                "baseline": m.baseline,
                "baseline_value": _figure(m.baseline_value),
                "ratio": m.ratio,
                "goal": m.goal,
                "runs": [
                    None if r is None else [_figure(r.value), _figure(r.baseline_value), r.ratio]
                    for r in row.runs
                ],
            }
        )
    return out


def from_json(rows: Sequence[dict[str, Any]], count: int) -> list[list[Row]]:
    """The ``count`` runs' rows back from ``to_json``'s list (``ValueError`` when malformed)."""
    runs: list[list[Row]] = [[] for _ in range(count)]
    for doc in rows:
        figures = doc["runs"]
        if len(figures) != count:
            raise ValueError(f"a row holds {len(figures)} runs, not {count}")
        for k, run in enumerate(figures):
            if run is not None:
                value, baseline_value, ratio = run
                runs[k].append(
                    Row(
                        doc["benchmark"],
                        doc["metric"],
                        value,
                        doc["unit"],
                        doc["baseline"],
                        baseline_value,
                        ratio,
                        doc["goal"],
                    )
                )
    return runs
