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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, update

from app.db.engine import Database
from app.db.models import TenantRow
from app.tenants.manifest import MAX_AGENT_CONFIG_BYTES, TenantManifest, validate_tenant_id
from app.tenants.profile import GATEWAY, OPEN, check_profile


@dataclass(frozen=True)
class TenantRecord:
    id: str
    manifest: Mapping[str, Any]
    agent_kind: str = "echo"
    agent_config: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True
    require_push_config: bool = True
    dedupe_message_ids: bool = True
    profile: str = GATEWAY
    revision: int = 1
    # When this incarnation of the tenant was added: a tenant removed and added again starts
    # over at revision 1, so (created_at, revision) is what identifies its manifest's version.
    created_at: datetime | None = None

    @property
    def card_version(self) -> tuple[datetime | None, int]:
        """What the signed-card cache keys on: changes whenever the manifest may have."""
        return (self.created_at, self.revision)

    @property
    def is_open(self) -> bool:
        """Served for general A2A clients (``app.tenants.profile``)."""
        return self.profile == OPEN

    @classmethod
    def from_row(cls, row: TenantRow) -> TenantRecord:
        return cls(
            id=row.id,
            manifest=dict(row.manifest),
            agent_kind=row.agent_kind,
            agent_config=dict(row.agent_config or {}),
            enabled=row.enabled,
            require_push_config=row.require_push_config,
            dedupe_message_ids=row.dedupe_message_ids,
            profile=row.profile,
            revision=row.revision,
            created_at=row.created_at,
        )


class TenantExists(ValueError):
    pass


class TenantMissing(LookupError):
    pass


class TenantStore:
    """CRUD on the ``tenants`` table (used by the CLI and the admin paths)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self) -> list[TenantRecord]:
        async with self._db.transaction() as s:
            rows = (await s.execute(select(TenantRow).order_by(TenantRow.id))).scalars().all()
            return [TenantRecord.from_row(r) for r in rows]

    async def get(self, tenant_id: str) -> TenantRecord | None:
        async with self._db.transaction() as s:
            row = await s.get(TenantRow, tenant_id)
            return TenantRecord.from_row(row) if row else None

    async def add(self, record: TenantRecord) -> TenantRecord:
        """Register a tenant; the id and manifest are checked here, not only by the
        CLI, so every path into the registry obeys CONTRACT §8 (``ValueError`` otherwise)."""
        _check_definition(record.id, record.manifest, record.profile)
        check_agent_config(record.agent_config)
        now = _utcnow()
        async with self._db.transaction() as s:
            if await s.get(TenantRow, record.id) is not None:
                raise TenantExists(record.id)
            row = TenantRow(
                id=record.id,
                manifest=dict(record.manifest),
                agent_kind=record.agent_kind,
                agent_config=dict(record.agent_config),
                enabled=record.enabled,
                require_push_config=record.require_push_config,
                dedupe_message_ids=record.dedupe_message_ids,
                profile=record.profile,
                revision=1,
                # Set here, to the microsecond on both backends (SQLite's CURRENT_TIMESTAMP
                # has whole seconds): a remove and re-add must not look like the same tenant.
                created_at=now,
                updated_at=now,
            )
            s.add(row)
        return await self._require(record.id)

    async def update(self, tenant_id: str, **changes: Any) -> TenantRecord:
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

        async with self._db.transaction() as s:
            values: dict[str, Any] = {k: v for k, v in changes.items() if v is not None}
            row = await s.get(TenantRow, tenant_id, with_for_update=True)
            if row is None:
                raise TenantMissing(tenant_id)
            if all(getattr(row, k) == v for k, v in values.items()):
                # Nothing changes (``disable`` of a disabled tenant, say): no new revision, so
                # the running edges do not re-sign its card for nothing.
                return TenantRecord.from_row(row)
            values["revision"] = TenantRow.revision + 1
            values["updated_at"] = _utcnow()
            result = await s.execute(
                update(TenantRow).where(TenantRow.id == tenant_id).values(**values)
            )
            if getattr(result, "rowcount", 0) == 0:
                raise TenantMissing(tenant_id)
        return await self._require(tenant_id)

    async def remove(self, tenant_id: str) -> None:
        async with self._db.transaction() as s:
            result = await s.execute(delete(TenantRow).where(TenantRow.id == tenant_id))
            if getattr(result, "rowcount", 0) == 0:
                raise TenantMissing(tenant_id)

    async def _require(self, tenant_id: str) -> TenantRecord:
        found = await self.get(tenant_id)
        if found is None:
            raise TenantMissing(tenant_id)
        return found


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
        snapshot = await self.snapshot()
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
