"""Server-Sent Events on the HTTP bindings (A2A 1.0 §9.4.2 JSON-RPC, §11.7 HTTP+JSON; WHATWG
HTML §9.2).

Each event is one ``data:`` line holding a JSON document (a JSON-RPC response, or a
``StreamResponse`` on HTTP+JSON; JSON never spans lines: the encoder escapes newlines),
followed by a blank line; the stream objects build them (``app.rpc.responses.sse_event``).
After ``heartbeat`` seconds without an event a comment line (``: keep-alive``) goes out, so
proxies and clients see the stream alive.
The response ends with the stream, or as soon as the client disconnects; either way the
stream is closed, which gives back its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.types import Receive, Send

from app.rpc.dispatch import EventStream, RpcOutcome

HEARTBEAT = b": keep-alive\n\n"


def stream_headers(outcome: RpcOutcome) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", outcome.media_type.encode("latin-1"))]
    headers += [
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in outcome.headers.items()
    ]
    # Proxies (nginx) that buffer responses would hold every event back.
    headers.append((b"x-accel-buffering", b"no"))
    return headers


async def send_stream(
    send: Send, receive: Receive, outcome: RpcOutcome, stream: EventStream, heartbeat: float
) -> None:
    """The whole SSE response on a raw ASGI connection."""
    await send(
        {
            "type": "http.response.start",
            "status": outcome.status_code,
            "headers": stream_headers(outcome),
        }
    )
    gone = asyncio.ensure_future(_disconnected(receive))
    pending: asyncio.Future[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(stream.next())
            waiting: set[asyncio.Future[Any]] = {pending, gone}
            done, _ = await asyncio.wait(
                waiting, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED
            )
            if gone in done:
                return
            if pending not in done:
                await send({"type": "http.response.body", "body": HEARTBEAT, "more_body": True})
                continue
            finished, pending = pending, None
            try:
                body = finished.result()
            except StopAsyncIteration:
                break
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        gone.cancel()
        await _cancel(pending)
        await stream.aclose()


async def frames(stream: EventStream, heartbeat: float) -> AsyncIterator[bytes]:
    """The same events and heartbeats as an iterator (for a framework's streaming response,
    which watches for the disconnect itself)."""
    pending: asyncio.Future[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(stream.next())
            done, _ = await asyncio.wait({pending}, timeout=heartbeat)
            if not done:
                yield HEARTBEAT
                continue
            finished, pending = pending, None
            try:
                body = finished.result()
            except StopAsyncIteration:
                return
            yield body
    finally:
        await _cancel(pending)
        await stream.aclose()


async def _disconnected(receive: Receive) -> None:
    """Returns when the client went away (the request body was read already)."""
    while True:
        message: Any = await receive()
        if message["type"] == "http.disconnect":
            return


async def _cancel(pending: asyncio.Future[bytes] | None) -> None:
    """Stop a pending read, and let it finish before the stream is closed (an async generator
    cannot be closed while it runs)."""
    if pending is None:
        return
    pending.cancel()
    with contextlib.suppress(BaseException):
        await pending
