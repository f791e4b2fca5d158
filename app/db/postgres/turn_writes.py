"""The turn-writes store on PostgreSQL (``app.db.turns.TurnWriteStore``), on the statement pool.

Why: through the ORM, ``finish`` was one transaction of ~9 round trips (BEGIN, task read,
guarded UPDATE, ``max(seq)``, history INSERT, push-config read, outbox INSERT, ``pg_notify``,
COMMIT) and ``mark_working``/``snapshot`` 3-4 each, every one paying SQLAlchemy's
per-statement CPU; the turn benchmark was bound by it. Here: ``mark_working`` and
``snapshot`` are one statement each, ``finish`` is one read and one write statement, and
``record_progress`` one statement when the caller passes the task's context id (the worker
does: it is in the snapshot the turn started on), else a read of it first. Through the ORM a
progress write was five round trips (BEGIN, task read, guarded UPDATE, push-config read,
COMMIT) and, with one per model response and one per tool result, the ``llm`` loop's
progress writes outweighed its model calls. Hand-written SQL on the driver because that
per-statement cost was measured, not guessed; both backends run the same turn-writes, worker
and crash tests.

The rules are the state machine's (``app.tasks.turn_writes`` passes the allowed states and
composes the documents), in the same WHERE clauses as the shared path: scope, allowed states,
the fence (``FENCE_SQL``), for ``record_progress`` the context id its documents name, and,
for ``finish``, the version read (a concurrent change such as a
cancel refuses the write). ``finish`` writes task, agent message and outbox rows in one
statement (data-modifying CTEs, so it is atomic like a transaction) and only if the guarded
UPDATE applied; the history position it read is re-checked in that statement, so the agent
message lands exactly where the read said (its interrupt key names that position).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from app.db import states
from app.db.fence import FENCE_SQL, Fence, fence_params
from app.db.postgres.batched_reads import TASK_COLUMNS_SQL, task_text
from app.db.postgres.turn_heads import HEAD_COLUMNS_SQL, head_join_sql, queued_turn
from app.db.signals import WakeChannel
from app.db.statement_pool import StatementPool
from app.db.turns import (
    REFUSED,
    UNSEEN,
    ComposeOutcome,
    ComposeProgress,
    Finished,
    KnownTask,
    OutcomeRule,
    OutcomeWrite,
    SettleTurn,
    TaskSnapshot,
)
from app.security.caller import CallerScope

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
# turn statuses; $22 the push's trace context. Settling rides on the task write (only if it
# applied, under its fence), and the identity's next head is read as
# ``mailbox.settle_and_head`` reads it: the settled turn left out by id, since the
# statement's snapshot predates the update.
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
                             payload, status, attempts, trace_context)
    SELECT $1, $2, $5, c.id, $14, 'final', $15::jsonb, 'pending', 0, $22::jsonb
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


# $5 task id, $6 status, $7 updated_at, $8 allowed states, $9 the context id the documents
# were composed with, $10 message key, $11 push payload, $12 wake-up channel, $13 the push's
# trace context. The outbox rows are written only if the guarded UPDATE applied
# (data-modifying CTEs: atomic, one statement).
_PROGRESS_SQL = (
    """
WITH task AS (
    UPDATE tasks SET status = $6::jsonb, updated_at = $7, version = version + 1
     WHERE tenant = $1 AND identity = $2 AND id = $5 AND state = ANY($8::text[])
       AND context_id = $9
       AND """  # noqa: S608 (constant fragments only)
    + FENCE_SQL
    + """
    RETURNING id
), push AS (
    INSERT INTO push_outbox (tenant, identity, task_id, config_id, message_key, kind,
                             payload, status, attempts, trace_context)
    SELECT $1, $2, $5, c.id, $10, 'progress', $11::jsonb, 'pending', 0, $13::jsonb
      FROM task, push_configs c
     WHERE c.tenant = $1 AND c.identity = $2 AND c.task_id = $5
    RETURNING 1
)
SELECT (SELECT count(*) FROM task) AS applied,
       (SELECT count(*) FROM push) AS pushes,
       (SELECT count(*) FROM (SELECT pg_notify($12, '') FROM push WHERE $12::text IS NOT NULL)
          AS notified) AS woken
"""
)

_CONTEXT_ID_SQL = "SELECT context_id FROM tasks WHERE tenant = $1 AND identity = $2 AND id = $3"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def snapshot_from_row(columns: Sequence[Any]) -> TaskSnapshot | None:
    """The task from ``SNAPSHOT_COLUMNS_SQL``'s values; None if no task row matched (an
    outer join's NULL state)."""
    state, version = columns[0], columns[1]
    if state is None:
        return None
    task: dict[str, Any] = json.loads(task_text(columns[2:]))
    return TaskSnapshot.of(task, state, int(version))


def _settle_params(settle: SettleTurn | None) -> tuple[bool, int, str, str | None]:
    """The settle half of ``_FINISH_WRITE_SQL``'s parameters (the first says whether to settle)."""
    if settle is None:
        return (False, 0, "", None)
    return (True, settle.turn_id, settle.status, settle.error)


class PostgresTurnWrites:
    """``TurnWriteStore`` on the statement pool."""

    def __init__(self, pool: StatementPool, pushes: WakeChannel) -> None:
        self._pool = pool
        self._pushes = pushes

    async def mark_working(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        *,
        allowed: frozenset[str],
        state: str,
        status: dict[str, Any],
        at: datetime,
    ) -> bool:
        applied = await self._pool.fetchval(
            _MARK_WORKING_SQL,
            *fence_params(scope, fence),
            state,
            _json(status),
            at,
            task_id,
            list(allowed),
        )
        return applied is not None

    async def record_progress(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        *,
        allowed: frozenset[str],
        compose: ComposeProgress,
        context_id: str | None = None,
    ) -> bool:
        if context_id is None:
            context_id = await self._pool.fetchval(
                _CONTEXT_ID_SQL, scope.tenant, scope.identity, task_id
            )
            if context_id is None:
                return False
        progress = compose(context_id)
        written = await self._pool.fetchrow(
            _PROGRESS_SQL,
            *fence_params(scope, fence),
            task_id,
            _json(progress.status),
            progress.at,
            list(allowed),
            context_id,
            progress.key,
            _json(progress.push),
            self._pushes.remote_channel(),
            None if progress.trace is None else _json(progress.trace),
        )
        if written is None or written["applied"] != 1:
            return False
        if written["pushes"]:
            # This process's deliverers; the others hear the NOTIFY, if sent, at commit.
            self._pushes.notify_local()
        return True

    async def snapshot(self, scope: CallerScope, task_id: str) -> TaskSnapshot | None:
        row = await self._pool.fetchrow(_SNAPSHOT_SQL, scope.tenant, scope.identity, task_id)
        return None if row is None else snapshot_from_row(row)

    async def finish(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        rule: OutcomeRule,
        compose: ComposeOutcome,
        known: KnownTask | None = None,
        settle: SettleTurn | None = None,
    ) -> Finished:
        if known is not None:
            if rule.seen_history is not None:
                # The position checked in the write is then the one after what the agent saw.
                known = replace(known, next_seq=rule.seen_history + 1)
            done = await self._write(scope, task_id, fence, rule, known, compose(known), settle)
            if done.applied:
                return done  # one round trip instead of two
        row = await self._pool.fetchrow(_FINISH_READ_SQL, scope.tenant, scope.identity, task_id)
        if row is None:
            return REFUSED
        state, context_id, artifacts_text, version, next_seq = row
        if rule.replay and state == rule.state:
            return Finished(applied=True)  # replayed turn (REFERENCE-CASES 77-80)
        if state not in rule.allowed:
            return REFUSED
        if rule.unseen(next_seq):
            return UNSEEN
        read = KnownTask(version, next_seq, context_id, json.loads(artifacts_text or "[]"))
        done = await self._write(scope, task_id, fence, rule, read, compose(read), settle)
        if not done.applied and rule.seen_history is not None:
            # A steering message may have committed while the write waited on its row lock.
            again = await self._pool.fetchrow(
                _FINISH_READ_SQL, scope.tenant, scope.identity, task_id
            )
            if again is not None and rule.unseen(again["next_seq"]):
                return UNSEEN
        return done

    async def _write(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        rule: OutcomeRule,
        basis: KnownTask,
        write: OutcomeWrite,
        settle: SettleTurn | None,
    ) -> Finished:
        """The guarded write of ``finish`` on what ``basis`` says the task is."""
        written = await self._pool.fetchrow(
            _FINISH_WRITE_SQL,
            *fence_params(scope, fence),
            task_id,
            write.state,
            _json(write.status),
            _json(write.artifacts),
            write.at,
            list(rule.allowed),
            basis.version,
            basis.next_seq,
            None if write.message is None else _json(write.message),
            write.key,
            _json(write.push),
            self._pushes.remote_channel(),
            *_settle_params(settle),
            list(states.UNFINISHED_TURNS),
            None if write.trace is None else _json(write.trace),
        )
        if written is None or written["applied"] != 1:
            return REFUSED
        if written["pushes"]:
            # This process's deliverers; the others hear the NOTIFY, if sent, at commit.
            self._pushes.notify_local()
        settled = written["settled"] == 1
        next_head = queued_turn(written) if settled else None
        return Finished(applied=True, settled=settled, next_head=next_head)
