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

The bound on an identity's unfinished new-task turns (``queued_limit``) is checked in the same
statement: the turn is inserted only while ``queued`` counts fewer, and a statement that
inserted nothing says whether the identity is full (no committed twin holds the key; a twin
is answered by the shared transaction: idempotency first). A statement counts the turns
committed before it began, so within a process the bounded accepts of one identity run one at
a time (``_IdentityLocks``); the shared transaction counts under a transaction advisory lock
of the identity (``IDENTITY_LOCK_SQL``). What is left: edge processes accepting for the same
identity at the same instant do not see each other's statement, so the identity can end up
over the limit by at most one turn per other such process.

A turn with attachments (issue 55) takes the shared transaction, which writes their rows
beside the turn: such turns are few and their bytes dominate the cost, and the statement the
text-only turns run stays as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from app.db import states
from app.db.accepts import Accepted, NewTurn, QueueFull, Refusal, Submission
from app.db.models import TaskRow
from app.db.shared.accepts import SharedAccepts
from app.db.signals import WakeChannel
from app.db.statement_pool import StatementPool
from app.db.states import UNFINISHED_TURNS_SQL
from app.security.caller import CallerScope

# The turn's row: as given, or (bounded accept) only while the identity has fewer than $21
# unfinished new-task turns, counted by ``queued`` below. The casts give the parameters the
# types the plain VALUES form infers from the columns.
_TURN_VALUES = "VALUES ($1, $2, $3, $4, $5, $6, 0, NULL, $7, $8, $9, $9)"
_TURN_WITHIN_LIMIT = """
    SELECT $1::varchar, $2::text, $3::text, $4::varchar, $5::varchar, $6::varchar, 0, NULL,
           $7::varchar, $8::jsonb, $9::timestamptz, $9::timestamptz
     WHERE (SELECT n FROM queued) < $21::int"""
# The identity's unfinished ``start`` turns, up to the limit: the walk of ``ix_turns_unfinished``
# stops there (the statuses are text so that a generic plan uses it: ``states``).
_QUEUED = f"""queued AS (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM turns
         WHERE tenant = $1 AND identity = $2 AND status IN {UNFINISHED_TURNS_SQL}
           AND kind = $5
         LIMIT $21::int) AS q
), """  # noqa: S608 (constant fragments only)
# Full: nothing was inserted, the limit is reached and no committed twin holds the key (a
# retry of an accepted message gets its task, by the shared transaction).
_FULL = """(SELECT n FROM queued) >= $21::int AND NOT EXISTS (
    SELECT 1 FROM turns WHERE tenant = $1 AND identity = $2 AND message_id = $3)"""


def _accept_new_sql(*, bounded: bool) -> str:
    rows, queued, full = (
        (_TURN_WITHIN_LIMIT, _QUEUED, _FULL) if bounded else (_TURN_VALUES, "", "false")
    )
    return f"""
WITH {queued}turn AS (
    INSERT INTO turns (tenant, identity, message_id, task_id, kind, status, attempts,
                       not_before, content_hash, payload, created_at, updated_at)
    {rows}
    ON CONFLICT (tenant, identity, message_id) DO NOTHING
    RETURNING id
), task AS (
    INSERT INTO tasks (tenant, id, identity, context_id, state, status, artifacts, metadata,
                       created_at, updated_at, version)
    SELECT $1, $4, $2, $10, $11, $12, '[]'::jsonb, $20::jsonb, $9, $9, 1 FROM turn
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
SELECT (SELECT id FROM turn) AS id, {full} AS full,
       (SELECT count(*) FROM (SELECT pg_notify($19, '') FROM turn
                               WHERE $19::text IS NOT NULL) AS n) AS notified
"""  # noqa: S608 (constant fragments only)


_ACCEPT_NEW = _accept_new_sql(bounded=False)
_ACCEPT_NEW_BOUNDED = _accept_new_sql(bounded=True)

# Opens the shared transaction of a bounded accept (``SharedAccepts``): accepts of one
# identity that reach it wait for each other until commit, so each counts the others' turns.
# The two-key form keeps it apart from the push claim's one-key lock.
_IDENTITY_LOCK_CLASS = 0x71756575  # "queu"
IDENTITY_LOCK_SQL = (
    f"SELECT pg_advisory_xact_lock({_IDENTITY_LOCK_CLASS}, "
    "hashtext(CAST(:tenant AS text) || chr(31) || CAST(:identity AS text)))"
)


class _IdentityLocks:
    """One ``asyncio.Lock`` per identity with a bounded accept in flight in this process."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def held(self, scope: CallerScope) -> AsyncIterator[None]:
        key = (scope.tenant, scope.identity)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def _doc(value: Any) -> str:
    # SQLAlchemy's asyncpg jsonb codec on these connections takes JSON text.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class PostgresAccepts:
    """``AcceptStore``: a new task in one statement, the rest through ``shared``."""

    def __init__(self, pool: StatementPool, shared: SharedAccepts, turns: WakeChannel) -> None:
        self._pool = pool
        self._shared = shared
        self._turns = turns
        self._identities = _IdentityLocks()

    async def twin(self, scope: CallerScope, message_id: str, content_hash: str) -> Accepted | None:
        return await self._shared.twin(scope, message_id, content_hash)

    async def start(
        self,
        scope: CallerScope,
        turn: NewTurn,
        *,
        task_id: str,
        context_id: str,
        submission: Submission,
        queued_limit: int | None = None,
    ) -> Accepted:
        if turn.attachments:
            async with self._identities.held(scope):
                return await self._shared.start(
                    scope,
                    turn,
                    task_id=task_id,
                    context_id=context_id,
                    submission=submission,
                    queued_limit=queued_limit,
                )
        if queued_limit is None:
            return await self._start(scope, turn, task_id, context_id, submission, None)
        # One bounded accept of an identity at a time in this process: each statement commits
        # before the next one's snapshot, so it counts the turns accepted before it.
        async with self._identities.held(scope):
            return await self._start(scope, turn, task_id, context_id, submission, queued_limit)

    async def _start(
        self,
        scope: CallerScope,
        turn: NewTurn,
        task_id: str,
        context_id: str,
        submission: Submission,
        queued_limit: int | None,
    ) -> Accepted:
        row = await self._start_new(scope, turn, task_id, context_id, submission, queued_limit)
        if row["id"] is not None:
            self._turns.notify_local()
            task = _new_task(scope, task_id, context_id, submission, turn.task_metadata)
            return Accepted(task=task, created=True)
        if row["full"] and queued_limit is not None:
            raise QueueFull(queued_limit)
        # The key is taken: the shared transaction finds the twin and answers with its task
        # (or, if the twin has rolled back meanwhile, accepts, counting under its lock).
        return await self._shared.start(
            scope,
            turn,
            task_id=task_id,
            context_id=context_id,
            submission=submission,
            queued_limit=queued_limit,
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
        queued_limit: int | None,
    ) -> Any:
        """Write turn, task, first message, push config and actor: the row of ``_ACCEPT_NEW``
        (``id`` None: the key was taken, or ``full``)."""
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
            _doc(turn.task_metadata),
        )
        if queued_limit is not None:
            return await self._pool.fetchrow(_ACCEPT_NEW_BOUNDED, *args, queued_limit)
        # On the statement pool (``app/db/statement_pool.py``), like GetTask and the turn
        # pipeline: a checkout through the SQLAlchemy pool costs more CPU than this
        # statement's client side, and one autocommit statement leaves no session state behind.
        return await self._pool.fetchrow(_ACCEPT_NEW, *args)


def _new_task(
    scope: CallerScope,
    task_id: str,
    context_id: str,
    submission: Submission,
    metadata: dict[str, Any],
) -> TaskRow:
    """The task row ``_ACCEPT_NEW`` wrote, as the answer needs it (not read back)."""
    return TaskRow(
        tenant=scope.tenant,
        id=task_id,
        identity=scope.identity,
        context_id=context_id,
        state=submission.state,
        status=submission.status,
        artifacts=[],
        metadata_=dict(metadata),
        created_at=submission.at,
        updated_at=submission.at,
        version=1,
    )
