"""The tenant store as SQLAlchemy statements, for both backends
(``app.db.tenants.TenantRecordStore``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update

from app.db.engine import Database
from app.db.models import TenantRow
from app.db.tenants import TenantExists, TenantMissing, TenantRecord, TenantStale


def _record(row: TenantRow) -> TenantRecord:
    return TenantRecord(
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


class SharedTenants:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self) -> list[TenantRecord]:
        async with self._db.transaction() as s:
            rows = (await s.execute(select(TenantRow).order_by(TenantRow.id))).scalars().all()
            return [_record(r) for r in rows]

    async def get(self, tenant_id: str) -> TenantRecord | None:
        async with self._db.transaction() as s:
            row = await s.get(TenantRow, tenant_id)
            return _record(row) if row else None

    async def insert(self, record: TenantRecord, *, at: datetime) -> TenantRecord:
        async with self._db.transaction() as s:
            if await s.get(TenantRow, record.id) is not None:
                raise TenantExists(record.id)
            s.add(
                TenantRow(
                    id=record.id,
                    manifest=dict(record.manifest),
                    agent_kind=record.agent_kind,
                    agent_config=dict(record.agent_config),
                    enabled=record.enabled,
                    require_push_config=record.require_push_config,
                    dedupe_message_ids=record.dedupe_message_ids,
                    profile=record.profile,
                    revision=1,
                    # Set here, to the microsecond on both backends (SQLite's
                    # CURRENT_TIMESTAMP has whole seconds): a remove and re-add must not look
                    # like the same tenant.
                    created_at=at,
                    updated_at=at,
                )
            )
        return await self._require(record.id)

    async def update(
        self,
        tenant_id: str,
        values: Mapping[str, Any],
        *,
        at: datetime,
        expected_revision: int | None = None,
    ) -> TenantRecord:
        async with self._db.transaction() as s:
            row = await s.get(TenantRow, tenant_id, with_for_update=True)
            if row is None:
                raise TenantMissing(tenant_id)
            if expected_revision is not None and row.revision != expected_revision:
                raise TenantStale(tenant_id, row.revision)
            if all(getattr(row, k) == v for k, v in values.items()):
                # Nothing changes (``disable`` of a disabled tenant, say): no new revision, so
                # the running edges do not re-sign its card for nothing.
                return _record(row)
            changed = {**values, "revision": TenantRow.revision + 1, "updated_at": at}
            statement = update(TenantRow).where(TenantRow.id == tenant_id)
            if expected_revision is not None:
                # SQLite takes no row lock: the revision in the statement keeps the check and
                # the write one step there too.
                statement = statement.where(TenantRow.revision == expected_revision)
            result = await s.execute(statement.values(**changed))
            if getattr(result, "rowcount", 0) == 0:
                if expected_revision is not None:
                    raise TenantStale(tenant_id, row.revision)
                raise TenantMissing(tenant_id)
        return await self._require(tenant_id)

    async def delete(self, tenant_id: str, *, expected_revision: int | None = None) -> None:
        statement = delete(TenantRow).where(TenantRow.id == tenant_id)
        if expected_revision is not None:
            statement = statement.where(TenantRow.revision == expected_revision)
        async with self._db.transaction() as s:
            result = await s.execute(statement)
            if getattr(result, "rowcount", 0) == 0:
                current = await s.get(TenantRow, tenant_id)
                if current is not None:
                    raise TenantStale(tenant_id, current.revision)
                raise TenantMissing(tenant_id)

    async def _require(self, tenant_id: str) -> TenantRecord:
        found = await self.get(tenant_id)
        if found is None:
            raise TenantMissing(tenant_id)
        return found
