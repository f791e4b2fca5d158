"""Helpers shared by the CLI commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.common import edge_command, printable


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("Demo agent", "Demo agent"),
        ("Agente español 😀", "Agente español 😀"),
        ("red \x1b[31m", "red \\x1b[31m"),
        ("two\nlines\r", "two\\nlines\\r"),
        ("rtl \u202e txt", "rtl \\u202e txt"),
        ("c1 \x9b", "c1 \\x9b"),
        ("line sep \u2028", "line sep \\u2028"),
    ],
)
def test_printable_escapes_what_would_split_or_restyle_a_terminal_row(
    stored: str, shown: str
) -> None:
    # Found by audit: `tenants list` printed a manifest name's ESC sequence as it was.
    assert printable(stored) == shown


ROOT = Path(__file__).resolve().parents[2]
OURS = Path(sys.executable).parent / "looping-edge"  # this installation's script
NO_VENV_PATH = "/usr/local/bin:/usr/bin:/bin"


def _runs_as_printed(command: str, cwd: Path, path: str) -> bool:
    done = subprocess.run(
        f"{command} --help",
        shell=True,
        cwd=cwd,
        env={**os.environ, "PATH": path},
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0


def test_the_printed_command_runs_from_the_checkout_without_an_activated_venv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by trying the quickstart: hints printed `looping-edge …`, "command not found"
    # from a checkout whose venv was not activated.
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", NO_VENV_PATH)
    command = edge_command()
    assert command == str(OURS.relative_to(ROOT))  # .venv/bin/looping-edge
    assert _runs_as_printed(command, ROOT, NO_VENV_PATH)


def test_the_bare_name_when_path_finds_this_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{OURS.parent}:{NO_VENV_PATH}")
    assert edge_command() == "looping-edge"


def test_another_directory_gets_the_absolute_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Another installation on PATH is not this one: the hint must run this one.
    other = tmp_path / "other-bin"
    other.mkdir()
    (other / "looping-edge").write_text("#!/bin/sh\nexit 3\n")
    (other / "looping-edge").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{other}:{NO_VENV_PATH}")
    command = edge_command()
    assert command == os.path.abspath(OURS)
    assert _runs_as_printed(command, tmp_path, f"{other}:{NO_VENV_PATH}")
