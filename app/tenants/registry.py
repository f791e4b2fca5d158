"""The tenant registry in the database, and the cached directory the request path reads.

Operators change tenants with the CLI (another process); a running edge picks the change up
within ``EDGE_TENANT_REFRESH_SECONDS`` without a restart: the directory reloads the small
``tenants`` table when its snapshot is older than that, one reload at a time.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from app.db.engine import Database
from app.db.tenants import TenantExists as TenantExists
from app.db.tenants import TenantMissing as TenantMissing
from app.db.tenants import TenantRecord as TenantRecord
from app.tenants.manifest import MAX_AGENT_CONFIG_BYTES, TenantManifest, validate_tenant_id
from app.tenants.profile import check_profile


class TenantStore:
    """CRUD on the tenants (used by the CLI and the admin paths): every path into the
    registry obeys CONTRACT §8, checked here before the store writes."""

    def __init__(self, db: Database) -> None:
        self._rows = db.storage.tenants

    async def list(self) -> list[TenantRecord]:
        return await self._rows.list()

    async def get(self, tenant_id: str) -> TenantRecord | None:
        return await self._rows.get(tenant_id)

    async def add(self, record: TenantRecord) -> TenantRecord:
        """Register a tenant; the id and manifest are checked here, not only by the
        CLI (``ValueError`` otherwise)."""
        _check_definition(record.id, record.manifest, record.profile)
        check_agent_config(record.agent_config)
        return await self._rows.insert(record, at=_utcnow())

    async def update(
        self, tenant_id: str, *, expected_revision: int | None = None, **changes: Any
    ) -> TenantRecord:
        """Change the tenant; ``expected_revision``: ``TenantStale`` unless it is the
        tenant's revision at the time of the change (optimistic, issue 52)."""
        allowed = {
            "manifest",
            "agent_kind",
            "agent_config",
            "enabled",
            "require_push_config",
            "dedupe_message_ids",
            "profile",
        }
        unknown = set(changes) - allowed
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)}")
        if changes.get("manifest") is not None:
            TenantManifest.from_data(dict(changes["manifest"]))
        if changes.get("agent_config") is not None:
            check_agent_config(changes["agent_config"])
        if changes.get("profile") is not None:
            check_profile(changes["profile"])
        values = {k: v for k, v in changes.items() if v is not None}
        return await self._rows.update(
            tenant_id, values, at=_utcnow(), expected_revision=expected_revision
        )

    async def remove(self, tenant_id: str, *, expected_revision: int | None = None) -> None:
        await self._rows.delete(tenant_id, expected_revision=expected_revision)


def _check_definition(tenant_id: str, manifest: Mapping[str, Any], profile: str) -> None:
    # The agent kind is checked against the worker's agent registry by whoever builds it (the
    # CLI knows the built-in kinds; embedders may register their own).
    validate_tenant_id(tenant_id)
    TenantManifest.from_data(dict(manifest))
    check_profile(profile)


def check_agent_config(config: Mapping[str, Any]) -> None:
    """Bounded like a manifest: every edge reloads every tenant's row on each refresh, so a
    30-MB config slowed the public routes of every replica to a second (found by audit)."""
    size = len(json.dumps(config, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_AGENT_CONFIG_BYTES:
        raise ValueError(f"agent config is larger than {MAX_AGENT_CONFIG_BYTES} bytes")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TenantDirectory:
    """Read path: an exact-match snapshot of enabled tenants, refreshed when stale.

    Lookups are exact dictionary hits, so ``__proto__`` or ``constructor`` are just unknown
    names (REFERENCE-CASES 34).
    """

    def __init__(
        self,
        store: TenantStore,
        *,
        refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._refresh = refresh_seconds
        self._clock = clock
        self._snapshot: dict[str, TenantRecord] = {}
        self._loaded_at: float | None = None
        self._lock = asyncio.Lock()

    async def get(self, tenant_id: str) -> TenantRecord | None:
        # Once per request: a fresh snapshot is read without awaiting ``snapshot()``.
        snapshot = self._snapshot if self._fresh() else await self.snapshot()
        record = snapshot.get(tenant_id)
        return record if record is not None and record.enabled else None

    async def enabled_ids(self) -> list[str]:
        snapshot = await self.snapshot()
        return sorted(t.id for t in snapshot.values() if t.enabled)

    async def snapshot(self) -> dict[str, TenantRecord]:
        if self._fresh():
            return self._snapshot
        async with self._lock:
            if not self._fresh():
                records = await self._store.list()
                self._snapshot = {r.id: r for r in records}
                self._loaded_at = self._clock()
        return self._snapshot

    def invalidate(self) -> None:
        self._loaded_at = None

    def _fresh(self) -> bool:
        return self._loaded_at is not None and self._clock() - self._loaded_at < self._refresh
