"""The official a2a-sdk Python client streams a turn from the edge (issue 49): it resolves the
stub card (``capabilities.streaming: true``), picks the JSON-RPC interface and reads the SSE
answer of SendStreamingMessage, then SubscribeToTask, with the gateway's bearer token in its
HTTP client's headers."""

from __future__ import annotations

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, TaskState

from app.testing.edge import EdgeHarness, edge_harness


async def _client(edge: EdgeHarness) -> tuple[httpx.AsyncClient, Client]:
    token = edge.token(tenant="open")
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=edge.app),
        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
    )
    client = await create_client(
        "http://localhost", ClientConfig(httpx_client=http, streaming=True)
    )
    return http, client


async def test_the_sdk_client_streams_a_turn(db_url: str):
    async with edge_harness(db_url, background=True, stream_poll_seconds=0.05) as edge:
        await edge.add_tenant("open", agent="scripted", require_push_config=False)
        http, client = await _client(edge)
        message = Message(
            message_id="sdk-1",
            role=Role.ROLE_USER,
            parts=[Part(text="progress working on it\nartifact text A\nreply done")],
        )
        events: list[StreamResponse] = []
        try:
            async for event in client.send_message(
                SendMessageRequest(tenant="open", message=message)
            ):
                events.append(event)
        finally:
            await http.aclose()
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task"
    assert kinds[-1] == "status_update"
    assert "artifact_update" in kinds
    final = events[-1].status_update
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert final.status.message.parts[0].text == "done"
    assert final.task_id == events[0].task.id
