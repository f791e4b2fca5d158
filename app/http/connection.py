"""The edge's HTTP/1.1 connection: uvicorn's httptools protocol with the limits it lacks.

Every limit here holds before the application sees a byte, so before any token check:

* the request head (request line plus header fields) is capped at ``max_header_bytes``; past
  it the answer is 431 (RFC 6585 §5) and the connection closes. httptools accumulates the
  URL and each header field in memory until its end, with no bound, and uvicorn sets none
  (its ``h11_max_incomplete_event_size`` applies to the h11 protocol only);
* deadlines are totals, not gaps between bytes: the head within ``header_seconds`` of the
  connection's start or of the previous response, the body within ``body_seconds`` of the
  head. A client that sends one byte every few seconds cannot hold a connection open
  (uvicorn only times out an idle keep-alive connection); past a deadline the answer is 408
  (RFC 9110 §15.5.9) with ``Connection: close``, or a plain close when nothing was sent;
* past ``max_connections`` open connections in this process a request is answered 503 with
  ``Connection: close`` (RFC 9110 §15.6.4), without a log line per refusal (uvicorn's
  ``limit_concurrency`` logs a warning for each, a log flood under the very load it sheds).

docs/http-limits.md says why this is hand-written; tests/http/test_connection.py holds each
reason to a test.
"""

from __future__ import annotations

import asyncio
import functools
from asyncio import TimerHandle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

if TYPE_CHECKING:
    from app.settings import Settings

__all__ = ["EdgeHttpProtocol", "HttpLimits", "protocol_class"]


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The connection limits of one process (from ``Settings``; picklable for uvicorn's
    worker processes, which receive the protocol factory by pickling)."""

    max_header_bytes: int = 32768
    header_seconds: float = 10.0
    body_seconds: float = 30.0
    max_connections: int = 1000

    @classmethod
    def of(cls, settings: Settings) -> HttpLimits:
        return cls(
            max_header_bytes=settings.max_header_bytes,
            header_seconds=settings.header_timeout_seconds,
            body_seconds=settings.body_timeout_seconds,
            max_connections=settings.max_connections,
        )


def protocol_class(limits: HttpLimits) -> type[asyncio.Protocol]:
    """What ``uvicorn.run(http=...)`` takes: uvicorn calls it with its own keyword arguments
    (``config``, ``server_state``, ``app_state``, ``_loop``) for every connection."""
    return cast("type[asyncio.Protocol]", functools.partial(EdgeHttpProtocol, limits=limits))


def _plain(status: int, phrase: str, text: str) -> bytes:
    """A complete response that closes the connection (written by the protocol itself: the
    application has not been called, or its answer can no longer come)."""
    body = text.encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\n"
        "content-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


# After a refusal: how long and how much more input is read and discarded before the close.
LINGER_SECONDS = 1.0
LINGER_BYTES = 262144

HEADERS_TOO_LARGE = _plain(431, "Request Header Fields Too Large", "request header too large")
REQUEST_TIMEOUT = _plain(408, "Request Timeout", "request timeout")


async def _over_capacity(scope: Any, receive: Any, send: Any) -> None:
    """503 for a request past the connection cap; the connection closes after it."""
    body = b"service unavailable: too many connections"
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class EdgeHttpProtocol(HttpToolsProtocol):
    """One connection. State: ``_in_head`` while the next request's head is arriving
    (``_head_bytes`` of it counted so far), one timer for the current deadline."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: HttpLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._limits = limits
        self._edge_app = self.app
        self._in_head = True
        self._head_bytes = 0
        self._refused = False
        self._linger_bytes = 0
        self._deadline: float | None = None
        self._timer: TimerHandle | None = None

    # --- connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self._limits.header_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            # Lingering after a refusal: discarded, up to a bound.
            self._linger_bytes -= len(data)
            if self._linger_bytes < 0:
                self.transport.close()
            return
        if not self._in_head:
            super().data_received(data)
            return
        # Counted per read, before the parser buffers anything, so the parser never holds
        # more than the cap of a head (plus, for a pipelined request whose head began in the
        # read that ended the previous request, what that one read held of it).
        room = self._limits.max_header_bytes - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            super().data_received(data)
            return
        self._head_bytes = self._limits.max_header_bytes
        super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if self._in_head:
            self._refuse(HEADERS_TOO_LARGE)
            return
        super().data_received(data[room:])

    # --- parser callbacks ------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._arm(self._limits.body_seconds)
        over = len(self.connections) > self._limits.max_connections
        self.app = _over_capacity if over else self._edge_app
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._deadline = None
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if not self._in_head and self.cycle.response_complete:
            # Answered before its body ended (a refusal that did not read it): kept alive, the
            # connection would read and discard the rest, however long (RFC 9112 §9.6).
            self.transport.close()
            return
        # The next head's deadline starts now, unless a pipelined request was already read.
        if self._in_head and self._deadline is None:
            self._arm(self._limits.header_seconds)

    # --- refusals and deadlines ------------------------------------------------------------

    def _refuse(self, response: bytes) -> None:
        """Answer ``response`` and close; when an answer to an earlier request is still owed,
        that answer ends the connection instead (``keep_alive`` off), never interleaved."""
        self._refused = True
        self._deadline = None
        cycle = self.cycle
        if self._in_head:
            if cycle is not None and (not cycle.response_complete or self.pipeline):
                cycle.keep_alive = False
                self.flow.pause_reading()
                return
        elif cycle.response_complete or self.pipeline:
            # The answer went out already (or a pipelined one is being written): just close.
            self.transport.close()
            return
        elif cycle.response_started:
            cycle.keep_alive = False
            self.flow.pause_reading()
            return
        else:
            # The application waits for this request's body: it gets a disconnect.
            cycle.disconnected = True
            cycle.message_event.set()
        self._close_after(response)

    def _close_after(self, response: bytes) -> None:
        """Write ``response``, then close in stages (RFC 9112 §9.6): the write side first, so
        a client still sending reads the answer before a reset; then, after ``LINGER_SECONDS``
        or ``LINGER_BYTES`` more discarded bytes, the whole connection."""
        self.transport.write(response)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._linger_bytes = LINGER_BYTES
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _arm(self, seconds: float) -> None:
        """Set the deadline ``seconds`` from now, reusing the timer when it fires earlier."""
        deadline = self.loop.time() + seconds
        self._deadline = deadline
        timer = self._timer
        if timer is not None:
            if timer.when() <= deadline:
                return
            timer.cancel()
        self._timer = self.loop.call_at(deadline, self._deadline_reached)

    def _deadline_reached(self) -> None:
        self._timer = None
        deadline = self._deadline
        if deadline is None or self.transport.is_closing():
            return
        if self.loop.time() < deadline:
            self._timer = self.loop.call_at(deadline, self._deadline_reached)
            return
        if self._in_head and self._head_bytes == 0:
            # Nothing of a request arrived: a plain close, like an idle keep-alive timeout.
            self._refused = True
            self._deadline = None
            self.transport.close()
            return
        self._refuse(REQUEST_TIMEOUT)
