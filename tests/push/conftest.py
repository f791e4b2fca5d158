"""A push rig: the real database (SQLite and Postgres), an edge signing key, a real loopback
receiver, and helpers that queue outbox rows through ``enqueue_push`` (as turns do)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import select, update

from app.db.engine import Database
from app.db.models import PushConfigRow, PushOutboxRow
from app.db.outbox import enqueue_push
from app.ops.metrics import Metrics
from app.push.deliverer import PushDeliverer
from app.push.runtime import create_deliverer
from app.security.caller import CallerScope
from app.security.keys import SigningKey, generate_private_jwk
from app.settings import Settings, load_settings
from app.tasks.push_secrets import PushSecrets
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.gateway import GatewayKit
from app.testing.push_receiver import CallbackExpectation, PushReceiver, push_receiver
from tests.polling import poll_until

EDGE_URL = "https://edge.test"
JKU = EDGE_URL + "/.well-known/jwks.json"
SCOPE = CallerScope(tenant="demo", identity="user-1")


def payload(task_id: str, key: str, *, state: str = "TASK_STATE_WORKING", text: str = "") -> dict:
    return {
        "task": {
            "id": task_id,
            "contextId": "ctx-1",
            "status": {
                "state": state,
                "message": {
                    "messageId": f"{task_id}:{key}",
                    "role": "ROLE_AGENT",
                    "parts": [{"text": text or f"step {key}"}],
                },
            },
        }
    }


@dataclass
class PushRig:
    db: Database
    jwk: dict[str, str]
    rx: PushReceiver
    db_url: str
    metrics: Metrics = field(default_factory=Metrics)
    overrides: dict[str, Any] = field(default_factory=dict)
    deliverers: list[PushDeliverer] = field(default_factory=list)

    @property
    def key(self) -> SigningKey:
        return SigningKey.from_jwk_json(json.dumps(self.jwk))

    def settings(self, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "signing_key": json.dumps(self.jwk),
            "gateway_origins": [self.rx.base_url],
            "public_url": EDGE_URL,
            "database_url": self.db_url,
            "allow_loopback_http": True,
            "push_retry_base_seconds": 0.01,
            "push_retry_max_seconds": 0.05,
            "push_timeout_seconds": 2.0,
            "poll_seconds": 0.05,
            "log_json": False,
        }
        values.update(self.overrides)
        values.update(overrides)
        return load_settings(**values)

    @property
    def box(self) -> PushSecrets:
        return PushSecrets.from_settings(self.settings(), self.key)

    async def add_config(
        self,
        task_id: str,
        *,
        config_id: str = "cfg",
        url: str | None = None,
        token: str | None = None,
        auth: tuple[str, str] | None = None,
        scope: CallerScope = SCOPE,
    ) -> tuple[str, str | None]:
        if url is None:
            url, token = self.rx.endpoint(f"{task_id}-{config_id}", token=token)
        async with self.db.transaction() as s:
            s.add(
                PushConfigRow(
                    tenant=scope.tenant,
                    identity=scope.identity,
                    task_id=task_id,
                    id=config_id,
                    url=url,
                    token_enc=None if token is None else self.box.encrypt(token),
                    auth_scheme=auth[0] if auth else None,
                    auth_credentials_enc=self.box.encrypt(auth[1]) if auth else None,
                )
            )
        return url, token

    async def queue(
        self,
        task_id: str,
        key: str,
        *,
        kind: str = "progress",
        state: str = "TASK_STATE_WORKING",
        scope: CallerScope = SCOPE,
    ) -> int:
        async with self.db.transaction() as s:
            written = await enqueue_push(
                s,
                self.db.signals.pushes,
                scope=scope,
                task_id=task_id,
                kind=kind,  # type: ignore[arg-type]
                message_key=key,
                payload=payload(task_id, key, state=state),
            )
        return written

    async def rows(self, task_id: str | None = None) -> list[PushOutboxRow]:
        query = select(PushOutboxRow).order_by(PushOutboxRow.id)
        if task_id is not None:
            query = query.where(PushOutboxRow.task_id == task_id)
        async with self.db.transaction() as s:
            return list((await s.execute(query)).scalars().all())

    async def make_due(self) -> None:
        """Fast-forward: every pending row is due now (tests never sleep through backoff)."""
        async with self.db.transaction() as s:
            await s.execute(
                update(PushOutboxRow)
                .where(PushOutboxRow.status == "pending")
                .values(next_attempt_at=PushOutboxRow.created_at)
            )

    async def wait_rows(
        self, predicate: Any, *, task_id: str | None = None, within: float = 10.0
    ) -> list[PushOutboxRow]:

        async def matching() -> tuple[list[PushOutboxRow]] | None:
            rows = await self.rows(task_id)
            return (rows,) if predicate(rows) else None  # a tuple: an empty list may match

        (rows,) = await poll_until(matching, within, interval=0.02, what="the outbox rows")
        return rows

    async def start(self, owner: str = "d1", **overrides: Any) -> PushDeliverer:
        deliverer = create_deliverer(
            settings=self.settings(**overrides),
            key=self.key,
            jku=JKU,
            db=self.db,
            metrics=self.metrics,
            owner=owner,
        )
        await deliverer.start()
        self.deliverers.append(deliverer)
        return deliverer

    async def stop_all(self) -> None:
        while self.deliverers:
            await self.deliverers.pop().stop()


@pytest.fixture
def edge_jwk() -> dict[str, str]:
    return generate_private_jwk("edge-key-1")


@asynccontextmanager
async def make_rig(db: Database, url: str, jwk: dict[str, str]) -> AsyncIterator[PushRig]:
    """A rig on ``db`` (the ``database`` or ``pg_database`` fixture, on ``url``)."""
    key = SigningKey.from_jwk_json(json.dumps(jwk))
    async with push_receiver(expect=CallbackExpectation.for_key(key, JKU)) as rx:
        rig = PushRig(db=db, jwk=jwk, rx=rx, db_url=url)
        try:
            yield rig
        finally:
            await rig.stop_all()


@pytest.fixture
async def rig(database: Database, db_url: str, edge_jwk: dict[str, str]) -> AsyncIterator[PushRig]:
    async with make_rig(database, db_url, edge_jwk) as rig:
        yield rig


@pytest.fixture
async def pg_rig(
    pg_database: Database, pg_url: str, edge_jwk: dict[str, str]
) -> AsyncIterator[PushRig]:
    async with make_rig(pg_database, pg_url, edge_jwk) as rig:
        yield rig


FAST = {"poll_seconds": 0.05, "turn_retry_base_seconds": 0.01, "push_retry_base_seconds": 0.01}


@asynccontextmanager
async def edge_and_receiver(
    db_url: str, **overrides: Any
) -> AsyncIterator[tuple[EdgeHarness, PushReceiver]]:
    """The real app with workers and push delivery, tenant ``demo`` on the scripted agent,
    and a loopback receiver that verifies every callback."""
    kit = GatewayKit()
    async with push_receiver() as rx:
        origins = [kit.origin, rx.base_url]
        async with edge_harness(
            db_url, gateway=kit, background=True, gateway_origins=origins, **{**FAST, **overrides}
        ) as edge:
            services = edge.services
            rx.expect = CallbackExpectation.for_key(services.key, services.cards.jku)
            await edge.add_tenant("demo", agent="scripted")
            yield edge, rx


async def send(edge: EdgeHarness, rx: PushReceiver, text: str, **message: Any) -> str:
    url, token = rx.endpoint()
    params = {
        "message": {
            "messageId": f"m-{len(rx.tokens)}",
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            **message,
        },
        "configuration": {"taskPushNotificationConfig": {"url": url, "token": token}},
    }
    return str((await edge.result("SendMessage", params))["task"]["id"])
