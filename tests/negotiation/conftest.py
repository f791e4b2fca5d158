"""A second migrated PostgreSQL database: the second edge of a negotiation test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.conftest import _empty, scratch_postgres


@pytest.fixture(scope="session")
def second_postgres_url() -> Iterator[str]:
    with scratch_postgres() as url:
        yield url


@pytest.fixture
async def second_pg_url(second_postgres_url: str) -> AsyncIterator[str]:
    await _empty(second_postgres_url)
    yield second_postgres_url
