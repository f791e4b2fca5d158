"""`tenants add --agent llm` with a ``delegation`` block: the example is stored; a missing
policy string is refused naming the field, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents.llm.delegation.test_config import example
from tests.cli.test_edge_cli import _cli, _one_line, operator  # noqa: F401 - the fixture


def _write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.slow
def test_the_example_is_stored_and_a_missing_policy_string_is_refused(
    operator: tuple[dict[str, str], Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    env, manifest = operator
    doc = example()
    doc["delegation"]["policy"].pop("recovered_reply")
    add = ("tenants", "add", "d", "--manifest", str(manifest), "--agent", "llm")
    line = _one_line(_cli(env, *add, "--agent-config", _write(tmp_path, doc)), 2)
    assert "delegation.policy.recovered_reply: required" in line
    assert _cli(env, "tenants", "show", "d").returncode == 2  # nothing written
    done = _cli(env, *add, "--agent-config", _write(tmp_path, example()))
    assert done.returncode == 0, done.stderr
    shown = json.loads(_cli(env, "tenants", "show", "d").stdout)
    assert shown["agentConfig"]["delegation"]["recipes"][0]["key"] == "research"
