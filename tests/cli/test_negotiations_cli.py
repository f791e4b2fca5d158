"""`looping-edge negotiations list --tenant T [--json]`: each negotiation's id, task id,
direction, counterparty, intent, state, verdict and basis; the negotiation block is checked
at `tenants add`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from app.db.engine import Database
from app.db.negotiations import OUTBOUND, NewNegotiation
from app.db.storage import open_storage
from tests.cli.test_edge_cli import _cli, operator  # noqa: F401 - the fixture


async def _seed(url: str) -> None:
    db = Database(url)
    try:
        await open_storage(db).negotiations.claim(
            NewNegotiation(
                id="n-1",
                tenant="shop",
                identity="alice",
                direction=OUTBOUND,
                counterparty="https://b.example/seller",
                intent="buy bike",
                origin_key="out:k",
            )
        )
    finally:
        await db.dispose()


def test_list_shows_the_tenants_negotiations(operator: tuple[dict[str, str], Path]) -> None:  # noqa: F811
    env, _ = operator
    assert "no negotiations" in _cli(env, "negotiations", "list", "--tenant", "shop").stdout
    asyncio.run(_seed(env["DATABASE_URL"]))
    [row] = json.loads(_cli(env, "negotiations", "list", "--tenant", "shop", "--json").stdout)
    assert row == {
        "id": "n-1",
        "task_id": None,
        "direction": "outbound",
        "counterparty": "https://b.example/seller",
        "intent": "buy bike",
        "state": "opening",
        "verdict": None,
        "basis": None,
    }
    text = _cli(env, "negotiations", "list", "--tenant", "shop").stdout
    assert text.split("\t")[:4] == ["n-1", "-", "outbound", "https://b.example/seller"]
    assert _cli(env, "negotiations", "list", "--tenant", "other", "--json").stdout.strip() == "[]"


def test_a_bad_negotiation_block_names_the_field(
    operator: tuple[dict[str, str], Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    env, manifest = operator
    config = {
        "model": {"base_url": "http://127.0.0.1:1/v1", "name": "m"},
        "system_prompt": "x",
        "negotiation": {"enabled": True, "negotiator_prompt": "p", "actions": [{"action": "ask"}]},
    }
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(config))
    done = _cli(
        env,
        "tenants",
        "add",
        "n",
        "--manifest",
        str(manifest),
        "--agent",
        "llm",
        "--agent-config",
        str(path),
    )
    assert done.returncode == 2 and "negotiation.actions.0.action" in done.stderr
