"""The admin-token store as SQLAlchemy statements, for both backends
(``app.db.admin_tokens.AdminTokenStore``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from app.db.admin_tokens import (
    AdminTokenExists,
    AdminTokenMissing,
    AdminTokenRecord,
)
from app.db.documents import as_utc
from app.db.engine import Database
from app.db.models import AdminTokenRow


def _when(value: datetime | None) -> datetime | None:
    return None if value is None else as_utc(value)


def _record(row: AdminTokenRow) -> AdminTokenRecord:
    return AdminTokenRecord(
        name=row.name,
        token_hash=row.token_hash,
        scopes=tuple(row.scopes),
        created_at=as_utc(row.created_at),
        last_used_at=_when(row.last_used_at),
        expires_at=_when(row.expires_at),
        revoked_at=_when(row.revoked_at),
    )


class SharedAdminTokens:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def insert(self, record: AdminTokenRecord) -> None:
        try:
            async with self._db.transaction() as s:
                if await s.get(AdminTokenRow, record.name) is not None:
                    raise AdminTokenExists(record.name)
                s.add(
                    AdminTokenRow(
                        name=record.name,
                        token_hash=record.token_hash,
                        scopes=list(record.scopes),
                        created_at=record.created_at,
                        expires_at=record.expires_at,
                    )
                )
        except IntegrityError:
            # The same name inserted at the same moment by another process.
            raise AdminTokenExists(record.name) from None

    async def list(self) -> list[AdminTokenRecord]:
        async with self._db.transaction() as s:
            rows = (
                (await s.execute(select(AdminTokenRow).order_by(AdminTokenRow.name)))
                .scalars()
                .all()
            )
            return [_record(r) for r in rows]

    async def find(self, token_hash: str) -> AdminTokenRecord | None:
        async with self._db.transaction() as s:
            row = (
                await s.execute(select(AdminTokenRow).where(AdminTokenRow.token_hash == token_hash))
            ).scalar_one_or_none()
            return None if row is None else _record(row)

    async def touch(self, name: str, *, at: datetime) -> None:
        async with self._db.transaction() as s:
            await s.execute(
                update(AdminTokenRow).where(AdminTokenRow.name == name).values(last_used_at=at)
            )

    async def revoke(self, name: str, *, at: datetime) -> AdminTokenRecord:
        async with self._db.transaction() as s:
            row = await s.get(AdminTokenRow, name, with_for_update=True)
            if row is None:
                raise AdminTokenMissing(name)
            if row.revoked_at is None:
                row.revoked_at = at
            await s.flush()
            return _record(row)
