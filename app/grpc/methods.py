"""The A2A service's methods as the a2a-sdk's generated descriptor defines them (A2A §10.3):
name, request and response classes, and whether the answer is a server stream.

Read from ``a2a.types.a2a_pb2`` rather than listed by hand, so every method of the service the
SDK ships is served, with the SDK's own generated message classes.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a.types import a2a_pb2
from google.protobuf import message_factory
from google.protobuf.message import Message

SERVICE_NAME = "A2AService"


@dataclass(frozen=True)
class ServiceMethod:
    name: str
    request: type[Message]
    response: type[Message]
    streaming: bool


def service_full_name() -> str:
    """``lf.a2a.v1.A2AService``: the name clients dial the methods under."""
    name: str = a2a_pb2.DESCRIPTOR.services_by_name[SERVICE_NAME].full_name
    return name


def service_methods() -> tuple[ServiceMethod, ...]:
    service = a2a_pb2.DESCRIPTOR.services_by_name[SERVICE_NAME]
    return tuple(
        ServiceMethod(
            name=method.name,
            request=message_factory.GetMessageClass(method.input_type),
            response=message_factory.GetMessageClass(method.output_type),
            streaming=bool(method.server_streaming),
        )
        for method in service.methods
    )
