"""Writing a task's push config in the caller's transaction (both backends)."""

from __future__ import annotations

import uuid

from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.accepts import SealedPush
from app.db.models import PushConfigRow
from app.db.shared.task_rows import insert_for
from app.errors import InvalidParams
from app.security.caller import CallerScope

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
