"""The gRPC side of the TCK's proxy (``app.testing.tck_proxy``): a generic passthrough.

Every call on the A2A service (A2A §10) is taken as bytes, the request's ``tenant`` field is
set when the caller left it empty (the TCK never sets it), and the call goes on to the edge's
gRPC interface with a caller token in the ``authorization`` metadata (``aud`` = that
interface's url as the edge's card lists it) beside the caller's own metadata
(``a2a-version`` and the rest). Answers, streams and errors come back as the edge sent them:
status code, message and trailing metadata (the ``google.rpc.Status`` details with their
``ErrorInfo`` included). A method the A2A service does not have is forwarded as a unary call,
so the edge gives its own ``UNIMPLEMENTED``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import cache
from typing import Any

import grpc
from a2a.types import a2a_pb2
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor

from app.testing.tck_proxy import GRPC, TckProxy

# Metadata that belongs to the proxy's own leg, not the caller's (gRPC over HTTP/2).
_OWN_METADATA = ("authorization", "user-agent", "content-type", "te", "host")


@cache
def a2a_methods() -> dict[str, MethodDescriptor]:
    """``/<package>.A2AService/<Method>`` -> the method's descriptor."""
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    return {f"/{service.full_name}/{m.name}": m for m in service.methods}


def with_tenant(raw: bytes, method: MethodDescriptor | None, tenant: str) -> bytes:
    """The request with its ``tenant`` field set when empty; bytes that do not parse as the
    method's request (or a request without the field) are forwarded unchanged."""
    if method is None or "tenant" not in method.input_type.fields_by_name:
        return raw
    request_class = message_factory.GetMessageClass(method.input_type)
    try:
        request = request_class.FromString(raw)
    except Exception:  # a malformed request: the edge answers it
        return raw
    if getattr(request, "tenant", ""):
        return raw
    request.tenant = tenant
    data: bytes = request.SerializeToString()
    return data


def caller_metadata(metadata: Sequence[tuple[str, Any]] | None) -> list[tuple[str, Any]]:
    return [
        (key, value)
        for key, value in metadata or ()
        if key not in _OWN_METADATA and not key.startswith((":", "grpc-"))
    ]


def _bytes(raw: bytes) -> bytes:
    return raw


class GrpcPassthrough(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Forwards every call to the edge's gRPC interface (``channel``)."""

    def __init__(self, proxy: TckProxy, channel: grpc.aio.Channel) -> None:
        self._proxy = proxy
        self._channel = channel

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method: str = details.method
        descriptor = a2a_methods().get(method)
        if descriptor is not None and descriptor.server_streaming:
            return grpc.unary_stream_rpc_method_handler(self._streaming(method, descriptor))
        return grpc.unary_unary_rpc_method_handler(self._unary(method, descriptor))

    async def _prepare(
        self, raw: bytes, descriptor: MethodDescriptor | None, context: grpc.aio.ServicerContext
    ) -> tuple[bytes, list[tuple[str, Any]]]:
        audience = (await self._proxy.interfaces()).url(GRPC)
        if audience is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the edge lists no gRPC interface")
        metadata = caller_metadata(context.invocation_metadata())
        metadata.append(("authorization", f"Bearer {self._proxy.mint(str(audience))}"))
        return with_tenant(raw, descriptor, self._proxy.config.tenant), metadata

    def _unary(
        self, method: str, descriptor: MethodDescriptor | None
    ) -> Callable[[bytes, grpc.aio.ServicerContext], Any]:
        call = self._channel.unary_unary(
            method, request_serializer=_bytes, response_deserializer=_bytes
        )

        async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
            request, metadata = await self._prepare(raw, descriptor, context)
            try:
                answer: bytes = await call(
                    request, metadata=metadata, timeout=context.time_remaining()
                )
            except grpc.aio.AioRpcError as error:
                await _relay_error(context, error)
            return answer

        return handle

    def _streaming(
        self, method: str, descriptor: MethodDescriptor
    ) -> Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[bytes]]:
        call = self._channel.unary_stream(
            method, request_serializer=_bytes, response_deserializer=_bytes
        )

        async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            request, metadata = await self._prepare(raw, descriptor, context)
            stream = call(request, metadata=metadata, timeout=context.time_remaining())
            try:
                async for event in stream:
                    yield event
            except grpc.aio.AioRpcError as error:
                await _relay_error(context, error)
            finally:
                stream.cancel()  # the TCK went away: so does the edge's stream

        return handle


async def _relay_error(context: grpc.aio.ServicerContext, error: grpc.aio.AioRpcError) -> None:
    trailing = tuple(
        (key, value)
        for key, value in error.trailing_metadata() or ()
        if not key.startswith(":") and key != "content-type"
    )
    await context.abort(error.code(), error.details() or "", trailing)


@asynccontextmanager
async def grpc_passthrough(proxy: TckProxy, host: str, port: int) -> AsyncIterator[int]:
    """The passthrough served on ``host:port`` (0: any free port) while the block runs; yields
    the bound port."""
    target = (await proxy.interfaces()).url(GRPC)
    if target is None:
        raise RuntimeError("the edge's card lists no gRPC interface")
    async with grpc.aio.insecure_channel(target) as channel:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((GrpcPassthrough(proxy, channel),))
        bound: int = server.add_insecure_port(f"{host}:{port}")
        await server.start()
        try:
            yield bound
        finally:
            await server.stop(grace=1)


async def serve_grpc(proxy: TckProxy, host: str, port: int) -> None:
    """Serve the passthrough on ``host:port`` until cancelled."""
    async with grpc_passthrough(proxy, host, port):
        await asyncio.Event().wait()
