"""Identity leases in ``actors`` (ARCHITECTURE, Durable execution: claim, heartbeat, release).

One lease per ``(tenant, identity)``. A claim takes actors whose lease is free or expired and
whose *head* turn (the lowest ``turns.id`` still ``queued``/``running``) is due, skips rows
another worker has locked (``FOR UPDATE SKIP LOCKED`` on PostgreSQL), sets the owner and
``lease_until`` from the database clock and bumps ``fence``. Every later write of the holder is
conditioned on that fence (``app.db.fence.fence_holds``), so a claim is the only moment a
worker "becomes" the identity's runner and a takeover silences the previous holder at once.

Time: PostgreSQL uses its own clock (``now()``) so every replica compares leases against one
clock. SQLite is single-process: the process clock is the database clock there (see
``Database.clock``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.engine import Database
from app.db.fence import Fence, fence_params
from app.db.models import ActorRow, TaskRow, TurnRow
from app.db.models.base import Timestamp
from app.security.caller import CallerScope
from app.tasks.states import UNFINISHED_TURNS, UNFINISHED_TURNS_SQL

UNFINISHED = UNFINISHED_TURNS

# A worker paused in the middle of a transaction (SIGSTOP, a frozen VM) would keep its row
# locks: claims skip a locked actor (SKIP LOCKED) and the takeover would wait for the pause to
# end. PostgreSQL ends a session idle inside a transaction after this long, releasing them.
LOCK_IDLE_LIMIT_MS = 5000


@asynccontextmanager
async def locking_transaction(db: Database) -> AsyncIterator[AsyncSession]:
    """``db.transaction()`` for statements that lock ``actors``/``turns`` rows."""
    async with db.transaction() as session:
        if not db.is_sqlite:
            await session.execute(
                text(f"SET LOCAL idle_in_transaction_session_timeout = {LOCK_IDLE_LIMIT_MS}")
            )
        yield session


@dataclass(frozen=True)
class Lease:
    """A claimed identity: the scope its turns run in and the fence its writes carry."""

    scope: CallerScope
    fence: Fence


def lease_deadline(db: Database, seconds: float) -> ColumnElement[Any]:
    """``now + seconds`` on the database clock."""
    if db.is_sqlite:
        return literal(datetime.now(UTC) + timedelta(seconds=seconds), type_=Timestamp)
    return func.now() + func.make_interval(0, 0, 0, 0, 0, 0, literal(float(seconds)))


def _head_is_due(db: Database) -> ColumnElement[bool]:
    """The actor's lowest unfinished turn exists and is due (strict per-identity order: a turn
    waiting out its retry backoff holds the identity's later turns until it runs or dies)."""
    head = aliased(TurnRow)
    earlier = aliased(TurnRow)
    now = db.clock()
    return exists(
        select(head.id).where(
            head.tenant == ActorRow.tenant,
            head.identity == ActorRow.identity,
            head.status.in_(UNFINISHED),
            or_(head.not_before.is_(None), head.not_before <= now),
            ~exists(
                select(earlier.id).where(
                    earlier.tenant == head.tenant,
                    earlier.identity == head.identity,
                    earlier.status.in_(UNFINISHED),
                    earlier.id < head.id,
                )
            ),
        )
    )


def _lease_free(db: Database) -> ColumnElement[bool]:
    return or_(ActorRow.lease_until.is_(None), ActorRow.lease_until <= db.clock())


# The same claim as one hand-written statement for the statement pool (PostgreSQL): through
# the ORM it cost a ``SET LOCAL`` round trip and ~1 ms of worker CPU per wake-up
# (bench/README). $1 owner, $2 lease seconds, $3 limit; the unfinished statuses are text,
# so that the search walks ``ix_turns_unfinished`` (``states.UNFINISHED_TURNS_SQL``).
# (``mailbox.claim_with_heads`` wraps it to read each claimed identity's head turn too.)
CLAIM_SQL = f"""
UPDATE actors a
   SET lease_owner = $1, lease_until = now() + make_interval(secs => $2::float8),
       fence = a.fence + 1, updated_at = now()
 WHERE (a.tenant, a.identity) IN (
         SELECT c.tenant, c.identity
           FROM actors c
          WHERE (c.lease_until IS NULL OR c.lease_until <= now())
            AND EXISTS (
                  SELECT 1 FROM turns h
                   WHERE h.tenant = c.tenant AND h.identity = c.identity
                     AND h.status IN {UNFINISHED_TURNS_SQL}
                     AND (h.not_before IS NULL OR h.not_before <= now())
                     AND NOT EXISTS (
                           SELECT 1 FROM turns e
                            WHERE e.tenant = h.tenant AND e.identity = h.identity
                              AND e.status IN {UNFINISHED_TURNS_SQL} AND e.id < h.id))
          ORDER BY c.updated_at, c.tenant, c.identity
          LIMIT $3
          FOR UPDATE OF c SKIP LOCKED)
   AND (a.lease_until IS NULL OR a.lease_until <= now())
RETURNING a.tenant, a.identity, a.fence
"""  # noqa: S608 (constant fragments only)


async def claim(db: Database, *, owner: str, limit: int, lease_seconds: float) -> list[Lease]:
    """Claim up to ``limit`` identities with due work; returns the new leases.

    One statement: ``UPDATE actors … WHERE (tenant, identity) IN (SELECT … FOR UPDATE SKIP
    LOCKED LIMIT n) RETURNING``. Concurrent workers never wait on each other's candidates and
    never both get the same actor; the UPDATE re-checks that the lease is free.
    """
    if limit <= 0:
        return []
    if db.statement_pool is not None:
        # One autocommit statement: its row locks last only while it runs.
        found = await db.statement_pool.fetch(CLAIM_SQL, owner, float(lease_seconds), limit)
        return [
            Lease(CallerScope(tenant=t, identity=i), Fence(owner=owner, token=int(f)))
            for t, i, f in found
        ]
    candidates = (
        select(ActorRow.tenant, ActorRow.identity)
        .where(_lease_free(db), _head_is_due(db))
        # Least recently claimed first: a busy identity cannot starve the others.
        .order_by(ActorRow.updated_at, ActorRow.tenant, ActorRow.identity)
        .limit(limit)
        .with_for_update(skip_locked=True, of=ActorRow)
    )
    stmt = (
        update(ActorRow)
        .where(tuple_(ActorRow.tenant, ActorRow.identity).in_(candidates), _lease_free(db))
        .values(
            lease_owner=owner,
            lease_until=lease_deadline(db, lease_seconds),
            fence=ActorRow.fence + 1,
            updated_at=db.clock(),
        )
        .returning(ActorRow.tenant, ActorRow.identity, ActorRow.fence)
        .execution_options(synchronize_session=False)
    )
    async with locking_transaction(db) as s:
        rows = (await s.execute(stmt)).all()
    return [
        Lease(CallerScope(tenant=t, identity=i), Fence(owner=owner, token=int(f)))
        for t, i, f in rows
    ]


def _held(lease: Lease) -> ColumnElement[bool]:
    return and_(
        ActorRow.tenant == lease.scope.tenant,
        ActorRow.identity == lease.scope.identity,
        ActorRow.fence == lease.fence.token,
        ActorRow.lease_owner == lease.fence.owner,
    )


async def extend(db: Database, leases: Iterable[Lease], *, lease_seconds: float) -> set[Lease]:
    """Heartbeat: push ``lease_until`` forward for every lease whose fence still matches.

    Returns the leases that were extended; any other one was lost (taken over after expiry).
    An expired lease nobody has claimed yet is extended: a claimer bumps the fence atomically,
    so the row lock orders the two and never both win.
    """
    wanted = list(leases)
    if not wanted:
        return set()
    extended: set[Lease] = set()
    async with locking_transaction(db) as s:
        for lease in wanted:
            result = await s.execute(
                update(ActorRow)
                .where(_held(lease))
                .values(lease_until=lease_deadline(db, lease_seconds))
                .execution_options(synchronize_session=False)
            )
            if getattr(result, "rowcount", 0):
                extended.add(lease)
    return extended


_RELEASE_SQL = """
UPDATE actors SET lease_owner = NULL, lease_until = NULL
 WHERE tenant = $1 AND identity = $2 AND fence = $3 AND lease_owner = $4
RETURNING 1
"""


async def release(db: Database, lease: Lease) -> bool:
    """Give the identity back (only if still ours): the next claim may come from anyone."""
    if db.statement_pool is not None:
        # One autocommit statement (app/db/statement_pool.py): no transaction left open.
        scope, fence = lease.scope, lease.fence
        done = await db.statement_pool.fetchval(_RELEASE_SQL, *fence_params(scope, fence))
        return done is not None
    async with locking_transaction(db) as s:
        result = await s.execute(
            update(ActorRow)
            .where(_held(lease))
            .values(lease_owner=None, lease_until=None)
            .execution_options(synchronize_session=False)
        )
    return bool(getattr(result, "rowcount", 0))


async def still_held(db: Database, lease: Lease) -> bool:
    """Whether the lease is still ours and unexpired (to tell "fence lost" from "task closed"
    after a guarded write was refused)."""
    async with db.transaction() as s:
        found = await s.execute(
            select(ActorRow.fence).where(_held(lease), ActorRow.lease_until > db.clock())
        )
        return found.first() is not None


async def task_states(
    db: Database, keys: Iterable[tuple[CallerScope, str]]
) -> dict[tuple[CallerScope, str], str]:
    """Current ``tasks.state`` of ``(scope, task id)`` pairs (the heartbeat's cancel check)."""
    wanted = list(keys)
    if not wanted:
        return {}
    triples = [(scope.tenant, scope.identity, task_id) for scope, task_id in wanted]
    async with db.transaction() as s:
        rows = await s.execute(
            select(TaskRow.tenant, TaskRow.identity, TaskRow.id, TaskRow.state).where(
                tuple_(TaskRow.tenant, TaskRow.identity, TaskRow.id).in_(triples)
            )
        )
        return {
            (CallerScope(tenant=t, identity=i), task_id): state
            for t, i, task_id, state in rows.all()
        }
