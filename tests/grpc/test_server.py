"""The gRPC listener's start: off without EDGE_GRPC_PORT, and a port it cannot bind is a
configuration error naming the variable (the process does not start half-served)."""

from __future__ import annotations

import socket

import grpc
import pytest

from app.errors import ConfigError
from app.grpc.server import GrpcServer
from app.settings import load_settings
from app.testing.edge import edge_harness


async def test_no_grpc_server_without_its_port(sqlite_url: str):
    async with edge_harness(sqlite_url) as edge:
        assert edge.services.settings.grpc_port is None
        assert not [s for s in edge.services.background if isinstance(s, GrpcServer)]


async def test_a_port_taken_by_another_listener_is_a_config_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = load_settings(grpc_port=port, public_url="http://localhost")
        server = GrpcServer(settings, grpc.method_handlers_generic_handler("t.T", {}))
        with pytest.raises(ConfigError) as refused:
            await server.start()
    assert refused.value.message == f"EDGE_GRPC_PORT: cannot listen on 127.0.0.1:{port}"
    await server.stop()
