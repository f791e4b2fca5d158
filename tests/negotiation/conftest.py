"""A second migrated PostgreSQL database: the second edge of a negotiation test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from app.db.migrate import upgrade_to_head
from tests.conftest import PG_ADMIN_DSN, _empty, _pg_admin, _pg_url


@pytest.fixture(scope="session")
def second_postgres_url() -> Iterator[str]:
    name = f"looping_t_{uuid.uuid4().hex[:12]}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    url = _pg_url(PG_ADMIN_DSN, name)
    try:
        upgrade_to_head(url)
        yield url
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def second_pg_url(second_postgres_url: str) -> AsyncIterator[str]:
    await _empty(second_postgres_url)
    yield second_postgres_url
