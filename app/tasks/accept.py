"""The accept path of ``SendMessage`` (CONTRACT §5, ARCHITECTURE "Durable execution: Accept").

One transaction writes the turn (the idempotency key and the identity's mailbox), the task,
its first history message, the push config and the actor row, so an answer means the turn is
durable. Idempotency rests on ``UNIQUE (tenant, identity, message_id)`` of ``turns``: the turn
is inserted first with ``ON CONFLICT DO NOTHING RETURNING``; no row back means a retry (or a
concurrent twin) already won, and we answer with *its* task — never check-then-insert.

Continuation (``message.taskId``): only an interrupted task (``INPUT_REQUIRED`` /
``AUTH_REQUIRED``) takes a new message. The task is moved back to ``SUBMITTED`` by a
compare-and-set in the same transaction that queues the ``resume`` turn, so two answers racing
for one question cannot both resume it, and the accept answer is ``SUBMITTED`` as for a new task.

With the tenant setting ``dedupe_message_ids`` off, the turn's key is the message id plus a
random suffix: every message starts a new turn (some test clients reuse message ids).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import Database
from app.db.models import ActorRow, TaskRow, TurnRow
from app.db.shared.task_rows import append_history, insert_for, load_task
from app.db.signals import WakeChannel
from app.errors import InvalidParams, TaskNotFound, UnsupportedOperation
from app.security.caller import CallerScope
from app.tasks import states
from app.tasks.accept_pg import accept_new_pg
from app.tasks.push_configs import store_push_config
from app.tasks.push_secrets import PushSecrets
from app.tasks.send_params import SendRequest
from app.tasks.wire import status_doc, utcnow
from app.text import shown


@dataclass(frozen=True)
class _TurnSpec:
    dedupe: bool
    identity: dict[str, Any]


@dataclass(frozen=True)
class Accepted:
    task: TaskRow
    created: bool  # False: an earlier identical message already holds this turn


class Acceptor:
    def __init__(self, db: Database, secrets: PushSecrets) -> None:
        self._db = db
        self._secrets = secrets
        # This process's workers are woken after the commit; the others by a NOTIFY only
        # when none of ours has a free slot (``app.db.signals``).
        self._turns: WakeChannel = db.signals.turns

    async def accept(
        self,
        scope: CallerScope,
        request: SendRequest,
        *,
        dedupe: bool = True,
        identity: Mapping[str, Any] | None = None,
    ) -> Accepted:
        """``identity`` (the verified identity claim) travels in the turn payload for the
        agent; it is not part of the idempotency hash (the key already scopes by identity)."""
        turn = _TurnSpec(dedupe=dedupe, identity=dict(identity or {}))
        channel = self._turns.remote_channel()
        if request.task_id is None and not self._db.is_sqlite:
            fast = await self._start_pg(scope, request, turn, channel=channel)
            if fast is not None:
                self._turns.notify_local()
                return fast
            # The key is taken: the ORM path below finds the twin and answers with its task.
        async with self._db.transaction() as session:
            if request.task_id is None:
                accepted = await self._start(session, scope, request, turn)
            else:
                accepted = await self._resume(session, scope, request, turn)
            if accepted.created and channel is not None:
                # Delivered to LISTENers at commit, never for a rolled-back accept.
                await session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})
        if accepted.created:
            self._turns.notify_local()
        return accepted

    # --- the two kinds of accept --------------------------------------------------------------

    async def _start_pg(
        self, scope: CallerScope, request: SendRequest, turn: _TurnSpec, *, channel: str | None
    ) -> Accepted | None:
        now = utcnow()
        task_id = str(uuid.uuid4())
        context_id = request.context_id or str(uuid.uuid4())
        status = status_doc(states.SUBMITTED, now)
        created = await accept_new_pg(
            self._db,
            scope,
            request,
            secrets=self._secrets,
            key=_turn_key(request, turn),
            task_id=task_id,
            context_id=context_id,
            payload=_turn_payload(request, task_id, turn),
            status=status,
            now=now,
            channel=channel,
        )
        if not created:
            return None
        task = TaskRow(
            tenant=scope.tenant,
            id=task_id,
            identity=scope.identity,
            context_id=context_id,
            state=states.SUBMITTED,
            status=status,
            artifacts=[],
            metadata_={},
            created_at=now,
            updated_at=now,
            version=1,
        )
        return Accepted(task=task, created=True)

    async def _start(
        self, session: AsyncSession, scope: CallerScope, request: SendRequest, turn: _TurnSpec
    ) -> Accepted:
        now = utcnow()
        task_id = str(uuid.uuid4())
        context_id = request.context_id or str(uuid.uuid4())
        if not await self._insert_turn(
            session, scope, request, task_id, states.TURN_START, now, turn
        ):
            return await self._existing(session, scope, request)
        task = TaskRow(
            tenant=scope.tenant,
            id=task_id,
            identity=scope.identity,
            context_id=context_id,
            state=states.SUBMITTED,
            status=status_doc(states.SUBMITTED, now),
            artifacts=[],
            metadata_={},
            created_at=now,
            updated_at=now,
            version=1,
        )
        session.add(task)
        await session.flush()
        await self._record_message(session, scope, request, task_id, context_id)
        await self._ensure_actor(session, scope)
        return Accepted(task=task, created=True)

    async def _resume(
        self, session: AsyncSession, scope: CallerScope, request: SendRequest, turn: _TurnSpec
    ) -> Accepted:
        assert request.task_id is not None
        now = utcnow()
        # The turn insert comes first: it is the idempotency decision, and on SQLite a write
        # as the first statement takes the write lock up front (no stale-snapshot upgrade).
        if not await self._insert_turn(
            session, scope, request, request.task_id, states.TURN_RESUME, now, turn
        ):
            return await self._existing(session, scope, request)
        task = await load_task(session, scope, request.task_id)
        if task is None:
            raise TaskNotFound(f"task '{shown(request.task_id)}' not found")
        if request.context_id is not None and request.context_id != task.context_id:
            raise InvalidParams(
                "params.message.contextId does not match the task's contextId",
                reason="context_mismatch",
            )
        resumed = await session.execute(
            update(TaskRow)
            .where(
                TaskRow.tenant == scope.tenant,
                TaskRow.identity == scope.identity,
                TaskRow.id == task.id,
                TaskRow.state.in_(states.INTERRUPTED),
            )
            .values(
                state=states.SUBMITTED,
                status=status_doc(states.SUBMITTED, now),
                updated_at=now,
                version=TaskRow.version + 1,
            )
            .execution_options(synchronize_session=False)
        )
        if _rowcount(resumed) != 1:
            current = await load_task(session, scope, task.id)
            raise _not_resumable(task.id, current.state if current is not None else task.state)
        await self._record_message(session, scope, request, task.id, task.context_id)
        await self._ensure_actor(session, scope)
        await session.refresh(task)
        return Accepted(task=task, created=True)

    # --- pieces -------------------------------------------------------------------------------

    async def _insert_turn(
        self,
        session: AsyncSession,
        scope: CallerScope,
        request: SendRequest,
        task_id: str,
        kind: str,
        now: datetime,
        turn: _TurnSpec,
    ) -> bool:
        key = _turn_key(request, turn)
        payload = _turn_payload(request, task_id, turn)
        stmt = (
            insert_for(session, TurnRow)
            .values(
                tenant=scope.tenant,
                identity=scope.identity,
                message_id=key,
                task_id=task_id,
                kind=kind,
                status=states.TURN_QUEUED,
                attempts=0,
                not_before=None,
                content_hash=request.content_hash,
                payload=payload,
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_nothing(index_elements=["tenant", "identity", "message_id"])
            .returning(TurnRow.id)
        )
        return (await session.execute(stmt)).scalar_one_or_none() is not None

    async def _existing(
        self, session: AsyncSession, scope: CallerScope, request: SendRequest
    ) -> Accepted:
        turn = (
            await session.execute(
                select(TurnRow.task_id, TurnRow.content_hash).where(
                    TurnRow.tenant == scope.tenant,
                    TurnRow.identity == scope.identity,
                    TurnRow.message_id == request.message_id,
                )
            )
        ).one_or_none()
        if turn is None:  # the twin rolled back between our insert and this read: rare
            raise TaskNotFound("task not found; retry the message")
        if turn.content_hash != request.content_hash:
            raise InvalidParams(
                "params.message.messageId was already used with different content",
                reason="message_id_conflict",
            )
        task = await load_task(session, scope, turn.task_id)
        if task is None:
            raise TaskNotFound(f"task '{turn.task_id}' not found")
        return Accepted(task=task, created=False)

    async def _record_message(
        self,
        session: AsyncSession,
        scope: CallerScope,
        request: SendRequest,
        task_id: str,
        context_id: str,
    ) -> None:
        message = {**request.message, "taskId": task_id, "contextId": context_id}
        await append_history(session, scope, task_id, role="ROLE_USER", message=message)
        if request.push is not None:
            await store_push_config(
                session, scope, task_id, request.push, self._secrets, reuse_same_url=True
            )

    async def _ensure_actor(self, session: AsyncSession, scope: CallerScope) -> None:
        # DO NOTHING: accept never waits on the row lock a worker's claim holds.
        await session.execute(
            insert_for(session, ActorRow)
            .values(tenant=scope.tenant, identity=scope.identity, fence=0)
            .on_conflict_do_nothing(index_elements=["tenant", "identity"])
        )


def _turn_key(request: SendRequest, turn: _TurnSpec) -> str:
    return request.message_id if turn.dedupe else f"{request.message_id}#{uuid.uuid4().hex}"


def _turn_payload(request: SendRequest, task_id: str, turn: _TurnSpec) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "message": {**request.message, "taskId": task_id},
        "identity": turn.identity,
    }
    if request.accepted_output_modes:
        payload["acceptedOutputModes"] = list(request.accepted_output_modes)
    return payload


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


def _not_resumable(task_id: str, state: str) -> UnsupportedOperation:
    """Why a message for a task that is not waiting for input is refused (A2A §3.1.1)."""
    if states.is_terminal(state):
        return UnsupportedOperation(
            f"task '{task_id}' is in terminal state {state} and cannot be continued",
            reason="task_terminal",
        )
    return UnsupportedOperation(
        f"task '{task_id}' is not waiting for input (state {state})",
        reason="task_not_interrupted",
    )
