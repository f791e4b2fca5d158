"""The JSON-RPC binding: the RPC path of one POST, in the load-bearing order of CONTRACT §3.

1-8  the gateway token (``TokenVerifier``) before anything else is read;
9    the body: size bound (413), JSON (-32700), one JSON-RPC 2.0 request object (-32600);
10-12 ``params.tenant``, ``A2A-Version``, the method and the handler: the transport-neutral
     ``CallDispatcher`` (``app.rpc.calls``), whose errors become JSON-RPC error responses.

Framework-free: the HTTP layer hands in the header values and a bounded body reader and
turns the ``RpcOutcome`` into a response.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.attachments.admission import LargeBodies, admitted
from app.errors import (
    ContentTypeNotSupported,
    HttpRefusal,
    InternalError,
    RpcError,
    TooManyRequests,
    Unauthorized,
)
from app.rpc.calls import CallDispatcher
from app.rpc.context import StreamResult
from app.rpc.envelope import EnvelopeError, JsonRpcRequest, RequestId, parse_request
from app.rpc.media_type import is_json
from app.rpc.responses import encode, failure, sse_event, success_body
from app.rpc.token_check import TokenVerifier, verified_caller
from app.security.caller import VerifiedCaller

log = logging.getLogger("looping_edge.rpc")

BodyReader = Callable[[int], Awaitable[bytes]]


class RpcObserver(Protocol):
    def rpc_finished(self, method: str, outcome: str, seconds: float) -> None: ...
    def token_verified(self) -> None: ...
    def token_refused(self, reason: str) -> None: ...
    def client_disconnected(self) -> None: ...


class ClientDisconnected(Exception):
    """Raised by a body reader when the client went away before its body arrived (an aborted
    upload, or the connection's body deadline): an ordinary event, counted, never logged as
    an error; the answer goes nowhere."""


@dataclass(frozen=True)
class RpcOutcome:
    """One answer: ``body``, or with ``stream`` a ``text/event-stream`` whose events the HTTP
    layer sends as they come (and must close)."""

    status_code: int
    body: bytes
    media_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream: EventStream | None = None


class EventStream(Protocol):
    """A stream answer as the Server-Sent Events to send (``app.http.sse``)."""

    async def next(self) -> bytes:
        """The next whole events (``sse_event``, one or more); ``StopAsyncIteration`` at the
        end."""
        ...

    async def aclose(self) -> None: ...


class EncodedStream:
    """A ``StreamResult`` as JSON-RPC response bodies with the call's id, one per event
    (A2A §9.4.2).

    A fault while streaming (the database went away) ends the stream with one -32603 error
    response: the events already sent stand, and the client may subscribe again.
    """

    def __init__(self, request_id: RequestId, results: StreamResult) -> None:
        self._id = request_id
        self._results = results
        self._failed = False

    async def next(self) -> bytes:
        """The next events (those ready together, in one write); ``StopAsyncIteration`` at
        the end."""
        return b"".join(sse_event(body) for body in await self._next_bodies())

    async def _next_bodies(self) -> list[bytes]:
        if self._failed:
            raise StopAsyncIteration
        try:
            return [success_body(self._id, r) for r in await self._results.next_batch()]
        except StopAsyncIteration:
            raise
        except RpcError as exc:
            self._failed = True
            return [encode(failure(self._id, exc))]
        except Exception:
            self._failed = True
            log.exception("stream failed")
            return [encode(failure(self._id, InternalError("internal error")))]

    async def aclose(self) -> None:
        await self._results.aclose()


class BodyLimit(Protocol):
    """The body limit for a verified caller's request (``default`` unless its tenant's
    policy raises it); must not raise for an unknown tenant (the call refuses it later)."""

    async def __call__(self, caller: VerifiedCaller, default: int) -> int: ...


class RpcDispatcher:
    """The JSON-RPC binding in front of the transport-neutral ``CallDispatcher``."""

    def __init__(
        self,
        *,
        verifier: TokenVerifier,
        calls: CallDispatcher,
        max_body_bytes: int,
        observer: RpcObserver | None = None,
        body_limit: BodyLimit | None = None,
        large_bodies: LargeBodies | None = None,
    ) -> None:
        self._verifier = verifier
        self._calls = calls
        self._max_body = max_body_bytes
        self._observer = observer
        self._body_limit = body_limit
        self._large = large_bodies

    async def handle(
        self,
        *,
        authorization: str | None,
        version: str | None,
        read_body: BodyReader,
        duplicate_authorization: bool = False,
        content_type: str | None = None,
    ) -> RpcOutcome:
        started = time.perf_counter()
        method = "-"
        try:
            caller = await verified_caller(
                self._verifier,
                authorization,
                duplicated=duplicate_authorization,
                observer=self._observer,
            )
            if not is_json(content_type):
                self._finished(method, ContentTypeNotSupported.default_reason, started)
                return _unsupported_media_type()
            # The limit may rise for the token's tenant (issue 55: attachments), known only
            # now that the token is verified; the body is read once, under that limit.
            limit = self._max_body
            if self._body_limit is not None:
                limit = await self._body_limit(caller, self._max_body)
            # A body past the default limit is read and handled in a slot (the memory bound).
            async with admitted(self._large, caller.tenant, limit, self._max_body):
                body = await read_body(limit)
                request = parse_request(body)
                method = request.method if self._calls.knows(request.method) else "unknown"
                result = await self._call(caller, request, version)
            outcome = _success(request.id, result)
            self._finished(method, "ok", started)
            return outcome
        except HttpRefusal as refusal:
            # The token's own refusals are counted by ``verified_caller`` too.
            self._finished(method, refusal.reason, started)
            return _refusal(refusal)
        except EnvelopeError as exc:
            self._finished(method, exc.error.reason, started)
            return RpcOutcome(200, encode(failure(exc.request_id, exc.error)))
        except _CallFailed as exc:
            self._finished(method, exc.error.reason, started)
            return RpcOutcome(200, encode(failure(exc.request_id, exc.error)))
        except ClientDisconnected:
            if self._observer is not None:
                self._observer.client_disconnected()
            self._finished(method, "client_disconnected", started)
            return RpcOutcome(400, b"", media_type="text/plain; charset=utf-8")

    async def _call(
        self, caller: VerifiedCaller, request: JsonRpcRequest, version: str | None
    ) -> Any:
        try:
            return await self._calls.dispatch(
                caller,
                request.params.get("tenant"),
                request.method,
                request.params,
                version=version,
                request_id=request.id,
            )
        except RpcError as exc:
            raise _CallFailed(request.id, exc) from None

    def _finished(self, method: str, outcome: str, started: float) -> None:
        if self._observer is not None:
            self._observer.rpc_finished(method, outcome, time.perf_counter() - started)


class _CallFailed(Exception):
    def __init__(self, request_id: RequestId, error: RpcError) -> None:
        super().__init__(error.message)
        self.request_id = request_id
        self.error = error


def _success(request_id: RequestId, result: Any) -> RpcOutcome:
    """A call's result: one response body, or a stream of them (``EncodedStream``)."""
    if isinstance(result, StreamResult):
        return RpcOutcome(
            200,
            b"",
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store"},
            stream=EncodedStream(request_id, result),
        )
    return RpcOutcome(200, success_body(request_id, result))


def _refusal(refusal: HttpRefusal) -> RpcOutcome:
    headers: dict[str, str] = {}
    if isinstance(refusal, Unauthorized):
        # RFC 6750 §3: the challenge names the error; the body carries the stable reason.
        headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    elif isinstance(refusal, TooManyRequests):
        headers["Retry-After"] = str(refusal.retry_after_seconds)
    return RpcOutcome(
        refusal.status_code,
        refusal.body.encode(),
        media_type="text/plain; charset=utf-8",
        headers=headers,
    )


def _unsupported_media_type() -> RpcOutcome:
    """HTTP 415 (RFC 9110 §15.5.16) with a JSON-RPC error body: the request was not read, so
    its id is unknown (null); the code is -32005, ContentTypeNotSupportedError, the error A2A
    §5.4 gives an unsupported media type."""
    error = ContentTypeNotSupported(
        "the request body must be JSON: Content-Type application/json or application/a2a+json",
        reason="unsupported_media_type",
    )
    return RpcOutcome(415, encode(failure(None, error)))
