"""The load generator: ``wrk`` with ``lua/pool.lua`` (installed from Debian's packages when
missing and we are root), else the multi-process Python client ``bench.pyload``.

Both run in their own processes, read the same pool file (``<token>\\t<body>`` per line) and
report requests, duration, p50/p90/p99 latency and the count of bad answers (anything but
HTTP 200 with a JSON-RPC ``result``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

_N = TypeVar("_N", int, float)

HERE = Path(__file__).resolve().parent
LUA = HERE / "lua" / "pool.lua"


@dataclass(frozen=True)
class HttpResult:
    tool: str
    connections: int
    requests: int
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    bad: int
    pool_wraps: int
    # CPU time the server's process tree used during the run (``Ctx.load`` sets it).
    server_cpu_seconds: float | None = None
    # The rate of each round a combined result was made of, in order (``combine``).
    round_rates: tuple[float, ...] = ()
    # The machine's CPU ticks during the run, all and stolen (``Ctx.load`` sets them).
    host_ticks: int | None = None
    steal_ticks: int | None = None

    @classmethod
    def combine(cls, rounds: list[HttpResult]) -> HttpResult:
        """Rounds of one server at one concurrency as one result: requests and time add up
        (the rate is over all rounds); each percentile is the median of the rounds'."""
        if len(rounds) == 1:
            return rounds[0]
        return cls(
            tool=rounds[0].tool,
            connections=rounds[0].connections,
            requests=sum(r.requests for r in rounds),
            seconds=sum(r.seconds for r in rounds),
            p50_ms=statistics.median(r.p50_ms for r in rounds),
            p90_ms=statistics.median(r.p90_ms for r in rounds),
            p99_ms=statistics.median(r.p99_ms for r in rounds),
            mean_ms=statistics.median(r.mean_ms for r in rounds),
            bad=sum(r.bad for r in rounds),
            pool_wraps=sum(r.pool_wraps for r in rounds),
            server_cpu_seconds=_sum_or_none([r.server_cpu_seconds for r in rounds]),
            round_rates=tuple(r.rps for r in rounds),
            host_ticks=_sum_or_none([r.host_ticks for r in rounds]),
            steal_ticks=_sum_or_none([r.steal_ticks for r in rounds]),
        )

    @property
    def cpu_us_per_request(self) -> float | None:
        """The server's CPU per answered request, in µs (``None`` when not measured)."""
        if self.server_cpu_seconds is None or self.requests <= 0:
            return None
        return self.server_cpu_seconds / self.requests * 1e6

    @property
    def rps(self) -> float:
        good = max(self.requests - self.bad, 0)
        return good / self.seconds if self.seconds > 0 else 0.0


def ensure_wrk(choice: str) -> str:
    """Which load generator to use: ``wrk`` (installing it when allowed) or ``python``."""
    if choice == "python":
        return "python"
    if shutil.which("wrk") is None and os.geteuid() == 0 and shutil.which("apt-get"):
        print("  wrk not found: installing it from Debian's packages (apt-get install wrk)")
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "check": False}
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(["apt-get", "install", "-y", "wrk"], env=env, **quiet).returncode:  # type: ignore[call-overload]
            subprocess.run(["apt-get", "update"], env=env, **quiet)  # type: ignore[call-overload]
            subprocess.run(["apt-get", "install", "-y", "wrk"], env=env, **quiet)  # type: ignore[call-overload]
    if shutil.which("wrk") is not None:
        return "wrk"
    if choice == "wrk":
        raise RuntimeError("wrk is not installed and could not be installed")
    print("  wrk unavailable: using the multi-process Python client (bench.pyload)")
    return "python"


def write_pool(path: Path, tokens: list[str], bodies: list[str]) -> Path:
    """One line per request: token ``k`` with body ``k % len(bodies)``."""
    with path.open("w") as out:
        for k, token in enumerate(tokens):
            out.write(f"{token}\t{bodies[k % len(bodies)]}\n")
    return path


def run(
    tool: str,
    *,
    port: int,
    pool_file: Path,
    connections: int,
    seconds: float,
    path: str = "/a2a",
    salt: str = "s",
) -> HttpResult:
    if tool == "wrk":
        argv = _wrk_argv(port, pool_file, connections, seconds, path, salt)
    else:
        argv = _pyload_argv(port, pool_file, connections, seconds, path, salt)
    done = subprocess.run(
        argv, capture_output=True, text=True, check=False, cwd=HERE.parent, timeout=seconds + 120
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
    if line is None:
        raise RuntimeError(
            f"{tool} produced no result ({done.returncode}): {done.stderr.strip()[-1500:]}"
        )
    doc = json.loads(line.split(" ", 1)[1])
    if doc["bad"] and done.stderr:
        print("    " + done.stderr.strip().replace("\n", "\n    ")[:900])
    return _http_result(tool, connections, doc)


def _wrk_argv(
    port: int, pool_file: Path, connections: int, seconds: float, path: str, salt: str
) -> list[str]:
    # One wrk thread: wrk is cheap per request, and on two cores every thread we add takes
    # CPU from the server being measured.
    return [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",  # wrk takes whole seconds only
        "--timeout",
        "10s",
        "-s",
        str(LUA),
        f"http://127.0.0.1:{port}",
        "--",
        str(pool_file),
        path,
        salt,
    ]


def _pyload_argv(
    port: int, pool_file: Path, connections: int, seconds: float, path: str, salt: str
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench.pyload",
        "--port",
        str(port),
        "--file",
        str(pool_file),
        "--connections",
        str(connections),
        "--seconds",
        str(seconds),
        "--path",
        path,
        "--salt",
        salt,
    ]


def _http_result(tool: str, connections: int, doc: dict[str, Any]) -> HttpResult:
    """The result from the ``BENCH_JSON`` document both load generators print."""
    return HttpResult(
        tool=tool,
        connections=connections,
        requests=int(doc["requests"]),
        seconds=doc["duration_us"] / 1e6,
        p50_ms=doc["p50_us"] / 1000,
        p90_ms=doc["p90_us"] / 1000,
        p99_ms=doc["p99_us"] / 1000,
        mean_ms=doc["mean_us"] / 1000,
        bad=int(doc["bad"]) + int(doc.get("socket_errors", 0)),
        pool_wraps=int(doc["pool_wraps"]),
    )


def _sum_or_none(values: list[_N | None]) -> _N | None:
    """The sum, or ``None`` when any round was not measured (no figure rather than a
    wrong one)."""
    measured = [v for v in values if v is not None]
    if len(measured) < len(values):
        return None
    return sum(measured[1:], measured[0]) if measured else None
