"""A gRPC stream whose client stops reading: HTTP/2 flow control holds the server's writes, so
the stream reads no further from the database than the client's window lets it send (memory
stays bounded, whatever the turn writes); the client going away then frees the slot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf import json_format

from app.testing.edge import edge_harness
from tests.grpc.conftest import GrpcEdge, free_port, grpc_server, text_message
from tests.polling import poll_until

pytestmark = pytest.mark.slow

EVENTS = 400
TEXT = "x" * 4096  # EVENTS x TEXT is far more than one HTTP/2 window


@pytest.fixture
async def big(db_url: str) -> AsyncIterator[GrpcEdge]:
    async with edge_harness(
        db_url,
        background=True,
        grpc_port=free_port(),
        max_body_bytes=4 * 1024 * 1024,
        stream_poll_seconds=0.05,
    ) as edge:
        await edge.add_tenant("open", agent="scripted", require_push_config=False, profile="open")
        edge.default_tenant = "open"
        target = f"127.0.0.1:{grpc_server(edge).port}"
        # No window growth on the client: its receive window stays the HTTP/2 default.
        options = [("grpc.http2.bdp_probe", 0)]
        async with grpc.aio.insecure_channel(target, options=options) as channel:
            yield GrpcEdge(edge, channel, a2a_pb2_grpc.A2AServiceStub(channel), target)


async def test_a_client_that_stops_reading_holds_its_stream_back(big: GrpcEdge):
    store = big.edge.services.db.storage.task_events
    read: list[int] = []
    original = store.after

    async def counted(*args: Any, **kwargs: Any) -> Any:
        events = await original(*args, **kwargs)
        read.append(len(events))
        return events

    store.after = counted  # type: ignore[method-assign]
    script = "sleep 0.3\n" + "".join(f"progress {i} {TEXT}\n" for i in range(EVENTS)) + "reply ok"
    request = json_format.ParseDict(
        {"tenant": "open", "message": text_message("slow-1", script)},
        a2a_pb2.SendMessageRequest(),
    )
    call = big.stub.SendStreamingMessage(request, metadata=big.metadata())
    first = await call.read()
    task_id = first.task.id

    async def finished() -> bool:
        task = await big.stub.GetTask(
            a2a_pb2.GetTaskRequest(tenant="open", id=task_id, history_length=0),
            metadata=big.metadata(),
        )
        return task.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED

    await poll_until(finished, 60, interval=0.1, what="the turn's end")
    await asyncio.sleep(0.5)
    # Some events went out into the window; far from all of them were read.
    assert 0 < sum(read) < EVENTS // 2, read
    call.cancel()

    async def freed() -> bool:
        return _open(big) == 0

    await poll_until(freed, 10, what="the slot given back")


def _open(big: GrpcEdge) -> float:
    gauge = big.edge.services.metrics.streams_open
    return float(gauge.collect()[0].samples[0].value)
