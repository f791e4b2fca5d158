"""The example plugin (examples/units-plugin) is a package of its own: it declares its entry
point in the plugin group, the edge's plugin checks accept it, and its own tests pass."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from app.agents.llm.plugins import ENTRY_POINT_GROUP

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "units-plugin"


def test_the_example_declares_its_entry_point() -> None:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    assert project["entry-points"][ENTRY_POINT_GROUP] == {"units": "looping_units:plugin"}


def test_the_examples_own_tests_pass() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        cwd=EXAMPLE,
        env={"PYTHONPATH": f"{EXAMPLE}:{Path(__file__).resolve().parents[3]}", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
