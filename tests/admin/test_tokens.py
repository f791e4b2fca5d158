"""Admin tokens (app/admin/tokens.py) on both backends: stored as hashes, refused alike when
unknown, revoked or expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from app.admin.tokens import (
    AdminTokenExists,
    AdminTokenInvalid,
    AdminTokenMissing,
    AdminTokens,
    hash_token,
)
from app.db.engine import Database


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tokens(database: Database, clock: Clock) -> AdminTokens:
    return AdminTokens(database.storage.admin_tokens, clock=clock)


async def test_only_the_hash_is_stored(tokens: AdminTokens, database: Database) -> None:
    issued = await tokens.create("ci", ["tenants:write", "tenants:read"])
    assert issued.record.scopes == ("tenants:read", "tenants:write")
    async with database.transaction() as s:
        stored = (await s.execute(text("SELECT token_hash FROM admin_tokens"))).scalar_one()
    assert stored == hash_token(issued.token) and issued.token not in stored
    found = await tokens.authenticate(issued.token)
    assert found is not None and found.name == "ci"


async def test_unknown_revoked_and_expired_tokens_are_refused_alike(
    tokens: AdminTokens, clock: Clock
) -> None:
    kept = await tokens.create("kept", ["push:read"])
    revoked = await tokens.create("gone", ["push:read"])
    short = await tokens.create("short", ["push:read"], expires_in_days=1)
    await tokens.revoke("gone")
    assert await tokens.authenticate(revoked.token) is None
    assert await tokens.authenticate(kept.token[:-1] + "x") is None
    assert await tokens.authenticate("") is None
    assert await tokens.authenticate("x" * 10_000) is None
    assert await tokens.authenticate(short.token) is not None
    clock.now += timedelta(days=1)
    assert await tokens.authenticate(short.token) is None
    assert await tokens.authenticate(kept.token) is not None


async def test_a_use_is_recorded_at_most_once_a_minute(tokens: AdminTokens, clock: Clock) -> None:
    issued = await tokens.create("ops", ["tenants:read"])
    await tokens.authenticate(issued.token)
    first = (await tokens.list())[0].last_used_at
    assert first == clock.now
    clock.now += timedelta(seconds=30)
    await tokens.authenticate(issued.token)
    assert (await tokens.list())[0].last_used_at == first
    clock.now += timedelta(seconds=31)
    await tokens.authenticate(issued.token)
    assert (await tokens.list())[0].last_used_at == clock.now


async def test_names_are_unique_and_checked(tokens: AdminTokens) -> None:
    await tokens.create("b", ["push:write"])
    await tokens.create("a", ["push:write"])
    with pytest.raises(AdminTokenExists):
        await tokens.create("a", ["push:read"])
    await tokens.revoke("a")
    with pytest.raises(AdminTokenExists):  # a revoked token keeps its name
        await tokens.create("a", ["push:read"])
    assert [r.name for r in await tokens.list()] == ["a", "b"]
    with pytest.raises(AdminTokenMissing):
        await tokens.revoke("nobody")
    for name, scopes in (("Bad Name", ["push:read"]), ("ok", []), ("ok", ["root"])):
        with pytest.raises(AdminTokenInvalid):
            await tokens.create(name, scopes)
    with pytest.raises(AdminTokenInvalid, match="expiry"):
        await tokens.create("ok", ["push:read"], expires_in_days=0)
