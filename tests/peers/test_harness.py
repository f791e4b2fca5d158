"""The two-edge world of the A2A tools' end-to-end tests runs (real processes, PostgreSQL):
A's agent answers the gateway's turn and the push verifies; B's tenant is up."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.testing.fake_model import text
from tests.peers.processes import peer_world

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


async def test_the_world_answers_a_gateway_turn(
    pg_url: str, second_pg_url: str, tmp_path: Path
) -> None:
    async with peer_world(pg_url, second_pg_url, tmp_path) as world:
        world.fake_a.script(text("hello from A"))
        task_id = await world.ask("hi")
        final = await world.final(task_id)
        assert final.state == "TASK_STATE_COMPLETED" and final.text == "hello from A"
        assert await world.helper_tasks() == []
