"""Tenants for tests and benchmarks that run the edge as processes: written straight to the
edge's database before its processes start (the in-process harness has
``EdgeHarness.add_tenant``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.db.engine import Database
from app.tenants.profile import OPEN
from app.tenants.registry import TenantRecord, TenantStore
from app.testing.edge import demo_manifest

__all__ = ["add_tenant_at", "open_tenant"]


def open_tenant(
    tenant_id: str,
    *,
    agent: str,
    agent_config: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> TenantRecord:
    """A tenant served to any verified caller (profile ``open``, no push config required),
    its card the demo manifest under ``name`` (the id when not given)."""
    return TenantRecord(
        id=tenant_id,
        manifest=demo_manifest(name or tenant_id),
        agent_kind=agent,
        agent_config=dict(agent_config or {}),
        require_push_config=False,
        profile=OPEN,
    )


async def add_tenant_at(database_url: str, record: TenantRecord) -> None:
    """Add ``record`` to the edge database at ``database_url``."""
    db = Database(database_url)
    try:
        await TenantStore(db).add(record)
    finally:
        await db.dispose()
