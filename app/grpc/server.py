"""The gRPC listener (``EDGE_GRPC_PORT``): a grpc.aio server on this process's event loop,
run beside the HTTP server as a background service (started with the others, stopped first).

Bounds, as the HTTP port has them: a request message at most ``EDGE_MAX_BODY_BYTES`` (larger is
RESOURCE_EXHAUSTED). gRPC reads a whole message before any handler runs, so the server takes
up to the largest limit a tenant may have (``largest_body_bytes``: the attachment limits,
issue 55) and the handler refuses a message past its caller's own limit once the token is
verified (``A2AGrpcService``); past the largest, gRPC answers RESOURCE_EXHAUSTED itself.
Request metadata at most ``EDGE_MAX_HEADER_BYTES``, at
most ``EDGE_MAX_CONNECTIONS`` calls in progress (past it RESOURCE_EXHAUSTED), and the open
streams per caller and per process are the JSON-RPC streams' own slots (one method table).
HTTP/2 keepalive pings stand in for the SSE heartbeat on an idle stream.

Under ``serve --workers N`` every worker process binds the port with ``SO_REUSEPORT`` (set
here explicitly; it is gRPC's default on Linux) and the kernel spreads connections over them.
"""

from __future__ import annotations

import logging

import grpc

from app.errors import ConfigError
from app.settings import Settings

log = logging.getLogger("looping_edge.grpc")

# How long a stop waits for calls in progress (open streams included) before cancelling them.
STOP_GRACE_SECONDS = 5.0


class GrpcServer:
    """One grpc.aio server serving ``handler``; ``port`` is the bound port once started."""

    def __init__(
        self, settings: Settings, handler: grpc.GenericRpcHandler, *, host: str = "127.0.0.1"
    ) -> None:
        if settings.grpc_port is None:
            raise ConfigError("EDGE_GRPC_PORT: not set, so no gRPC server")
        self._settings = settings
        self._handler = handler
        self._address = _address(host, settings.grpc_port)
        self._server: grpc.aio.Server | None = None
        self.port: int | None = None

    async def start(self) -> None:
        settings = self._settings
        heartbeat_ms = int(settings.stream_heartbeat_seconds * 1000)
        server = grpc.aio.server(
            options=[
                ("grpc.so_reuseport", 1),
                ("grpc.max_receive_message_length", largest_body_bytes(settings)),
                ("grpc.max_metadata_size", settings.max_header_bytes),
                ("grpc.keepalive_time_ms", heartbeat_ms),
                ("grpc.http2.max_pings_without_data", 0),
            ],
            maximum_concurrent_rpcs=settings.max_connections,
        )
        server.add_generic_rpc_handlers((self._handler,))
        try:
            self.port = server.add_insecure_port(self._address)
        except RuntimeError:
            raise ConfigError(f"EDGE_GRPC_PORT: cannot listen on {self._address}") from None
        await server.start()
        self._server = server
        log.info("grpc listening", extra={"address": self._address, "port": self.port})

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.stop(STOP_GRACE_SECONDS)


def largest_body_bytes(settings: Settings) -> int:
    """The largest request body any tenant may send (the attachment opt-ins raise it)."""
    return max(
        settings.max_body_bytes,
        settings.max_image_body_bytes,
        settings.max_document_body_bytes,
    )


def _address(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"{host}:{port}"
