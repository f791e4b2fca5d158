"""The second edge's PostgreSQL database of the two-edge tests (as the negotiation tests'),
and the scripted peer's task ``p-1`` made by the test caller's own send: the tools read,
answer and cancel only tasks the caller's sends made (``PeerTools.check_ours``)."""

from __future__ import annotations

import pytest

from app.db.engine import Database
from app.db.storage import open_storage
from tests.negotiation.conftest import second_pg_url, second_postgres_url
from tests.peers.kit import OWN_TASK, own_task

__all__ = ["second_pg_url", "second_postgres_url"]


@pytest.fixture
async def database(database: Database) -> Database:
    """The shared fixture's database (both backends), holding the send that made ``p-1``."""
    await own_task(open_storage(database).peer_sends, OWN_TASK)
    return database
