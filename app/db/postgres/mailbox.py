"""The mailbox store on PostgreSQL (``app.db.mailbox.MailboxStore``), on the statement pool.

Each unit is one autocommit statement. Through the ORM each was a transaction of 3-4 round
trips (BEGIN, ``SET LOCAL``, the statement, COMMIT) and far more worker CPU; the
turn benchmark was bound by them. Same rules as the shared statements
(``app.db.shared.mailbox``): scope, unfinished status and the fence (``FENCE_SQL``) in the same
WHERE, the database clock for every time. The heartbeat, the still-held check and the cancel
check run the shared transactions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.db.fence import FENCE_SQL, Fence, fence_params
from app.db.mailbox import (
    ERROR_INTERRUPTED,
    Begun,
    Lease,
    QueuedTurn,
    Settled,
    WorkingMark,
)
from app.db.postgres.turn_heads import HEAD_COLUMNS_SQL, head_join_sql, queued_turn
from app.db.postgres.turn_writes import SNAPSHOT_COLUMNS_SQL, snapshot_from_row
from app.db.shared.mailbox import SharedMailbox
from app.db.statement_pool import StatementPool
from app.db.states import TURN_QUEUED, TURN_RUNNING, UNFINISHED_TURNS, UNFINISHED_TURNS_SQL
from app.security.caller import CallerScope

# A worker paused in the middle of a transaction (SIGSTOP, a frozen VM) would keep its row
# locks: claims skip a locked actor (SKIP LOCKED) and the takeover would wait for the pause to
# end. PostgreSQL ends a session idle inside a transaction after this long, releasing them.
LOCK_IDLE_LIMIT_MS = 5000
LOCKING_SQL = f"SET LOCAL idle_in_transaction_session_timeout = {LOCK_IDLE_LIMIT_MS}"

# The claim as one hand-written statement for the statement pool (PostgreSQL): through the
# ORM it cost a ``SET LOCAL`` round trip and far more worker CPU per wake-up.
# $1 owner, $2 lease seconds, $3 limit. Which identities it takes is the rule of
# ``app.db.mailbox`` (tenants holding the fewest leases first, then the identity that has
# waited longest since it was last served); the rows it reads are bounded by the work in
# flight, never by the history kept:
# - ``waiting``: one entry of ``ix_turns_unfinished`` per identity with unfinished turns (a
#   skip scan: each step seeks past the previous identity), and that entry is the identity's
#   head turn (its lowest id), so whether the head is due is read on the way. The unfinished
#   statuses are text, so that even a generic plan walks the partial index
#   (``states.UNFINISHED_TURNS_SQL``);
# - ``live``: the unexpired leases per tenant, through ``ix_actors_lease_until``;
# - ``ranked``: each waiting identity's actor by primary key; its ``share`` is its tenant's
#   live leases plus its rank among that tenant's waiting identities, so a claim of several
#   slots hands them out one tenant after another rather than all to the first tenant;
# - the ``UPDATE``: the best-ranked free actors, locked ``SKIP LOCKED`` in that order (rows
#   another claimer holds are passed over, never waited for), re-checked as still free.
_CLAIM_CTES_SQL = f"""
WITH RECURSIVE waiting AS (
    (SELECT tenant, identity, not_before FROM turns
      WHERE status IN {UNFINISHED_TURNS_SQL}
      ORDER BY tenant, identity, id LIMIT 1)
    UNION ALL
    SELECT n.tenant, n.identity, n.not_before
      FROM waiting w, LATERAL (
        SELECT t.tenant, t.identity, t.not_before FROM turns t
         WHERE t.status IN {UNFINISHED_TURNS_SQL}
           AND (t.tenant, t.identity) > (w.tenant, w.identity)
         ORDER BY t.tenant, t.identity, t.id LIMIT 1) n
), live AS (
    SELECT tenant, count(*) AS leases FROM actors WHERE lease_until > now() GROUP BY tenant
), ranked AS (
    SELECT w.tenant, w.identity, c.last_served_at,
           coalesce(l.leases, 0) + row_number() OVER (
               PARTITION BY w.tenant ORDER BY c.last_served_at NULLS FIRST, w.identity) AS share
      FROM waiting w
      JOIN actors c ON c.tenant = w.tenant AND c.identity = w.identity
      LEFT JOIN live l ON l.tenant = w.tenant
     WHERE (w.not_before IS NULL OR w.not_before <= now())
       AND (c.lease_until IS NULL OR c.lease_until <= now())
)"""  # noqa: S608 (constant fragments only)

_CLAIM_UPDATE_SQL = """
UPDATE actors a
   SET lease_owner = $1, lease_until = now() + make_interval(secs => $2::float8),
       fence = a.fence + 1, updated_at = now()
 WHERE (a.tenant, a.identity) IN (
         SELECT c.tenant, c.identity
           FROM actors c
           JOIN ranked r ON r.tenant = c.tenant AND r.identity = c.identity
          WHERE (c.lease_until IS NULL OR c.lease_until <= now())
          ORDER BY r.share, r.last_served_at NULLS FIRST, c.tenant, c.identity
          LIMIT $3
          FOR UPDATE OF c SKIP LOCKED)
   AND (a.lease_until IS NULL OR a.lease_until <= now())
RETURNING a.tenant, a.identity, a.fence
"""

CLAIM_SQL = _CLAIM_CTES_SQL + _CLAIM_UPDATE_SQL


_RELEASE_SQL = """
UPDATE actors SET lease_owner = NULL, lease_until = NULL, last_served_at = now()
 WHERE tenant = $1 AND identity = $2 AND fence = $3 AND lease_owner = $4
RETURNING 1
"""


# PostgreSQL: each unit below is one autocommit statement on the statement pool. Through the
# ORM each was a transaction of 3-4 round trips (BEGIN, ``SET LOCAL``, the statement, COMMIT)
# and far more worker CPU; the turn benchmark was bound by them. Same rules as
# the ORM statements: scope, unfinished status and the fence (``app.db.fence.FENCE_SQL``)
# in the same WHERE, the database clock for every time.
_HEAD_SQL = (
    f"SELECT {HEAD_COLUMNS_SQL} FROM (SELECT 1) AS one"  # noqa: S608 (constant fragments only)
    + head_join_sql(tenant="$1", identity="$2")
)

# $5 turn id; $6 new status; $7 attempts delta; $8 seconds until due (NULL: keep
# not_before); $9 whether to set last_error, $10 its value.
_FENCED_UPDATE_SQL = (
    """
UPDATE turns
   SET status = $6,
       attempts = attempts + $7,
       not_before = CASE WHEN $8::float8 IS NULL THEN not_before
                         ELSE now() + make_interval(secs => $8::float8) END,
       last_error = CASE WHEN $9::bool THEN $10::text ELSE last_error END,
       updated_at = now()
 WHERE id = $5 AND tenant = $1 AND identity = $2 AND status = ANY($11::text[])
   AND """
    + FENCE_SQL
    + """
RETURNING 1
"""
)


# ``settle`` and the read of the identity's next head in one statement: the drain reads the
# head after every settled turn, so apart they were two round trips per turn. Every part of a
# statement sees the same snapshot, taken before its UPDATE runs, so the settled turn still
# looks unfinished to the head read: it is left out by id (it was the head, so the next head
# has a higher id). The head is only used when the settle applied. $5 turn id, $6 new status,
# $7 last error, $8 unfinished statuses.
_SETTLE_AND_HEAD_SQL = (
    """
WITH settled AS (
    UPDATE turns SET status = $6, last_error = $7::text, updated_at = now()
     WHERE id = $5 AND tenant = $1 AND identity = $2 AND status = ANY($8::text[])
       AND """  # noqa: S608 (constant fragments only)
    + FENCE_SQL
    + """
    RETURNING 1
)
SELECT (SELECT count(*) FROM settled) AS applied, """
    + HEAD_COLUMNS_SQL
    + " FROM (SELECT 1) AS one"
    + head_join_sql(tenant="$1", identity="$2", extra="id <> $5")
)


# The claim (``CLAIM_SQL``) and each claimed identity's head turn in one statement: a
# drain starts by reading its head, one more round trip per claimed identity. The head read
# sees the statement's snapshot, and so does the claim's search for identities whose head is
# due; a holder that lost its lease before that snapshot cannot write after it (its fence
# requires an unexpired lease, and the lease had expired).
_CLAIM_WITH_HEADS_SQL = (
    _CLAIM_CTES_SQL  # noqa: S608 (constant fragments only)
    + ", claimed AS ("
    + _CLAIM_UPDATE_SQL
    + ") SELECT c.tenant, c.identity, c.fence, "
    + HEAD_COLUMNS_SQL
    + " FROM claimed c"
    + head_join_sql(tenant="c.tenant", identity="c.identity")
)


# $1 tenant, $2 identity, $3 fence token, $4 lease owner (FENCE_SQL); $5 turn id,
# $6 'running', $7 unfinished statuses, $8 task id; $9 whether to mark the task working,
# with $10 state, $11 status, $12 updated_at and $13 the states it may be marked from.
_BEGIN_AND_SNAPSHOT_SQL = (
    """
WITH begun AS (
    UPDATE turns SET status = $6, attempts = attempts + 1, updated_at = now()
     WHERE id = $5 AND tenant = $1 AND identity = $2 AND status = ANY($7::text[])
       AND """  # noqa: S608 (constant fragments only)
    + FENCE_SQL
    + """
    RETURNING 1
), marked AS (
    UPDATE tasks SET state = $10, status = $11::jsonb, updated_at = $12, version = version + 1
     WHERE $9::bool AND tenant = $1 AND identity = $2 AND id = $8 AND state = ANY($13::text[])
       AND EXISTS (SELECT 1 FROM begun)
    RETURNING 1
)
SELECT (SELECT count(*) FROM begun) AS applied, (SELECT count(*) FROM marked) AS marked, """
    + SNAPSHOT_COLUMNS_SQL
    + """
  FROM (SELECT 1) AS one
  LEFT JOIN tasks t ON t.tenant = $1 AND t.identity = $2 AND t.id = $8
"""
)


@dataclass(frozen=True)
class _TurnChange:
    """What one fenced turn update sets (``_FENCED_UPDATE_SQL``'s parameters)."""

    status: str
    attempts_delta: int = 0
    due_in: float | None = None  # seconds from now; None keeps not_before
    set_error: bool = False
    error: str | None = None


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class PostgresMailbox:
    def __init__(self, pool: StatementPool, shared: SharedMailbox) -> None:
        self._pool = pool
        self._shared = shared

    async def claim(self, *, owner: str, limit: int, lease_seconds: float) -> list[Lease]:
        """One statement: ``UPDATE actors … WHERE (tenant, identity) IN (SELECT … FOR UPDATE
        SKIP LOCKED LIMIT n) RETURNING``; its row locks last only while it runs."""
        if limit <= 0:
            return []
        found = await self._pool.fetch(CLAIM_SQL, owner, float(lease_seconds), limit)
        return [
            Lease(CallerScope(tenant=t, identity=i), Fence(owner=owner, token=int(f)))
            for t, i, f in found
        ]

    async def claim_with_heads(
        self, *, owner: str, limit: int, lease_seconds: float
    ) -> list[tuple[Lease, QueuedTurn | None]]:
        if limit <= 0:
            return []
        rows = await self._pool.fetch(_CLAIM_WITH_HEADS_SQL, owner, float(lease_seconds), limit)
        return [
            (
                Lease(
                    CallerScope(tenant=row["tenant"], identity=row["identity"]),
                    Fence(owner=owner, token=int(row["fence"])),
                ),
                queued_turn(row),
            )
            for row in rows
        ]

    async def head_turn(self, lease: Lease) -> QueuedTurn | None:
        row = await self._pool.fetchrow(_HEAD_SQL, lease.scope.tenant, lease.scope.identity)
        return queued_turn(row)

    async def _fenced_update(self, lease: Lease, turn_id: int, change: _TurnChange) -> bool:
        applied = await self._pool.fetchval(
            _FENCED_UPDATE_SQL,
            *fence_params(lease.scope, lease.fence),
            turn_id,
            change.status,
            change.attempts_delta,
            change.due_in,
            change.set_error,
            change.error,
            list(UNFINISHED_TURNS),
        )
        return applied is not None

    async def begin_attempt(self, lease: Lease, turn: QueuedTurn) -> bool:
        return await self._fenced_update(lease, turn.id, _TurnChange(TURN_RUNNING, 1))

    async def begin(self, lease: Lease, turn: QueuedTurn, mark: WorkingMark | None) -> Begun:
        """One statement: the attempt begun, the task marked working (with ``mark``) and its
        snapshot read."""
        row = await self._pool.fetchrow(
            _BEGIN_AND_SNAPSHOT_SQL,
            *fence_params(lease.scope, lease.fence),
            turn.id,
            TURN_RUNNING,
            list(UNFINISHED_TURNS),
            turn.task_id,
            mark is not None,
            mark.state if mark is not None else None,
            _json(mark.status) if mark is not None else None,
            mark.at if mark is not None else None,
            list(mark.allowed) if mark is not None else [],
        )
        if row is None or row["applied"] != 1:
            return Begun(applied=False)
        return Begun(applied=True, snapshot=snapshot_from_row(row[2:]), marked=row["marked"] == 1)

    async def settle(
        self, lease: Lease, turn_id: int, status: str, *, error: str | None = None
    ) -> bool:
        return await self._fenced_update(
            lease, turn_id, _TurnChange(status, set_error=True, error=error)
        )

    async def settle_and_head(
        self, lease: Lease, turn_id: int, status: str, *, error: str | None = None
    ) -> Settled:
        row = await self._pool.fetchrow(
            _SETTLE_AND_HEAD_SQL,
            *fence_params(lease.scope, lease.fence),
            turn_id,
            status,
            error,
            list(UNFINISHED_TURNS),
        )
        if row is None or row["applied"] != 1:
            return Settled(applied=False)
        return Settled(applied=True, next_turn=queued_turn(row))

    async def retry_later(self, lease: Lease, turn_id: int, *, delay: float, error: str) -> bool:
        change = _TurnChange(TURN_QUEUED, due_in=float(delay), set_error=True, error=error)
        return await self._fenced_update(lease, turn_id, change)

    async def give_back(self, lease: Lease, turn_id: int) -> bool:
        change = _TurnChange(TURN_QUEUED, -1, set_error=True, error=ERROR_INTERRUPTED)
        return await self._fenced_update(lease, turn_id, change)

    async def extend(self, leases: Iterable[Lease], *, lease_seconds: float) -> set[Lease]:
        return await self._shared.extend(leases, lease_seconds=lease_seconds)

    async def release(self, lease: Lease) -> bool:
        done = await self._pool.fetchval(_RELEASE_SQL, *fence_params(lease.scope, lease.fence))
        return done is not None

    async def still_held(self, lease: Lease) -> bool:
        return await self._shared.still_held(lease)

    async def task_states(
        self, keys: Iterable[tuple[CallerScope, str]]
    ) -> dict[tuple[CallerScope, str], str]:
        return await self._shared.task_states(keys)
