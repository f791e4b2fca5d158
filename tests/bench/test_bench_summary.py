"""``bench.summary`` and ``bench/run --repeat``: the goal rows of several runs side by side.

The fast tests feed it result files written by ``bench.report``; the slow one makes two real
quick runs of benchmark 1 through ``bench/run --repeat 2`` (``test_bench_repeat.py`` has the
median judgement on synthetic runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import summary
from bench.report import Report, Row, rate_row
from tests.bench.runner import bench_run

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, name: str, edge: float, sdk: float, bare: float) -> Path:
    """A result directory with one GetTask cell measured against both baselines."""
    report = Report(profile="full", loadgen="wrk", machine={})
    report.rows.append(rate_row("2 GetTask", "req/s 1p c1", edge, "/s", "a2a-sdk", sdk, 4.0))
    report.rows.append(rate_row("2 GetTask", "req/s 1p c1", edge, "/s", "bare", bare, 0.35))
    report.rows.append(rate_row("2 GetTask", "p50 1p c1", 0.5, "ms", None, None, None))
    out = tmp_path / name
    report.write(out)
    return out


def test_median_range_and_runs_that_met_each_goal(tmp_path: Path) -> None:
    dirs = [
        _run(tmp_path, "a", 1600, 400, 4000),  # 4.0x / 0.40x: both met
        _run(tmp_path, "b", 1500, 500, 4500),  # 3.0x / 0.333x: both missed
        _run(tmp_path, "c", 1800, 400, 5000),  # 4.5x / 0.36x
    ]
    runs = [summary.load_run(d) for d in dirs]
    sdk, bare = summary.spreads(runs)
    assert (sdk.baseline, sdk.ratios, sdk.median, sdk.met, sdk.median_meets) == (
        "a2a-sdk",
        (4.0, 3.0, 4.5),
        4.0,
        2,
        True,
    )
    assert (bare.baseline, bare.median, bare.met) == ("bare", 0.36, 2)
    # rows without a goal are not summed up
    assert all(s.metric == "req/s 1p c1" for s in summary.spreads(runs))
    (share,) = summary.shares(runs)
    assert share.shares == (0.1, 500 / 4500, 0.08) and share.median == 0.1
    text = summary.markdown([d.name for d in dirs], runs)
    assert "| 2 GetTask | req/s 1p c1 | a2a-sdk | 3 | 4.000x | 3.000-4.500x | ≥ 4x ✓" in text
    assert "| 2 of 3 |" in text and "| 2 GetTask | req/s 1p c1 | 0.100 | 0.080-0.111 |" in text
    # the share that makes the a2a-sdk goal the stricter one, from benchmark 2's own goals
    assert "where it exceeds 0.0875, 4x the a2a-sdk asks for more than the 0.35x bare" in text


def test_an_even_median_just_under_its_goal_is_a_miss() -> None:
    # 0.349 and 0.350 have the median 0.3495: cut like the rows, it misses the 0.35x goal
    runs = [[Row("2 GetTask", "m", 1.0, "/s", "bare", 1.0, r, 0.35)] for r in (0.349, 0.35)]
    (spread,) = summary.spreads(runs)
    assert spread.median == 0.349 and not spread.median_meets and spread.met == 1


def test_a_row_missing_from_a_run_counts_over_the_runs_that_have_it() -> None:
    full = [Row("1 token verification", "v/s", 9.0, "/s", "raw", 7.0, 1.28, 0.6)]
    only_2 = [Row("2 GetTask", "m", 1.0, "/s", "bare", 2.0, 0.5, 0.35)]
    spreads = summary.spreads([full + only_2, only_2])
    assert [(s.benchmark, len(s.ratios)) for s in spreads] == [
        ("1 token verification", 1),
        ("2 GetTask", 2),
    ]


def test_the_command_writes_markdown_and_json_and_refuses_what_is_no_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = [_run(tmp_path, n, 1600, 400, 4000) for n in ("a", "b")]
    out = tmp_path / "sum" / "summary.md"
    assert summary.main([*map(str, dirs), "--out", str(out)]) == 0
    assert "2 runs:" in capsys.readouterr().out and out.read_text().startswith("2 runs:")
    figures = json.loads(out.with_suffix(".json").read_text())
    assert [g["median"] for g in figures["goals"]] == [4.0, 0.4]
    assert figures["a2a_sdk_share_of_bare"][0]["median"] == 0.1
    # a result file given directly reads the same
    assert summary.load_run(dirs[0] / "latest.json") == summary.load_run(dirs[0])
    (tmp_path / "junk.json").write_text("{not json")
    assert summary.main([str(tmp_path / "junk.json")]) == 2
    assert summary.main([str(tmp_path / "nothing-here")]) == 2
    err = capsys.readouterr().err
    assert "not a bench result" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["--repeat", "0", "--out", "x"],
        ["--repeat", "2", "--merge", "--out", "x"],
    ],
)
def test_repeat_needs_one_run_at_least_and_never_merges(args: list[str]) -> None:
    # a merge replaces the rows of one run: a result of several runs is not one
    done = bench_run("--only", "1", *args, timeout=60)
    assert done.returncode == 2 and "--repeat N needs" in done.stderr


@pytest.mark.slow
@pytest.mark.postgres
def test_repeat_makes_each_run_and_judges_the_goals_on_the_median(tmp_path: Path) -> None:
    done = bench_run("--quick", "--only", "1", "--repeat", "2", "--out", tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "bench: run 2 of 2" in done.stdout
    doc = json.loads((tmp_path / "latest.json").read_text())
    assert doc["repeat"] == 2 and doc["rows"]
    assert all(r["benchmark"].startswith("1 ") and len(r["runs"]) == 2 for r in doc["rows"])
    goals = doc["goals"]
    assert {g["baseline"] for g in goals} == {"raw Ed25519 (OpenSSL)", "raw Ed25519 (libsodium)"}
    assert all(g["runs"] == 2 and len(g["ratios"]) == 2 for g in goals)
    text = (tmp_path / "latest.md").read_text()
    assert "2 runs: run 1, run 2." in text and "(median)" in text
    assert "2 runs: run 1, run 2." in done.stdout
    assert [len(run) for run in summary.load_runs(tmp_path)] == [len(doc["rows"])] * 2
