"""Starting a turn's attempt: ``begin_attempt`` and the task snapshot the turn runs on.

The attempt is counted and the turn marked ``running`` before anything else happens
(``mailbox.begin_attempt``; a worker killed mid-turn leaves a counted attempt behind), then the
runner reads the task it is about to run (``TurnWrites.load_turn_context``). On PostgreSQL the
two are one statement on the statement pool: the fenced turn update in a data-modifying CTE and
the task read beside it. Apart they were two round trips on every turn (bench/ROUNDS.md, round
seven). The task read sees the statement's snapshot, taken as it starts: the same task a read
right after the update would have seen, give or take a write that lands between the two, which
the runner's guarded writes refuse either way (a cancel makes ``mark_working`` refuse). The
snapshot is only used when the update applied, so a worker that lost its lease reads nothing
it acts on. SQLite runs the two units one after the other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from app.db.engine import Database
from app.db.fence import FENCE_SQL, fence_params
from app.db.postgres.turn_writes import SNAPSHOT_COLUMNS_SQL, snapshot_from_row
from app.db.turns import TaskSnapshot
from app.errors import TaskNotFound
from app.security.caller import CallerScope
from app.tasks.states import RUNNABLE, TURN_RUNNING
from app.tasks.turn_writes import working_values
from app.worker import mailbox
from app.worker.lease import UNFINISHED, Lease
from app.worker.mailbox import QueuedTurn

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


class SnapshotLoader(Protocol):
    """What reads the task on SQLite (``app.tasks.turn_writes.TurnWrites``)."""

    async def load_turn_context(self, scope: CallerScope, task_id: str) -> TaskSnapshot: ...


@dataclass(frozen=True)
class Begun:
    """``applied`` False: fenced out, touch nothing. ``snapshot`` None: the task is gone
    (purged by retention, or never committed). ``marked``: the task was also marked working
    (``TurnWrites.mark_working``) by the same statement; the snapshot is from before that."""

    applied: bool
    snapshot: TaskSnapshot | None = None
    marked: bool = False


async def begin(db: Database, loader: SnapshotLoader, lease: Lease, turn: QueuedTurn) -> Begun:
    """On PostgreSQL a turn's first attempt also marks its task working in the statement:
    every path of a first attempt whose task may be marked marks it before anything else
    (the agent call, or the final failure when the tenant or its agent kind is gone), and a
    task that is canceled, terminal or gone is left alone by the guard, as ``mark_working``
    leaves it. A retry does not (an earlier attempt may have answered already)."""
    if db.statement_pool is None:
        if not await mailbox.begin_attempt(db, lease, turn):
            return Begun(applied=False)
        try:
            snapshot = await loader.load_turn_context(lease.scope, turn.task_id)
        except TaskNotFound:
            return Begun(applied=True)
        return Begun(applied=True, snapshot=snapshot)
    scope, fence = lease.scope, lease.fence
    state, status, now = working_values()
    row = await db.statement_pool.fetchrow(
        _BEGIN_AND_SNAPSHOT_SQL,
        *fence_params(scope, fence),
        turn.id,
        TURN_RUNNING,
        list(UNFINISHED),
        turn.task_id,
        turn.attempts == 0,
        state,
        json.dumps(status, separators=(",", ":"), ensure_ascii=False),
        now,
        list(RUNNABLE),
    )
    if row is None or row["applied"] != 1:
        return Begun(applied=False)
    read = snapshot_from_row(row[2:])
    return Begun(applied=True, snapshot=read, marked=row["marked"] == 1)
