"""The official a2a-sdk Python client over the HTTP+JSON binding (issue 49): it resolves the
stub card, picks the ``HTTP+JSON`` interface (its url is ``PUBLIC_URL``), puts the tenant in
the path, and sends, streams, reads and cancels with a token minted for that interface; the
edge's errors reach it as the SDK's own A2A error types (``ErrorInfo.reason``). Once through
the app in process on both backends, once against a live ``looping-edge serve`` process."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

from app.db.migrate import upgrade_to_head
from app.security.keys import generate_private_jwk
from app.testing.edge import EdgeHarness, edge_harness
from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks
from app.testing.tenants import add_tenant_at, open_tenant
from tests.e2e.processes import edge_env, free_port, process, wait_ready

SCRIPT = "progress working on it\nartifact text A\nreply done"


def _message(message_id: str, text: str = SCRIPT) -> Message:
    return Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])


async def _client(base: str, http: httpx.AsyncClient, *, streaming: bool) -> Client:
    config = ClientConfig(
        httpx_client=http, streaming=streaming, supported_protocol_bindings=["HTTP+JSON"]
    )
    return await create_client(base, config)


async def _stream(client: Client, message_id: str) -> list[StreamResponse]:
    request = SendMessageRequest(tenant="open", message=_message(message_id))
    return [event async for event in client.send_message(request)]


def _check_turn(events: list[StreamResponse]) -> None:
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and kinds[-1] == "status_update"
    assert "artifact_update" in kinds
    final = events[-1].status_update
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert final.status.message.parts[0].text == "done"
    assert final.task_id == events[0].task.id


def _http(edge: EdgeHarness) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=edge.app),
        headers={"Authorization": f"Bearer {edge.rest_token(tenant='open')}", "A2A-Version": "1.0"},
    )


async def test_the_sdk_client_sends_streams_and_reads_over_http_json(db_url: str) -> None:
    async with edge_harness(db_url, background=True, stream_poll_seconds=0.05) as edge:
        await edge.add_tenant("open", agent="scripted", profile="open", require_push_config=False)
        async with _http(edge) as http:
            streaming = await _client("http://localhost", http, streaming=True)
            events = await _stream(streaming, "sdk-rest-1")
            _check_turn(events)
            task = await streaming.get_task(GetTaskRequest(tenant="open", id=events[0].task.id))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.artifacts[0].parts[0].text == "A"
            with pytest.raises(TaskNotFoundError):
                await streaming.cancel_task(CancelTaskRequest(tenant="open", id="no-such-task"))
            blocking = await _client("http://localhost", http, streaming=False)
            request = SendMessageRequest(
                tenant="open", message=_message("sdk-rest-2", "message hi")
            )
            [answer] = [event async for event in blocking.send_message(request)]
            assert answer.message.parts[0].text == "hi"


@pytest.mark.slow
async def test_the_sdk_client_streams_from_a_live_edge(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'edge.db'}"
    upgrade_to_head(url)
    await add_tenant_at(url, open_tenant("open", agent="scripted", name="Demo agent"))
    kit = GatewayKit()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with serve_jwks(kit):
        env = edge_env(url, port=port, signing_jwk=generate_private_jwk("e"), origins=[kit.origin])
        with process("serve", ["serve", "--port", str(port), "--no-push"], env, tmp_path) as child:
            await wait_ready(base, child)
            headers = {**kit.bearer(audience=base, tenant="open"), "A2A-Version": "1.0"}
            async with httpx.AsyncClient(headers=headers, timeout=20) as http:
                client = await _client(base, http, streaming=True)
                _check_turn(await _stream(client, "sdk-live-1"))
