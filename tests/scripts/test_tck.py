"""``scripts/tck`` refuses a run it cannot make before it touches the database (the TCK
itself needs the network to be fetched, so CI runs only these refusals)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tck(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "TCK_DIR"}
    return subprocess.run(
        [str(ROOT / "scripts" / "tck"), *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_an_unknown_transport_is_refused_with_the_usage():
    done = _tck("soap")
    assert done.returncode == 2
    assert "usage: TCK_DIR=" in done.stderr


def test_a_run_needs_a_tck_checkout_with_its_venv(tmp_path: Path):
    assert "TCK_DIR" in _tck("jsonrpc").stderr
    done = _tck("grpc", TCK_DIR=str(tmp_path))
    assert done.returncode == 2
    assert f"no venv in {tmp_path}/.venv" in done.stderr
