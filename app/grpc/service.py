"""The A2A service's handlers: each call is verified, checked and answered as JSON-RPC is.

Per call, in the order of CONTRACT §3: the token from the ``authorization`` metadata (its
audience the gRPC interface url, ``host:port``, exactly as the card lists it); then the request
bytes are parsed with the a2a-sdk's generated class and converted to the A2A JSON form; then
the shared dispatcher applies the tenant rules (the request's ``tenant`` field), the
``a2a-version`` metadata (A2A §10.2) and the method, and the same handler answers. Every
failure ends the call with a gRPC status (``app.grpc.status``); an unexpected exception is
INTERNAL with a fixed text, never its own.

The handlers take the raw request bytes (no deserializer registered with gRPC): a request that
does not parse is INVALID_ARGUMENT here, where gRPC's own parse failure would be INTERNAL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import Message
from opentelemetry.trace import SpanKind

from app.attachments.admission import LargeBodies, admitted
from app.errors import EdgeError, InternalError, PayloadTooLarge
from app.grpc.messages import params_of, parse_request, response_of
from app.grpc.methods import ServiceMethod, service_full_name, service_methods
from app.grpc.status import GrpcFailure, failure_of, internal_failure
from app.rpc.calls import CallDispatcher
from app.rpc.context import StreamResult
from app.rpc.dispatch import BodyLimit, RpcObserver
from app.rpc.token_check import TokenVerifier, verified_caller
from app.security.caller import VerifiedCaller
from app.tracing import spans

log = logging.getLogger("looping_edge.grpc")

_PROPAGATED = ("traceparent", "tracestate")

UnaryHandler = Callable[[bytes, grpc.aio.ServicerContext], Awaitable[Message]]
StreamHandler = Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[Message]]


class A2AGrpcService:
    """The handlers of ``lf.a2a.v1.A2AService`` over one dispatcher and token verifier."""

    def __init__(
        self,
        *,
        verifier: TokenVerifier,
        calls: CallDispatcher,
        observer: RpcObserver | None = None,
        max_body_bytes: int | None = None,
        body_limit: BodyLimit | None = None,
        large_bodies: LargeBodies | None = None,
    ) -> None:
        self._verifier = verifier
        self._calls = calls
        self._observer = observer
        self._max_body = max_body_bytes
        self._body_limit = body_limit
        self._large = large_bodies

    def generic_handler(self) -> grpc.GenericRpcHandler:
        handlers: dict[str, grpc.RpcMethodHandler] = {}
        for method in service_methods():
            if method.streaming:
                handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                    self._streaming(method), response_serializer=_serialize
                )
            else:
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                    self._unary(method), response_serializer=_serialize
                )
        return grpc.method_handlers_generic_handler(service_full_name(), handlers)

    def _unary(self, method: ServiceMethod) -> UnaryHandler:
        async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> Message:
            started = time.perf_counter()
            try:
                result = await self._answer(method, raw, context)
                if isinstance(result, StreamResult):  # a unary method never streams
                    await result.aclose()
                    raise InternalError("internal error")
                response = response_of(result, method.response)
            except EdgeError as exc:
                failure = failure_of(exc)
                self._finished(method.name, exc.reason, started)
            except Exception:
                log.exception("grpc call failed", extra={"method": method.name})
                failure = internal_failure()
                self._finished(method.name, "internal_error", started)
            else:
                self._finished(method.name, "ok", started)
                return response
            await _abort(context, failure)
            raise AssertionError("abort returned")  # pragma: no cover - abort always raises

        return handle

    def _streaming(self, method: ServiceMethod) -> StreamHandler:
        async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Message]:
            started = time.perf_counter()
            failure: GrpcFailure | None = None
            try:
                result = await self._answer(method, raw, context)
            except EdgeError as exc:
                self._finished(method.name, exc.reason, started)
                await _abort(context, failure_of(exc))
                return
            except Exception:
                log.exception("grpc call failed", extra={"method": method.name})
                self._finished(method.name, "internal_error", started)
                await _abort(context, internal_failure())
                return
            self._finished(method.name, "ok", started)
            try:
                async for response in _responses(result, method):
                    yield response
            except EdgeError as exc:
                # The events already sent stand; the client may subscribe again.
                failure = failure_of(exc)
            except Exception:
                log.exception("grpc stream failed", extra={"method": method.name})
                failure = internal_failure()
            if failure is not None:
                await _abort(context, failure)

        return handle

    async def _answer(
        self, method: ServiceMethod, raw: bytes, context: grpc.aio.ServicerContext
    ) -> Any:
        if not spans.enabled():
            return await self._dispatch(method, raw, context)
        # The server span (RPC semantic conventions), continuing the caller's W3C trace
        # context from the metadata; the dispatcher adds the method and the tenant.
        traced = {
            key: value
            for key, value in context.invocation_metadata() or ()
            if key in _PROPAGATED and isinstance(value, str)
        }
        with spans.span(
            f"{service_full_name()}/{method.name}",
            kind=SpanKind.SERVER,
            attributes={
                "rpc.system": "grpc",
                "rpc.service": service_full_name(),
                "rpc.method": method.name,
            },
            parent=traced,
        ):
            return await self._dispatch(method, raw, context)

    async def _dispatch(
        self, method: ServiceMethod, raw: bytes, context: grpc.aio.ServicerContext
    ) -> Any:
        authorization, duplicated, version = _service_parameters(context)
        caller = await verified_caller(
            self._verifier,
            authorization,
            duplicated=duplicated,
            observer=self._observer,
            duplicate_text="more than one authorization entry",
        )
        size = len(raw)
        await self._check_size(caller, size)
        # A message past the default limit is parsed and handled in a slot, as an HTTP body
        # is (the memory bound): gRPC has received it already, but not yet copied it.
        default = size if self._max_body is None else self._max_body
        async with admitted(self._large, caller.tenant, size, default):
            params = params_of(parse_request(raw, method.request))
            return await self._calls.dispatch(
                caller, params.get("tenant"), method.name, params, version=version
            )

    async def _check_size(self, caller: VerifiedCaller, size: int) -> None:
        """The request message within the caller's limit: the server receives up to the
        largest tenant limit (``GrpcServer``), and a tenant that did not opt into
        attachments keeps ``EDGE_MAX_BODY_BYTES``, checked here once the token (and so its
        tenant) is verified, as on the HTTP bindings (issue 55)."""
        if self._max_body is None or size <= self._max_body:
            return
        limit = self._max_body
        if self._body_limit is not None:
            limit = await self._body_limit(caller, self._max_body)
        if size > limit:
            raise PayloadTooLarge(f"request message exceeds {limit} bytes")

    def _finished(self, method: str, outcome: str, started: float) -> None:
        if self._observer is not None:
            self._observer.rpc_finished(method, outcome, time.perf_counter() - started)


async def _responses(result: Any, method: ServiceMethod) -> AsyncIterator[Message]:
    """A ``StreamResult``'s events as ``method.response`` messages; it is closed (its slot
    given back) when the call ends for any reason, the client going away included."""
    if not isinstance(result, StreamResult):
        raise InternalError("internal error")
    try:
        while True:
            try:
                event = await result.next()
            except StopAsyncIteration:
                return
            yield response_of(event, method.response)
    finally:
        await result.aclose()


def _service_parameters(
    context: grpc.aio.ServicerContext,
) -> tuple[str | None, bool, str | None]:
    """(authorization, given more than once?, a2a-version) from the call's metadata, whose
    keys gRPC delivers in lower case (A2A §10.2)."""
    authorization: str | None = None
    duplicated = False
    version: str | None = None
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            duplicated = authorization is not None
            authorization = value if isinstance(value, str) else None
        elif key == "a2a-version":
            version = value if isinstance(value, str) else None
    return authorization, duplicated, version


async def _abort(context: grpc.aio.ServicerContext, failure: GrpcFailure) -> None:
    await context.abort(failure.code, failure.message, failure.trailing_metadata)


def _serialize(message: Message) -> bytes:
    data: bytes = message.SerializeToString()
    return data
