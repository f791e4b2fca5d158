"""The guarded writes a running turn makes (CONTRACT §6; the TASKS/WORKER shared contract).

Each method is one short transaction whose state change is a single compare-and-set
``UPDATE … WHERE state IN (…) AND EXISTS (<fence holds>)``; the return value says whether it
applied ("the cancellation verdict is read, not probed"). A refused write means: no agent
call (``mark_working``), no push (``record_progress``, ``finish``). The outbox row of a push is
written in the same transaction as the change it reports (CONTRACT §7).

Rules enforced in SQL, not in Python: nothing overwrites ``CANCELED`` (it is terminal and
every guard requires a non-terminal state); a terminal state is never replaced by another
(``finish`` requires ``WORKING``). ``finish`` with the state the task already holds is a
no-op success so a replayed turn is safe (REFERENCE-CASES 77-80, 85).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.types import Artifact
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import Database
from app.db.models import TaskRow
from app.db.outbox import enqueue_push
from app.errors import TaskNotFound
from app.security.caller import CallerScope
from app.settings import Settings
from app.tasks import states
from app.tasks.fence import Fence, fence_holds
from app.tasks.outcome import TurnOutcome, outcome_message_key
from app.tasks.repository import append_history, load_history, load_task, next_history_seq
from app.tasks.turn_writes_pg import (
    Finished,
    KnownTask,
    SettleTurn,
    finish_pg,
    mark_working_pg,
    snapshot_pg,
)
from app.tasks.wire import agent_message, normalise, status_doc, task_doc, utcnow
from app.text import shown


@dataclass(frozen=True)
class TaskSnapshot:
    """What a turn needs to run: the task (protobuf-JSON, full history), its state."""

    task: dict[str, Any]
    history: list[dict[str, Any]]
    state: str
    context_id: str
    version: int  # tasks.version when read: every task write bumps it

    @classmethod
    def of(cls, task: dict[str, Any], state: str, version: int) -> TaskSnapshot:
        """From the protobuf-JSON task with its whole history (the PostgreSQL reads)."""
        history = list(task.get("history", []))
        context_id = str(task["contextId"])
        return cls(task, history, state, context_id, version)

    def known(self, version: int) -> KnownTask:
        """What ``finish`` may write on without reading the task again, if the task is at
        ``version`` (this snapshot's plus the runner's own applied writes, which change
        neither the history nor the artifacts)."""
        artifacts = list(self.task.get("artifacts", []))
        return KnownTask(version, len(self.history) + 1, self.context_id, artifacts)


class TurnWrites:
    def __init__(self, db: Database, settings: Settings) -> None:
        self._db = db
        self._settings = settings

    def _guarded(
        self, scope: CallerScope, task_id: str, fence: Fence, allowed: frozenset[str]
    ) -> Any:
        return update(TaskRow).where(
            TaskRow.tenant == scope.tenant,
            TaskRow.identity == scope.identity,
            TaskRow.id == task_id,
            TaskRow.state.in_(allowed),
            fence_holds(scope, fence, is_sqlite=self._db.is_sqlite),
        )

    async def mark_working(self, scope: CallerScope, task_id: str, fence: Fence) -> bool:
        """SUBMITTED / INPUT_REQUIRED / AUTH_REQUIRED / WORKING → WORKING.

        False: canceled, terminal, or the fence was lost — make no agent call.
        """
        if self._db.statement_pool is not None:
            return await mark_working_pg(self._db.statement_pool, scope, task_id, fence)
        now = utcnow()
        async with self._db.transaction() as session:
            result = await session.execute(
                self._guarded(scope, task_id, fence, states.RUNNABLE)
                .values(
                    state=states.WORKING,
                    status=status_doc(states.WORKING, now),
                    updated_at=now,
                    version=TaskRow.version + 1,
                )
                .execution_options(synchronize_session=False)
            )
            return _applied(result)

    async def record_progress(
        self, scope: CallerScope, task_id: str, fence: Fence, *, step_key: str, text: str
    ) -> bool:
        """WORKING only: the agent's progress message in ``status.message`` (message id
        ``<taskId>:<step key>``, stable across retries) and its push, one transaction."""
        now = utcnow()
        async with self._db.transaction() as session:
            context_id = await self._context_id(session, scope, task_id)
            if context_id is None:
                return False
            message = agent_message(task_id=task_id, context_id=context_id, key=step_key, text=text)
            status = status_doc(states.WORKING, now, message)
            result = await session.execute(
                self._guarded(scope, task_id, fence, states.WORKING_ONLY)
                .values(status=status, updated_at=now, version=TaskRow.version + 1)
                .execution_options(synchronize_session=False)
            )
            if not _applied(result):
                return False
            payload = {"task": {"id": task_id, "contextId": context_id, "status": status}}
            await enqueue_push(
                session,
                self._db.signals.pushes,
                scope=scope,
                task_id=task_id,
                kind="progress",
                message_key=step_key,
                payload=payload,
            )
            return True

    async def finish(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        outcome: TurnOutcome,
        known: KnownTask | None = None,
    ) -> bool:
        """WORKING → ``outcome.state`` with its message, artifacts and final push, one
        transaction (FAILED also from SUBMITTED/interrupted). Same terminal state again →
        True (replay); anything else refused. ``known``: the caller's view of the task, which
        PostgreSQL writes on directly when it is still true (``turn_writes_pg.KnownTask``)."""
        done = await self.finish_and_settle(scope, task_id, fence, outcome, known)
        return done.applied

    async def finish_and_settle(
        self,
        scope: CallerScope,
        task_id: str,
        fence: Fence,
        outcome: TurnOutcome,
        known: KnownTask | None = None,
        settle: SettleTurn | None = None,
    ) -> Finished:
        """``finish``; on PostgreSQL the same statement also settles the worker's turn and
        reads the identity's next one when ``settle`` is given (``Finished.settled``). On
        SQLite, and for a replay, the caller settles the turn itself."""
        if outcome.state not in states.OUTCOMES:
            raise ValueError(f"not a turn outcome state: {outcome.state}")
        if self._db.statement_pool is not None:
            pool = self._db.statement_pool
            pushes = self._db.signals.pushes
            return await finish_pg(
                pool, scope, task_id, fence, outcome, known, settle, pushes=pushes
            )
        return Finished(applied=await self._finish_orm(scope, task_id, fence, outcome))

    async def _finish_orm(
        self, scope: CallerScope, task_id: str, fence: Fence, outcome: TurnOutcome
    ) -> bool:
        async with self._db.transaction() as session:
            row = await load_task(session, scope, task_id)
            if row is None:
                return False
            if row.state == outcome.state and states.is_terminal(row.state):
                return True
            # The host's final failure must land even for a turn that never reached WORKING
            # (it failed before mark_working); every other outcome comes from a working turn.
            allowed = states.RUNNABLE if outcome.state == states.FAILED else states.WORKING_ONLY
            if row.state not in allowed:
                return False
            return await self._write_outcome(session, scope, row, fence, outcome, allowed)

    async def _write_outcome(
        self,
        session: AsyncSession,
        scope: CallerScope,
        row: TaskRow,
        fence: Fence,
        outcome: TurnOutcome,
        allowed: frozenset[str],
    ) -> bool:
        now = utcnow()
        key = outcome.message_key or await self._final_key(session, scope, row.id, outcome)
        message = agent_message(
            task_id=row.id,
            context_id=row.context_id,
            key=key,
            text=outcome.text,
            parts=outcome.parts,
            required=True,
        )
        status = status_doc(outcome.state, now, message)
        artifacts = list(row.artifacts or []) + normalise(outcome.artifacts, Artifact, "artifact")
        # The version pins the artifacts we read: a concurrent change (a cancel) refuses.
        result = await session.execute(
            self._guarded(scope, row.id, fence, allowed)
            .where(TaskRow.version == row.version)
            .values(
                state=outcome.state,
                status=status,
                artifacts=artifacts,
                updated_at=now,
                version=TaskRow.version + 1,
            )
            .execution_options(synchronize_session=False)
        )
        if not _applied(result):
            return False
        if message is not None:
            await append_history(session, scope, row.id, role="ROLE_AGENT", message=message)
        task: dict[str, Any] = {"id": row.id, "contextId": row.context_id, "status": status}
        if artifacts:
            task["artifacts"] = artifacts
        await enqueue_push(
            session,
            self._db.signals.pushes,
            scope=scope,
            task_id=row.id,
            kind="final",
            message_key=key,
            payload={"task": task},
        )
        return True

    async def load_turn_context(self, scope: CallerScope, task_id: str) -> TaskSnapshot:
        if self._db.statement_pool is not None:
            found = await snapshot_pg(self._db.statement_pool, scope, task_id)
            if found is None:
                raise TaskNotFound(f"task '{shown(task_id)}' not found")
            return TaskSnapshot.of(*found)
        async with self._db.transaction() as session:
            row = await load_task(session, scope, task_id)
            if row is None:
                raise TaskNotFound(f"task '{shown(task_id)}' not found")
            history = await load_history(session, scope, task_id, None)
        return TaskSnapshot(
            task=task_doc(row, history=history),
            history=history,
            state=row.state,
            context_id=row.context_id,
            version=row.version,
        )

    # --- helpers ------------------------------------------------------------------------------

    async def _context_id(
        self, session: AsyncSession, scope: CallerScope, task_id: str
    ) -> str | None:
        row = await load_task(session, scope, task_id)
        return row.context_id if row is not None else None

    async def _final_key(
        self, session: AsyncSession, scope: CallerScope, task_id: str, outcome: TurnOutcome
    ) -> str:
        if states.is_terminal(outcome.state):
            return outcome_message_key(outcome.state, 0)  # "final": no history read needed
        seq = await next_history_seq(session, scope, task_id)
        return outcome_message_key(outcome.state, seq)


def _applied(result: Any) -> bool:
    return int(getattr(result, "rowcount", 0) or 0) == 1
