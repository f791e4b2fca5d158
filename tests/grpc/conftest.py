"""A running edge with its gRPC port, and a client over a real grpc.aio channel."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from a2a.types import a2a_pb2_grpc
from google.rpc import error_details_pb2, status_pb2

from app.grpc.server import GrpcServer
from app.interfaces import GRPC, interface_url
from app.testing.edge import EdgeHarness, edge_harness

USER = {"key": "user-1", "name": "Test User", "kind": "user"}
OTHER = {"key": "user-2", "name": "Other", "kind": "user"}


@dataclass
class GrpcEdge:
    """The harness plus a channel to its gRPC port; ``metadata`` mints a gRPC-audience
    token for the open tenant unless told otherwise."""

    edge: EdgeHarness
    channel: grpc.aio.Channel
    stub: a2a_pb2_grpc.A2AServiceStub
    target: str
    identity: dict[str, Any] = field(default_factory=lambda: dict(USER))

    @property
    def audience(self) -> str:
        return interface_url(self.edge.settings, GRPC)

    def token(self, *, tenant: str = "open", **kwargs: Any) -> str:
        kwargs.setdefault("identity", self.identity)
        kwargs.setdefault("audience", self.audience)
        return self.edge.gateway.mint(tenant=tenant, **kwargs)

    def metadata(
        self, token: str | None = None, *, version: str | None = "1.0", **kwargs: Any
    ) -> tuple[tuple[str, str], ...]:
        entries = [("authorization", f"Bearer {token or self.token(**kwargs)}")]
        if version is not None:
            entries.append(("a2a-version", version))
        return tuple(entries)


def free_port() -> int:
    """A port nothing listens on now (EDGE_GRPC_PORT names a real port: the card lists it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def grpc_server(edge: EdgeHarness) -> GrpcServer:
    for service in edge.services.background:
        if isinstance(service, GrpcServer):
            return service
    raise AssertionError("no gRPC server among the background services")


@pytest.fixture
async def live(db_url: str) -> AsyncIterator[GrpcEdge]:
    async with edge_harness(
        db_url,
        background=True,
        grpc_port=free_port(),
        stream_max_per_identity=2,
        stream_max_per_process=3,
        stream_poll_seconds=0.05,
    ) as edge:
        await edge.add_tenant("open", agent="scripted", require_push_config=False, profile="open")
        await edge.add_tenant("demo", agent="scripted")
        edge.default_tenant = "open"
        target = f"127.0.0.1:{grpc_server(edge).port}"
        async with grpc.aio.insecure_channel(target) as channel:
            yield GrpcEdge(edge, channel, a2a_pb2_grpc.A2AServiceStub(channel), target)


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The ``google.rpc.ErrorInfo`` of a failed call's rich status."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            assert status.code == error.code().value[0]
            assert status.message == error.details()
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info
    raise AssertionError(f"no ErrorInfo in {error!r}")


def text_message(message_id: str, text: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **fields}
