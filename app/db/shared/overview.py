"""The overview as SQLAlchemy statements, for both backends (``app.db.overview.OverviewStore``):
unfinished turns are few (the partial index ``ix_turns_unfinished`` holds exactly them), tenants
a small table, held leases few (``ix_actors_lease_until``). What differs per backend is passed
in: the clock leases are compared with (``app.db.clock``) and how a time becomes a minute's
index for the activity chart (``postgres_minute``, ``sqlite_minute``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, Integer, String, cast, func, literal, select, union_all

from app.db.clock import SqlClock
from app.db.documents import as_utc
from app.db.engine import Database
from app.db.models import ActorRow, PushOutboxRow, TaskRow, TenantRow, TurnRow
from app.db.models.base import Timestamp
from app.db.outbox import PENDING
from app.db.overview import Activity, Overview, TenantTurns, WorkerLeases
from app.db.states import CANCELED, COMPLETED, FAILED, REJECTED, UNFINISHED_TURNS

# A time's whole minutes since ``since`` (both UTC timestamps, the time not before ``since``).
MinuteIndex = Callable[[Any, ColumnElement[Any]], ColumnElement[Any]]

_FINISHED_TASKS = (COMPLETED, FAILED, CANCELED, REJECTED)


def postgres_minute(at: Any, since: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(func.floor(func.extract("epoch", at - since) / 60), Integer)


def sqlite_minute(at: Any, since: ColumnElement[Any]) -> ColumnElement[Any]:
    # julianday counts days; the difference is never negative here, so the cast's truncation
    # is the floor.
    return cast((func.julianday(at) - func.julianday(since)) * 1440, Integer)


class SharedOverview:
    def __init__(self, db: Database, clock: SqlClock, minute: MinuteIndex) -> None:
        self._db = db
        self._clock = clock
        self._minute = minute

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

    async def turns_by_tenant(self) -> list[TenantTurns]:
        query = (
            select(TurnRow.tenant, TurnRow.status, func.count(), func.min(TurnRow.created_at))
            .where(TurnRow.status.in_(UNFINISHED_TURNS))
            .group_by(TurnRow.tenant, TurnRow.status)
            .order_by(TurnRow.tenant, TurnRow.status)
        )
        async with self._db.transaction() as s:
            rows = (await s.execute(query)).all()
        return [TenantTurns(t, status, int(n), as_utc(oldest)) for t, status, n, oldest in rows]

    async def workers(self) -> list[WorkerLeases]:
        found: dict[str, list[Any]] = {}
        async with self._db.transaction() as s:
            now = self._clock.now()
            actors = select(ActorRow.lease_owner, func.count(), func.max(ActorRow.lease_until))
            actors = actors.where(ActorRow.lease_until > now).group_by(ActorRow.lease_owner)
            o = PushOutboxRow
            pushes = select(o.lease_owner, func.count(), func.max(o.lease_until))
            pushes = pushes.where(o.status == PENDING, o.lease_until > now)
            for column, query in ((1, actors), (2, pushes.group_by(o.lease_owner))):
                for owner, n, until in (await s.execute(query)).all():
                    if owner is None or until is None:
                        continue
                    entry = found.setdefault(owner, [owner, 0, 0, as_utc(until)])
                    entry[column] = int(n)
                    entry[3] = max(entry[3], as_utc(until))
        return [WorkerLeases(*found[owner]) for owner in sorted(found)]

    async def activity(self, minutes: int) -> Activity:
        async with self._db.transaction() as s:
            until = await self._clock.read(s)
            since_at = until - timedelta(minutes=minutes)
            since = literal(since_at, type_=Timestamp)
            accepted = select(
                literal("a", String).label("kind"),
                self._minute(TaskRow.created_at, since).label("minute"),
            ).where(TaskRow.created_at >= since)
            finished = select(
                literal("f", String).label("kind"),
                self._minute(TaskRow.updated_at, since).label("minute"),
            ).where(TaskRow.state.in_(_FINISHED_TASKS), TaskRow.updated_at >= since)
            both = union_all(accepted, finished).subquery()
            query = select(both.c.kind, both.c.minute, func.count()).group_by(
                both.c.kind, both.c.minute
            )
            rows = (await s.execute(query)).all()
        counts = {"a": [0] * minutes, "f": [0] * minutes}
        for kind, minute, n in rows:
            if minute is not None and 0 <= int(minute) < minutes:
                counts[kind][int(minute)] += int(n)
        return Activity(until=until, accepted=counts["a"], finished=counts["f"])
