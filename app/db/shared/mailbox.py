"""The mailbox store as SQLAlchemy transactions (``app.db.mailbox.MailboxStore``).

SQLite runs all of it; PostgreSQL runs the heartbeat, the still-held check and the cancel
check from here and its one-statement units for the rest (``app.db.postgres.mailbox``). Every
turn update is fenced (``app.db.fence.fence_holds``) in the same statement, so a zombie worker
that lost its lease cannot move a turn the new holder owns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, exists, func, or_, select, text, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.clock import SqlClock
from app.db.engine import Database
from app.db.fence import Fence, fence_holds
from app.db.mailbox import (
    ERROR_INTERRUPTED,
    Begun,
    Lease,
    QueuedTurn,
    Settled,
    WorkingMark,
)
from app.db.models import ActorRow, TaskRow, TurnRow
from app.db.shared.turn_writes import SharedTurnWrites
from app.db.states import TURN_QUEUED, TURN_RUNNING, UNFINISHED_TURNS
from app.security.caller import CallerScope


def _held(lease: Lease) -> ColumnElement[bool]:
    return and_(
        ActorRow.tenant == lease.scope.tenant,
        ActorRow.identity == lease.scope.identity,
        ActorRow.fence == lease.fence.token,
        ActorRow.lease_owner == lease.fence.owner,
    )


class SharedMailbox:
    """``clock``: the storage's clock; ``locking``: a statement that opens every transaction
    locking ``actors``/``turns`` rows (PostgreSQL bounds a paused holder's locks with it)."""

    def __init__(
        self,
        db: Database,
        clock: SqlClock,
        snapshots: SharedTurnWrites,
        *,
        locking: str | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self._snapshots = snapshots
        self._locking = locking

    @asynccontextmanager
    async def _locking_transaction(self) -> AsyncIterator[AsyncSession]:
        async with self._db.transaction() as session:
            if self._locking is not None:
                await session.execute(text(self._locking))
            yield session

    # --- leases ---------------------------------------------------------------------------

    def _head_is_due(self) -> ColumnElement[bool]:
        """The actor's lowest unfinished turn exists and is due (strict per-identity order: a
        turn waiting out its retry backoff holds the identity's later turns until it runs or
        dies)."""
        head = aliased(TurnRow)
        earlier = aliased(TurnRow)
        now = self._clock.now()
        return exists(
            select(head.id).where(
                head.tenant == ActorRow.tenant,
                head.identity == ActorRow.identity,
                head.status.in_(UNFINISHED_TURNS),
                or_(head.not_before.is_(None), head.not_before <= now),
                ~exists(
                    select(earlier.id).where(
                        earlier.tenant == head.tenant,
                        earlier.identity == head.identity,
                        earlier.status.in_(UNFINISHED_TURNS),
                        earlier.id < head.id,
                    )
                ),
            )
        )

    def _lease_free(self) -> ColumnElement[bool]:
        return or_(ActorRow.lease_until.is_(None), ActorRow.lease_until <= self._clock.now())

    def _candidates(self, limit: int) -> Select[tuple[str, str]]:
        """The free actors with a due head in claim order (``app.db.mailbox``): tenants holding
        the fewest leases first, then the identity that has waited longest since it was last
        served. ``share`` is the tenant's live leases plus the identity's rank among its
        tenant's candidates, so the slots of one claim go to one tenant after another. The
        claim of SQLite (one writer at a time, nothing to skip); PostgreSQL's is
        ``app.db.postgres.mailbox.CLAIM_SQL``."""
        live = (
            select(ActorRow.tenant.label("tenant"), func.count().label("leases"))
            .where(ActorRow.lease_until > self._clock.now())
            .group_by(ActorRow.tenant)
            .subquery("live")
        )
        served = ActorRow.last_served_at.asc().nulls_first()
        rank = func.row_number().over(
            partition_by=ActorRow.tenant, order_by=(served, ActorRow.identity)
        )
        ranked = (
            select(
                ActorRow.tenant,
                ActorRow.identity,
                ActorRow.last_served_at,
                (func.coalesce(live.c.leases, 0) + rank).label("share"),
            )
            .outerjoin(live, live.c.tenant == ActorRow.tenant)
            .where(self._lease_free(), self._head_is_due())
            .subquery("ranked")
        )
        return (
            select(ranked.c.tenant, ranked.c.identity)
            .order_by(
                ranked.c.share,
                ranked.c.last_served_at.asc().nulls_first(),
                ranked.c.tenant,
                ranked.c.identity,
            )
            .limit(limit)
        )

    async def claim(self, *, owner: str, limit: int, lease_seconds: float) -> list[Lease]:
        if limit <= 0:
            return []
        candidates = self._candidates(limit)
        stmt = (
            update(ActorRow)
            .where(tuple_(ActorRow.tenant, ActorRow.identity).in_(candidates), self._lease_free())
            .values(
                lease_owner=owner,
                lease_until=self._clock.after(lease_seconds),
                fence=ActorRow.fence + 1,
                updated_at=self._clock.now(),
            )
            .returning(ActorRow.tenant, ActorRow.identity, ActorRow.fence)
            .execution_options(synchronize_session=False)
        )
        async with self._locking_transaction() as s:
            rows = (await s.execute(stmt)).all()
        return [
            Lease(CallerScope(tenant=t, identity=i), Fence(owner=owner, token=int(f)))
            for t, i, f in rows
        ]

    async def claim_with_heads(
        self, *, owner: str, limit: int, lease_seconds: float
    ) -> list[tuple[Lease, QueuedTurn | None]]:
        leases = await self.claim(owner=owner, limit=limit, lease_seconds=lease_seconds)
        return [(lease, await self.head_turn(lease)) for lease in leases]

    async def extend(self, leases: Iterable[Lease], *, lease_seconds: float) -> set[Lease]:
        """An expired lease nobody has claimed yet is extended: a claimer bumps the fence
        atomically, so the row lock orders the two and never both win."""
        wanted = list(leases)
        if not wanted:
            return set()
        extended: set[Lease] = set()
        async with self._locking_transaction() as s:
            for lease in wanted:
                result = await s.execute(
                    update(ActorRow)
                    .where(_held(lease))
                    .values(lease_until=self._clock.after(lease_seconds))
                    .execution_options(synchronize_session=False)
                )
                if getattr(result, "rowcount", 0):
                    extended.add(lease)
        return extended

    async def release(self, lease: Lease) -> bool:
        async with self._locking_transaction() as s:
            result = await s.execute(
                update(ActorRow)
                .where(_held(lease))
                .values(lease_owner=None, lease_until=None, last_served_at=self._clock.now())
                .execution_options(synchronize_session=False)
            )
        return bool(getattr(result, "rowcount", 0))

    async def still_held(self, lease: Lease) -> bool:
        async with self._db.transaction() as s:
            found = await s.execute(
                select(ActorRow.fence).where(_held(lease), ActorRow.lease_until > self._clock.now())
            )
            return found.first() is not None

    async def task_states(
        self, keys: Iterable[tuple[CallerScope, str]]
    ) -> dict[tuple[CallerScope, str], str]:
        wanted = list(keys)
        if not wanted:
            return {}
        triples = [(scope.tenant, scope.identity, task_id) for scope, task_id in wanted]
        async with self._db.transaction() as s:
            rows = await s.execute(
                select(TaskRow.tenant, TaskRow.identity, TaskRow.id, TaskRow.state).where(
                    tuple_(TaskRow.tenant, TaskRow.identity, TaskRow.id).in_(triples)
                )
            )
            return {
                (CallerScope(tenant=t, identity=i), task_id): state
                for t, i, task_id, state in rows.all()
            }

    # --- the mailbox ----------------------------------------------------------------------

    async def head_turn(self, lease: Lease) -> QueuedTurn | None:
        scope = lease.scope
        async with self._db.transaction() as s:
            row = (
                await s.execute(
                    select(TurnRow)
                    .where(
                        TurnRow.tenant == scope.tenant,
                        TurnRow.identity == scope.identity,
                        TurnRow.status.in_(UNFINISHED_TURNS),
                    )
                    .order_by(TurnRow.id)
                    .limit(1)
                )
            ).scalar_one_or_none()
            if row is None:
                return None
            if row.not_before is not None:
                due = (
                    await s.execute(
                        select(TurnRow.id).where(
                            TurnRow.id == row.id,
                            or_(
                                TurnRow.not_before.is_(None),
                                TurnRow.not_before <= self._clock.now(),
                            ),
                        )
                    )
                ).first()
                if due is None:
                    return None
            return QueuedTurn(
                id=row.id,
                task_id=row.task_id,
                message_id=row.message_id,
                kind=row.kind,
                status=row.status,
                attempts=row.attempts,
                payload=dict(row.payload or {}),
            )

    async def _fenced_update(self, lease: Lease, turn_id: int, **values: Any) -> bool:
        stmt = (
            update(TurnRow)
            .where(
                TurnRow.id == turn_id,
                TurnRow.tenant == lease.scope.tenant,
                TurnRow.identity == lease.scope.identity,
                TurnRow.status.in_(UNFINISHED_TURNS),
                fence_holds(lease.scope, lease.fence, now=self._clock.now()),
            )
            .values(updated_at=self._clock.now(), **values)
            .execution_options(synchronize_session=False)
        )
        async with self._locking_transaction() as s:
            result = await s.execute(stmt)
        return bool(getattr(result, "rowcount", 0))

    async def begin_attempt(self, lease: Lease, turn: QueuedTurn) -> bool:
        return await self._fenced_update(
            lease, turn.id, status=TURN_RUNNING, attempts=TurnRow.attempts + 1
        )

    async def begin(self, lease: Lease, turn: QueuedTurn, mark: WorkingMark | None) -> Begun:
        """Never marks the task (``Begun.marked`` stays False): the runner does."""
        if not await self.begin_attempt(lease, turn):
            return Begun(applied=False)
        snapshot = await self._snapshots.snapshot(lease.scope, turn.task_id)
        return Begun(applied=True, snapshot=snapshot)

    async def settle(
        self, lease: Lease, turn_id: int, status: str, *, error: str | None = None
    ) -> bool:
        return await self._fenced_update(lease, turn_id, status=status, last_error=error)

    async def settle_and_head(
        self, lease: Lease, turn_id: int, status: str, *, error: str | None = None
    ) -> Settled:
        if not await self.settle(lease, turn_id, status, error=error):
            return Settled(applied=False)
        return Settled(applied=True, next_turn=await self.head_turn(lease))

    async def retry_later(self, lease: Lease, turn_id: int, *, delay: float, error: str) -> bool:
        return await self._fenced_update(
            lease,
            turn_id,
            status=TURN_QUEUED,
            not_before=self._clock.after(delay),
            last_error=error,
        )

    async def give_back(self, lease: Lease, turn_id: int) -> bool:
        return await self._fenced_update(
            lease,
            turn_id,
            status=TURN_QUEUED,
            attempts=TurnRow.attempts - 1,
            last_error=ERROR_INTERRUPTED,
        )
