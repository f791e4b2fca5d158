"""Builds the gRPC binding of one process from its services and the shared dispatcher."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.grpc.server import GrpcServer
from app.grpc.service import A2AGrpcService
from app.interfaces import GRPC
from app.method_table import call_dispatcher, tenant_body_limit

if TYPE_CHECKING:
    from app.services import EdgeServices


def build_grpc_server(services: EdgeServices, *, host: str = "127.0.0.1") -> GrpcServer:
    """The gRPC server answering through the process's one ``CallDispatcher`` (the JSON-RPC
    endpoint's too, so both share one method table: the same handlers and stream slots). Its
    own token verifier differs from the JSON-RPC one only in the audience: the gRPC interface
    url as the cards list it (``app.interfaces``, issue 49), so a token minted for the
    JSON-RPC endpoint is refused here and the reverse."""
    verifier = services.verifier.for_binding(GRPC)
    service = A2AGrpcService(
        verifier=verifier,
        calls=call_dispatcher(services),
        observer=services.metrics,
        max_body_bytes=services.settings.max_body_bytes,
        body_limit=tenant_body_limit(services),
        large_bodies=services.large_bodies,
    )
    return GrpcServer(services.settings, service.generic_handler(), host=host)
