"""PostgreSQL fast paths of the turn's guarded writes (``TurnWrites``), on the statement pool.

Why: through the ORM, ``finish`` was one transaction of ~9 round trips (BEGIN, task read,
guarded UPDATE, ``max(seq)``, history INSERT, push-config read, outbox INSERT, ``pg_notify``,
COMMIT) and ``mark_working``/``load_turn_context`` 3-4 each, every one paying SQLAlchemy's
per-statement CPU; a worker spent ~20 ms of CPU per echo turn, and the turn benchmark was bound
by it (bench/README). Here: ``mark_working`` and ``load_turn_context`` are one statement each,
``finish`` is one read and one write statement. Hand-written SQL on the driver because that
per-statement cost was measured, not guessed; SQLite keeps the ORM path (``turn_writes.py``),
and both run the same turn-writes, worker and crash tests.

The rules are the ORM path's, in the same WHERE clauses: scope, allowed states, the fence
(``FENCE_SQL``) and, for ``finish``, the version read (a concurrent change such as a cancel
refuses the write). ``finish`` writes task, agent message and outbox rows in one statement
(data-modifying CTEs, so it is atomic like the ORM transaction) and only if the guarded
UPDATE applied; the history position it read is re-checked in that statement, so the agent
message lands exactly where the read said (its interrupt key names that position).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from a2a.types import Artifact

from app.db.signals import WakeChannel
from app.db.statement_pool import StatementPool
from app.security.caller import CallerScope
from app.tasks import states
from app.tasks.batched_reads import TASK_COLUMNS_SQL, task_text
from app.tasks.fence import FENCE_SQL, Fence, fence_params
from app.tasks.outcome import TurnOutcome, outcome_message_key
from app.tasks.turn_heads import HEAD_COLUMNS_SQL, head_join_sql
from app.tasks.wire import agent_message, normalise, status_doc, utcnow

# $1 tenant, $2 identity, $3 fence token, $4 lease owner (FENCE_SQL); then per statement.
_MARK_WORKING_SQL = (
    """
UPDATE tasks SET state = $5, status = $6::jsonb, updated_at = $7, version = version + 1
 WHERE tenant = $1 AND identity = $2 AND id = $8 AND state = ANY($9::text[])
   AND """
    + FENCE_SQL
    + """
RETURNING 1
"""
)

# The task's state and its protobuf-JSON pieces with the whole history (LIMIT NULL), from
# ``tasks t`` with $1 the tenant; ``snapshot_from_row`` reads them (also used by the worker's
# one-statement start of an attempt, ``app.worker.turn_start``).
SNAPSHOT_COLUMNS_SQL = "t.state, t.version, " + TASK_COLUMNS_SQL.replace("@TENANT", "$1").replace(
    "@LIMIT", "NULL"
)
_SNAPSHOT_SQL = (
    "SELECT "  # noqa: S608 (constant fragments only)
    + SNAPSHOT_COLUMNS_SQL
    + """
  FROM tasks t
 WHERE t.tenant = $1 AND t.identity = $2 AND t.id = $3
"""
)

_FINISH_READ_SQL = """
SELECT state, context_id, artifacts::text, version,
       (SELECT coalesce(max(m.seq), 0) + 1 FROM task_messages m
         WHERE m.tenant = $1 AND m.task_id = $3) AS next_seq
  FROM tasks
 WHERE tenant = $1 AND identity = $2 AND id = $3
"""

# $5 task id, $6 state, $7 status, $8 artifacts, $9 updated_at, $10 allowed states,
# $11 version read, $12 history position read, $13 agent message (NULL: none),
# $14 message key, $15 push payload, $16 wake-up channel; $17 whether to settle the turn
# (``SettleTurn``): $18 its id, $19 its final status, $20 its last error, $21 the unfinished
# turn statuses. Settling rides on the task write (only if it applied, under its fence), and
# the identity's next head is read as ``mailbox.settle_and_head`` reads it: the settled turn
# left out by id, since the statement's snapshot predates the update.
_FINISH_WRITE_SQL = (
    """
WITH task AS (
    UPDATE tasks
       SET state = $6, status = $7::jsonb, artifacts = $8::jsonb, updated_at = $9,
           version = version + 1
     WHERE tenant = $1 AND identity = $2 AND id = $5 AND state = ANY($10::text[])
       AND version = $11
       AND (SELECT coalesce(max(m.seq), 0) + 1 FROM task_messages m
             WHERE m.tenant = $1 AND m.task_id = $5) = $12
       AND """  # noqa: S608 (constant fragments only)
    + FENCE_SQL
    + """
    RETURNING id
), message AS (
    INSERT INTO task_messages (tenant, task_id, seq, role, message)
    SELECT $1, $5, $12, 'ROLE_AGENT', $13::jsonb FROM task WHERE $13::jsonb IS NOT NULL
), push AS (
    INSERT INTO push_outbox (tenant, identity, task_id, config_id, message_key, kind,
                             payload, status, attempts)
    SELECT $1, $2, $5, c.id, $14, 'final', $15::jsonb, 'pending', 0
      FROM task, push_configs c
     WHERE c.tenant = $1 AND c.identity = $2 AND c.task_id = $5
    RETURNING 1
), settled AS (
    UPDATE turns SET status = $19, last_error = $20::text, updated_at = now()
     WHERE $17::bool AND id = $18 AND tenant = $1 AND identity = $2
       AND status = ANY($21::text[]) AND EXISTS (SELECT 1 FROM task)
    RETURNING 1
)
SELECT (SELECT count(*) FROM task) AS applied,
       (SELECT count(*) FROM push) AS pushes,
       (SELECT count(*) FROM (SELECT pg_notify($16, '') FROM push WHERE $16::text IS NOT NULL)
          AS notified) AS woken,
       (SELECT count(*) FROM settled) AS settled, """
    + HEAD_COLUMNS_SQL
    + " FROM (SELECT 1) AS one"
    + head_join_sql(tenant="$1", identity="$2", extra="$17::bool AND id <> $18")
)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def working_values() -> tuple[str, str, datetime]:
    """``mark_working``'s new state, status (JSON text) and ``updated_at``, for statements
    that mark a task working (also ``app.worker.turn_start``)."""
    now = utcnow()
    return states.WORKING, _json(status_doc(states.WORKING, now)), now


async def mark_working_pg(
    pool: StatementPool, scope: CallerScope, task_id: str, fence: Fence
) -> bool:
    state, status, now = working_values()
    applied = await pool.fetchval(
        _MARK_WORKING_SQL,
        *fence_params(scope, fence),
        state,
        status,
        now,
        task_id,
        list(states.RUNNABLE),
    )
    return applied is not None


async def snapshot_pg(
    pool: StatementPool, scope: CallerScope, task_id: str
) -> tuple[dict[str, Any], str, int] | None:
    """The task as protobuf-JSON with its whole history, its state and its version; None if
    not found."""
    row = await pool.fetchrow(_SNAPSHOT_SQL, scope.tenant, scope.identity, task_id)
    return None if row is None else snapshot_from_row(row)


def snapshot_from_row(columns: Sequence[Any]) -> tuple[dict[str, Any], str, int] | None:
    """The task, its state and its version from ``SNAPSHOT_COLUMNS_SQL``'s values; None if
    no task row matched (an outer join's NULL state)."""
    state, version = columns[0], columns[1]
    if state is None:
        return None
    task: dict[str, Any] = json.loads(task_text(columns[2:]))
    return task, state, int(version)


@dataclass(frozen=True)
class KnownTask:
    """What the runner knows of its task without reading it again: the snapshot it ran on
    and the version its own applied writes moved it to. ``finish_pg`` writes with it
    directly; the write's own guards (version, history position, state, fence) refuse it if
    anything else changed the task since, and ``finish_pg`` then reads and writes as usual."""

    version: int
    next_seq: int  # the history position of the agent's message (messages are numbered 1..n)
    context_id: str
    artifacts: list[Any]


@dataclass(frozen=True)
class SettleTurn:
    """The worker's turn to settle in the statement that writes its outcome."""

    turn_id: int
    status: str  # done | dead
    error: str | None = None


@dataclass(frozen=True)
class Finished:
    """``finish``'s verdict. ``settled``: the turn was settled by the same statement, and
    ``next_head`` is the identity's next unfinished turn as it read it (a row of
    ``mailbox``'s head shape, or None); otherwise the caller settles the turn itself."""

    applied: bool
    settled: bool = False
    next_head: Any = None


_REFUSED = Finished(applied=False)


async def finish_pg(
    pool: StatementPool,
    scope: CallerScope,
    task_id: str,
    fence: Fence,
    outcome: TurnOutcome,
    known: KnownTask | None = None,
    settle: SettleTurn | None = None,
    *,
    pushes: WakeChannel,
) -> Finished:
    # As the ORM path: the host's final FAILED may land before WORKING, nothing else may.
    allowed = states.RUNNABLE if outcome.state == states.FAILED else states.WORKING_ONLY
    if known is not None:
        done = await _write_outcome(
            pool, scope, task_id, fence, outcome, allowed, known, settle, pushes
        )
        if done.applied:
            return done  # one round trip instead of two (bench/ROUNDS.md, round seven)
    row = await pool.fetchrow(_FINISH_READ_SQL, scope.tenant, scope.identity, task_id)
    if row is None:
        return _REFUSED
    state, context_id, artifacts_text, version, next_seq = row
    if state == outcome.state and states.is_terminal(state):
        return Finished(applied=True)  # replayed turn (REFERENCE-CASES 77-80)
    if state not in allowed:
        return _REFUSED
    read = KnownTask(version, next_seq, context_id, json.loads(artifacts_text or "[]"))
    return await _write_outcome(pool, scope, task_id, fence, outcome, allowed, read, settle, pushes)


def _settle_params(settle: SettleTurn | None) -> tuple[bool, int, str, str | None]:
    """The settle half of ``_FINISH_WRITE_SQL``'s parameters (the first says whether to settle)."""
    if settle is None:
        return (False, 0, "", None)
    return (True, settle.turn_id, settle.status, settle.error)


async def _write_outcome(
    pool: StatementPool,
    scope: CallerScope,
    task_id: str,
    fence: Fence,
    outcome: TurnOutcome,
    allowed: frozenset[str],
    basis: KnownTask,
    settle: SettleTurn | None,
    pushes: WakeChannel,
) -> Finished:
    """The guarded write of ``finish`` on what ``basis`` says the task is."""
    context_id, version, next_seq = basis.context_id, basis.version, basis.next_seq
    now = utcnow()
    key = outcome.message_key or outcome_message_key(outcome.state, next_seq)
    message = agent_message(
        task_id=task_id,
        context_id=context_id,
        key=key,
        text=outcome.text,
        parts=outcome.parts,
        required=True,
    )
    status = status_doc(outcome.state, now, message)
    artifacts = list(basis.artifacts) + normalise(outcome.artifacts, Artifact, "artifact")
    task: dict[str, Any] = {"id": task_id, "contextId": context_id, "status": status}
    if artifacts:
        task["artifacts"] = artifacts
    written = await pool.fetchrow(
        _FINISH_WRITE_SQL,
        *fence_params(scope, fence),
        task_id,
        outcome.state,
        _json(status),
        _json(artifacts),
        now,
        list(allowed),
        version,
        next_seq,
        None if message is None else _json(message),
        key,
        _json({"task": task}),
        pushes.remote_channel(),
        *_settle_params(settle),
        list(states.UNFINISHED_TURNS),
    )
    if written is None or written["applied"] != 1:
        return _REFUSED
    if written["pushes"]:
        # This process's deliverers; the others hear the NOTIFY, if sent, at commit.
        pushes.notify_local()
    settled = written["settled"] == 1
    return Finished(applied=True, settled=settled, next_head=written if settled else None)
