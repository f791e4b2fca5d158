"""``bench/run`` as the tests start it: this interpreter, and the test suite's PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench_run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``bench/run ARGS`` to completion, output captured (the caller checks the exit code)."""
    env = dict(os.environ)
    if "LOOPING_TEST_PG_DSN" in env:
        env.setdefault("BENCH_PG_DSN", env["LOOPING_TEST_PG_DSN"])
    return subprocess.run(
        [str(ROOT / "bench" / "run"), *map(str, args)],
        cwd=ROOT,
        env={**env, "BENCH_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
