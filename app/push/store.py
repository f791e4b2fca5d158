"""The outbox as the deliverer sees it: claim due rows, re-check, record outcomes.

Claiming (CONTRACT §7 "per task, in order, never two concurrently"):

- a row is *due* when ``status='pending'``, ``next_attempt_at <= now`` and it is not leased
  (``lease_until`` unset or past: a crashed deliverer's lease simply runs out);
- it is *eligible* only if it is the lowest pending id of its ``(tenant, task, config)``
  (order per push target) and no row of its task is leased right now (never two of one task
  on the wire at once, whatever the number of processes);
- on PostgreSQL (``store_pg.claim_pg``) the claim runs under one transaction-scoped advisory
  lock, so two deliverers never both see "no row of task T in flight" and claim two of T's
  rows; ``FOR UPDATE SKIP LOCKED`` keeps claimers from waiting on rows an outcome write holds.
  SQLite runs one process with one claimer, which serialises claims by construction.

A dead row is terminal: the next row of its task becomes eligible (a dead letter must not block
a task's later pushes forever; the operator can replay it).

Times come from the database clock on PostgreSQL (several hosts, one clock) and from this
process on SQLite (one process). SQLite keeps naive UTC; we read every timestamp back as UTC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.engine import Database
from app.db.models import PushConfigRow, PushOutboxRow
from app.db.outbox import CANCELED, DEAD, DELIVERED, PENDING
from app.push.policy import Decision, Verdict
from app.push.store_pg import Checked, claim_pg, payload_of, record_pg, still_ours_pg

# pg_advisory_xact_lock key for the claim step ("lp_claim" as an int64).
_CLAIM_LOCK_KEY = 0x6C705F636C61696D
# Bound on re-check clock readings kept for pushes on the wire (far above any concurrency).
_MAX_CHECKED = 4096


def as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


async def db_now(db: Database, session: AsyncSession) -> datetime:
    """The database clock on PostgreSQL (one clock for every host), this process's on SQLite."""
    if db.is_sqlite:
        return datetime.now(UTC)
    return as_utc((await session.execute(select(func.now()))).scalar_one())


@dataclass(frozen=True)
class ClaimedPush:
    """One leased outbox row with what an attempt needs (secrets still sealed)."""

    id: int
    tenant: str
    identity: str
    task_id: str
    config_id: str
    kind: str
    message_key: str
    payload: dict[str, Any]
    attempts: int  # including the attempt this claim is for
    unauthorized_attempts: int
    first_attempt_at: datetime
    created_at: datetime
    url: str | None  # None: the push config was deleted after the row was queued
    token_enc: str | None
    auth_scheme: str | None
    auth_credentials_enc: str | None


def _claimed(
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


@dataclass(frozen=True)
class OutboxGauges:
    depth: int
    oldest_pending_seconds: float


class OutboxStore:
    def __init__(self, db: Database, *, owner: str, lease_seconds: float) -> None:
        self.db = db
        self.owner = owner
        self.lease = timedelta(seconds=lease_seconds)
        # PostgreSQL: the re-check's clock reading per push on the wire (``store_pg.Checked``).
        self._checked: dict[int, Checked] = {}

    async def now(self, session: AsyncSession) -> datetime:
        return await db_now(self.db, session)

    # --- claiming ----------------------------------------------------------------------------

    async def claim(self, limit: int) -> list[ClaimedPush]:
        """Lease up to ``limit`` eligible rows (at most one per task) for this owner."""
        if limit <= 0:
            return []
        pool = self.db.statement_pool
        if pool is not None:
            leased = await claim_pg(
                pool, owner=self.owner, lease=self.lease, limit=limit, lock_key=_CLAIM_LOCK_KEY
            )
            return [_claimed(r, payload_of(r), r) for r in leased]
        # SQLite: one process with one claimer (its worker lock), so claims are serialised
        # by construction and need neither the advisory lock nor row locks.
        async with self.db.transaction() as session:
            now = await self.now(session)
            ids = self._one_per_task(await self._candidates(session, now, limit))
            if not ids:
                return []
            await session.execute(
                update(PushOutboxRow)
                .where(PushOutboxRow.id.in_(ids))
                .values(
                    lease_owner=self.owner,
                    lease_until=now + self.lease,
                    attempts=PushOutboxRow.attempts + 1,
                    first_attempt_at=func.coalesce(PushOutboxRow.first_attempt_at, now),
                )
                .execution_options(synchronize_session=False)
            )
            return await self._load(session, ids)

    async def _candidates(
        self, session: AsyncSession, now: datetime, limit: int
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

    @staticmethod
    def _one_per_task(rows: Sequence[tuple[int, str, str]]) -> list[int]:
        seen: set[tuple[str, str]] = set()
        ids: list[int] = []
        for row_id, tenant, task_id in rows:
            if (tenant, task_id) not in seen:
                seen.add((tenant, task_id))
                ids.append(row_id)
        return ids

    async def _load(self, session: AsyncSession, ids: list[int]) -> list[ClaimedPush]:
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
        claimed = []
        for row, url, token, scheme, creds in (await session.execute(query)).all():
            target = {
                "url": url,
                "token_enc": token,
                "auth_scheme": scheme,
                "auth_credentials_enc": creds,
            }
            claimed.append(_claimed(vars(row), row.payload, target))
        return claimed

    # --- around an attempt ---------------------------------------------------------------------

    async def still_ours(self, push: ClaimedPush) -> bool:
        """Right before sending: still pending (not canceled) and still leased to us."""
        if self.db.statement_pool is not None:
            checked = await still_ours_pg(self.db.statement_pool, push.id, self.owner)
            if checked is not None:
                self._checked[push.id] = checked
                if len(self._checked) > _MAX_CHECKED:  # an attempt that never recorded
                    self._checked.pop(next(iter(self._checked)))
            return checked is not None
        async with self.db.transaction() as session:
            row = (
                await session.execute(
                    select(PushOutboxRow.status, PushOutboxRow.lease_owner).where(
                        PushOutboxRow.id == push.id
                    )
                )
            ).first()
        return row is not None and row[0] == PENDING and row[1] == self.owner

    async def record(
        self, push: ClaimedPush, status: int | None, decide: Callable[[datetime], Decision]
    ) -> Decision | None:
        """Write the outcome if the row is still ours and pending; None if it was not."""
        if self.db.statement_pool is not None:
            checked = self._checked.pop(push.id, None)
            pool = self.db.statement_pool
            return await record_pg(pool, push.id, self.owner, status, decide, checked)
        async with self.db.transaction() as session:
            now = await self.now(session)
            decision = decide(now)
            values: dict[str, Any] = {
                "lease_owner": None,
                "lease_until": None,
                "unauthorized_attempts": decision.unauthorized_attempts,
                "last_error": decision.error,
                "last_status": status,
            }
            if decision.verdict is Verdict.DELIVERED:
                values.update(status=DELIVERED, delivered_at=now)
            elif decision.verdict is Verdict.DEAD:
                values.update(status=DEAD)
            else:
                values.update(next_attempt_at=decision.next_attempt_at)
            applied = await self._update_ours(session, push, values)
        return decision if applied else None

    async def drop(self, push: ClaimedPush, *, reason: str) -> bool:
        """Cancel a row that can never be sent (its push config is gone)."""
        async with self.db.transaction() as session:
            values = {"status": CANCELED, "lease_owner": None, "lease_until": None}
            return await self._update_ours(session, push, {**values, "last_error": reason})

    async def _update_ours(
        self, session: AsyncSession, push: ClaimedPush, values: dict[str, Any]
    ) -> bool:
        result = await session.execute(
            update(PushOutboxRow)
            .where(
                PushOutboxRow.id == push.id,
                PushOutboxRow.status == PENDING,
                PushOutboxRow.lease_owner == self.owner,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return int(getattr(result, "rowcount", 0) or 0) == 1

    # --- observation ---------------------------------------------------------------------------

    async def gauges(self) -> OutboxGauges:
        async with self.db.transaction() as session:
            now = await self.now(session)
            depth, oldest = (
                await session.execute(
                    select(func.count(), func.min(PushOutboxRow.created_at)).where(
                        PushOutboxRow.status == PENDING
                    )
                )
            ).one()
        age = 0.0 if oldest is None else max(0.0, (now - as_utc(oldest)).total_seconds())
        return OutboxGauges(depth=int(depth), oldest_pending_seconds=age)


async def wake_deliverers(db: Database) -> None:
    """Wake deliverers in every process (after a replay, for instance)."""
    await db.signals.pushes.notify_everyone()
