"""`looping-edge agents try TENANT "text"`: one turn of the tenant's agent, each step printed."""

from __future__ import annotations

import json
from pathlib import Path

from app.testing.fake_model import FakeModelServer, text, tool_call
from tests.cli.test_edge_cli import _cli, operator  # noqa: F401 - the fixture


def test_try_prints_each_step_of_an_llm_turn(
    operator: tuple[dict[str, str], Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    env, manifest = operator
    with FakeModelServer() as fake:
        fake.script(
            tool_call("nope", {"x": 1}, call_id="c1"),
            text("All done."),
        )
        config = tmp_path / "agent.json"
        config.write_text(
            json.dumps(
                {
                    "model": {"base_url": fake.base_url, "name": "fake", "api_key_env": "TRY_KEY"},
                    "system_prompt": "You try.",
                }
            )
        )
        add = ("tenants", "add", "l", "--manifest", str(manifest), "--agent", "llm")
        assert _cli(env, *add, "--agent-config", str(config)).returncode == 0
        done = _cli({**env, "TRY_KEY": "k-1"}, "agents", "try", "l", "hello")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert "step 1: the model calls nope" in lines
        assert any(
            line.startswith("step 2: nope unknown: error: there is no tool") for line in lines
        )
        assert lines[-1] == "COMPLETED: All done."
        assert fake.requests[0].headers["authorization"] == "Bearer k-1"
        # Without the key: the operator's failure text, and the variable named on stderr.
        fake.script(text("unused"))
        missing = _cli(env, "agents", "try", "l", "hello")
        assert missing.returncode == 1 and missing.stdout.splitlines()[-1].startswith("FAILED: ")
        assert "TRY_KEY" in missing.stderr


def test_try_a_scripted_tenant_and_an_unknown_one(
    operator: tuple[dict[str, str], Path],  # noqa: F811
) -> None:
    env, manifest = operator
    add = ("tenants", "add", "s", "--manifest", str(manifest), "--agent", "scripted")
    assert _cli(env, *add).returncode == 0
    done = _cli(env, "agents", "try", "s", "progress thinking\nreply hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["  progress line-1: thinking", "COMPLETED: hi"]
    unknown = _cli(env, "agents", "try", "ghost", "x")
    assert unknown.returncode == 2 and "no tenant 'ghost'" in unknown.stderr


def test_the_cli_does_not_import_the_model_loop_until_agents_try_runs() -> None:
    """Every command would otherwise pay the seconds ``pydantic_ai`` and ``openai`` take to
    import (``app.cli.agents`` defers them to ``app.cli.agent_try``)."""
    import subprocess
    import sys

    probe = "import sys, app.cli.main; print(sorted({'pydantic_ai', 'openai'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_try_says_the_a2a_tools_are_not_offered_and_offers_none(
    operator: tuple[dict[str, str], Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A try writes nothing, so it never sends to a peer: the model gets no a2a_* tool and
    the operator is told why."""
    env, manifest = operator
    with FakeModelServer() as fake:
        fake.script(text("No peers here."))
        config = tmp_path / "agent.json"
        peer = {"url": "https://helper.example", "auth": {"bearer_env": "HELPER_TOKEN"}}
        doc = {
            "model": {"base_url": fake.base_url, "name": "fake"},
            "system_prompt": "You try.",
            "agents": {"helper": peer},
        }
        config.write_text(json.dumps(doc))
        add = ("tenants", "add", "p", "--manifest", str(manifest), "--agent", "llm")
        assert _cli(env, *add, "--agent-config", str(config)).returncode == 0
        done = _cli(env, "agents", "try", "p", "hello")
        assert done.returncode == 0, done.stderr
        assert "note: the A2A tools (a2a_*) are not offered in a try" in done.stdout
        assert "helper" in done.stdout.splitlines()[1]
        tools = [t["function"]["name"] for t in fake.requests[0].body.get("tools", [])]
        assert not [t for t in tools if t.startswith("a2a_")]
