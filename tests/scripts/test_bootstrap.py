"""``scripts/bootstrap`` in a copy whose Python only records how pip was called."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# ``python -m venv .venv`` makes a .venv/bin/python that records its arguments and prints what
# pip would without -q (a line per package, one already there, the summary).
_FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
echo "$*" >> "$(dirname "$0")/pip.log"
case " $* " in *" -q "*) exit 0;; esac
echo "Collecting httpx>=0.27 (from looping-edge==0.1.0)"
echo "Requirement already satisfied: idna in ./.venv/lib/python3/site-packages"
echo "Installing collected packages: httpx, looping-edge"
echo "Successfully installed httpx-0.28.1 looping-edge-0.1.0"
"""


def _checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap", tmp_path / "scripts" / "bootstrap")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    python = tmp_path / "fake-python"
    python.write_text(_FAKE_PYTHON)
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    return tmp_path, {**env, "PYTHON": str(python)}


def _pip_calls(checkout: Path) -> list[str]:
    return (checkout / ".venv" / "bin" / "pip.log").read_text().splitlines()


def _on_a_terminal(script: Path, env: dict[str, str]) -> str:
    """``script``'s output when its stdout and stderr are a terminal."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([str(script)], env=env, stdout=secondary, stderr=secondary)
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(primary)
    assert proc.wait(timeout=30) == 0, out
    return out.decode().replace("\r\n", "\n")


def test_a_first_install_says_what_it_does_and_ci_output_stays_small(tmp_path: Path) -> None:
    # Found by trying the quickstart: a fresh clone sat silent through the whole install.
    checkout, env = _checkout(tmp_path)
    script = checkout / "scripts" / "bootstrap"
    done = subprocess.run(
        [str(script)], env={**env, "CI": "true"}, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "bootstrap: creating .venv and installing looping-edge with its dependencies "
        "(may take a minute)",
        "bootstrap: .venv is ready",
    ]
    assert _pip_calls(checkout)[-1] == "-m pip install -q -e .[dev]"
    # installed: the next run says nothing and installs nothing
    again = subprocess.run([str(script)], env=env, capture_output=True, text=True, check=True)
    assert again.stdout == "" and len(_pip_calls(checkout)) == 2


def test_a_terminal_sees_a_line_per_package(tmp_path: Path) -> None:
    checkout, env = _checkout(tmp_path)
    out = _on_a_terminal(checkout / "scripts" / "bootstrap", env)
    assert out.splitlines() == [
        "bootstrap: creating .venv and installing looping-edge with its dependencies "
        "(may take a minute)",
        "Collecting httpx>=0.27 (from looping-edge==0.1.0)",
        "Installing collected packages: httpx, looping-edge",
        "bootstrap: .venv is ready",
    ]
    assert _pip_calls(checkout)[-1] == "-m pip install -e .[dev]"
    # a changed pyproject.toml is a re-install, and says so
    (checkout / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    out = _on_a_terminal(checkout / "scripts" / "bootstrap", env)
    assert out.startswith("bootstrap: pyproject.toml changed; installing dependencies")
