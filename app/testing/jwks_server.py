"""A real loopback HTTP server publishing a ``GatewayKit``'s JWKS, with hostile behaviours.

::

    kit = GatewayKit()
    async with serve_jwks(kit) as server:      # binds 127.0.0.1:<free port>
        # kit.origin is now server.base_url, e.g. "http://127.0.0.1:54321"
        settings = load_settings(gateway_origins=[kit.origin], allow_loopback_http=True, ...)
        server.behaviour = status(500)         # switch behaviour at any time
        assert server.request_count == 1

Behaviours: ``"ok"`` (200, the JWKS), ``"redirect"`` (302 to the JWKS itself, so following it
would have worked), ``"oversized"`` (200 with a declared ``Content-Length`` past any sane cap),
``"oversized_stream"`` (the same body with no length, ended by closing the connection, so
only a streaming cap can stop it), ``"slow_drip"`` (200, then one byte every
``drip_interval`` seconds, forever), or ``status(code)``. Any path other than the kit's JWKS
path answers 404. Plain asyncio streams, ``Connection: close``; every connection task is
cancelled and awaited on exit so the server shuts down cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from app.testing.gateway import JWKS_PATH, GatewayKit

_OVERSIZED_BYTES = 256 * 1024


@dataclass(frozen=True)
class Behaviour:
    kind: str  # "ok" | "redirect" | "oversized" | "oversized_stream" | "slow_drip" | "status"
    code: int = 200


OK = Behaviour("ok")
REDIRECT = Behaviour("redirect")
OVERSIZED = Behaviour("oversized")
OVERSIZED_STREAM = Behaviour("oversized_stream")
SLOW_DRIP = Behaviour("slow_drip")
_NAMED = {b.kind: b for b in (OK, REDIRECT, OVERSIZED, OVERSIZED_STREAM, SLOW_DRIP)}


def status(code: int) -> Behaviour:
    """Answer every JWKS request with this HTTP status (and a short text body)."""
    return Behaviour("status", code)


def _as_behaviour(value: Behaviour | str) -> Behaviour:
    if isinstance(value, Behaviour):
        return value
    try:
        return _NAMED[value]
    except KeyError:
        raise ValueError(f"unknown JWKS server behaviour {value!r}") from None


@dataclass
class JwksServer:
    """Handle on a running server: where it is, what it does, what it saw."""

    kit: GatewayKit
    host: str
    port: int
    behaviour: Behaviour
    drip_interval: float = 0.05
    request_count: int = 0
    paths: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def set_behaviour(self, value: Behaviour | str) -> None:
        self.behaviour = _as_behaviour(value)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            _method, target, _version = request_line.split(" ", 2)
            self.request_count += 1
            self.paths.append(target)
            await self._answer(urlsplit(target).path, writer)
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            ValueError,
        ):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, path: str, writer: asyncio.StreamWriter) -> None:
        if path != JWKS_PATH:
            await _respond(writer, 404, b"not found", "text/plain")
            return
        body = json.dumps(self.kit.jwks()).encode("utf-8")
        behaviour = self.behaviour
        if behaviour.kind == "ok":
            await _respond(writer, 200, body, "application/json")
        elif behaviour.kind == "redirect":
            extra = f"Location: {self.kit.jwks_url}\r\n"
            await _respond(writer, 302, b"", "text/plain", extra_headers=extra)
        elif behaviour.kind == "oversized":
            await _respond(writer, 200, _padded(body), "application/json")
        elif behaviour.kind == "oversized_stream":
            writer.write(_status_line(200) + b"Content-Type: application/json\r\n\r\n")
            writer.write(_padded(body))
            await writer.drain()
        elif behaviour.kind == "slow_drip":
            writer.write(_status_line(200) + b"Content-Type: application/json\r\n\r\n")
            while True:  # until the client gives up (ConnectionError) or we are cancelled
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(self.drip_interval)
        else:
            await _respond(writer, behaviour.code, b"failure", "text/plain")


def _status_line(code: int) -> bytes:
    return f"HTTP/1.1 {code} X\r\nConnection: close\r\n".encode("ascii")


def _padded(body: bytes) -> bytes:
    # Valid JSON all the same: the cap, not a parse error, must be what refuses it.
    return body[:-1] + b', "padding": "' + b"x" * _OVERSIZED_BYTES + b'"}'


async def _respond(
    writer: asyncio.StreamWriter,
    code: int,
    body: bytes,
    content_type: str,
    *,
    extra_headers: str = "",
) -> None:
    head = f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra_headers}\r\n"
    writer.write(_status_line(code) + head.encode("ascii") + body)
    await writer.drain()


@contextlib.asynccontextmanager
async def serve_jwks(
    kit: GatewayKit,
    *,
    host: str = "127.0.0.1",
    behaviour: Behaviour | str = OK,
    drip_interval: float = 0.05,
) -> AsyncIterator[JwksServer]:
    """Serve ``kit``'s JWKS on ``host``:<free port> and point ``kit.origin`` at it."""
    tasks: set[asyncio.Task[Any]] = set()
    state = JwksServer(kit=kit, host=host, port=0, behaviour=_as_behaviour(behaviour))
    state.drip_interval = drip_interval

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await state.handle(reader, writer)
        finally:
            tasks.discard(task)

    server = await asyncio.start_server(on_connect, host, 0)
    state.port = server.sockets[0].getsockname()[1]
    kit.origin = state.base_url
    try:
        yield state
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
