"""Smoke tests of the benchmark suite: every benchmark runs briefly (``bench/run --quick
--only N``) and produces numbers. No timing is asserted: only that rows come out, with the
documented shape, finite positive values and ratios consistent with their values.

The fast tests cover the pieces with logic of their own (ratio orientation, pool files,
push parsing); the slow ones start real servers, PostgreSQL databases and the load generator.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.b2_gettask import binding_goal_note, round_spread_note, steal_note
from bench.loadgen import HttpResult, write_pool
from bench.procs import cpu_seconds_of, postgres_cpu_seconds
from bench.profile import _finish_py_spy
from bench.receiver import _task_and_state
from bench.report import Report, latency_row, rate_row
from tests.bench.runner import bench_run

ROOT = Path(__file__).resolve().parents[2]
FIELDS = {"benchmark", "metric", "value", "unit", "baseline", "baseline_value", "ratio", "goal"}


def test_rates_and_latencies_are_oriented_so_higher_is_better() -> None:
    rate = rate_row("b", "req/s", 300.0, "/s", "sdk", 100.0, 4.0)
    assert rate.ratio == 3.0 and rate.verdict == "MISS"
    latency = latency_row("b", "p50", 2.0, "ms", "sdk", 8.0, 3.0)
    assert latency.ratio == 4.0 and latency.verdict == "ok"
    alone = rate_row("b", "rss", 100.0, "MiB", None, None, None)
    assert alone.ratio is None and alone.verdict == ""


def test_a_ratio_just_under_its_goal_is_a_miss_in_every_output(tmp_path: Path) -> None:
    # 1,546 against 4,425 req/s is 0.3495 of the bare rate, which rounding would make 0.350 and
    # a met 0.35x goal. Ratios are cut, not rounded.
    under = rate_row("2 GetTask", "req/s 2p c1", 1546.43, "/s", "bare", 4424.63, 0.35)
    assert under.ratio == 0.349 and under.verdict == "MISS"
    at = rate_row("2 GetTask", "req/s 1p c1", 350.0, "/s", "bare", 1000.0, 0.35)
    assert at.ratio == 0.35 and at.verdict == "ok"
    # binary noise must not cut an exact ratio below itself (1.001 * 1000 < 1001 in floats)
    assert rate_row("b", "r", 1001.0, "/s", "x", 1000.0, 1.001).verdict == "ok"
    report = Report(profile="quick", loadgen="wrk", machine={})
    report.rows.extend([under, at])
    report.write(tmp_path)
    rows = json.loads((tmp_path / "latest.json").read_text())
    assert [r["ratio"] for r in rows] == [0.349, 0.35]
    markdown = (tmp_path / "latest.md").read_text()
    assert "| 0.349x | ≥ 0.35x ✗ |" in markdown and "| 0.35x | ≥ 0.35x ✓ |" in markdown
    assert "0.349x  >= 0.35x  MISS" in report.table()


def test_report_writes_json_rows_and_markdown(tmp_path: Path) -> None:
    report = Report(profile="quick", loadgen="wrk", machine={"cpu": "x", "cores": 2})
    report.rows.append(
        rate_row("1 token verification", "verifications/s", 6.0, "/s", "raw", 10.0, 0.6)
    )
    report.write(tmp_path)
    rows = json.loads((tmp_path / "latest.json").read_text())
    assert rows == [
        {
            "benchmark": "1 token verification",
            "metric": "verifications/s",
            "value": 6.0,
            "unit": "/s",
            "baseline": "raw",
            "baseline_value": 10.0,
            "ratio": 0.6,
            "goal": 0.6,
        }
    ]
    markdown = (tmp_path / "latest.md").read_text()
    assert "| 1 token verification | verifications/s |" in markdown and "0.60x" in markdown


def test_pool_file_pairs_every_token_with_a_body(tmp_path: Path) -> None:
    path = write_pool(tmp_path / "p.pool", ["t1", "t2", "t3"], ["a", "b"])
    assert path.read_text().splitlines() == ["t1\ta", "t2\tb", "t3\ta"]


def test_receiver_reads_task_and_status_update_pushes() -> None:
    task = {"task": {"id": "t1", "status": {"state": "TASK_STATE_COMPLETED"}}}
    update = {"statusUpdate": {"taskId": "t2", "status": {"state": "TASK_STATE_WORKING"}}}
    assert _task_and_state(task) == ("t1", "TASK_STATE_COMPLETED")
    assert _task_and_state(update) == ("t2", "TASK_STATE_WORKING")
    assert _task_and_state(["not", "a", "push"]) == (None, None)


def _result(requests: int, cpu: float | None) -> HttpResult:
    return HttpResult("wrk", 1, requests, 1.0, 1.0, 1.0, 1.0, 1.0, 0, 0, server_cpu_seconds=cpu)


def test_server_cpu_per_request_adds_up_over_rounds() -> None:
    combined = HttpResult.combine([_result(1000, 0.2), _result(3000, 0.6)])
    assert combined.server_cpu_seconds == pytest.approx(0.8)
    assert combined.cpu_us_per_request == pytest.approx(200.0)
    # One round without a measurement: no figure rather than a wrong one.
    assert HttpResult.combine([_result(1000, 0.2), _result(1000, None)]).cpu_us_per_request is None
    assert _result(0, 0.1).cpu_us_per_request is None


def _rounds(*rates: float) -> HttpResult:
    return HttpResult.combine([_result(int(rate), None) for rate in rates])


def test_combined_result_keeps_each_rounds_rate_in_order() -> None:
    assert _rounds(1000, 3000, 2000).round_rates == (1000.0, 3000.0, 2000.0)
    assert _result(1000, None).round_rates == ()


def test_round_spread_note_pairs_the_rounds_measured_together() -> None:
    edge, sdk, bare = _rounds(1500, 2000), _rounds(400, 400), _rounds(4000, 5000)
    note = round_spread_note("1p c1", edge, sdk, bare)
    # Round 1: 3.75x / 0.375x; round 2: 5.00x / 0.40x.
    assert note == (
        "1p c1: round by round (2 rounds, the servers taking turns) "
        "3.75-5.00x the a2a-sdk, 0.38-0.40x bare"
    )
    # One round, rounds that do not pair up, or a baseline round with nothing answered:
    # no range rather than a wrong one.
    assert round_spread_note("1p c1", _result(1500, None), sdk, bare) is None
    assert round_spread_note("1p c1", _rounds(1, 2, 3), sdk, bare) is None
    assert round_spread_note("1p c1", edge, _rounds(400, 0), bare) is None


def _ticks(host: int | None, steal: int | None) -> HttpResult:
    return HttpResult(
        "wrk", 1, 100, 1.0, 1.0, 1.0, 1.0, 1.0, 0, 0, host_ticks=host, steal_ticks=steal
    )


def test_steal_adds_up_over_rounds_and_is_noted_per_cell_only_past_one_per_cent() -> None:
    combined = HttpResult.combine([_ticks(200, 2), _ticks(200, 6)])
    assert (combined.host_ticks, combined.steal_ticks) == (400, 8)
    unmeasured = HttpResult.combine([_ticks(200, 2), _ticks(None, None)])
    assert (unmeasured.host_ticks, unmeasured.steal_ticks) == (None, None)
    # The cell is every server's rounds: 2 + 6 + 4 stolen of 1,200 ticks is 1.0 %; each
    # server's share is of its own turns, so a reader sees which ratio the steal leaned on.
    cell = {"edge": combined, "a2a-sdk": _ticks(400, 0), "bare": _ticks(400, 4)}
    assert steal_note("1p c1", cell) == (
        "1p c1: host steal time 1.0% of the vCPUs' time during the cell "
        "(edge 2.0%, a2a-sdk 0.0%, bare 1.0% of their own turns)"
    )
    quiet = {"edge": _ticks(400, 3), "a2a-sdk": _ticks(400, 0), "bare": _ticks(400, 0)}
    assert steal_note("1p c1", quiet) is None
    # Not measured (no /proc/stat) or no time passed: no note rather than a wrong one.
    unmeasured_cell = {"edge": _ticks(None, None), "a2a-sdk": _ticks(400, 40)}
    assert steal_note("1p c1", unmeasured_cell) is None
    assert steal_note("1p c1", {"edge": _ticks(0, 0)}) is None


def test_binding_goal_note_names_the_a2a_sdk_goal_only_when_it_is_the_stricter() -> None:
    # 4x an a2a-sdk at 0.11x bare asks for 0.44x bare: stricter than the 0.35x goal.
    note = binding_goal_note("1p c1", 349.0, 3169.0)
    assert note is not None
    assert "0.110x" in note and ">= 0.44x bare" in note
    # At 0.0875x (0.35 / 4) or below, the bare goal is the stricter one: no note.
    assert binding_goal_note("1p c1", 87.5, 1000.0) is None
    assert binding_goal_note("1p c16", 76.0, 1000.0) is None
    # A server that answered nothing gives no figure rather than a wrong one.
    assert binding_goal_note("1p c1", 0.0, 1000.0) is None
    assert binding_goal_note("1p c1", 100.0, 0.0) is None


def test_cpu_seconds_of_counts_this_process_and_not_a_gone_one() -> None:
    before = cpu_seconds_of(os.getpid())
    sum(i * i for i in range(300_000))  # burn a little CPU
    assert cpu_seconds_of(os.getpid()) > before > 0
    assert cpu_seconds_of(2**22 + 12345) == 0.0  # above the largest pid_max Linux allows


@pytest.mark.postgres
def test_postgres_cpu_seconds_counts_the_servers_processes() -> None:
    # The test suite's PostgreSQL runs on this machine (its processes are named postgres).
    assert postgres_cpu_seconds() > 0


def _run_bench(tmp_path: Path, *args: str) -> list[dict[str, object]]:
    done = bench_run("--quick", "--out", tmp_path, *args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((tmp_path / "latest.json").read_text())
    assert isinstance(rows, list) and rows
    return rows


def _check_rows(rows: list[dict[str, object]], prefix: str) -> None:
    mine = [r for r in rows if str(r["benchmark"]).startswith(prefix)]
    assert mine, rows
    for row in mine:
        assert set(row) == FIELDS
        value = row["value"]
        assert isinstance(value, float | int) and math.isfinite(value) and value >= 0
        if row["ratio"] is not None:
            assert isinstance(row["baseline_value"], float | int) and row["baseline_value"] > 0
            assert isinstance(row["ratio"], float | int) and row["ratio"] > 0


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("number", ["1", "2", "3", "4", "5", "6", "7", "8"])
def test_each_benchmark_runs_briefly_and_produces_numbers(tmp_path: Path, number: str) -> None:
    rows = _run_bench(tmp_path, "--only", number)
    _check_rows(rows, f"{number} ")
    if number == "2":
        baselines = {r["baseline"] for r in rows if r["goal"] is not None}
        assert baselines == {"a2a-sdk", "bare"}
        cpu = [r for r in rows if str(r["metric"]).startswith("server CPU per request")]
        assert {r["baseline"] for r in cpu} == {"a2a-sdk", "bare"}, rows
        trips = [r for r in rows if str(r["metric"]).startswith("PostgreSQL round trip c1")]
        assert len(trips) == 2 and all(r["value"] > 0 for r in trips), rows
    if number == "4":
        cpu = {str(r["metric"]): r["value"] for r in rows if "CPU per turn" in str(r["metric"])}
        sides = ("worker", "edge", "PostgreSQL")
        assert set(cpu) == {f"{side} CPU per turn, 1 worker process" for side in sides}, rows
        assert all(isinstance(v, float | int) and v > 0 for v in cpu.values()), rows
        xacts = [r for r in rows if str(r["metric"]).startswith("PostgreSQL transactions")]
        assert len(xacts) == 1 and xacts[0]["value"] > 1, rows
    if number == "5":
        # The worker's claim with each size's finished turns stored, against the smallest.
        claims = [r for r in rows if str(r["metric"]).startswith("worker claim p50")]
        assert len(claims) == 2 and all(r["goal"] is None for r in claims), rows
        assert claims[1]["baseline_value"] == claims[0]["value"], rows
    if number == "7":
        # Each attack's GetTask latency against the same load without one, and the size.
        latency = {str(r["metric"]) for r in rows if r["baseline"] == "no attack"}
        assert len(latency) == 8 and all("during" in m for m in latency), rows
        assert any(str(r["metric"]).startswith("server RSS") for r in rows), rows
    if number == "8":
        # The newcomers' wait behind the flood, against the turn length, with the issue's goal.
        (row,) = rows
        assert row["baseline"] == "turn length" and row["goal"] is not None, rows


@pytest.mark.slow
@pytest.mark.postgres
def test_python_fallback_load_generator_produces_numbers(tmp_path: Path) -> None:
    rows = _run_bench(tmp_path, "--only", "5", "--loadgen", "python")
    _check_rows(rows, "5 ")
    meta = json.loads((tmp_path / "latest-meta.json").read_text())
    assert "bench.pyload" in meta["loadgen"]


def test_a_failed_py_spy_says_why_instead_of_a_missing_file(tmp_path: Path) -> None:
    failing = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stderr.write('Permission denied'); sys.exit(3)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with pytest.raises(RuntimeError, match=r"exit 3\): Permission denied"):
        _finish_py_spy(failing, tmp_path / "never-written.collapsed")


@pytest.mark.slow
@pytest.mark.postgres
def test_the_profiler_samples_an_edge_under_load(tmp_path: Path) -> None:
    env = dict(os.environ)
    if "LOOPING_TEST_PG_DSN" in env:
        env.setdefault("BENCH_PG_DSN", env["LOOPING_TEST_PG_DSN"])
    out = tmp_path / "gettask.collapsed"
    done = subprocess.run(
        [sys.executable, "-m", "bench.profile", "gettask", "--seconds", "2", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "req/s" in done.stdout and "samples" in done.stdout
    # The signature check is on every sampled request's path (a distinct token each).
    assert "VerifyKey.verify" in out.read_text()
