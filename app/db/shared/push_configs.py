"""The push-config store as SQLAlchemy statements, for both backends
(``app.db.push_configs.PushConfigStore``), and the config write accept shares."""

from __future__ import annotations

import uuid

from sqlalchemy import ColumnElement, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import Database
from app.db.models import PushConfigRow, PushOutboxRow
from app.db.outbox import CANCELED, PENDING
from app.db.push_configs import PushConfigView, SealedPush
from app.db.shared.task_rows import insert_for, load_task
from app.errors import InvalidParams, TaskNotFound
from app.security.caller import CallerScope
from app.text import shown

MAX_CONFIGS_PER_TASK = 10  # each push of the task goes to every one of them


def of_task(scope: CallerScope, task_id: str) -> tuple[ColumnElement[bool], ...]:
    """The caller's configs of one task (every query here takes the caller scope)."""
    return (
        PushConfigRow.tenant == scope.tenant,
        PushConfigRow.identity == scope.identity,
        PushConfigRow.task_id == task_id,
    )


async def _check_room(
    session: AsyncSession, scope: CallerScope, task_id: str, config_id: str
) -> None:
    """A new config id must find the task below ``MAX_CONFIGS_PER_TASK`` (replacing one is
    always allowed): every push of the task goes to each config, so an unbounded number
    would let one caller multiply the outbox and the gateway's traffic (found by audit)."""
    query = select(PushConfigRow.id).where(*of_task(scope, task_id))
    held = (await session.execute(query.limit(MAX_CONFIGS_PER_TASK + 1))).scalars().all()
    if config_id not in held and len(held) >= MAX_CONFIGS_PER_TASK:
        raise InvalidParams(
            f"a task holds at most {MAX_CONFIGS_PER_TASK} push notification configs; "
            "replace or delete one"
        )


async def store_push_config(
    session: AsyncSession,
    scope: CallerScope,
    task_id: str,
    config: SealedPush,
    *,
    reuse_same_url: bool = False,
) -> str:
    """Insert or replace one config of the task (in the caller's transaction); returns its id.

    Without an id, ``reuse_same_url`` makes a continuation that repeats the task's push url
    update that config instead of adding a second one (which would double every push).
    """
    config_id = config.id
    if config_id is None and reuse_same_url:
        config_id = (
            await session.execute(
                select(PushConfigRow.id)
                .where(*of_task(scope, task_id), PushConfigRow.url == config.url)
                .order_by(PushConfigRow.created_at, PushConfigRow.id)
                .limit(1)
            )
        ).scalar_one_or_none()
    config_id = config_id or str(uuid.uuid4())
    await _check_room(session, scope, task_id, config_id)
    values = {
        "url": config.url,
        "token_enc": config.token_enc,
        "auth_scheme": config.auth_scheme,
        "auth_credentials_enc": config.auth_credentials_enc,
    }
    stmt = insert_for(session, PushConfigRow).values(
        tenant=scope.tenant, identity=scope.identity, task_id=task_id, id=config_id, **values
    )
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=["tenant", "task_id", "id"],
            set_=values,
            # The PK has no identity column: never let one caller overwrite another's row.
            where=PushConfigRow.identity == scope.identity,
        )
    )
    return config_id


def _view(row: PushConfigRow) -> PushConfigView:
    return PushConfigView(
        tenant=row.tenant, id=row.id, task_id=row.task_id, url=row.url, auth_scheme=row.auth_scheme
    )


async def _require_task(session: AsyncSession, scope: CallerScope, task_id: str) -> None:
    if not task_id or await load_task(session, scope, task_id) is None:
        raise TaskNotFound(f"task '{shown(task_id)}' not found")


async def _row(
    session: AsyncSession, scope: CallerScope, task_id: str, config_id: str
) -> PushConfigRow | None:
    return (
        await session.execute(
            select(PushConfigRow).where(*of_task(scope, task_id), PushConfigRow.id == config_id)
        )
    ).scalar_one_or_none()


class SharedPushConfigs:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, scope: CallerScope, task_id: str, config: SealedPush) -> PushConfigView:
        async with self._db.transaction() as session:
            await _require_task(session, scope, task_id)
            config_id = await store_push_config(session, scope, task_id, config)
            row = await _row(session, scope, task_id, config_id)
        assert row is not None
        return _view(row)

    async def get(self, scope: CallerScope, task_id: str, config_id: str) -> PushConfigView | None:
        async with self._db.transaction() as session:
            await _require_task(session, scope, task_id)
            row = await _row(session, scope, task_id, config_id)
        return None if row is None else _view(row)

    async def page(
        self, scope: CallerScope, task_id: str, *, after: str | None, limit: int
    ) -> list[PushConfigView]:
        async with self._db.transaction() as session:
            await _require_task(session, scope, task_id)
            query = (
                select(PushConfigRow)
                .where(*of_task(scope, task_id))
                .order_by(PushConfigRow.id)
                .limit(limit)
            )
            if after is not None:
                query = query.where(PushConfigRow.id > after)
            rows = list((await session.execute(query)).scalars().all())
        return [_view(r) for r in rows]

    async def delete(self, scope: CallerScope, task_id: str, config_id: str) -> None:
        async with self._db.transaction() as session:
            await _require_task(session, scope, task_id)
            await session.execute(
                delete(PushConfigRow).where(*of_task(scope, task_id), PushConfigRow.id == config_id)
            )
            # Nothing is sent to a config after it was deleted.
            await session.execute(
                update(PushOutboxRow)
                .where(
                    PushOutboxRow.tenant == scope.tenant,
                    PushOutboxRow.identity == scope.identity,
                    PushOutboxRow.task_id == task_id,
                    PushOutboxRow.config_id == config_id,
                    PushOutboxRow.status == PENDING,
                )
                .values(status=CANCELED)
            )
