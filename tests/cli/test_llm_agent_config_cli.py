"""`looping-edge tenants add/update --agent llm --agent-config A.json`: the llm config is
checked at the CLI, one line naming the field, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_edge_cli import _cli, _one_line, operator  # noqa: F401 - the fixture

GOOD = {
    "model": {"base_url": "http://127.0.0.1:11434/v1", "name": "llama3", "api_key_env": "K"},
    "system_prompt": "You help.",
}


def _write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_good_llm_config_is_stored(operator: tuple[dict[str, str], Path], tmp_path: Path) -> None:  # noqa: F811
    env, manifest = operator
    add = ("tenants", "add", "l", "--manifest", str(manifest), "--agent", "llm")
    done = _cli(env, *add, "--agent-config", _write(tmp_path, GOOD))
    assert done.returncode == 0, done.stderr
    shown = json.loads(_cli(env, "tenants", "show", "l").stdout)
    assert shown["agent"] == "llm" and shown["agentConfig"]["model"]["api_key_env"] == "K"


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"system_prompt": "x"}, "model: required"),
        ({**GOOD, "temperature": 1}, "temperature: unknown field"),
        ({**GOOD, "model": {**GOOD["model"], "base_url": "ftp://x"}}, "model.base_url"),
        ({**GOOD, "model": {**GOOD["model"], "api_key_env": "A-B"}}, "model.api_key_env"),
        ({**GOOD, "max_steps": 0}, "max_steps"),
        ({**GOOD, "tools": ["a", "a"]}, "tools"),
    ],
)
def test_a_bad_llm_config_names_the_field(
    operator: tuple[dict[str, str], Path],  # noqa: F811
    tmp_path: Path,
    doc: dict[str, object],
    field: str,
) -> None:
    env, manifest = operator
    add = ("tenants", "add", "l", "--manifest", str(manifest), "--agent", "llm")
    line = _one_line(_cli(env, *add, "--agent-config", _write(tmp_path, doc)), 2)
    assert field in line
    assert _cli(env, "tenants", "show", "l").returncode == 2  # nothing written


def test_switching_to_llm_without_a_config_is_refused(
    operator: tuple[dict[str, str], Path],  # noqa: F811
) -> None:
    env, manifest = operator
    assert _cli(env, "tenants", "add", "e", "--manifest", str(manifest)).returncode == 0
    assert "model: required" in _one_line(_cli(env, "tenants", "update", "e", "--agent", "llm"), 2)
