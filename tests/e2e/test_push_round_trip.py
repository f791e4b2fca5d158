"""A full round trip through real HTTP and real processes on PostgreSQL (issue 4 tests):

gateway (this test: JWKS server + push receiver) → ``looping-edge serve`` (HTTP only) →
database → ``looping-edge worker`` (turns + push delivery) → signed push → receiver.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from app.db.engine import Database
from app.db.models import PushOutboxRow, TaskRow
from app.security.keys import SigningKey, generate_private_jwk
from app.tenants.registry import TenantRecord, TenantStore
from app.testing.edge import demo_manifest
from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks
from app.testing.push_faults import hang
from app.testing.push_receiver import CallbackExpectation, PushReceiver, push_receiver
from tests.e2e.processes import Process, edge_env, free_port, process, until, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@dataclass
class World:
    pg_url: str
    tmp: Path
    kit: GatewayKit
    rx: PushReceiver
    jwk: dict[str, str]
    port: int
    db: Database
    stack: AsyncExitStack

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **knobs: object) -> dict[str, str]:
        origins = [self.kit.origin, self.rx.base_url]
        return edge_env(self.pg_url, port=self.port, signing_jwk=self.jwk, origins=origins, **knobs)

    def start(self, name: str, *argv: str, **knobs: object) -> Process:
        return self.stack.enter_context(process(name, list(argv), self.env(**knobs), self.tmp))

    async def send(self, text: str) -> str:
        url, token = self.rx.endpoint()
        params = {
            "tenant": "demo",
            "message": {
                "messageId": f"m-{url[-8:]}",
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            },
            "configuration": {"taskPushNotificationConfig": {"url": url, "token": token}},
        }
        headers = self.kit.bearer(audience=self.base + "/a2a", tenant="demo")
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        async with httpx.AsyncClient(trust_env=False) as client:
            response = await client.post(self.base + "/a2a", json=body, headers=headers)
        doc = response.json()
        assert response.status_code == 200 and "result" in doc, doc
        return str(doc["result"]["task"]["id"])

    async def task_state(self, task_id: str) -> str | None:
        async with self.db.transaction() as s:
            return await s.scalar(select(TaskRow.state).where(TaskRow.id == task_id))

    async def outbox(self, task_id: str) -> list[PushOutboxRow]:
        async with self.db.transaction() as s:
            query = select(PushOutboxRow).where(PushOutboxRow.task_id == task_id)
            return list((await s.execute(query.order_by(PushOutboxRow.id))).scalars())


@asynccontextmanager
async def world(pg_url: str, db: Database, tmp: Path) -> AsyncIterator[World]:
    """Processes on ``pg_url``; ``db`` (the ``pg_database`` fixture) is the test's own view."""
    jwk = generate_private_jwk("e2e-edge")
    await TenantStore(db).add(
        TenantRecord(id="demo", manifest=demo_manifest(), agent_kind="scripted")
    )
    kit = GatewayKit()
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(serve_jwks(kit))
        rx = await stack.enter_async_context(push_receiver())
        w = World(pg_url, tmp, kit, rx, jwk, free_port(), db, stack)
        key = SigningKey.from_jwk_json(json.dumps(jwk))
        rx.expect = CallbackExpectation.for_key(key, w.base + "/.well-known/jwks.json")
        yield w


async def _http_edge(w: World) -> Process:
    edge = w.start("serve", "serve", "--port", str(w.port), "--no-worker", "--no-push")
    await wait_ready(w.base, edge)
    return edge


async def test_send_message_to_pushes_across_processes(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    async with world(pg_url, pg_database, tmp_path) as w:
        edge = await _http_edge(w)
        worker = w.start("worker", "worker")
        task_id = await w.send("progress thinking\nreply done")
        final = await w.rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=60)
        edge.check_alive()
        worker.check_alive()
        assert final.state == "TASK_STATE_COMPLETED" and final.text == "done"
        assert final.error is None and final.claims is not None
        assert [p.message_id for p in w.rx.deliveries] == [f"{task_id}:line-1", f"{task_id}:final"]


async def test_receiver_down_for_a_while_then_delivered(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    async with world(pg_url, pg_database, tmp_path) as w:
        await _http_edge(w)
        worker = w.start("worker", "worker")
        await w.rx.go_down()
        task_id = await w.send("reply done")

        async def retried() -> bool:
            rows = await w.outbox(task_id)
            return bool(rows) and rows[0].attempts >= 3 and rows[0].status == "pending"

        await until(retried, worker)
        assert w.rx.requests == []
        await w.rx.come_back()
        final = await w.rx.wait_for(lambda p: p.message_id == f"{task_id}:final", within=30)
        assert final.state == "TASK_STATE_COMPLETED"


async def test_worker_killed_after_the_terminal_write_still_pushes(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    async with world(pg_url, pg_database, tmp_path) as w:
        await _http_edge(w)
        doomed = w.start("worker-a", "worker")
        await w.rx.go_down()  # the push cannot go out before the crash
        task_id = await w.send("reply done")

        async def terminal_and_queued() -> list[PushOutboxRow] | None:
            rows = await w.outbox(task_id)
            completed = await w.task_state(task_id) == "TASK_STATE_COMPLETED"
            return rows if completed and rows and rows[0].attempts >= 1 else None

        [row] = await until(terminal_and_queued, doomed)
        assert row.status == "pending"
        doomed.kill9()
        await w.rx.come_back()
        w.start("worker-b", "worker")
        final = await w.rx.wait_for(lambda p: p.task_id == task_id, within=30)
        assert (
            final.message_id
            == f"{task_id}:final"
            == row.payload["task"]["status"]["message"]["messageId"]
        )
        assert final.state == "TASK_STATE_COMPLETED" and final.text == "done"


async def test_worker_killed_mid_push_is_redelivered_after_its_lease(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    async with world(pg_url, pg_database, tmp_path) as w:
        await _http_edge(w)
        w.rx.fault = hang(30.0, times=1)  # the first attempt is held on the wire
        doomed = w.start("worker-a", "worker", push_timeout_seconds=2)
        task_id = await w.send("reply done")

        async def on_the_wire() -> bool:
            return any(count > 0 for count in w.rx.active.values())

        await until(on_the_wire, doomed)
        doomed.kill9()
        w.start("worker-b", "worker", push_timeout_seconds=2)  # lease = 2*2+5 s
        final = await w.rx.wait_for(lambda p: p.task_id == task_id, within=40)
        assert final.message_id == f"{task_id}:final"
        rows = await until(lambda: _delivered(w, task_id), within=10)
        assert rows[0].attempts == 2


async def _delivered(w: World, task_id: str) -> list[PushOutboxRow] | None:
    rows = await w.outbox(task_id)
    return rows if rows and rows[0].status == "delivered" else None
