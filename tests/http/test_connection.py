"""The connection limits of ``EdgeHttpProtocol`` (issue 47 rows 1 and 2), on a real uvicorn
server in the test's loop with a small application: each test is one reason the protocol is
hand-written (docs/http-limits.md)."""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from app.http.connection import HttpLimits, protocol_class
from app.settings import load_settings
from tests.polling import poll_until

HEAD = b"POST /a2a HTTP/1.1\r\nHost: edge\r\n"


async def _echo(scope: Any, receive: Any, send: Any) -> None:
    """Reads the whole body and answers its length; on ``/early``, answers without reading."""
    size = 0
    if scope["path"] == "/early":
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": b"no"})
        return
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = str(size).encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serving(limits: HttpLimits, *, keep_alive: int = 5) -> AsyncIterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        _echo,
        http=protocol_class(limits),
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_keep_alive=keep_alive,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await poll_until(lambda: server.started, 10, interval=0.01, what="uvicorn started")
    try:
        yield port
    finally:
        server.should_exit = True
        await task
        sock.close()


async def _read_all(reader: asyncio.StreamReader, within: float) -> bytes:
    """Everything until the server closes (or resets) the connection, which it must do
    ``within`` seconds."""
    chunks = []
    with contextlib.suppress(ConnectionError):
        async with asyncio.timeout(within):
            while chunk := await reader.read(65536):
                chunks.append(chunk)
    return b"".join(chunks)


async def _read_for(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """What arrives in ``seconds`` (the connection stays open)."""
    chunks = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while chunk := await reader.read(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def _request(body: bytes = b"", extra: bytes = b"") -> bytes:
    return HEAD + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body


async def test_a_head_past_the_cap_is_431_and_closed() -> None:
    # httptools buffers a header field until its end, with no bound; uvicorn sets none.
    async with serving(HttpLimits(max_header_bytes=16384)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HEAD + b"X-Filler: " + b"a" * 20000)  # unterminated, past the cap
        answer = await _read_all(reader, 5)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b"connection: close" in answer.lower()


async def test_an_endless_header_line_is_cut_at_the_cap() -> None:
    async with serving(HttpLimits(max_header_bytes=16384)) as port:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HEAD + b"X-Filler: ")
        sent = 0
        with contextlib.suppress(ConnectionError):
            while sent < 50_000_000:
                writer.write(b"a" * 65536)
                await writer.drain()
                sent += 65536
        writer.close()
    # The server stopped reading soon after the cap (its 431 is lost in the reset, since this
    # client never reads): the client could not push 50 MB into it.
    assert sent < 16_000_000, sent


async def test_a_head_at_the_cap_with_its_body_in_the_same_read_is_served() -> None:
    async with serving(HttpLimits(max_header_bytes=16384)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head_filler = b"X-Filler: " + b"a" * 16000 + b"\r\n"
        writer.write(_request(b"b" * 60000, head_filler))
        writer.write(_request(b"c" * 10))  # and the connection goes on
        await writer.drain()
        answer = await _read_for(reader, 1)
        writer.close()
    assert answer.count(b"HTTP/1.1 200 ") == 2
    assert answer.endswith(b"\r\n\r\n10")
    assert b"\r\n\r\n60000" in answer


async def _drip(writer: asyncio.StreamWriter, data: bytes, answer: asyncio.Task[bytes]) -> None:
    """``data`` one byte every 0.2 s, until the server has answered and closed."""
    with contextlib.suppress(ConnectionError):
        for byte in data:
            if answer.done():
                return
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.2)


async def test_a_slow_head_is_cut_at_its_total_deadline() -> None:
    # uvicorn has no deadline for a request's head: one byte every few seconds kept it open.
    async with serving(HttpLimits(header_seconds=1.0)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started = time.monotonic()
        answer = asyncio.create_task(_read_all(reader, 3))
        await _drip(writer, HEAD * 4, answer)
        elapsed = time.monotonic() - started
        writer.close()
    assert (await answer).startswith(b"HTTP/1.1 408 ")
    assert 0.9 < elapsed < 2.0


async def test_a_silent_connection_is_closed_at_the_head_deadline() -> None:
    async with serving(HttpLimits(header_seconds=0.5)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started = time.monotonic()
        answer = await _read_all(reader, 5)
        elapsed = time.monotonic() - started
        writer.close()
    assert answer == b""
    assert 0.4 < elapsed < 2.0


async def test_a_slow_body_is_cut_at_its_total_deadline() -> None:
    async with serving(HttpLimits(body_seconds=1.0)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HEAD + b"Content-Length: 100\r\n\r\n")
        started = time.monotonic()
        answer = asyncio.create_task(_read_all(reader, 3))
        await _drip(writer, b"x" * 100, answer)
        elapsed = time.monotonic() - started
        writer.close()
    assert (await answer).startswith(b"HTTP/1.1 408 ")
    assert 0.9 < elapsed < 2.0


async def test_the_head_deadline_restarts_after_each_response() -> None:
    async with serving(HttpLimits(header_seconds=0.6, body_seconds=0.6)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(4):  # 4 x 0.3 s: past one deadline in total, never within one request
            await asyncio.sleep(0.3)
            writer.write(_request(b"abc"))
            line = await reader.readuntil(b"\r\n\r\n3")
            assert line.startswith(b"HTTP/1.1 200 ")
        answer = await _read_all(reader, 3)  # then idle: closed at the head deadline
        writer.close()
    assert answer == b""


async def test_past_the_connection_cap_a_request_is_503_and_closed() -> None:
    async with serving(HttpLimits(max_connections=2)) as port:
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_request(b"abc"))
        answer = await _read_all(reader, 3)
        writer.close()
        for _, w in held:
            w.close()
        await asyncio.sleep(0.1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_request(b"abc"))
        again = await reader.readuntil(b"\r\n\r\n3")
        writer.close()
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert b"connection: close" in answer.lower()
    assert again.startswith(b"HTTP/1.1 200 ")


def test_the_limits_come_from_the_settings() -> None:
    settings = load_settings(
        signing_key="{}",
        max_header_bytes=20000,
        header_timeout_seconds=2.5,
        body_timeout_seconds=7,
        max_connections=12,
    )
    assert HttpLimits.of(settings) == HttpLimits(
        max_header_bytes=20000, header_seconds=2.5, body_seconds=7.0, max_connections=12
    )
    assert HttpLimits.of(load_settings(signing_key="{}")) == HttpLimits()


def test_the_protocol_factory_survives_pickling() -> None:
    # uvicorn's worker processes (--workers > 1) are spawned and receive the config pickled.
    limits = HttpLimits(max_connections=7)
    factory = pickle.loads(pickle.dumps(protocol_class(limits)))
    assert factory.keywords == {"limits": limits}


async def test_an_answer_before_the_body_ended_closes_the_connection() -> None:
    # Kept alive, uvicorn reads and discards the rest of a body the application did not want.
    async with serving(HttpLimits()) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n")
        answer = asyncio.create_task(_read_all(reader, 3))
        started = time.monotonic()
        with contextlib.suppress(ConnectionError):
            while not answer.done() and time.monotonic() - started < 3:
                writer.write(b"a" * 65536)
                await writer.drain()
        elapsed = time.monotonic() - started
        writer.close()
        with contextlib.suppress(ConnectionError):
            await answer
    assert elapsed < 1.5, elapsed
