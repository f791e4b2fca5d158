"""The turn-writes store as SQLAlchemy transactions (``app.db.turns.TurnWriteStore``).

SQLite runs all of it; PostgreSQL runs ``record_progress`` from here and its own one-statement
paths for the rest (``app.db.postgres.turn_writes``). Each method is one short transaction
whose state change is a single compare-and-set ``UPDATE … WHERE state IN (…) AND EXISTS
(<fence holds>)``; the outbox row of a push is written in the same transaction as the change
it reports (CONTRACT §7).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.documents import task_doc
from app.db.engine import Database
from app.db.fence import Fence, fence_holds
from app.db.models import TaskRow
from app.db.outbox import enqueue_push
from app.db.shared.task_rows import append_history, load_history, load_task, next_history_seq
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


class SharedTurnWrites:
    """``clock``: the storage's clock for the fence's lease comparison (``Database.clock``)."""

    def __init__(self, db: Database, clock: Callable[[], ColumnElement[Any]]) -> None:
        self._db = db
        self._clock = clock

    def _guarded(
        self, scope: CallerScope, task_id: str, fence: Fence, allowed: frozenset[str]
    ) -> Any:
        return update(TaskRow).where(
            TaskRow.tenant == scope.tenant,
            TaskRow.identity == scope.identity,
            TaskRow.id == task_id,
            TaskRow.state.in_(allowed),
            fence_holds(scope, fence, now=self._clock()),
        )

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
        async with self._db.transaction() as session:
            result = await session.execute(
                self._guarded(scope, task_id, fence, allowed)
                .values(state=state, status=status, updated_at=at, version=TaskRow.version + 1)
                .execution_options(synchronize_session=False)
            )
            return _applied(result)

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
        """Reads the task in its own transaction, so ``context_id`` is only checked."""
        async with self._db.transaction() as session:
            row = await load_task(session, scope, task_id)
            if row is None or context_id not in (None, row.context_id):
                return False
            progress = compose(row.context_id)
            result = await session.execute(
                self._guarded(scope, task_id, fence, allowed)
                .values(status=progress.status, updated_at=progress.at, version=TaskRow.version + 1)
                .execution_options(synchronize_session=False)
            )
            if not _applied(result):
                return False
            await enqueue_push(
                session,
                self._db.signals.pushes,
                scope=scope,
                task_id=task_id,
                kind="progress",
                message_key=progress.key,
                payload=progress.push,
                trace_context=progress.trace,
            )
            return True

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
        """Reads the task in its own transaction (``known`` is not needed) and never settles
        the turn: the caller does (``Finished.settled`` stays False)."""
        async with self._db.transaction() as session:
            row = await load_task(session, scope, task_id)
            if row is None:
                return REFUSED
            if rule.replay and row.state == rule.state:
                return Finished(applied=True)
            if row.state not in rule.allowed:
                return REFUSED
            next_seq = await next_history_seq(session, scope, task_id)
            if rule.unseen(next_seq):
                return UNSEEN
            basis = KnownTask(row.version, next_seq, row.context_id, list(row.artifacts or []))
            write = compose(basis)
            # The version pins the artifacts we read: a concurrent change (a cancel) refuses.
            result = await session.execute(
                self._guarded(scope, task_id, fence, rule.allowed)
                .where(TaskRow.version == row.version)
                .values(
                    state=write.state,
                    status=write.status,
                    artifacts=write.artifacts,
                    updated_at=write.at,
                    version=TaskRow.version + 1,
                )
                .execution_options(synchronize_session=False)
            )
            if not _applied(result):
                # A steering message may have committed while the write waited on its lock.
                later = await next_history_seq(session, scope, task_id)
                return UNSEEN if rule.unseen(later) else REFUSED
            await self._outcome_written(session, scope, task_id, write)
            return Finished(applied=True)

    async def _outcome_written(
        self, session: AsyncSession, scope: CallerScope, task_id: str, write: OutcomeWrite
    ) -> None:
        """After the outcome's row write, in its transaction: the agent's message joins the
        history and the final push is queued."""
        if write.message is not None:
            await append_history(session, scope, task_id, role="ROLE_AGENT", message=write.message)
        await enqueue_push(
            session,
            self._db.signals.pushes,
            scope=scope,
            task_id=task_id,
            kind="final",
            message_key=write.key,
            payload=write.push,
            trace_context=write.trace,
        )

    async def snapshot(self, scope: CallerScope, task_id: str) -> TaskSnapshot | None:
        async with self._db.transaction() as session:
            row = await load_task(session, scope, task_id)
            if row is None:
                return None
            history = await load_history(session, scope, task_id, None)
        return TaskSnapshot(
            task=task_doc(row, history=history),
            history=history,
            state=row.state,
            context_id=row.context_id,
            version=row.version,
        )


def _applied(result: Any) -> bool:
    return int(getattr(result, "rowcount", 0) or 0) == 1
