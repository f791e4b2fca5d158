"""The overview counts as SQLAlchemy statements, for both backends
(``app.db.overview.OverviewStore``): unfinished turns are few (the partial index
``ix_turns_unfinished`` holds exactly them), tenants a small table."""

from __future__ import annotations

from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import TenantRow, TurnRow
from app.db.overview import Overview
from app.db.states import UNFINISHED_TURNS


class SharedOverview:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def overview(self) -> Overview:
        async with self._db.transaction() as s:
            tenants = dict(
                (
                    await s.execute(
                        select(TenantRow.enabled, func.count()).group_by(TenantRow.enabled)
                    )
                ).all()
            )
            turns = dict(
                (
                    await s.execute(
                        select(TurnRow.status, func.count())
                        .where(TurnRow.status.in_(UNFINISHED_TURNS))
                        .group_by(TurnRow.status)
                    )
                ).all()
            )
        return Overview(
            tenants_enabled=int(tenants.get(True, 0)),
            tenants_disabled=int(tenants.get(False, 0)),
            unfinished_turns={status: int(turns.get(status, 0)) for status in UNFINISHED_TURNS},
        )
