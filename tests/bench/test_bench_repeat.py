"""``bench/run --repeat N``: N runs written as one result, every goal judged on the median.

Synthetic runs written by ``bench.repeated`` (nothing is measured here); the slow test of a
real ``bench/run --quick --repeat 2`` is in ``test_bench_summary.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import summary
from bench.repeated import Repeated
from bench.report import Report, Row, rate_row

GOAL = 4.0


def _report(sdk_ratio: float, date: str, *, with_memory: bool = True) -> Report:
    """One run: a GetTask cell against the a2a-sdk (goal 4x), and a row without a goal."""
    machine = {"cpu": "x", "cores": 2, "postgres": "15", "date": date}
    report = Report(profile="full", loadgen="wrk", machine=machine)
    report.rows.append(
        rate_row("2 GetTask", "req/s 1p c1", 400 * sdk_ratio, "/s", "a2a-sdk", 400, GOAL)
    )
    if with_memory:
        report.rows.append(rate_row("6 memory", "RSS idle", 100.0, "MiB", None, None, None))
    report.notes.append(f"2 GetTask: noted on {date}")
    return report


def _goal(result: Repeated) -> dict[str, object]:
    (goal,) = result.as_json()["goals"]
    return dict(goal)


def test_a_goal_met_on_the_median_is_met_though_one_run_missed_it() -> None:
    result = Repeated([_report(4.5, "d1"), _report(3.2, "d2"), _report(4.1, "d3")])
    goal = _goal(result)
    assert (goal["median"], goal["met"], goal["median_meets_goal"]) == (4.1, 2, True)
    assert "| 3 | 4.100x | 3.200-4.500x | ≥ 4x ✓ (median) | 2 of 3 |" in result.goals()
    markdown = result.markdown()
    # every row: the median, then each run's figure in run order
    assert (
        "| 2 GetTask | req/s 1p c1 | 1,640 /s (1,800 / 1,280 / 1,640) | a2a-sdk 400 "
        "| 4.10x (4.50x / 3.20x / 4.10x) | ≥ 4x ✓ |"
    ) in markdown


def test_a_goal_missed_on_the_median_is_missed_though_one_run_met_it() -> None:
    result = Repeated([_report(4.5, "d1"), _report(3.2, "d2"), _report(3.9, "d3")])
    goal = _goal(result)
    assert (goal["median"], goal["met"], goal["median_meets_goal"]) == (3.9, 1, False)
    assert "| 3.900x | 3.200-4.500x | ≥ 4x ✗ (median) | 1 of 3 |" in result.goals()
    assert "| 3.90x (4.50x / 3.20x / 3.90x) | ≥ 4x ✗ |" in result.markdown()


def test_the_result_records_every_run_and_reads_back(tmp_path: Path) -> None:
    reports = [_report(4.5, "d1"), _report(3.2, "d2", with_memory=False), _report(4.1, "d3")]
    Repeated(reports).write(tmp_path, "latest")
    doc = json.loads((tmp_path / "latest.json").read_text())
    assert doc["repeat"] == 3
    sdk, memory = doc["rows"]
    assert (sdk["value"], sdk["ratio"], sdk["goal"]) == (1640.0, 4.1, GOAL)
    assert sdk["runs"] == [[1800.0, 400.0, 4.5], [1280.0, 400.0, 3.2], [1640.0, 400.0, 4.1]]
    # a row missing from a run (its benchmark failed there): null, the median over the rest
    assert memory["runs"] == [[100.0, None, None], None, [100.0, None, None]]
    # read back as the runs' rows (values kept to six significant digits)
    back = summary.load_runs(tmp_path)
    assert [[(r.metric, r.baseline, r.ratio, r.goal) for r in run] for run in back] == [
        [(r.metric, r.baseline, r.ratio, r.goal) for r in report.rows] for report in reports
    ]
    assert [r.value for run in back for r in run] == pytest.approx(
        [r.value for report in reports for r in report.rows], rel=1e-6
    )
    with pytest.raises(ValueError, match="holds 3 runs"):
        summary.load_run(tmp_path)
    markdown = (tmp_path / "latest.md").read_text()
    assert markdown.splitlines()[0].endswith("PostgreSQL 15; 3 runs, d1 to d3.")
    assert "Notes of run 2:\n\n- 2 GetTask: noted on d2" in markdown
    meta = json.loads((tmp_path / "latest-meta.json").read_text())
    assert meta["repeat"] == 3 and [r["date"] for r in meta["runs"]] == ["d1", "d2", "d3"]
    # a merge replaces one run's rows: never into a result of several
    with pytest.raises(ValueError, match="holds 3 runs"):
        _report(5.0, "d4").merged_into(tmp_path, ["2"])


def test_the_summary_command_reads_a_repeated_result_as_its_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Repeated([_report(4.5, "d1"), _report(3.2, "d2")]).write(tmp_path / "r", "latest")
    single = tmp_path / "s"
    _report(4.1, "d3").write(single)
    assert summary.main([str(tmp_path / "r"), str(single)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"3 runs: {tmp_path / 'r'} run 1, {tmp_path / 'r'} run 2, {single}.")
    assert "| 4.100x | 3.200-4.500x | ≥ 4x ✓ (median) | 2 of 3 |" in out


def test_one_run_is_written_as_before(tmp_path: Path) -> None:
    # --repeat 1 (the default) writes a single run's list of rows, not a repeated result
    report = _report(4.5, "d1")
    report.write(tmp_path)
    assert isinstance(json.loads((tmp_path / "latest.json").read_text()), list)
    assert summary.load_run(tmp_path) == report.rows
    assert Row(**json.loads((tmp_path / "latest.json").read_text())[0]) == report.rows[0]
