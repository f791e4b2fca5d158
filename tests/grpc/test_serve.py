"""``looping-edge serve`` with ``EDGE_GRPC_PORT`` as real processes on PostgreSQL: under
``--workers 2`` both worker processes bind the gRPC port (SO_REUSEPORT) and answer, and on
SIGTERM the gRPC server stops gracefully: an open stream is ended and the process exits."""

from __future__ import annotations

import asyncio
import signal
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf import json_format

from app.db.engine import Database
from app.security.keys import generate_private_jwk
from app.tenants.registry import TenantStore
from app.testing.gateway import GatewayKit
from app.testing.jwks_server import serve_jwks
from app.testing.tenants import open_tenant
from tests.e2e.processes import edge_env, free_port, process, until, wait_ready

# Two spawned workers import the whole app each: on a busy two-core host that takes a while.
pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(400)]

USER = {"key": "user-1", "name": "Test User", "kind": "user"}


def _send(message_id: str, text: str) -> a2a_pb2.SendMessageRequest:
    doc = {
        "tenant": "open",
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]},
    }
    return json_format.ParseDict(doc, a2a_pb2.SendMessageRequest())


async def test_workers_share_the_grpc_port_and_stop_gracefully(
    pg_url: str, pg_database: Database, tmp_path: Path
) -> None:
    await TenantStore(pg_database).add(open_tenant("open", agent="scripted", name="Demo agent"))
    kit = GatewayKit()
    port, grpc_port = free_port(), free_port()
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(serve_jwks(kit))
        env = edge_env(
            pg_url,
            port=port,
            signing_jwk=generate_private_jwk("grpc-edge"),
            origins=[kit.origin],
            grpc_port=grpc_port,
            stream_poll_seconds=0.05,
        )
        argv = ["serve", "--port", str(port), "--workers", "2"]
        edge = stack.enter_context(process("serve", argv, env, tmp_path))
        await wait_ready(f"http://127.0.0.1:{port}", edge, within=180)

        async def both_listening() -> bool:
            return edge.logs().count("grpc listening") >= 2

        await until(both_listening, edge, within=180)
        token = kit.mint(audience=f"127.0.0.1:{grpc_port}", tenant="open", identity=USER)
        metadata = (("authorization", f"Bearer {token}"), ("a2a-version", "1.0"))
        # Several connections (one channel each): the kernel spreads them over the processes.
        for n in range(4):
            async with grpc.aio.insecure_channel(
                f"127.0.0.1:{grpc_port}", options=[("grpc.use_local_subchannel_pool", 1)]
            ) as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                events = [
                    e
                    async for e in stub.SendStreamingMessage(
                        _send(f"w-{n}", "reply hi"), metadata=metadata
                    )
                ]
                assert events[-1].status_update.status.state == (
                    a2a_pb2.TaskState.TASK_STATE_COMPLETED
                )

        # An open stream when the edge is told to stop: it ends, and the process exits.
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}")
        stack.push_async_callback(channel.close)
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        call = stub.SendStreamingMessage(_send("w-long", "sleep 60"), metadata=metadata)
        assert (await call.read()).HasField("task")
        edge.proc.send_signal(signal.SIGTERM)

        async def drained() -> grpc.StatusCode:
            try:
                while await call.read() is not grpc.aio.EOF:
                    pass
            except grpc.aio.AioRpcError as exc:
                return exc.code()
            return grpc.StatusCode.OK

        # The grace for calls in progress, then the stream is cut: it does not hold the stop.
        ended = await asyncio.wait_for(drained(), 30)
        assert ended in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), ended
        await asyncio.to_thread(edge.proc.wait, 30)
        assert edge.proc.returncode == 0, edge.logs()[-3000:]
