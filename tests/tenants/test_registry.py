"""The tenant store (app/tenants/registry.py): revisions move only on a real change."""

from __future__ import annotations

import pytest

from app.db.engine import Database
from app.tenants.registry import TenantMissing, TenantRecord, TenantStore
from app.testing.edge import demo_manifest


@pytest.fixture
def store(database: Database) -> TenantStore:
    return TenantStore(database)


async def test_an_update_that_changes_nothing_keeps_the_revision(store: TenantStore) -> None:
    # Every revision makes the running edges re-sign the tenant's card: only a change may.
    await store.add(TenantRecord(id="acme", manifest=demo_manifest()))
    disabled = await store.update("acme", enabled=False)
    assert disabled.revision == 2 and not disabled.enabled
    again = await store.update("acme", enabled=False)
    assert again.revision == 2
    same = await store.update("acme", manifest=demo_manifest(), agent_kind="echo")
    assert same.revision == 2
    enabled = await store.update("acme", enabled=True)
    assert enabled.revision == 3 and enabled.enabled


async def test_updating_a_missing_tenant_says_so(store: TenantStore) -> None:
    with pytest.raises(TenantMissing):
        await store.update("nobody", enabled=False)


async def test_an_agent_config_past_its_cap_is_refused_on_every_path(store: TenantStore) -> None:
    big = {"blob": "x" * (256 * 1024)}
    with pytest.raises(ValueError, match="agent config is larger"):
        await store.add(TenantRecord(id="big", manifest=demo_manifest(), agent_config=big))
    await store.add(TenantRecord(id="big", manifest=demo_manifest()))
    with pytest.raises(ValueError, match="agent config is larger"):
        await store.update("big", agent_config=big)
    record = await store.get("big")
    assert record is not None and record.agent_config == {}


async def test_the_profile_is_stored_and_defaults_to_gateway(store: TenantStore) -> None:
    # Issue 49: "gateway" is today's behaviour, "open" serves general A2A clients.
    plain = await store.add(TenantRecord(id="plain", manifest=demo_manifest()))
    assert plain.profile == "gateway" and not plain.is_open
    opened = await store.add(TenantRecord(id="opened", manifest=demo_manifest(), profile="open"))
    assert opened.profile == "open" and opened.is_open
    back = await store.update("opened", profile="gateway")
    assert back.profile == "gateway" and back.revision == 2
    assert [r.profile for r in await store.list()] == ["gateway", "gateway"]


async def test_an_unknown_profile_is_refused_on_every_path(store: TenantStore) -> None:
    with pytest.raises(ValueError, match="profile must be one of gateway, open"):
        await store.add(TenantRecord(id="odd", manifest=demo_manifest(), profile="public"))
    await store.add(TenantRecord(id="odd", manifest=demo_manifest()))
    with pytest.raises(ValueError, match="profile must be one of"):
        await store.update("odd", profile="Open")
    record = await store.get("odd")
    assert record is not None and record.profile == "gateway"
