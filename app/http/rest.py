"""The HTTP+JSON binding (A2A §11) as a bare ASGI callable, in the order of CONTRACT §3.

``/{tenant}/<operation>`` (``app.http.rest_routes``): the route is matched first (an unknown
one is a 404 before anything else); then the token, verified with this interface's audience
(its url in the cards, ``app.interfaces``); then the body, only for operations that take one:
a JSON media type (415), bounded (413), one JSON object (400); then the transport-neutral
``CallDispatcher`` with the path's tenant, whose tenant, version and method rules are the
JSON-RPC binding's. Results are the protobuf-JSON response messages (A2A §11.4); errors are
``google.rpc.Status`` bodies (``app.http.rest_errors``); streams are Server-Sent Events of
``StreamResponse`` documents (A2A §11.7), a failure mid-stream an ``event: error``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import Receive, Scope, Send

from app import text
from app.attachments.admission import LargeBodies, admitted
from app.db.documents import RawJson
from app.errors import (
    ContentTypeNotSupported,
    HttpRefusal,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    RpcError,
)
from app.http.rest_errors import JSON, error_body, refusal_body
from app.http.rest_routes import RestRoute, match, query_params
from app.http.routes import BoundedBody, read_headers, send_outcome
from app.http.sse import send_stream
from app.rpc.calls import CallDispatcher
from app.rpc.context import StreamResult
from app.rpc.dispatch import BodyLimit, ClientDisconnected, RpcObserver, RpcOutcome
from app.rpc.media_type import is_json
from app.rpc.responses import encode, sse_event
from app.rpc.token_check import TokenVerifier, verified_caller

log = logging.getLogger("looping_edge.rest")

# RFC 8259 §6 as on JSON-RPC: no NaN/Infinity, no 1e999 read as infinity.
_DECODER = json.JSONDecoder(parse_constant=text.refuse_constant, parse_float=text.finite_float)


class RestEndpoint:
    """Every request whose path has the binding's shape (``rest_routes.is_rest_path``)."""

    def __init__(
        self,
        *,
        verifier: TokenVerifier,
        calls: CallDispatcher,
        max_body_bytes: int,
        heartbeat_seconds: float = 15.0,
        observer: RpcObserver | None = None,
        body_limit: BodyLimit | None = None,
        large_bodies: LargeBodies | None = None,
    ) -> None:
        self._verifier = verifier
        self._calls = calls
        self._max_body = max_body_bytes
        self._heartbeat = heartbeat_seconds
        self._observer = observer
        self._body_limit = body_limit
        self._large = large_bodies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authorization, duplicate, version, declared, content_type = read_headers(scope)
        body = BoundedBody(declared, receive)
        outcome = await self.handle(
            match(scope["method"], scope["path"]),
            authorization=authorization,
            duplicate_authorization=duplicate,
            version=version,
            content_type=content_type,
            read_body=body,
            query=scope.get("query_string", b""),
        )
        if outcome.stream is not None:
            await send_stream(send, receive, outcome, outcome.stream, self._heartbeat)
            return
        await send_outcome(send, outcome, close=not body.complete)

    async def handle(
        self,
        route: RestRoute | None,
        *,
        authorization: str | None,
        duplicate_authorization: bool,
        version: str | None,
        content_type: str | None,
        read_body: BoundedBody,
        query: bytes,
    ) -> RpcOutcome:
        started = time.perf_counter()
        method = route.method if route is not None else "unknown"
        try:
            if route is None:
                raise MethodNotFound("no such operation on the HTTP+JSON binding")
            caller = await verified_caller(
                self._verifier,
                authorization,
                duplicated=duplicate_authorization,
                observer=self._observer,
            )
            # The limit may rise for the token's tenant (issue 55: attachments), as on
            # JSON-RPC: known only now that the token is verified.
            limit = self._max_body
            if self._body_limit is not None and route.reads_body:
                limit = await self._body_limit(caller, self._max_body)
            # A body past the default limit is read and handled in a slot (the memory bound).
            async with admitted(self._large, caller.tenant, limit, self._max_body):
                params = await self._params(route, content_type, read_body, query, limit)
                result = await self._calls.dispatch(
                    caller, route.tenant, route.method, params, version=version
                )
            outcome = _result(result)
            self._finished(method, "ok", started)
            return outcome
        except HttpRefusal as refusal:
            self._finished(method, refusal.reason, started)
            body, headers = refusal_body(refusal)
            return RpcOutcome(refusal.status_code, body, media_type=JSON, headers=headers)
        except RpcError as error:
            self._finished(method, error.reason, started)
            return RpcOutcome(error.http_status, error_body(error), media_type=JSON)
        except ClientDisconnected:
            if self._observer is not None:
                self._observer.client_disconnected()
            self._finished(method, "client_disconnected", started)
            return RpcOutcome(400, b"", media_type="text/plain; charset=utf-8")

    async def _params(
        self,
        route: RestRoute,
        content_type: str | None,
        read_body: BoundedBody,
        query: bytes,
        limit: int,
    ) -> dict[str, Any]:
        """The request message as protobuf-JSON: the body (if the operation takes one), the
        query parameters (if it reads them), and the path's parameters over both."""
        if not all(map(text.is_clean, (route.tenant, *route.path_params.values()))):
            # A %00 in the path: the same rule as request text (``app.text``).
            raise InvalidParams(
                "the path must be valid Unicode text without U+0000", reason="invalid_text"
            )
        params: dict[str, Any] = {}
        if route.reads_body:
            if not is_json(content_type):
                raise ContentTypeNotSupported(
                    "the request body must be JSON: Content-Type application/json or "
                    "application/a2a+json",
                    reason="unsupported_media_type",
                )
            params = _body_object(await read_body.read(limit))
        if route.query_type is not None:
            try:
                pairs = parse_qsl(query.decode("ascii"), keep_blank_values=True, errors="strict")
            except (UnicodeDecodeError, ValueError):
                raise InvalidParams("the query string is not valid", reason="bad_query") from None
            params.update(query_params(pairs, route.query_type))
            where = text.first_bad_text(params, "query")
            if where is not None:
                raise InvalidParams(
                    f"{text.shown(where, 120)} must be valid Unicode text without U+0000",
                    reason="invalid_text",
                )
        # The path names the tenant and the task: a body's own members never override them.
        params.pop("tenant", None)
        params.update(route.path_params)
        return params

    def _finished(self, method: str, outcome: str, started: float) -> None:
        if self._observer is not None:
            self._observer.rpc_finished(method, outcome, time.perf_counter() - started)


def _body_object(body: bytes) -> dict[str, Any]:
    """The body as one JSON object; an empty body is an empty request message."""
    if not body.strip():
        return {}
    try:
        # RFC 8259 §8.1: JSON exchanged between systems is UTF-8.
        doc = _DECODER.decode(body.decode("utf-8"))
    except (ValueError, RecursionError):
        raise ParseError("the request body is not valid JSON") from None
    if not isinstance(doc, dict):
        raise InvalidRequest("the request body must be a JSON object")
    if text.may_hold_bad_text(body):
        where = text.first_bad_text(doc, "body")
        if where is not None:
            raise InvalidParams(
                f"{text.shown(where, 120)} must be valid Unicode text without U+0000",
                reason="invalid_text",
            )
    return doc


def _result(result: Any) -> RpcOutcome:
    if isinstance(result, StreamResult):
        return RpcOutcome(
            200,
            b"",
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store"},
            stream=RestEventStream(result),
        )
    return RpcOutcome(200, _json(result), media_type=JSON)


def _json(result: Any) -> bytes:
    if isinstance(result, RawJson):
        try:
            return result.text.encode()
        except UnicodeEncodeError:
            return encode(json.loads(result.text))
    return encode(result)


class RestEventStream:
    """A ``StreamResult`` as ``StreamResponse`` events (A2A §11.7). A fault while streaming
    ends the stream with one ``event: error`` holding a ``google.rpc.Status`` body."""

    def __init__(self, results: StreamResult) -> None:
        self._results = results
        self._failed = False

    async def next(self) -> bytes:
        if self._failed:
            raise StopAsyncIteration
        try:
            return b"".join(sse_event(_json(r)) for r in await self._results.next_batch())
        except StopAsyncIteration:
            raise
        except RpcError as exc:
            self._failed = True
            return sse_event(error_body(exc), "error")
        except Exception:
            self._failed = True
            log.exception("stream failed")
            return sse_event(error_body(InternalError("internal error")), "error")

    async def aclose(self) -> None:
        await self._results.aclose()
