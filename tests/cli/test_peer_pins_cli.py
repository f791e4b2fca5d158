"""`looping-edge peer-pins list [--json]` and `peer-pins remove ORIGIN`: the keys pinned for
other agents, and the operator's way out of `KEY_CHANGED` after a peer rotated its key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from app.db.engine import Database
from app.db.storage import open_storage
from tests.cli.test_edge_cli import _cli, operator  # noqa: F401 - the fixture


async def _pin(url: str, origin: str) -> tuple[str, str] | None:
    db = Database(url)
    try:
        pins = open_storage(db).peer_pins
        await pins.pin(origin, f"{origin}/.well-known/jwks.json", "k1")
        return await pins.pinned("https://gone.example")
    finally:
        await db.dispose()


def test_list_and_remove_a_pin(operator: tuple[dict[str, str], Path]) -> None:  # noqa: F811
    env, _ = operator
    assert _cli(env, "peer-pins", "list").stdout.strip() == "no pinned peers"
    asyncio.run(_pin(env["DATABASE_URL"], "https://gone.example"))
    [row] = json.loads(_cli(env, "peer-pins", "list", "--json").stdout)
    assert (row["origin"], row["kid"]) == ("https://gone.example", "k1") and row["pinned_at"]
    assert "https://gone.example\thttps://gone.example/.well-known/jwks.json\tk1" in (
        _cli(env, "peer-pins", "list").stdout
    )
    removed = _cli(env, "peer-pins", "remove", "https://gone.example")
    assert removed.returncode == 0 and "removed the pin" in removed.stdout
    again = _cli(env, "peer-pins", "remove", "https://gone.example")
    assert again.returncode == 2 and "no pin for 'https://gone.example'" in again.stderr
    assert asyncio.run(_pin(env["DATABASE_URL"], "https://other.example")) is None
