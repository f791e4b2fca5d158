"""The server span of one request to the A2A bindings (HTTP server semantic conventions).

Wraps the bindings' ASGI callables only when tracing is on (``app.main``): with it off the
request path has no extra frame. The incoming ``traceparent``/``tracestate`` is continued; a
request without them starts a new trace. The token and the body are never attributes: the
method and the tenant are added by the dispatcher (``app.rpc.calls``).
"""

from __future__ import annotations

from opentelemetry.trace import SpanKind, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.tracing import spans

_PROPAGATED = (b"traceparent", b"tracestate")


class TracedEndpoint:
    def __init__(self, inner: ASGIApp, route: str) -> None:
        self._inner = inner
        self._route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _PROPAGATED
        }
        method = str(scope.get("method", "POST"))
        attributes = {
            "http.request.method": method,
            "http.route": self._route,
            "url.path": str(scope.get("path", "")),
            "url.scheme": str(scope.get("scheme", "http")),
            "network.protocol.version": str(scope.get("http_version", "1.1")),
        }
        with spans.span(
            f"{method} {self._route}",
            kind=SpanKind.SERVER,
            attributes=attributes,
            parent=headers,
        ) as current:

            async def send_traced(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    current.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        current.set_status(StatusCode.ERROR)
                await send(message)

            await self._inner(scope, receive, send_traced)
