"""`tenants add --agent llm` refuses a directory entry that holds a literal credential: exit 2,
one line, the value never printed, nothing stored (issue 54)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_edge_cli import _cli, _one_line, operator  # noqa: F401 - the fixture
from tests.cli.test_llm_agent_config_cli import GOOD, _write

TOKEN = "eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ4In0.bGl0ZXJhbC1zaWduYXR1cmU"


def test_a_literal_token_in_the_directory_is_refused_unechoed(
    operator: tuple[dict[str, str], Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    env, manifest = operator
    entry = {"url": "https://b.example", "auth": {"bearer_env": "B"}, "token": TOKEN}
    doc = {**GOOD, "agents": {"b": entry}}
    add = ("tenants", "add", "l", "--manifest", str(manifest), "--agent", "llm")
    done = _cli(env, *add, "--agent-config", _write(tmp_path, doc))
    line = _one_line(done, 2)
    assert "'b'.token holds a literal credential" in line
    assert TOKEN not in done.stdout + done.stderr
    assert _cli(env, "tenants", "show", "l").returncode == 2  # nothing written


def test_a_directory_naming_an_env_var_is_stored(
    operator: tuple[dict[str, str], Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    env, manifest = operator
    doc = {**GOOD, "agents": {"b": {"url": "https://b.example", "auth": {"bearer_env": "B"}}}}
    add = ("tenants", "add", "l", "--manifest", str(manifest), "--agent", "llm")
    assert _cli(env, *add, "--agent-config", _write(tmp_path, doc)).returncode == 0
    shown = json.loads(_cli(env, "tenants", "show", "l").stdout)
    assert shown["agentConfig"]["agents"]["b"]["auth"] == {"bearer_env": "B"}


def test_an_update_bringing_a_literal_password_is_refused_unechoed(
    operator: tuple[dict[str, str], Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    env, manifest = operator
    add = ("tenants", "add", "l", "--manifest", str(manifest), "--agent", "llm")
    assert _cli(env, *add, "--agent-config", _write(tmp_path, GOOD)).returncode == 0
    entry = {"url": "https://b.example", "auth": {"bearer_env": "B"}, "password": "hunter2-pw"}
    doc = {**GOOD, "agents": {"b": entry}}
    done = _cli(env, "tenants", "update", "l", "--agent-config", _write(tmp_path, doc))
    assert "'b'.password holds a literal credential" in _one_line(done, 2)
    assert "hunter2" not in done.stdout + done.stderr
    shown = json.loads(_cli(env, "tenants", "show", "l").stdout)
    assert "agents" not in shown["agentConfig"]  # the stored config is unchanged
