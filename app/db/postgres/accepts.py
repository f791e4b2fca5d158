"""The accept store on PostgreSQL: a new task's whole accept as ONE statement.

Through the ORM a new turn was ~10 round trips (BEGIN, turn insert, task insert, ``max(seq)``
read, history insert, push-config read and upsert, actor upsert, ``pg_notify``, COMMIT) and
the accept benchmark was bound by them. Here the same rows
are written by one statement of data-modifying CTEs, so the accept is still one transaction
(a single statement is atomic) and costs one round trip; asyncpg keeps it prepared per
connection. Hand-written SQL on a raw driver connection because the ORM's per-statement
overhead was measured, not guessed; continuations and SQLite keep the shared transaction
(``app.db.shared.accepts``), and both backends run the same accept tests.

Idempotency is unchanged: every insert hangs off the turn insert's
``ON CONFLICT (tenant, identity, message_id) DO NOTHING RETURNING``. No row back means a retry
or a concurrent twin holds the key (Postgres waits for an in-flight twin to commit or roll
back first); nothing else is written and the shared transaction answers with the twin's
task. The new task's first history message is ``seq = 1`` (the task id is fresh,
so there is nothing to count), and its push config is a plain insert for the same reason.
``pg_notify`` runs only when the turn row came back and a channel is given (not when this
process's own worker takes the turn: ``app.db.signals``), and Postgres delivers it at commit.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from app.db import states
from app.db.accepts import Accepted, NewTurn, Refusal, Submission
from app.db.models import TaskRow
from app.db.shared.accepts import SharedAccepts
from app.db.signals import WakeChannel
from app.db.statement_pool import StatementPool
from app.security.caller import CallerScope

_ACCEPT_NEW = """
WITH turn AS (
    INSERT INTO turns (tenant, identity, message_id, task_id, kind, status, attempts,
                       not_before, content_hash, payload, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, 0, NULL, $7, $8, $9, $9)
    ON CONFLICT (tenant, identity, message_id) DO NOTHING
    RETURNING id
), task AS (
    INSERT INTO tasks (tenant, id, identity, context_id, state, status, artifacts, metadata,
                       created_at, updated_at, version)
    SELECT $1, $4, $2, $10, $11, $12, '[]'::jsonb, '{}'::jsonb, $9, $9, 1 FROM turn
), message AS (
    INSERT INTO task_messages (tenant, task_id, seq, role, message)
    SELECT $1, $4, 1, 'ROLE_USER', $13 FROM turn
), push AS (
    INSERT INTO push_configs (tenant, identity, task_id, id, url, token_enc, auth_scheme,
                              auth_credentials_enc)
    SELECT $1, $2, $4, $14, $15, $16, $17, $18 FROM turn WHERE $15::text IS NOT NULL
), actor AS (
    INSERT INTO actors (tenant, identity, fence)
    SELECT $1, $2, 0 FROM turn
    ON CONFLICT (tenant, identity) DO NOTHING
)
SELECT id, (SELECT count(*) FROM (SELECT pg_notify($19, '') WHERE $19::text IS NOT NULL) AS n)
  FROM turn
"""


def _doc(value: Any) -> str:
    # SQLAlchemy's asyncpg jsonb codec on these connections takes JSON text.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class PostgresAccepts:
    """``AcceptStore``: a new task in one statement, the rest through ``shared``."""

    def __init__(self, pool: StatementPool, shared: SharedAccepts, turns: WakeChannel) -> None:
        self._pool = pool
        self._shared = shared
        self._turns = turns

    async def start(
        self,
        scope: CallerScope,
        turn: NewTurn,
        *,
        task_id: str,
        context_id: str,
        submission: Submission,
    ) -> Accepted:
        if await self._start_new(scope, turn, task_id, context_id, submission):
            self._turns.notify_local()
            task = TaskRow(
                tenant=scope.tenant,
                id=task_id,
                identity=scope.identity,
                context_id=context_id,
                state=submission.state,
                status=submission.status,
                artifacts=[],
                metadata_={},
                created_at=submission.at,
                updated_at=submission.at,
                version=1,
            )
            return Accepted(task=task, created=True)
        # The key is taken: the shared transaction finds the twin and answers with its task.
        return await self._shared.start(
            scope, turn, task_id=task_id, context_id=context_id, submission=submission
        )

    async def resume(
        self,
        scope: CallerScope,
        turn: NewTurn,
        *,
        task_id: str,
        context_id: str | None,
        resumable: frozenset[str],
        submission: Submission,
        refuse: Refusal,
    ) -> Accepted:
        return await self._shared.resume(
            scope,
            turn,
            task_id=task_id,
            context_id=context_id,
            resumable=resumable,
            submission=submission,
            refuse=refuse,
        )

    async def steer(
        self,
        scope: CallerScope,
        turn: NewTurn,
        *,
        task_id: str,
        context_id: str | None,
        steerable: frozenset[str],
        submission: Submission,
        refuse: Refusal,
    ) -> Accepted:
        return await self._shared.steer(
            scope,
            turn,
            task_id=task_id,
            context_id=context_id,
            steerable=steerable,
            submission=submission,
            refuse=refuse,
        )

    async def _start_new(
        self,
        scope: CallerScope,
        turn: NewTurn,
        task_id: str,
        context_id: str,
        submission: Submission,
    ) -> bool:
        """Write turn, task, first message, push config and actor; False if the key was taken."""
        push = turn.push
        message = {**turn.message, "taskId": task_id, "contextId": context_id}
        args = (
            scope.tenant,
            scope.identity,
            turn.key,
            task_id,
            states.TURN_START,
            states.TURN_QUEUED,
            turn.content_hash,
            _doc(turn.payload),
            submission.at,
            context_id,
            submission.state,
            _doc(submission.status),
            _doc(message),
            (push.id or str(uuid.uuid4())) if push is not None else None,
            push.url if push is not None else None,
            push.token_enc if push is not None else None,
            push.auth_scheme if push is not None else None,
            push.auth_credentials_enc if push is not None else None,
            self._turns.remote_channel(),
        )
        # On the statement pool (``app/db/statement_pool.py``), like GetTask and the turn
        # pipeline: a checkout through the SQLAlchemy pool costs more CPU than this
        # statement's client side, and one autocommit statement leaves no session state behind.
        row = await self._pool.fetchrow(_ACCEPT_NEW, *args)
        return row is not None
