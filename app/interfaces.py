"""The interfaces the edge serves (A2A §4.4.6 ``AgentInterface``), from settings alone.

One list drives both what the cards advertise in ``supportedInterfaces`` and what a token's
``aud`` must be: the ``url`` of the interface being called, exactly as the card lists it
(issue 49). Every URL derives from ``PUBLIC_URL`` (CONTRACT §2), never from a request.

- JSON-RPC (A2A §9), always first: ``PUBLIC_URL`` + ``EDGE_RPC_PATH``, as the gateway knows it.
- HTTP+JSON (A2A §11): ``PUBLIC_URL``; the REST paths hang off it with the tenant as their
  first segment (``/{tenant}/message:send``, the ``additional_bindings`` of ``a2a.proto``).
- gRPC (A2A §10), when ``EDGE_GRPC_PORT`` is set: the bare ``host:port`` a client dials, the
  host of ``PUBLIC_URL``.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.origins import parse_url
from app.settings import Settings

JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
GRPC = "GRPC"


@dataclass(frozen=True)
class Interface:
    binding: str  # ``protocolBinding``: JSONRPC, HTTP+JSON or GRPC
    url: str


def served_interfaces(settings: Settings) -> tuple[Interface, ...]:
    """The bindings this deployment serves, JSON-RPC first."""
    interfaces = [
        Interface(JSONRPC, settings.endpoint_url),
        Interface(HTTP_JSON, settings.public_origin),
    ]
    if settings.grpc_port is not None:
        host = parse_url(settings.public_url, allow_loopback_http=True).host
        interfaces.append(Interface(GRPC, f"{host}:{settings.grpc_port}"))
    return tuple(interfaces)


def interface_url(settings: Settings, binding: str) -> str:
    """The ``url`` of one served binding (and so the audience its tokens carry);
    ``LookupError`` when the binding is not served (gRPC without ``EDGE_GRPC_PORT``)."""
    for interface in served_interfaces(settings):
        if interface.binding == binding:
            return interface.url
    raise LookupError(f"{binding} is not served")
