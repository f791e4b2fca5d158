"""Installed plugins are checked when a process starts: one clear line and exit 78."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.child_env import CLI
from tests.worker.processes import worker_env

PLUGIN = '''
async def lookup(q: str) -> str:
    """Look q up."""
    return q


class Needy:
    key = "needy"
    tools = (lookup,)
    secrets = ("NEEDY_TOKEN",)


plugin = Needy()
'''


def _install(where: Path) -> None:
    (where / "needy_plugin.py").write_text(PLUGIN)
    info = where / "needy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: needy-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[looping_edge.plugins]\nneedy = needy_plugin:plugin\n")


def _worker(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = worker_env(f"sqlite+aiosqlite:///{tmp_path / 'edge.db'}")
    env.update(PYTHONPATH=str(tmp_path), EDGE_LOG_JSON="false", **extra)
    return subprocess.run([CLI, "worker"], env=env, capture_output=True, text=True, timeout=60)


def test_a_missing_plugin_secret_stops_the_worker_with_78(tmp_path: Path) -> None:
    _install(tmp_path)
    done = _worker(tmp_path)
    assert done.returncode == 78, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "looping-edge: plugins: plugin 'needy' needs the environment variable NEEDY_TOKEN"
    ]


def test_a_plugin_that_does_not_load_is_one_line(tmp_path: Path) -> None:
    _install(tmp_path)
    (tmp_path / "needy_plugin.py").write_text("raise RuntimeError('boom secret')\n")
    done = _worker(tmp_path)
    assert done.returncode == 78
    assert "does not load: RuntimeError" in done.stderr and "boom secret" not in done.stderr


def test_serve_stops_with_78_too(tmp_path: Path) -> None:
    _install(tmp_path)
    env = worker_env(f"sqlite+aiosqlite:///{tmp_path / 'edge.db'}")
    env.update(PYTHONPATH=str(tmp_path), EDGE_LOG_JSON="false")
    done = subprocess.run(
        [CLI, "serve", "--port", "0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 78, done.stderr
    assert "plugin 'needy' needs the environment variable NEEDY_TOKEN" in done.stderr
