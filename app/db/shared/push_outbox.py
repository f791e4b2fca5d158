"""The push-outbox store as SQLAlchemy transactions (``app.db.push_outbox.PushOutboxStore``).

SQLite runs all of it: one process with one claimer (its worker lock), so claims are
serialised by construction and need neither an advisory lock nor row locks. PostgreSQL runs
the drop, the gauges and the dead letters from here (``app.db.postgres.push_outbox``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.clock import SqlClock
from app.db.documents import as_utc
from app.db.engine import Database
from app.db.models import PushConfigRow, PushOutboxRow, TurnRow
from app.db.outbox import CANCELED, DEAD, DELIVERED, PENDING
from app.db.push_outbox import (
    ClaimedPush,
    DeadLetter,
    DeadLetterFilter,
    OutboxGauges,
    PushRecord,
    ReplayReport,
)
from app.db.signals import WakeChannel


def claimed(
    row: Mapping[str, Any], payload: dict[str, Any], target: Mapping[str, Any]
) -> ClaimedPush:
    """A ``ClaimedPush`` from an outbox row's columns and its push target's (``url`` None:
    the config was deleted after the row was queued)."""
    return ClaimedPush(
        id=row["id"],
        tenant=row["tenant"],
        identity=row["identity"],
        task_id=row["task_id"],
        config_id=row["config_id"],
        kind=row["kind"],
        message_key=row["message_key"],
        payload=payload,
        attempts=row["attempts"],
        unauthorized_attempts=row["unauthorized_attempts"],
        first_attempt_at=as_utc(row["first_attempt_at"] or row["created_at"]),
        created_at=as_utc(row["created_at"]),
        url=target["url"],
        token_enc=target["token_enc"],
        auth_scheme=target["auth_scheme"],
        auth_credentials_enc=target["auth_credentials_enc"],
    )


def record_values(record: PushRecord, now: datetime) -> dict[str, Any]:
    """The columns an outcome sets (the lease let go)."""
    values: dict[str, Any] = {
        "lease_owner": None,
        "lease_until": None,
        "status": record.status,
        "unauthorized_attempts": record.unauthorized_attempts,
        "last_error": record.error,
        "last_status": record.http_status,
    }
    if record.status == DELIVERED:
        values["delivered_at"] = now
    elif record.status == PENDING:
        values["next_attempt_at"] = record.next_attempt_at
    return values


class SharedPushOutbox:
    def __init__(self, db: Database, clock: SqlClock, pushes: WakeChannel) -> None:
        self._db = db
        self._clock = clock
        self._pushes = pushes

    # --- claiming ---------------------------------------------------------------------------

    async def claim(self, *, owner: str, lease: timedelta, limit: int) -> list[ClaimedPush]:
        if limit <= 0:
            return []
        async with self._db.transaction() as session:
            now = await self._clock.read(session)
            ids = _one_per_task(await _candidates(session, now, limit))
            if not ids:
                return []
            await session.execute(
                update(PushOutboxRow)
                .where(PushOutboxRow.id.in_(ids))
                .values(
                    lease_owner=owner,
                    lease_until=now + lease,
                    attempts=PushOutboxRow.attempts + 1,
                    first_attempt_at=func.coalesce(PushOutboxRow.first_attempt_at, now),
                )
                .execution_options(synchronize_session=False)
            )
            return await _load(session, ids)

    # --- around an attempt ------------------------------------------------------------------

    async def still_ours(self, push_id: int, owner: str) -> bool:
        async with self._db.transaction() as session:
            row = (
                await session.execute(
                    select(PushOutboxRow.status, PushOutboxRow.lease_owner).where(
                        PushOutboxRow.id == push_id
                    )
                )
            ).first()
        return row is not None and row[0] == PENDING and row[1] == owner

    async def record(
        self, push_id: int, owner: str, decide: Callable[[datetime], PushRecord]
    ) -> bool:
        async with self._db.transaction() as session:
            now = await self._clock.read(session)
            values = record_values(decide(now), now)
            return await _update_ours(session, push_id, owner, values)

    async def drop(self, push_id: int, owner: str, *, reason: str) -> bool:
        async with self._db.transaction() as session:
            values = {"status": CANCELED, "lease_owner": None, "lease_until": None}
            return await _update_ours(session, push_id, owner, {**values, "last_error": reason})

    # --- observation and the operator ---------------------------------------------------------

    async def gauges(self) -> OutboxGauges:
        async with self._db.transaction() as session:
            now = await self._clock.read(session)
            depth, oldest = (
                await session.execute(
                    select(func.count(), func.min(PushOutboxRow.created_at)).where(
                        PushOutboxRow.status == PENDING
                    )
                )
            ).one()
        age = 0.0 if oldest is None else max(0.0, (now - as_utc(oldest)).total_seconds())
        return OutboxGauges(depth=int(depth), oldest_pending_seconds=age)

    async def list_dead(
        self, *, tenant: str | None, limit: int, filters: DeadLetterFilter | None = None
    ) -> list[DeadLetter]:
        o = PushOutboxRow
        query = select(o).where(o.status == DEAD).order_by(o.id).limit(limit)
        if tenant is not None:
            query = query.where(o.tenant == tenant)
        if filters is not None:
            if filters.task_id is not None:
                query = query.where(o.task_id == filters.task_id)
            if filters.kind is not None:
                query = query.where(o.kind == filters.kind)
            if filters.after_id is not None:
                query = query.where(o.id > filters.after_id)
        async with self._db.transaction() as session:
            rows = (await session.execute(query)).scalars().all()
        return [
            DeadLetter(
                id=r.id,
                tenant=r.tenant,
                task_id=r.task_id,
                kind=r.kind,
                message_key=r.message_key,
                attempts=r.attempts,
                last_status=r.last_status,
                last_error=r.last_error,
                created_at=as_utc(r.created_at),
            )
            for r in rows
        ]

    async def trace_context(self, push: ClaimedPush) -> dict[str, Any] | None:
        async with self._db.transaction() as session:
            kept = await session.scalar(
                select(PushOutboxRow.trace_context).where(PushOutboxRow.id == push.id)
            )
            if isinstance(kept, Mapping):
                return dict(kept)
            found = await session.scalar(
                select(TurnRow.payload)
                .where(
                    TurnRow.tenant == push.tenant,
                    TurnRow.identity == push.identity,
                    TurnRow.task_id == push.task_id,
                )
                .order_by(TurnRow.id.desc())
                .limit(1)
            )
        context = found.get("traceContext") if isinstance(found, Mapping) else None
        return dict(context) if isinstance(context, Mapping) else None

    async def replay(self, *, ids: list[int] | None, tenant: str | None) -> ReplayReport:
        """A replayed row starts over: ``pending``, zero attempts, due now. A dead row whose
        task already had a later push delivered to the same target is skipped as
        superseded (``app.push.dead_letters``)."""
        o = PushOutboxRow
        later = aliased(PushOutboxRow)
        superseded = exists().where(
            and_(
                later.tenant == o.tenant,
                later.task_id == o.task_id,
                later.config_id == o.config_id,
                later.status == DELIVERED,
                later.id > o.id,
            )
        )
        scope = [o.status == DEAD]
        if ids is not None:
            scope.append(o.id.in_(ids))
        if tenant is not None:
            scope.append(o.tenant == tenant)
        async with self._db.transaction() as session:
            dead = (await session.execute(select(o.id, superseded).where(*scope))).all()
            skip = tuple(sorted(row_id for row_id, is_superseded in dead if is_superseded))
            requeue = sorted(row_id for row_id, is_superseded in dead if not is_superseded)
            if requeue:
                now = await self._clock.read(session)
                await session.execute(
                    update(o)
                    .where(o.id.in_(requeue), o.status == DEAD)
                    .values(
                        status=PENDING,
                        attempts=0,
                        unauthorized_attempts=0,
                        first_attempt_at=None,
                        next_attempt_at=now,
                        lease_owner=None,
                        lease_until=None,
                    )
                    .execution_options(synchronize_session=False)
                )
        if requeue:
            await self._pushes.notify_everyone()
        found = {row_id for row_id, _ in dead}
        missing = tuple(sorted(set(ids or ()) - found))
        return ReplayReport(requeued=tuple(requeue), superseded=skip, not_dead=missing)


async def _candidates(
    session: AsyncSession, now: datetime, limit: int
) -> list[tuple[int, str, str]]:
    o = PushOutboxRow
    earlier = aliased(PushOutboxRow)
    in_flight = aliased(PushOutboxRow)
    query = (
        select(o.id, o.tenant, o.task_id)
        .where(
            o.status == PENDING,
            o.next_attempt_at <= now,
            (o.lease_until.is_(None)) | (o.lease_until <= now),
            ~exists().where(
                and_(
                    earlier.tenant == o.tenant,
                    earlier.task_id == o.task_id,
                    earlier.config_id == o.config_id,
                    earlier.status == PENDING,
                    earlier.id < o.id,
                )
            ),
            ~exists().where(
                and_(
                    in_flight.tenant == o.tenant,
                    in_flight.task_id == o.task_id,
                    in_flight.status == PENDING,
                    in_flight.lease_until > now,
                )
            ),
        )
        .order_by(o.next_attempt_at, o.id)
        .limit(limit)
    )
    return [(r[0], r[1], r[2]) for r in (await session.execute(query)).all()]


def _one_per_task(rows: Sequence[tuple[int, str, str]]) -> list[int]:
    seen: set[tuple[str, str]] = set()
    ids: list[int] = []
    for row_id, tenant, task_id in rows:
        if (tenant, task_id) not in seen:
            seen.add((tenant, task_id))
            ids.append(row_id)
    return ids


async def _load(session: AsyncSession, ids: list[int]) -> list[ClaimedPush]:
    o, c = PushOutboxRow, PushConfigRow
    query = (
        select(o, c.url, c.token_enc, c.auth_scheme, c.auth_credentials_enc)
        .outerjoin(
            c,
            and_(
                c.tenant == o.tenant,
                c.identity == o.identity,
                c.task_id == o.task_id,
                c.id == o.config_id,
            ),
        )
        .where(o.id.in_(ids))
        .order_by(o.id)
    )
    found = []
    for row, url, token, scheme, creds in (await session.execute(query)).all():
        target = {
            "url": url,
            "token_enc": token,
            "auth_scheme": scheme,
            "auth_credentials_enc": creds,
        }
        found.append(claimed(vars(row), row.payload, target))
    return found


async def _update_ours(
    session: AsyncSession, push_id: int, owner: str, values: dict[str, Any]
) -> bool:
    result = await session.execute(
        update(PushOutboxRow)
        .where(
            PushOutboxRow.id == push_id,
            PushOutboxRow.status == PENDING,
            PushOutboxRow.lease_owner == owner,
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0) == 1
