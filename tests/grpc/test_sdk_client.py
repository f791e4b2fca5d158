"""The official a2a-sdk Python client over its gRPC transport (issue 49): it resolves the stub
card, picks the ``GRPC`` interface the card lists (the bare ``host:port``), and sends and
streams a turn with the gateway's token (audience: that interface url) in its call context."""

from __future__ import annotations

import grpc
import httpx
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)

from app.interfaces import GRPC, interface_url
from app.testing.edge import edge_harness
from tests.grpc.conftest import free_port


async def test_the_sdk_client_sends_and_streams_a_turn_over_grpc(db_url: str):
    async with edge_harness(
        db_url, background=True, grpc_port=free_port(), stream_poll_seconds=0.05
    ) as edge:
        await edge.add_tenant("open", agent="scripted", require_push_config=False, profile="open")
        token = edge.gateway.mint(
            audience=interface_url(edge.settings, GRPC), tenant="open", identity=edge.identity
        )
        context = ClientCallContext(service_parameters={"authorization": f"Bearer {token}"})
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=edge.app))
        channels: list[grpc.aio.Channel] = []

        def channel(url: str) -> grpc.aio.Channel:
            channels.append(grpc.aio.insecure_channel(url))
            return channels[-1]

        config = ClientConfig(
            httpx_client=http,
            grpc_channel_factory=channel,
            supported_protocol_bindings=[GRPC],
            streaming=True,
        )
        client = await create_client("http://localhost", config)
        try:
            events: list[StreamResponse] = []
            message = Message(
                message_id="sdk-grpc-1",
                role=Role.ROLE_USER,
                parts=[Part(text="progress working on it\nartifact text A\nreply done")],
            )
            async for event in client.send_message(
                SendMessageRequest(tenant="open", message=message), context=context
            ):
                events.append(event)
            task_id = events[0].task.id
            task = await client.get_task(GetTaskRequest(tenant="open", id=task_id), context=context)
        finally:
            await client.close()
            await http.aclose()
            for open_channel in channels:
                await open_channel.close()
    assert channels, "the client did not dial the card's GRPC interface"
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task"
    assert "artifact_update" in kinds
    assert kinds[-1] == "status_update"
    final = events[-1].status_update
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert final.status.message.parts[0].text == "done"
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
