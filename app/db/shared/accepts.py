"""The accept store as one SQLAlchemy transaction (``app.db.accepts.AcceptStore``).

SQLite runs all of it; PostgreSQL runs continuations and a taken key's answer from here and a
new task as one statement (``app.db.postgres.accepts``). The turn insert comes first: it is
the idempotency decision, and on SQLite a write as the first statement takes the write lock
up front (no stale-snapshot upgrade). Continuation: the task is moved back by a
compare-and-set in the same transaction that queues the ``resume`` turn, so two answers racing
for one question cannot both resume it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import states
from app.db.accepts import Accepted, NewTurn, QueueFull, Refusal, Submission
from app.db.engine import Database
from app.db.models import ActorRow, TaskRow, TurnAttachmentRow, TurnRow
from app.db.shared.push_configs import store_push_config
from app.db.shared.task_rows import append_history, insert_for, load_task
from app.db.signals import WakeChannel
from app.errors import InvalidParams, TaskNotFound
from app.security.caller import CallerScope
from app.text import shown


class SharedAccepts:
    """``identity_lock``: a statement (binds ``:tenant``, ``:identity``) that opens a bounded
    new-task accept and holds until its commit, so two accepts of one identity count each
    other's turns (PostgreSQL's transaction advisory lock); SQLite runs one writer at a time
    and needs none."""

    def __init__(self, db: Database, *, identity_lock: str | None = None) -> None:
        self._db = db
        self._turns: WakeChannel = db.signals.turns
        self._identity_lock = identity_lock

    async def twin(self, scope: CallerScope, message_id: str, content_hash: str) -> Accepted | None:
        async with self._db.transaction() as session:
            return await _held(session, scope, message_id, content_hash)

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
        channel = self._turns.remote_channel()
        async with self._db.transaction() as session:
            if queued_limit is not None and self._identity_lock is not None:
                lock = {"tenant": scope.tenant, "identity": scope.identity}
                await session.execute(text(self._identity_lock), lock)
            turn_id = await _insert_turn(
                session, scope, turn, task_id, states.TURN_START, submission
            )
            if turn_id is None:
                return await existing(session, scope, turn)
            # After the idempotency decision (a retry gets its task whatever the count), and
            # the new turn counts itself: past the limit, raising rolls it back.
            if queued_limit is not None and await _over(session, scope, queued_limit):
                raise QueueFull(queued_limit)
            task = TaskRow(
                tenant=scope.tenant,
                id=task_id,
                identity=scope.identity,
                context_id=context_id,
                state=submission.state,
                status=submission.status,
                artifacts=[],
                metadata_=dict(turn.task_metadata),
                created_at=submission.at,
                updated_at=submission.at,
                version=1,
            )
            session.add(task)
            await session.flush()
            await _record(session, scope, turn, (task_id, turn_id), context_id, channel)
        self._turns.notify_local()
        return Accepted(task=task, created=True)

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
        channel = self._turns.remote_channel()
        async with self._db.transaction() as session:
            turn_id = await _insert_turn(
                session, scope, turn, task_id, states.TURN_RESUME, submission
            )
            if turn_id is None:
                return await existing(session, scope, turn)
            task = await load_task(session, scope, task_id)
            if task is None:
                raise TaskNotFound(f"task '{shown(task_id)}' not found")
            if context_id is not None and context_id != task.context_id:
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
                    TaskRow.state.in_(resumable),
                )
                .values(
                    state=submission.state,
                    status=submission.status,
                    updated_at=submission.at,
                    version=TaskRow.version + 1,
                )
                .execution_options(synchronize_session=False)
            )
            if _rowcount(resumed) != 1:
                current = await load_task(session, scope, task.id)
                raise refuse(task.id, current.state if current is not None else task.state)
            await _record(session, scope, turn, (task.id, turn_id), task.context_id, channel)
            await session.refresh(task)
        self._turns.notify_local()
        return Accepted(task=task, created=True)

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
        async with self._db.transaction() as session:
            turn_id = await _insert_turn(
                session, scope, turn, task_id, states.TURN_STEER, submission, states.TURN_DONE
            )
            if turn_id is None:
                return await existing(session, scope, turn)
            # Locked: an outcome write in flight (it takes the row and the next history
            # position) is waited for, and its state then refuses this message, instead of
            # both taking that position. The other order: the version bump below makes an
            # outcome write waiting on this lock find the row changed and read it again, and
            # the completion's guard then sees this message (``OutcomeRule.seen_history``).
            task = await load_task(session, scope, task_id, for_update=True)
            if task is None:
                raise TaskNotFound(f"task '{shown(task_id)}' not found")
            if context_id is not None and context_id != task.context_id:
                raise InvalidParams(
                    "params.message.contextId does not match the task's contextId",
                    reason="context_mismatch",
                )
            if task.state not in steerable:
                raise refuse(task.id, task.state)  # rolls the turn row back
            await session.execute(
                update(TaskRow)
                .where(
                    TaskRow.tenant == scope.tenant,
                    TaskRow.identity == scope.identity,
                    TaskRow.id == task.id,
                )
                .values(version=TaskRow.version + 1)
                .execution_options(synchronize_session=False)
            )
            await _record(session, scope, turn, (task.id, turn_id), task.context_id, None)
        return Accepted(task=task, created=True)


async def existing(session: AsyncSession, scope: CallerScope, turn: NewTurn) -> Accepted:
    """The task of the message that holds the key: a retry, or a concurrent twin."""
    found = await _held(session, scope, turn.message_id, turn.content_hash)
    if found is None:  # the twin rolled back between our insert and this read: rare
        raise TaskNotFound("task not found; retry the message")
    return found


async def _held(
    session: AsyncSession, scope: CallerScope, message_id: str, content_hash: str
) -> Accepted | None:
    held = (
        await session.execute(
            select(TurnRow.task_id, TurnRow.content_hash).where(
                TurnRow.tenant == scope.tenant,
                TurnRow.identity == scope.identity,
                TurnRow.message_id == message_id,
            )
        )
    ).one_or_none()
    if held is None:
        return None
    if held.content_hash != content_hash:
        raise InvalidParams(
            "params.message.messageId was already used with different content",
            reason="message_id_conflict",
        )
    task = await load_task(session, scope, held.task_id)
    if task is None:
        raise TaskNotFound(f"task '{held.task_id}' not found")
    return Accepted(task=task, created=False)


async def _over(session: AsyncSession, scope: CallerScope, limit: int) -> bool:
    return await new_turns(session, scope, limit + 1) > limit


async def new_turns(session: AsyncSession, scope: CallerScope, at_most: int) -> int:
    """The identity's unfinished ``start`` turns (continuations are not counted), counted up
    to ``at_most``: the read stops there."""
    unfinished = (
        select(TurnRow.id)
        .where(
            TurnRow.tenant == scope.tenant,
            TurnRow.identity == scope.identity,
            TurnRow.status.in_(states.UNFINISHED_TURNS),
            TurnRow.kind == states.TURN_START,
        )
        .limit(at_most)
        .subquery()
    )
    found = await session.execute(select(func.count()).select_from(unfinished))
    return int(found.scalar_one())


async def _insert_turn(
    session: AsyncSession,
    scope: CallerScope,
    turn: NewTurn,
    task_id: str,
    kind: str,
    submission: Submission,
    status: str = states.TURN_QUEUED,
) -> int | None:
    """The new turn's id; None when the key is taken."""
    stmt = (
        insert_for(session, TurnRow)
        .values(
            tenant=scope.tenant,
            identity=scope.identity,
            message_id=turn.key,
            task_id=task_id,
            kind=kind,
            status=status,
            attempts=0,
            not_before=None,
            content_hash=turn.content_hash,
            payload=turn.payload,
            created_at=submission.at,
            updated_at=submission.at,
        )
        .on_conflict_do_nothing(index_elements=["tenant", "identity", "message_id"])
        .returning(TurnRow.id)
    )
    found: int | None = (await session.execute(stmt)).scalar_one_or_none()
    return found


async def _record(
    session: AsyncSession,
    scope: CallerScope,
    turn: NewTurn,
    ids: tuple[str, int],
    context_id: str,
    channel: str | None,
) -> None:
    """The accepted message in the history, its attachments, its push config, the actor row
    and the wake-up. ``ids``: the task's and the new turn's."""
    task_id, turn_id = ids
    message = {**turn.message, "taskId": task_id, "contextId": context_id}
    await append_history(session, scope, task_id, role="ROLE_USER", message=message)
    if turn.attachments:
        session.add_all(_attachment_rows(scope, turn, task_id, turn_id))
    if turn.push is not None:
        await store_push_config(session, scope, task_id, turn.push, reuse_same_url=True)
    # DO NOTHING: accept never waits on the row lock a worker's claim holds.
    await session.execute(
        insert_for(session, ActorRow)
        .values(tenant=scope.tenant, identity=scope.identity, fence=0)
        .on_conflict_do_nothing(index_elements=["tenant", "identity"])
    )
    if channel is not None:
        # Delivered to LISTENers at commit, never for a rolled-back accept.
        await session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})


def _attachment_rows(
    scope: CallerScope, turn: NewTurn, task_id: str, turn_id: int
) -> list[TurnAttachmentRow]:
    return [
        TurnAttachmentRow(
            tenant=scope.tenant,
            task_id=task_id,
            turn_id=turn_id,
            ordinal=a.index,
            identity=scope.identity,
            message_id=turn.message_id,
            kind=a.kind,
            media_type=a.media_type,
            filename=a.filename,
            data=a.data,
            text=a.text,
            pages=a.pages,
        )
        for a in turn.attachments
    ]


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)
