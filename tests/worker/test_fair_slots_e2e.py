"""Issue 47, row 3, end to end: a real worker process with default settings, the scripted
agent's one-second turns. Behind 24 identities of one tenant, each with 6 queued turns, a
newcomer of another tenant finishes its own one-second turn within 4 s (before the fair
slots, it waited for the whole flood to drain)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.settings import Settings
from app.tasks import states
from app.testing.edge import edge_harness
from tests.polling import poll_until
from tests.worker.helpers import reached, send
from tests.worker.processes import worker_process

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

FLOOD_IDENTITIES = 24
FLOOD_TURNS = 6
NEWCOMER_LIMIT_SECONDS = 4.0
# The worker's settings are the defaults (``tests.worker.processes`` shortens some for the
# crash tests): slots, lease and poll as deployed.
DEFAULTS = {
    name: Settings.model_fields[name].default
    for name in ("worker_concurrency", "lease_seconds", "poll_seconds", "turn_retry_base_seconds")
}


async def test_a_newcomer_is_served_within_a_turn_or_two_behind_a_flood(
    pg_url: str, tmp_path: Path
) -> None:
    async with edge_harness(pg_url) as edge:
        for tenant in ("flood", "calm"):
            await edge.add_tenant(tenant, agent="scripted", require_push_config=False)
        db = edge.services.db
        flood = [
            await send(
                edge,
                "sleep 1\nreply flood",
                message_id=f"f{i}-{n}",
                who=f"f{i}",
                tenant="flood",
                push_url=None,
            )
            for n in range(FLOOD_TURNS)
            for i in range(FLOOD_IDENTITIES)
        ]
        with worker_process(pg_url, tmp_path, "fair", **DEFAULTS) as worker:
            # The flood holds every slot: its first turns have finished and more are running.
            await poll_until(
                lambda: reached(db, flood[0], states.COMPLETED),
                30.0,
                interval=0.1,
                check=worker.check_alive,
            )
            began = time.monotonic()
            newcomer = await send(
                edge,
                "sleep 1\nreply hello",
                message_id="n1",
                who="n1",
                tenant="calm",
                push_url=None,
            )
            await poll_until(
                lambda: reached(db, newcomer, states.COMPLETED),
                30.0,
                interval=0.05,
                check=worker.check_alive,
            )
            waited = time.monotonic() - began
            unfinished = [t for t in flood if await reached(db, t, states.COMPLETED) is None]
        assert waited < NEWCOMER_LIMIT_SECONDS, f"newcomer took {waited:.2f} s"
        assert len(unfinished) > FLOOD_IDENTITIES, "the flood should still be queued"
