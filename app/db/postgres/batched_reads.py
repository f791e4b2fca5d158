"""Coalescing concurrent GetTask reads on PostgreSQL into one statement.

Why: under load, each GetTask was one statement on its own pooled connection, and the round
trip itself — asyncpg's encode/send/receive, the event-loop wake-ups, PostgreSQL's per-statement
work and its backend wake-up — cost more CPU on both sides than the lookup.
Requests that arrive while earlier reads are in flight are queued and answered together by one
statement over ``unnest`` of their keys, so that cost is paid once per batch.

How it keeps latency: a read goes out at once while fewer than ``max_in_flight`` statements
are running (a lone request at concurrency 1 never waits for company); only requests that
find every slot busy queue, and the statement that finishes first takes the queue with it.

Scope: every key is the full ``(tenant, identity, task id)`` triple of its own caller, and the
statement joins on all three, exactly as the single-task query filters (ARCHITECTURE: every
tenant-data query takes the caller scope). A row answers only the request at its ordinal.
A batch statement refused for a value it carried is run again per request, so one caller's
key that the database refuses fails only that caller's read; a lost connection fails the batch.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg

from app.security.caller import CallerScope

# The pieces of the protobuf-JSON Task, each as PostgreSQL's text of the stored value: the
# task row's columns plus its last ``limit`` history messages, newest first (walking the
# primary key (tenant, task_id, seq) backwards). Empty artifacts and metadata come back NULL:
# protobuf-JSON leaves them out (``task_doc`` builds the same document on SQLite).
# ``task_text`` splices the pieces. Why not one document built by the database
# (``jsonb_build_object(…) || … ::text``, as before): every ``||`` copies the whole document
# again, and building it was a large share of the statement's server time at concurrency 1;
# handing back each stored value's text and joining strings is cheaper.
TASK_COLUMNS_SQL = """
  t.id, t.context_id, t.status::text,
  CASE WHEN jsonb_array_length(t.artifacts) > 0 THEN t.artifacts::text END,
  CASE WHEN t.metadata <> '{}'::jsonb THEN t.metadata::text END,
  ARRAY(SELECT m.message::text FROM task_messages m
         WHERE m.tenant = @TENANT AND m.task_id = t.id
         ORDER BY m.seq DESC LIMIT @LIMIT)
"""

# Each requested key's pieces, when the task exists in that key's own scope, after the
# key's ordinal (1-based) to hand them back to its request.
# (Both statements are assembled from constant fragments at import; no value is ever
# formatted into SQL, every value is a bind parameter.)
GET_TASKS_SQL = (
    "SELECT k.n, "  # noqa: S608 (constant fragments only)
    + TASK_COLUMNS_SQL.replace("@TENANT", "k.tenant").replace("@LIMIT", "k.lim")
    + """
  FROM unnest($1::text[], $2::text[], $3::text[], $4::int[])
       WITH ORDINALITY AS k(tenant, identity, id, lim, n)
  JOIN tasks t ON t.tenant = k.tenant AND t.identity = k.identity AND t.id = k.id
"""
)

# The same pieces for one key: what a read that finds no queue sends alone.
GET_TASK_SQL = (
    "SELECT "  # noqa: S608 (constant fragments only)
    + TASK_COLUMNS_SQL.replace("@TENANT", "$1").replace("@LIMIT", "$4")
    + """
  FROM tasks t
 WHERE t.tenant = $1 AND t.identity = $2 AND t.id = $3
"""
)


def task_text(columns: Sequence[Any]) -> str:
    """The protobuf-JSON Task text from the ``TASK_COLUMNS_SQL`` values (in that order).

    Every stored piece is JSON the edge wrote itself (validated on write, ``app.tasks.wire``)
    and arrives as PostgreSQL's text of that value; only the two ids are encoded here.
    """
    task_id, context_id, status, artifacts, metadata, newest_first = columns
    parts = ['{"id":', json.dumps(task_id), ',"contextId":', json.dumps(context_id)]
    parts += [',"status":', status]
    if artifacts is not None:
        parts += [',"artifacts":', artifacts]
    if newest_first:
        parts += [',"history":[', ",".join(reversed(newest_first)), "]"]
    if metadata is not None:
        parts += [',"metadata":', metadata]
    parts.append("}")
    return "".join(parts)


# Two statements in flight: one being answered while the next batch forms. Measured on the
# bench machine: more slots make smaller batches, fewer make requests wait.
MAX_IN_FLIGHT = 2
MAX_BATCH = 64


class StatementRunner(Protocol):
    """What runs the statements: ``app.db.statement_pool.StatementPool``."""

    async def fetchrow(self, query: str, *args: Any) -> Sequence[Any] | None: ...
    async def fetch(self, query: str, *args: Any) -> Sequence[Any]: ...


# A statement refused for the values it carried: the server's refusal (PostgresError, e.g.
# "\u0000 cannot be converted to text") or the driver's, encoding an argument (a ValueError).
_REFUSED_VALUES: tuple[type[Exception], ...] = (asyncpg.PostgresError, ValueError)


class TaskReadFailed(Exception):
    """The batch statement failed (its cause attached); the request answers -32603."""


@dataclass(frozen=True, slots=True)
class _Read:
    tenant: str
    identity: str
    task_id: str
    limit: int
    answer: asyncio.Future[str | None]


class GetTaskBatcher:
    """``get`` answers one task's JSON text (or ``None`` when it is not the caller's)."""

    def __init__(
        self,
        pool: StatementRunner,
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._pool = pool
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: list[_Read] = []
        self._in_flight = 0
        self._running: set[asyncio.Task[None]] = set()
        self.statements = 0  # statements run (for tests and the bench)

    def _bind(self) -> None:
        # Reads in flight belong to the loop that started them; a new loop (tests, CLI
        # commands reusing the services) starts over, as the read pool does, instead of
        # waiting on slots a dead loop will never release.
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._queue = []
            self._in_flight = 0
            self._running = set()

    async def get(self, scope: CallerScope, task_id: str, limit: int) -> str | None:
        self._bind()
        if self._in_flight < self._max_in_flight and not self._queue:
            # Nobody waiting: this read goes out alone, from the caller's own task (no hop
            # through a batch task, no array parameters): the latency at concurrency 1.
            self._in_flight += 1
            try:
                self.statements += 1
                row = await self._pool.fetchrow(
                    GET_TASK_SQL, scope.tenant, scope.identity, task_id, limit
                )
                return None if row is None else task_text(row)
            finally:
                self._release()
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Read(scope.tenant, scope.identity, task_id, limit, answer))
        if self._in_flight < self._max_in_flight:
            self._start_next()
        return await answer

    def _release(self) -> None:
        self._in_flight -= 1
        if self._queue and self._in_flight < self._max_in_flight:
            self._start_next()

    def _start_next(self) -> None:
        batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
        self._in_flight += 1
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, batch: list[_Read]) -> None:
        try:
            self.statements += 1
            rows = await self._pool.fetch(
                GET_TASKS_SQL,
                [r.tenant for r in batch],
                [r.identity for r in batch],
                [r.task_id for r in batch],
                [r.limit for r in batch],
            )
        except _REFUSED_VALUES as exc:
            if len(batch) == 1:
                _fail(batch, exc)
            else:
                # One caller's key can fail the statement for all (a value PostgreSQL or the
                # driver refuses): each read runs again alone, so a failure answers only the read
                # it belongs to.
                await self._each_alone(batch)
        except Exception as exc:
            # The connection or the server is gone: reads one by one would each wait for the
            # same failure (a connect timeout apiece), so the batch fails at once.
            _fail(batch, exc)
        except BaseException as exc:
            _fail(batch, exc)
            raise
        else:
            found = {row[0]: row[1:] for row in rows}
            for ordinal, read in enumerate(batch, start=1):
                if not read.answer.done():
                    columns = found.get(ordinal)
                    read.answer.set_result(None if columns is None else task_text(columns))
        finally:
            self._release()

    async def _each_alone(self, batch: list[_Read]) -> None:
        for read in batch:
            if read.answer.done():
                continue
            try:
                self.statements += 1
                row = await self._pool.fetchrow(
                    GET_TASK_SQL, read.tenant, read.identity, read.task_id, read.limit
                )
            except Exception as exc:
                _fail([read], exc)
            else:
                read.answer.set_result(None if row is None else task_text(row))


def _fail(reads: list[_Read], exc: BaseException) -> None:
    for read in reads:
        if not read.answer.done():
            # One exception per request: an object raised in several tasks would share (and
            # keep growing) one traceback.
            failure = TaskReadFailed("GetTask read failed")
            failure.__cause__ = exc
            read.answer.set_exception(failure)
