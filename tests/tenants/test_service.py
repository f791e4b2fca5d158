"""The tenant service (app/tenants/service.py): one set of checks for both front ends, and
optimistic updates on the tenant's revision (issue 52)."""

from __future__ import annotations

import pytest

from app.db.engine import Database
from app.tenants.registry import TenantStore
from app.tenants.service import (
    TenantDraft,
    TenantExists,
    TenantInvalid,
    TenantMissing,
    TenantService,
    TenantStale,
)
from app.testing.edge import demo_manifest


@pytest.fixture
def service(database: Database) -> TenantService:
    return TenantService(TenantStore(database))


async def test_add_applies_the_defaults_and_refuses_a_taken_id(service: TenantService) -> None:
    record = await service.add("acme", TenantDraft(manifest=demo_manifest()))
    assert (record.agent_kind, record.profile, record.revision) == ("echo", "gateway", 1)
    assert record.require_push_config and record.dedupe_message_ids
    with pytest.raises(TenantExists):
        await service.add("acme", TenantDraft(manifest=demo_manifest()))


async def test_an_open_profile_alone_needs_no_push_config(service: TenantService) -> None:
    record = await service.add("o", TenantDraft(manifest=demo_manifest(), profile="open"))
    assert record.profile == "open" and not record.require_push_config
    explicit = TenantDraft(manifest=demo_manifest(), profile="open", require_push_config=True)
    assert (await service.add("p", explicit)).require_push_config


@pytest.mark.parametrize(
    ("tenant_id", "draft", "field", "words"),
    [
        ("Bad", TenantDraft(manifest=demo_manifest()), "id", "tenant id must be"),
        ("a", TenantDraft(), "manifest", "manifest: required"),
        ("a", TenantDraft(manifest={"name": "x"}), "manifest", "invalid manifest: description"),
        ("a", TenantDraft(manifest=demo_manifest(), agent="nope"), "agent", "agent must be"),
        ("a", TenantDraft(manifest=demo_manifest(), profile="x"), "profile", "profile must be"),
        ("a", TenantDraft(manifest=demo_manifest(), agent="python"), "agent", '"entry"'),
        (
            "a",
            TenantDraft(manifest=demo_manifest(), agent_config={"b": "x" * 300_000}),
            "agent_config",
            "agent config is larger",
        ),
    ],
)
async def test_a_bad_definition_names_the_field(
    service: TenantService, tenant_id: str, draft: TenantDraft, field: str, words: str
) -> None:
    with pytest.raises(TenantInvalid) as refused:
        await service.add(tenant_id, draft)
    assert refused.value.field == field and words in refused.value.message
    assert await service.list() == []


async def test_an_update_on_a_stale_revision_is_refused(service: TenantService) -> None:
    await service.add("acme", TenantDraft(manifest=demo_manifest()))
    renamed = TenantDraft(manifest=demo_manifest("Renamed"))
    updated = await service.update("acme", renamed, revision=1)
    assert updated.revision == 2
    with pytest.raises(TenantStale) as stale:
        await service.update("acme", TenantDraft(manifest=demo_manifest("Again")), revision=1)
    assert stale.value.current == 2
    assert (await service.get("acme")).manifest["name"] == "Renamed"
    with pytest.raises(TenantStale):
        await service.set_enabled("acme", False, revision=1)
    assert (await service.set_enabled("acme", False, revision=2)).revision == 3


async def test_updates_check_the_agent_against_what_is_stored(service: TenantService) -> None:
    await service.add("acme", TenantDraft(manifest=demo_manifest()))
    with pytest.raises(TenantInvalid, match='"entry"'):
        await service.update("acme", TenantDraft(agent="python"))
    with pytest.raises(TenantInvalid, match="nothing to update"):
        await service.update("acme", TenantDraft())
    with pytest.raises(TenantMissing):
        await service.update("nobody", TenantDraft(agent="echo"))


async def test_pages_follow_the_id_order(service: TenantService) -> None:
    for name in ("c", "a", "b"):
        await service.add(name, TenantDraft(manifest=demo_manifest()))
    first = await service.page(after=None, limit=2)
    assert [r.id for r in first.items] == ["a", "b"] and first.next == "b"
    last = await service.page(after=first.next, limit=2)
    assert [r.id for r in last.items] == ["c"] and last.next is None
