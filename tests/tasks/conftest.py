"""Helpers for the task tests: an edge harness per backend, message builders, DB-level accept
and a fake worker lease (the fence the guarded writes check)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from app.db.engine import Database
from app.db.fence import Fence
from app.db.models import ActorRow, TaskRow, TurnRow
from app.security.caller import CallerScope
from app.settings import Settings, load_settings
from app.tasks.accept import Accepted, Acceptor
from app.tasks.push_secrets import PushSecrets
from app.tasks.send_params import parse_send_message
from app.tasks.turn_writes import TurnWrites
from app.tasks.wire import utcnow
from app.tenants.registry import TenantRecord
from app.testing.edge import EdgeHarness, edge_harness

GATEWAY = "https://gateway.test"
PUSH_URL = GATEWAY + "/a2a/push"
SCOPE = CallerScope(tenant="demo", identity="user-1")


def message(
    message_id: str = "m-1",
    text: str = "hello",
    *,
    task_id: str | None = None,
    context_id: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id is not None:
        doc["taskId"] = task_id
    if context_id is not None:
        doc["contextId"] = context_id
    return doc


def send_params(
    message_id: str = "m-1",
    text: str = "hello",
    *,
    push: dict[str, Any] | bool | None = True,
    task_id: str | None = None,
    context_id: str | None = None,
    **configuration: Any,
) -> dict[str, Any]:
    config: dict[str, Any] = dict(configuration)
    if push is True:
        config["taskPushNotificationConfig"] = {"url": PUSH_URL, "token": "notify-token"}
    elif isinstance(push, dict):
        config["taskPushNotificationConfig"] = push
    params: dict[str, Any] = {
        "message": message(message_id, text, task_id=task_id, context_id=context_id)
    }
    if config:
        params["configuration"] = config
    return params


def rpc_error(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    doc = response.json()
    assert "error" in doc, doc
    return dict(doc["error"])


@pytest.fixture
async def edge(db_url: str) -> AsyncIterator[EdgeHarness]:
    async with edge_harness(db_url) as harness:
        await harness.add_tenant("demo")
        await harness.add_tenant("open", require_push_config=False)
        await harness.add_tenant("nodedupe", dedupe_message_ids=False)
        yield harness


@pytest.fixture
def settings() -> Settings:
    return load_settings(gateway_origins=[GATEWAY])


@pytest.fixture
def secrets() -> PushSecrets:
    return PushSecrets(b"test-push-secret-material-0123456789")


@pytest.fixture
def writes(database: Database, settings: Settings) -> TurnWrites:
    return TurnWrites(database, settings)


async def accept(
    db: Database,
    settings: Settings,
    *,
    scope: CallerScope = SCOPE,
    message_id: str = "m-1",
    text: str = "hello",
    require_push: bool = False,
    task_id: str | None = None,
    secrets: PushSecrets | None = None,
) -> Accepted:
    tenant = TenantRecord(id=scope.tenant, manifest={}, require_push_config=require_push)
    params = send_params(message_id, text, push=require_push, task_id=task_id)
    request = parse_send_message(params, tenant=tenant, targets=settings.push_targets)
    acceptor = Acceptor(db, secrets or PushSecrets(b"x" * 32))
    return await acceptor.accept(scope, request)


async def hold_lease(
    db: Database,
    scope: CallerScope = SCOPE,
    *,
    owner: str = "worker-a",
    token: int = 1,
    seconds: float = 60.0,
) -> Fence:
    """What a worker's claim does: own the actor row under a fresh fence."""
    async with db.transaction() as session:
        result = await session.execute(
            update(ActorRow)
            .where(ActorRow.tenant == scope.tenant, ActorRow.identity == scope.identity)
            .values(
                lease_owner=owner,
                fence=token,
                lease_until=utcnow() + timedelta(seconds=seconds),
            )
        )
        assert result.rowcount == 1  # type: ignore[attr-defined]
    return Fence(owner=owner, token=token)


async def task_row(db: Database, task_id: str) -> TaskRow:
    async with db.transaction() as session:
        row = (await session.execute(select(TaskRow).where(TaskRow.id == task_id))).scalar_one()
        return row


async def count(db: Database, model: Any) -> int:
    async with db.transaction() as session:
        return int((await session.execute(select(func.count()).select_from(model))).scalar_one())


async def turns(db: Database) -> list[TurnRow]:
    async with db.transaction() as session:
        return list((await session.execute(select(TurnRow).order_by(TurnRow.id))).scalars())
